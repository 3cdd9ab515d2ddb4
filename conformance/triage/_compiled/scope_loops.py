"""The scope of a large batch, its other elements split in one pass (numba).

``triage.sampling.scope_of`` scores a batch larger than ``SAMPLING.full_scope`` on its
mismatches, every other element that is special and a sample of the plain ones.  The numpy
path marks the mismatches in a mask, lists the others, tests every element for a special
value and gathers the tests at the others; :func:`split_others` walks the batch once, past the
ascending mismatches, and lists each other element as special or plain, in order: the same
two lists.
"""
from __future__ import annotations

import numba
import numpy as np

from conformance.jit import read_only

__all__ = ["split_others", "warm"]


@numba.njit(cache=True, inline="always")
def _special(bits, i, exp_mask):
    field = bits[i] & exp_mask
    return (field == 0) | (field == exp_mask)


@numba.njit(cache=True, nogil=True)
def _split(mismatches, xb, x_exp, gb, g_exp, db, special, plain):
    """Each position of ``xb`` that is not in the ascending ``mismatches``, written to ``special``
    when x, golden (``gb``, empty: none) or dy (``db``, empty: none) has an exponent field all
    zeros or all ones there, else to ``plain``; how many of each."""
    j, n_special, n_plain = 0, 0, 0
    for i in range(xb.size):
        if j < mismatches.size and mismatches[j] == i:
            j += 1
            continue
        odd = _special(xb, i, x_exp)
        if gb.size:
            odd |= _special(gb, i, g_exp)
        if db.size:
            odd |= _special(db, i, x_exp)
        if odd:
            special[n_special] = i
            n_special += 1
        else:
            plain[n_plain] = i
            n_plain += 1
    return n_special, n_plain


def split_others(mismatches: np.ndarray, x_bits: np.ndarray, *, x_exp: int, golden_bits: np.ndarray, golden_exp: int,
                 dy_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions other than ``mismatches`` (ascending, distinct, in range), special and plain
    (``claims.special_values`` of x, golden and dy; an empty golden or dy is none), each in order."""
    n = x_bits.size - mismatches.size
    special, plain = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    kind = x_bits.dtype.type
    n_special, n_plain = _split(read_only(mismatches.astype(np.int64, copy=False)), read_only(x_bits), kind(x_exp),
                                read_only(golden_bits), golden_bits.dtype.type(golden_exp),
                                read_only(dy_bits), special, plain)
    return special[:n_special], plain[:n_plain]


def warm() -> None:
    """Compile (or load) the pass for each pair of x and golden bit widths the golden computes."""
    for x_type, g_type in ((np.uint16, np.uint16), (np.uint32, np.uint32), (np.uint64, np.uint64),
                           (np.uint32, np.uint16), (np.uint16, np.uint32)):
        x, g = np.arange(8, dtype=x_type), np.arange(8, dtype=g_type)
        split_others(np.array([1, 5]), x, x_exp=3, golden_bits=g, golden_exp=3, dy_bits=x[:0])
