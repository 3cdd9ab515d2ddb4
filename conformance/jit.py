"""When the compiled paths run: numba installed (the ``fast`` extra) and allowed.

:func:`enabled` is False without numba, or with ``CONFORMANCE_COMPILED=0``; every caller
then takes its numpy path, which stays the reference implementation.  numba itself is
imported only by the modules holding compiled loops, and those only on a first compiled
call, so a process that never computes (``conformance --help``, a worker waiting) does not
pay for it.  Compiled code is cached (``cache=True``) in the package's ``__pycache__``, or
under ``NUMBA_CACHE_DIR`` when that is set (numba falls back to a per-user cache directory
when the package directory is read-only).
"""
from __future__ import annotations

import importlib.util
import os
from functools import cache

import numpy as np

__all__ = ["available", "enabled", "read_only"]


@cache
def available() -> bool:
    """True when numba is installed."""
    return importlib.util.find_spec("numba") is not None


def enabled() -> bool:
    """True when compiled paths may run: numba is there and ``CONFORMANCE_COMPILED`` is not 0."""
    return os.environ.get("CONFORMANCE_COMPILED", "1") != "0" and available()


def read_only(a: np.ndarray) -> np.ndarray:
    """``a`` as a C-contiguous read-only view (a copy only when ``a`` is strided): what a compiled
    loop reads.  numba compiles a signature per layout and per writability, so arrays a run
    computes (writable), reads from a file (read-only) or slices (strided) would each compile
    one; given this way they share the one the set-up's warm-up compiled."""
    view = np.ascontiguousarray(a).view()
    view.setflags(write=False)
    return view
