"""The scan of one chunk of a dump compiled with numba (``conformance.jit`` says when).

The same results as the numpy path of :mod:`conformance.judge.chunked`, which compares
the chunk (:func:`conformance.metrics.exact.compare`), then takes the mismatching
elements and a stride sample of the matching ones in several passes.  Here a first pass
(:func:`find`) flags a run of elements at a time without branches (vectorised), lists the
mismatches and the special matching elements from the flags (the plain ones are where
neither list is: :func:`plain_picks`), then adds up the cosine sums as numpy's pairwise sum
adds them; a second (:func:`judge_range`) writes a run of the mismatches where the caller
keeps them and judges the run there (:func:`conformance.metrics._compiled.metric_loops.judge_run`), a
range of the mismatches at a time, so that threads may judge ranges at once (``nogil``) and
their counts and maxima merge exactly.
Every array is read as bit patterns; values come from the float32/float64 arrays
themselves, or from a table of every pattern for a 16-bit format.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numba
import numpy as np

from conformance.metrics._compiled.check_loops import as_bits, check_run
from conformance.metrics._compiled.metric_loops import NO_ERROR, RUN, judge_run, scratch, taken, ulp_bin, valued
from conformance.ulp_loops import is_nan_bits

__all__ = ["ChunkBits", "Judging", "KeptColumns", "count_into", "find", "judge_range", "pairwise_sums", "piece_sums",
           "plain_picks"]


class ChunkBits(NamedTuple):
    """A chunk as the loops read it: the bits of x, dy (empty forward), actual and golden; the
    values of actual and golden (float32/float64), or ``table``, every 16-bit pattern's value
    (empty for a wider format)."""

    x: Any
    dy: Any
    actual: Any
    golden: Any
    actual_values: Any
    golden_values: Any
    table: Any


class KeptColumns(NamedTuple):
    """Where :func:`judge_range` writes the chunk's mismatches: flat index, the bits of x, dy,
    golden and actual, and whether each violates the tolerance."""

    where: Any
    x: Any
    dy: Any
    golden: Any
    actual: Any
    violating: Any


class Judging(NamedTuple):
    """The tolerance and the masks a run is judged and binned by: of the output format
    (magnitude, exponent and mantissa) and of x's (sign, mantissa, exponent and its shift)."""

    rtol: float
    atol: float
    max_ulp: int
    strict_zeros: bool
    magnitude: Any
    exp_mask: Any
    mant_mask: Any
    x_sign: Any
    x_mant: Any
    x_exp: Any
    x_shift: Any

_BLOCK = 128  # numpy's PW_BLOCKSIZE: a piece this short is summed by eight accumulators
_DEPTH = 128  # pieces a pairwise sum holds at once: two per halving, far more than 2^63 elements need


@numba.njit(cache=True)
def pairwise_sums(a, g, lo, n):
    """``np.add.reduce`` of each of the float64 products ``a[i] * g[i]``, ``a[i] * a[i]`` and
    ``g[i] * g[i]`` over ``lo .. lo + n - 1``, in numpy's order: a piece of more than 128
    elements is split in halves (the first rounded down to a multiple of 8) summed apart, a
    shorter one by eight accumulators; plus the reduction's initial 0.0.  The halves are
    walked with a stack of their own (numba's cache does not keep recursive functions)."""
    lanes = np.empty((3, 8), dtype=np.float64)
    if n <= _BLOCK:
        return _plus_zero(_block(a, g, lo, n, lanes))
    starts, sizes = np.empty(_DEPTH, dtype=np.int64), np.empty(_DEPTH, dtype=np.int64)
    split, sums = np.zeros(_DEPTH, dtype=np.bool_), np.empty((_DEPTH, 3), dtype=np.float64)
    starts[0], sizes[0], split[0], top, done = lo, n, False, 1, 0
    while top:
        at, size = starts[top - 1], sizes[top - 1]
        if size <= _BLOCK:
            sums[done, 0], sums[done, 1], sums[done, 2] = _block(a, g, at, size, lanes)
            done, top = done + 1, top - 1
        elif split[top - 1]:  # both halves summed: the first is below the second
            for j in range(3):
                sums[done - 2, j] += sums[done - 1, j]
            done, top = done - 1, top - 1
        else:
            half = size // 2
            half -= half % 8
            split[top - 1] = True
            starts[top], sizes[top], split[top] = at + half, size - half, False
            starts[top + 1], sizes[top + 1], split[top + 1] = at, half, False
            top += 2
    return _plus_zero((sums[0, 0], sums[0, 1], sums[0, 2]))


