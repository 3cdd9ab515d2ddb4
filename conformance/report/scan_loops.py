"""The scan of one chunk of a dump compiled with numba (``conformance.jit`` says when).

The same results as the numpy path of :mod:`conformance.report.chunked`, which compares
the chunk (:func:`conformance.report.metrics.compare`), then takes the mismatching
elements and a stride sample of the matching ones in several passes: here one pass
finds the mismatches and the special matching elements (the plain ones are where neither
list is: :func:`plain_picks`) and adds up the cosine sums as numpy's pairwise sum adds them
(:func:`find`); a second judges each mismatch
(:func:`conformance.report.metric_loops.judge`) and writes it where the caller keeps it
(:func:`judge_range`), a range of the mismatches at a time, so that threads may judge
ranges at once (``nogil``) and their counts and maxima merge exactly.
Every array is read as bit patterns; values come from the float32/float64 arrays
themselves, or from a table of every pattern for a 16-bit format.
"""
from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

from conformance.report.metric_loops import judge
from conformance.report.metrics import DOT_PIECE  # finite pairs summed as one piece, as numpy sums them
from conformance.ulp_loops import is_nan_bits, ordered_bits

__all__ = ["DOT_PIECE", "find", "judge_range", "pairwise_sum", "plain_picks"]

_BLOCK = 128  # numpy's PW_BLOCKSIZE: a piece this short is summed by eight accumulators
_DEPTH = 128  # pieces a pairwise sum holds at once: two per halving, far more than 2^63 elements need


@numba.njit(cache=True)
def pairwise_sum(p, lo, n):
    """``np.add.reduce(p[lo:lo + n])`` of float64, in numpy's order: a piece of more than 128
    elements is split in halves (the first rounded down to a multiple of 8) summed apart, a
    shorter one by eight accumulators; plus the reduction's initial 0.0.  The halves are
    walked with a stack of their own (numba's cache does not keep recursive functions)."""
    if n <= _BLOCK:
        return 0.0 + _block(p, lo, n)
    starts, sizes = np.empty(_DEPTH, dtype=np.int64), np.empty(_DEPTH, dtype=np.int64)
    split, sums = np.zeros(_DEPTH, dtype=np.bool_), np.empty(_DEPTH, dtype=np.float64)
    starts[0], sizes[0], split[0], top, done = lo, n, False, 1, 0
    while top:
        at, size = starts[top - 1], sizes[top - 1]
        if size <= _BLOCK:
            sums[done], done, top = _block(p, at, size), done + 1, top - 1
        elif split[top - 1]:  # both halves summed: the first is below the second
            sums[done - 2], done, top = sums[done - 2] + sums[done - 1], done - 1, top - 1
        else:
            half = size // 2
            half -= half % 8
            split[top - 1] = True
            starts[top], sizes[top], split[top] = at + half, size - half, False
            starts[top + 1], sizes[top + 1], split[top + 1] = at, half, False
            top += 2
    return 0.0 + sums[0]


