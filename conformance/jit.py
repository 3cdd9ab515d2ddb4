"""numba, when it is installed and allowed, and the compiled ordered-integer ULP distance.

numba is optional (the ``fast`` extra).  :func:`enabled` is False without it, or with
``CONFORMANCE_COMPILED=0``; every caller then takes its numpy path, which stays the
reference implementation.  Compiled code is cached (``cache=True``) in the package's
``__pycache__``, or under ``NUMBA_CACHE_DIR`` when that is set (numba falls back to a
per-user cache directory when the package directory is read-only).
"""
from __future__ import annotations

import os

import numpy as np

try:  # the `fast` extra
    import numba
except ImportError:  # pragma: no cover - exercised where numba is missing
    numba = None

__all__ = ["available", "enabled", "numba", "ordered_bits", "ulp_and_nan"]


def available() -> bool:
    """True when numba is installed."""
    return numba is not None


def enabled() -> bool:
    """True when compiled paths may run: numba is there and ``CONFORMANCE_COMPILED`` is not 0."""
    return available() and os.environ.get("CONFORMANCE_COMPILED", "1") != "0"


def ulp_and_nan(a_bits: np.ndarray, b_bits: np.ndarray, *, bits: int, mant_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Ordered-integer distance of two flat bit-pattern arrays of one format (int64, 0 where
    either side is NaN) and the NaN mask, in one pass: as ``conformance.dtypes.ulp_distance``."""
    ulps = np.empty(a_bits.size, dtype=np.int64)
    nan = np.empty(a_bits.size, dtype=np.bool_)
    word = a_bits.dtype.type  # the masks in the patterns' own unsigned type
    magnitude = (1 << (bits - 1)) - 1
    _ulp_loop(a_bits, b_bits, ulps, nan, word(magnitude), word(magnitude & ~((1 << mant_bits) - 1)),
              word((1 << mant_bits) - 1))
    return ulps, nan


if numba is not None:
    @numba.njit(cache=True)
    def ordered_bits(u, magnitude):
        """The ordered integer of one pattern: its magnitude, negated when the sign bit is set."""
        mag = np.int64(u & magnitude)
        return -mag if u > magnitude else mag

    @numba.njit(cache=True)
    def _ulp_loop(a, b, ulps, nan, magnitude, exp_mask, mant_mask):
        for i in range(a.size):
            ua, ub = a[i], b[i]
            if ((ua & exp_mask) == exp_mask and (ua & mant_mask) != 0) or \
                    ((ub & exp_mask) == exp_mask and (ub & mant_mask) != 0):
                nan[i] = True
                ulps[i] = 0
            else:
                nan[i] = False
                d = ordered_bits(ua, magnitude) - ordered_bits(ub, magnitude)
                ulps[i] = -d if d < 0 else d
