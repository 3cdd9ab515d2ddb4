"""The ordered-integer ULP distance compiled with numba (``conformance.jit`` says when it runs).

The same values as the numpy path of :func:`conformance.dtypes.ulp_distance`: a pattern's
ordered integer is its magnitude, negated when the sign bit is set; NaN on either side
gives 0 and is marked.
"""
from __future__ import annotations

import numba
import numpy as np

__all__ = ["masks", "ordered_bits", "ulp_and_nan"]


def masks(word: type, *, bits: int, mant_bits: int) -> tuple[int, int, int]:
    """(magnitude, exponent, mantissa) masks of a format, in its unsigned type ``word``."""
    magnitude = (1 << (bits - 1)) - 1
    return word(magnitude), word(magnitude & ~((1 << mant_bits) - 1)), word((1 << mant_bits) - 1)


def ulp_and_nan(a_bits: np.ndarray, b_bits: np.ndarray, *, bits: int, mant_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Ordered-integer distance of two flat bit-pattern arrays of one format (int64, 0 where
    either side is NaN) and the NaN mask, in one pass."""
    ulps = np.empty(a_bits.size, dtype=np.int64)
    nan = np.empty(a_bits.size, dtype=np.bool_)
    _ulp_loop(a_bits, b_bits, ulps, nan, *masks(a_bits.dtype.type, bits=bits, mant_bits=mant_bits))
    return ulps, nan


@numba.njit(cache=True)
def ordered_bits(u, magnitude):
    """The ordered integer of one pattern."""
    mag = np.int64(u & magnitude)
    return -mag if u > magnitude else mag


@numba.njit(cache=True)
def is_nan_bits(u, exp_mask, mant_mask):
    return ((u & exp_mask) == exp_mask) & ((u & mant_mask) != 0)  # no branch: a loop of it is vectorised


@numba.njit(cache=True)
def _ulp_loop(a, b, ulps, nan, magnitude, exp_mask, mant_mask):
    for i in range(a.size):
        if is_nan_bits(a[i], exp_mask, mant_mask) or is_nan_bits(b[i], exp_mask, mant_mask):
            nan[i] = True
            ulps[i] = 0
        else:
            nan[i] = False
            d = ordered_bits(a[i], magnitude) - ordered_bits(b[i], magnitude)
            ulps[i] = -d if d < 0 else d