@numba.njit(cache=True, inline="always")
def _plus_zero(sums):
    return 0.0 + sums[0], 0.0 + sums[1], 0.0 + sums[2]


@numba.njit(cache=True)
def _block(a, g, lo, n, lanes):
    """The three sums of a piece of at most 128 pairs: eight accumulators each (``lanes``), lane
    l taking elements l, l + 8, ..., then added pairwise, then the elements past the last
    eight one by one; a piece shorter than eight, one by one."""
    if n < 8:
        dot = aa = gg = 0.0
        for i in range(lo, lo + n):
            x, y = np.float64(a[i]), np.float64(g[i])
            dot, aa, gg = dot + x * y, aa + x * x, gg + y * y
        return dot, aa, gg
    for lane in range(8):
        x, y = np.float64(a[lo + lane]), np.float64(g[lo + lane])
        lanes[0, lane], lanes[1, lane], lanes[2, lane] = x * y, x * x, y * y
    whole = n - n % 8
    for t in range(8, whole, 8):
        for lane in range(8):
            x, y = np.float64(a[lo + t + lane]), np.float64(g[lo + t + lane])
            lanes[0, lane] += x * y
            lanes[1, lane] += x * x
            lanes[2, lane] += y * y
    dot, aa, gg = _lanes_added(lanes, 0), _lanes_added(lanes, 1), _lanes_added(lanes, 2)
    for i in range(lo + whole, lo + n):
        x, y = np.float64(a[i]), np.float64(g[i])
        dot, aa, gg = dot + x * y, aa + x * x, gg + y * y
    return dot, aa, gg


@numba.njit(cache=True, inline="always")
def _lanes_added(lanes, j):
    """The eight accumulators of sum ``j`` added pairwise, as numpy adds its eight."""
    r = lanes[j]
    return ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))


@numba.njit(cache=True)
def _add_piece(a, g, lo, n, sums):
    """The cosine sums (dot, aa, gg) of one piece of finite pairs added to ``sums``."""
    dot, aa, gg = pairwise_sums(a, g, lo, n)
    sums[0] += dot
    sums[1] += aa
    sums[2] += gg


@numba.njit(cache=True)
def piece_sums(a, g, size, sums):
    """Add up the cosine sums (dot, aa, gg) of the finite float32 or float64 values ``a``, ``g``
    into ``sums``, by pieces of ``size`` (each a pairwise sum, the pieces added in order): as
    ``metrics._dots`` takes them."""
    for lo in range(0, a.size, size):
        _add_piece(a, g, lo, min(size, a.size - lo), sums)


@numba.njit(cache=True)
def _cosine_sums(ab, gb, af, gf, table, all_finite, pieces, sums, exp_mask):
    """Add up the cosine sums of the chunk's finite pairs by pieces of ``pieces.shape[1]``, as
    the numpy path takes them: read in place when every pair is finite and the values are the
    arrays themselves, else each piece's values gathered into ``pieces[0]``, ``pieces[1]``."""
    size = pieces.shape[1]
    if all_finite and table.size == 0:
        piece_sums(af, gf, size, sums)
        return
    va, vg, filled = pieces[0], pieces[1], 0
    for i in range(ab.size):
        u, v = ab[i], gb[i]
        if (u & exp_mask) != exp_mask and (v & exp_mask) != exp_mask:
            va[filled] = table[u] if table.size else np.float64(af[i])
            vg[filled] = table[v] if table.size else np.float64(gf[i])
            filled += 1
            if filled == size:
                _add_piece(va, vg, 0, filled, sums)
                filled = 0
    if filled:
        _add_piece(va, vg, 0, filled, sums)


