"""The scope of a large batch, its other elements split in one pass (numba).

``triage.sampling.scope_of`` scores a batch larger than ``SAMPLING.full_scope`` on its
mismatches, every other element that is special and a sample of the plain ones.  The numpy
path marks the mismatches in a mask, lists the others, tests every element for a special
value, gathers the tests at the others and draws the sample from the list of plain ones.
:func:`split_others` counts the special elements of each block of :data:`BLOCK` positions
without a branch, takes away the special mismatches, and walks only a block with a special
element left to list it; the plain ones are counted per block.  :func:`plain_at` then finds
the plain elements of the ranks drawn (the same draw: the ``k``-th plain element is the
list's ``k``-th), looking only at the blocks they lie in.  The plain ones, most of a large
batch, are never listed.
"""
from __future__ import annotations

import numba
import numpy as np

from conformance.jit import read_only

__all__ = ["BLOCK", "plain_at", "split_others", "warm"]

BLOCK = 64  # positions whose plain elements one count holds (and one mask: 64 bits)


@numba.njit(cache=True, inline="always")
def _special(bits, i, exp_mask):
    field = bits[i] & exp_mask
    return (field == 0) | (field == exp_mask)


@numba.njit(cache=True, inline="always")
def _odd(xb, i, x_exp, gb, g_exp, db):
    """Whether x, golden or dy is special at ``i`` (an operand absent is x again: no branch)."""
    return _special(xb, i, x_exp) | _special(gb, i, g_exp) | _special(db, i, x_exp)


@numba.njit(cache=True, nogil=True)
def _split(mismatches, xb, x_exp, gb, g_exp, db, special, plain_counts):
    """Each position of ``xb`` that is not in the ascending ``mismatches`` and where x, golden
    (``gb``) or dy (``db``) has an exponent field all zeros or all ones, written to
    ``special``; the other such positions counted per block of ``BLOCK`` in ``plain_counts``.
    How many special ones there are.  A block's elements are tested without a branch; only a
    block with a special element other than a mismatch is walked."""
    m, n = mismatches.size, xb.size
    j, n_special = 0, 0
    for block in range(plain_counts.size):
        lo, hi = block * BLOCK, min(n, (block + 1) * BLOCK)
        odd = 0
        for i in range(lo, hi):
            odd += np.int64(_odd(xb, i, x_exp, gb, g_exp, db))
        k = j
        while k < m and mismatches[k] < hi:
            odd -= np.int64(_odd(xb, mismatches[k], x_exp, gb, g_exp, db))
            k += 1
        plain_counts[block] = (hi - lo) - (k - j) - odd
        if odd:
            q = j
            for i in range(lo, hi):
                if q < k and mismatches[q] == i:
                    q += 1
                elif _odd(xb, i, x_exp, gb, g_exp, db):
                    special[n_special] = i
                    n_special += 1
        j = k
    return n_special


@numba.njit(cache=True, nogil=True)
def _plain_at(ranks, mismatches, xb, x_exp, gb, g_exp, db, plain_counts, out):
    """The positions of the plain elements of the ascending ``ranks`` (0: the first plain
    element), written to ``out``: the block each lies in found by the counts, its plain
    elements as the bits of a mask, the rank's bit counted off."""
    m, n = mismatches.size, xb.size
    block, before, j = 0, 0, 0  # the plain elements before ``block``; its first mismatch
    for r in range(ranks.size):
        rank = ranks[r]
        while before + plain_counts[block] <= rank:
            before += plain_counts[block]
            block += 1
        lo = block * BLOCK
        hi = min(n, lo + BLOCK)
        while j < m and mismatches[j] < lo:
            j += 1
        odd, k = np.uint64(0), j
        while k < m and mismatches[k] < hi:
            odd |= np.uint64(1) << np.uint64(mismatches[k] - lo)
            k += 1
        if (hi - lo) - (k - j) > plain_counts[block]:  # a special element besides the mismatches
            for i in range(lo, hi):
                odd |= np.uint64(_odd(xb, i, x_exp, gb, g_exp, db)) << np.uint64(i - lo)
        plain = ~odd if hi - lo == BLOCK else ~odd & ((np.uint64(1) << np.uint64(hi - lo)) - np.uint64(1))
        for _ in range(rank - before):  # the lower plain elements' bits cleared
            plain &= plain - np.uint64(1)
        low, at = plain & (~plain + np.uint64(1)), lo
        while low > np.uint64(1):
            low >>= np.uint64(1)
            at += 1
        out[r] = at


def _operands(x_bits: np.ndarray, x_exp: int, golden_bits: np.ndarray, golden_exp: int, dy_bits: np.ndarray) -> tuple:
    """The loops' operands: an empty golden or dy is x again (its test adds nothing)."""
    kind = x_bits.dtype.type
    gb, g_exp = (golden_bits, golden_bits.dtype.type(golden_exp)) if golden_bits.size else (x_bits, kind(x_exp))
    return (read_only(x_bits), kind(x_exp), read_only(gb), g_exp, read_only(dy_bits if dy_bits.size else x_bits))


def split_others(mismatches: np.ndarray, x_bits: np.ndarray, *, x_exp: int, golden_bits: np.ndarray, golden_exp: int,
                 dy_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions other than ``mismatches`` (ascending, distinct, in range) that are special
    (``claims.special_values`` of x, golden and dy; an empty golden or dy is none), in order,
    and how many plain ones each block of :data:`BLOCK` positions holds."""
    special = np.empty(x_bits.size - mismatches.size, dtype=np.int64)
    counts = np.empty(-(-x_bits.size // BLOCK), dtype=np.int64)
    n_special = _split(read_only(mismatches.astype(np.int64, copy=False)),
                       *_operands(x_bits, x_exp, golden_bits, golden_exp, dy_bits), special, counts)
    return special[:n_special], counts


def plain_at(ranks: np.ndarray, mismatches: np.ndarray, x_bits: np.ndarray, *, x_exp: int, golden_bits: np.ndarray,
             golden_exp: int, dy_bits: np.ndarray, plain_counts: np.ndarray) -> np.ndarray:
    """The positions of the plain elements of the ascending ``ranks``, of the split
    :func:`split_others` counted (the same operands)."""
    out = np.empty(ranks.size, dtype=np.int64)
    _plain_at(read_only(ranks.astype(np.int64, copy=False)), read_only(mismatches.astype(np.int64, copy=False)),
              *_operands(x_bits, x_exp, golden_bits, golden_exp, dy_bits), read_only(plain_counts), out)
    return out


def warm() -> None:
    """Compile (or load) the passes for each pair of x and golden bit widths the golden computes."""
    for x_type, g_type in ((np.uint16, np.uint16), (np.uint32, np.uint32), (np.uint64, np.uint64),
                           (np.uint32, np.uint16), (np.uint16, np.uint32)):
        x, g = np.arange(8, dtype=x_type), np.arange(8, dtype=g_type)
        for golden in (g, x[:0]):
            operands = dict(x_exp=3, golden_bits=golden, golden_exp=3, dy_bits=x[:0])
            mis = np.array([1, 5])
            _, counts = split_others(mis, x, **operands)
            plain_at(np.array([0]), mis, x, plain_counts=counts, **operands)