@numba.njit(cache=True)
def _block(p, lo, n):
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += p[i]
        return res
    r0, r1, r2, r3 = p[lo], p[lo + 1], p[lo + 2], p[lo + 3]
    r4, r5, r6, r7 = p[lo + 4], p[lo + 5], p[lo + 6], p[lo + 7]
    i = 8
    while i < n - n % 8:
        r0 += p[lo + i]
        r1 += p[lo + i + 1]
        r2 += p[lo + i + 2]
        r3 += p[lo + i + 3]
        r4 += p[lo + i + 4]
        r5 += p[lo + i + 5]
        r6 += p[lo + i + 6]
        r7 += p[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += p[lo + i]
        i += 1
    return res


@numba.njit(cache=True)
def _flush(products, n, sums):
    for j in range(3):
        sums[j] += pairwise_sum(products[j], 0, n)


@numba.njit(cache=True, inline="always")
def _bin_of(u, v, magnitude):
    """The ULP bin of a pair of at most 32 bits, not NaN: 0 for a distance of 0, else k for a
    distance in [2^(k-1), 2^k) (its bit length, as ``math.frexp`` of it gives)."""
    d = ordered_bits(u, magnitude) - ordered_bits(v, magnitude)
    d = -d if d < 0 else d
    return 0 if d == 0 else 64 - np.int64(leading_zeros(np.uint64(d)))


@numba.njit(cache=True)
def _special(u, exp_mask):
    field = u & exp_mask
    return field == 0 or field == exp_mask


@numba.njit(cache=True, nogil=True)
def find(xb, db, ab, gb, af, gf, table, offset, out_where, start, products, sums, special_at, kinds,
         exp_mask, mant_mask, x_exp):
    """The first pass over a chunk (bits ``xb``, ``db`` of x and dy, ``ab``, ``gb`` of actual and
    golden; ``db`` empty forward; their values from ``table`` by the bits when it is not
    empty, else ``af``, ``gf``): adds up the cosine sums of the finite pairs into ``sums``
    (dot, aa, gg) by pieces of ``products.shape[1]``, writes the flat index ``offset + i`` of
    each mismatch (bits differ, not NaN on both sides) at ``start``, ``start + 1``, ... of
    ``out_where``, and the local index of each matching element that is special (an exponent
    field all zeros or all ones in x, dy or golden) in ``special_at``; how many matching
    elements are special and how many are plain (the others) in ``kinds``; ``out_where`` and
    ``special_at`` are written one place past their end too.  The plain ones are where neither
    list is (:func:`plain_picks`).  Branches that depend on the data are avoided where
    elements of each kind are mixed at random.  Returns where the writing ended and the
    largest finite magnitude."""
    k, filled, top, has_dy, by_table = start, 0, 0.0, db.size > 0, table.size > 0
    n_special = 0
    for i in range(ab.size):
        u, v = ab[i], gb[i]
        if (u & exp_mask) != exp_mask and (v & exp_mask) != exp_mask:  # both finite
            x = table[u] if by_table else np.float64(af[i])
            y = table[v] if by_table else np.float64(gf[i])
            products[0, filled], products[1, filled], products[2, filled] = x * y, x * x, y * y
            larger = max(abs(x), abs(y))
            if larger > top:  # rare after the first elements: no chain of maxima from one element to the next
                top = larger
            filled += 1
            if filled == products.shape[1]:
                _flush(products, filled, sums)
                filled = 0
        mismatch = (u != v) & ~(is_nan_bits(u, exp_mask, mant_mask) & is_nan_bits(v, exp_mask, mant_mask))
        special = _special(xb[i], x_exp) | _special(v, exp_mask) | (_special(db[i], x_exp) if has_dy else False)
        out_where[k], special_at[n_special] = offset + i, i
        k += mismatch
        n_special += special & ~mismatch
    if filled:
        _flush(products, filled, sums)
    kinds[0], kinds[1] = n_special, ab.size - (k - start) - n_special
    return k, top


@numba.njit(cache=True, nogil=True)
def judge_range(xb, db, ab, gb, af, gf, table, offset, out_where, out_x, out_dy, out_golden, out_actual, out_bad,
                lo, hi, counts, bins, classes, rtol, atol, max_ulp, strict_zeros, magnitude, exp_mask, mant_mask,
                x_sign, x_mant, x_exp, x_shift):
    """The second pass over the chunk's mismatches ``out_where[lo:hi]`` (:func:`find`): judges
    each (:func:`conformance.report.metric_loops.judge`), writes its bits and violation to the
    other ``out_*``, adds its eight flags to ``counts`` and what the plots of the mismatches
    show (``plots.measure``): their ULP distances to ``bins`` (as
    ``metric_loops.ulp_bin_counts``; none when ``bins`` is empty) and the classes of their x
    to ``classes`` (as ``metric_loops.class_counts``, by x's sign, mantissa and exponent masks
    and the exponent's shift).  Counts are kept in registers, not in arrays.  Returns the
    maxima of the range, the first index winning a tie (a range after another merges into it
    with :func:`conformance.report.metric_loops.merged`)."""
    has_dy, by_table = db.size > 0, table.size > 0
    best = (0.0, 0.0, np.int64(0), np.int64(0), np.int64(0), np.int64(0))  # no error yet
    c0, c1, c2, c3, c4, c5, c6, c7 = 0, 0, 0, 0, 0, 0, 0, 0
    binned = bins.size > 0
    for j in range(lo, hi):
        i = out_where[j] - offset
        u, v = ab[i], gb[i]
        x = table[u] if by_table else np.float64(af[i])
        y = table[v] if by_table else np.float64(gf[i])
        out_bad[j], best, flags = judge(x, y, u, v, i, best, rtol, atol, max_ulp, strict_zeros,
                                        magnitude, exp_mask, mant_mask)
        c0, c1, c2, c3 = c0 + flags[0], c1 + flags[1], c2 + flags[2], c3 + flags[3]
        c4, c5, c6, c7 = c4 + flags[4], c5 + flags[5], c6 + flags[6], c7 + flags[7]
        if binned:
            bins[65 if flags[1] else _bin_of(u, v, magnitude)] += 1
        w = xb[i]
        classes[np.int64((w & x_exp) >> x_shift) * 4 + 2 * np.int64((w & x_sign) != 0)
                + np.int64((w & x_mant) != 0)] += 1
        out_x[j], out_golden[j], out_actual[j] = w, v, u
        if has_dy:
            out_dy[j] = db[i]
    counts[0] += c0
    counts[1] += c1
    counts[2] += c2
    counts[3] += c3
    counts[4] += c4
    counts[5] += c5
    counts[6] += c6
    counts[7] += c7
    return best


@numba.njit(cache=True, nogil=True)
def plain_picks(where, lo, hi, offset, special_at, n_special, step, out):
    """The local indices of the plain matching elements of ranks 0, ``step``, ``2 * step``, ...
    (``out.size`` of them) of a chunk: the places, in order, that are neither a mismatch
    (``where[lo:hi] - offset``) nor a special matching element (``special_at[:n_special]``);
    both lists ascending, apart."""
    a, b, skipped = lo, 0, 0
    for j in range(out.size):
        p = j * step + skipped
        while True:
            if a < hi and where[a] - offset <= p:
                a += 1
            elif b < n_special and special_at[b] <= p:
                b += 1
            else:
                break
            skipped += 1
            p += 1
        out[j] = p