@numba.njit(cache=True, inline="always")
def _special(u, exp_mask):
    field = u & exp_mask
    return (field == 0) | (field == exp_mask)


@numba.njit(cache=True, nogil=True)
def _flagged(xb, db, ab, gb, lo, n, flags, top, has_dy, exp_mask, mant_mask, x_exp):
    """Flags of the elements ``lo .. lo + n - 1`` into ``flags`` (from 0): 1 a mismatch (bits
    differ, not NaN on both sides), 2 a matching element that is special (an exponent field
    all zeros or all ones in x, dy or golden), 4 a finite pair; how many pairs are finite, how
    many matching pairs are NaN and how many an infinity (on both sides, so), and ``top`` with
    the largest finite magnitude's bits taken in.  No branch on the data: vectorised."""
    finite, nan_both, inf_both = 0, 0, 0
    magnitude = exp_mask | mant_mask
    for k in range(n):
        i = lo + k
        u, v = ab[i], gb[i]
        fin = ((u & exp_mask) != exp_mask) & ((v & exp_mask) != exp_mask)
        nan_v = is_nan_bits(v, exp_mask, mant_mask)
        mismatch = (u != v) & ~(is_nan_bits(u, exp_mask, mant_mask) & nan_v)
        special = _special(xb[i], x_exp) | _special(v, exp_mask) | (_special(db[i], x_exp) if has_dy else False)
        flags[k] = np.uint8(mismatch) | (np.uint8(special & ~mismatch) << 1) | (np.uint8(fin) << 2)
        finite += fin
        nan_both += nan_v & ~mismatch
        inf_both += ((v & magnitude) == exp_mask) & ~mismatch
        largest = max(u & magnitude, v & magnitude)
        top = max(top, largest if fin else largest ^ largest)  # in the bits' own type: vectorised
    return finite, nan_both, inf_both, top


@numba.njit(cache=True, nogil=True)
def _listed(flags, lo, n, offset, out_where, k, special_at, n_special):
    """The flat index of each mismatch of :func:`_flagged`'s elements written at ``k``, ``k + 1``,
    ... of ``out_where``, the local index of each special matching one at ``n_special``, ...
    of ``special_at`` (each written one place past its end too); where the writing ended."""
    for t in range(n):
        f = flags[t]
        out_where[k], special_at[n_special] = offset + lo + t, lo + t
        k += f & 1
        n_special += (f >> 1) & 1
    return k, n_special


@numba.njit(cache=True, nogil=True)
def find(bits, offset, out_where, start, pieces, sums, special_at, kinds, exp_mask, mant_mask, x_exp):
    """The first pass over a chunk (:class:`ChunkBits` ``bits``), a run of elements at a time:
    adds up the cosine sums of the finite pairs into ``sums`` (dot, aa, gg) by pieces of
    ``pieces.shape[1]``, writes the flat
    index ``offset + i`` of each mismatch (bits differ, not NaN on both sides) at ``start``,
    ``start + 1``, ... of ``out_where``, and the local index of each matching element that is
    special (an exponent field all zeros or all ones in x, dy or golden) in ``special_at``; how
    many matching elements are special and how many are plain (the others), then how many are
    NaN and how many an infinity on both sides, in ``kinds``; ``out_where`` and ``special_at``
    are written one place past their end too.  The plain ones are where neither list is
    (:func:`plain_picks`).  Returns where the writing ended and the bits of the largest finite
    magnitude."""
    xb, db, ab, gb, af, gf, table = bits
    k, n_special, finite, top = start, 0, 0, exp_mask ^ exp_mask  # zero of the bits' type
    nan_both, inf_both = 0, 0
    flags = np.empty(RUN, dtype=np.uint8)
    for lo in range(0, ab.size, RUN):
        n = min(RUN, ab.size - lo)
        fin, nan, inf, top = _flagged(xb, db, ab, gb, lo, n, flags, top, db.size > 0, exp_mask, mant_mask, x_exp)
        k, n_special = _listed(flags, lo, n, offset, out_where, k, special_at, n_special)
        finite, nan_both, inf_both = finite + fin, nan_both + nan, inf_both + inf
    _cosine_sums(ab, gb, af, gf, table, finite == ab.size, pieces, sums, exp_mask)
    kinds[0], kinds[1] = n_special, ab.size - (k - start) - n_special
    kinds[2], kinds[3] = nan_both, inf_both
    return k, top


@numba.njit(cache=True, nogil=True)
def judge_range(bits, offset, kept, lo, hi, counts, bins, classes, judging, checks, closeness):
    """The second pass over the chunk's (:class:`ChunkBits`) mismatches ``kept.where[lo:hi]``
    (:func:`find`), a run at a time, by :class:`Judging` ``judging``: writes their bits to the
    other :class:`KeptColumns`, adds what the plots of the mismatches
    show (``plots.measure``) to ``bins``, their ULP bins (:func:`conformance.metrics._compiled.metric_loops.ulp_bin`;
    none when ``bins`` is empty), and to ``classes``, the classes of their x (as
    ``metric_loops.class_counts``, by x's sign, mantissa and exponent masks and the exponent's
    shift); then judges the run from its values (``af``, ``gf``, or ``table`` by the bits when it
    is not empty) with :func:`conformance.metrics._compiled.metric_loops.judge_run`, into ``out_bad`` and
    ``counts``, and, when ``checks`` is not empty (float32 and float64 outputs), adds what other
    tools' checks count of the run to ``checks`` by the tolerances ``closeness``
    (:func:`conformance.metrics._compiled.check_loops.check_run`).  Returns the maxima of the range,
    the first index winning a tie (a range after another merges into it with
    :func:`conformance.metrics._compiled.metric_loops.merged`)."""
    xb, db, ab, gb, af, gf, table = bits
    out_where, out_x, out_dy, out_golden, out_actual, out_bad = kept
    rtol, atol, max_ulp, strict_zeros, magnitude, exp_mask, mant_mask, x_sign, x_mant, x_exp, x_shift = judging
    has_dy, by_table, binned, checked = db.size > 0, table.size > 0, bins.size > 0, checks.size > 0
    best = NO_ERROR
    errs, ulps = scratch()
    va, vg = np.empty(RUN, dtype=np.float64), np.empty(RUN, dtype=np.float64)
    ta, tg, te = np.empty(RUN, dtype=af.dtype), np.empty(RUN, dtype=af.dtype), np.empty(RUN, dtype=af.dtype)
    te_bits = as_bits(te)
    for start in range(lo, hi, RUN):
        n = min(RUN, hi - start)
        for j in range(start, start + n):
            i = out_where[j] - offset
            u, v, w = ab[i], gb[i], xb[i]
            out_x[j], out_golden[j], out_actual[j] = w, v, u
            va[j - start] = table[u] if by_table else np.float64(af[i])
            vg[j - start] = table[v] if by_table else np.float64(gf[i])
            if checked:
                ta[j - start], tg[j - start] = af[i], gf[i]
            if has_dy:
                out_dy[j] = db[i]
            if binned:
                bins[ulp_bin(u, v, magnitude, exp_mask, mant_mask)] += 1
            classes[np.int64((w & x_exp) >> x_shift) * 4 + 2 * np.int64((w & x_sign) != 0)
                    + np.int64((w & x_mant) != 0)] += 1
        judge_run(out_actual, out_golden, start, va, vg, 0, n, out_bad, errs, ulps, counts, rtol, atol, max_ulp,
                  strict_zeros, magnitude, exp_mask, mant_mask)
        best = taken(best, errs, ulps, n, out_where, start, offset)
        if checked:
            check_run(ta, tg, n, closeness, checks, te, te_bits)
    return valued(best)


@numba.njit(cache=True, nogil=True)
def count_into(out, lo, hi):
    """``out[lo:hi] = lo, lo + 1, ..., hi - 1``: the batch positions of kept mismatches, a range
    per thread (most of the cost is the fresh pages, which threads take at once)."""
    for i in range(lo, hi):
        out[i] = i


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
