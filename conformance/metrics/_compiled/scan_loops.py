"""The scan of one chunk of a dump compiled with numba (``conformance.jit`` says when).

The same results as the numpy path of :mod:`conformance.judge.chunked`, which compares
the chunk (:func:`conformance.metrics.exact.compare`), then takes the mismatching
elements and a stride sample of the matching ones in several passes.  Here a first pass
(:func:`find`) takes a run of elements at a time: computes a forward golden there when asked
(:class:`Golden`), passes a run of equal pairs and no special element on bitwise reductions,
flags the elements of any other run without branches (vectorised), lists the mismatches and
the special matching elements from the flags (the plain ones are where neither list is:
:func:`plain_picks`), and adds up the cosine sums as numpy's pairwise sum adds them
(:mod:`conformance.metrics._compiled.pairwise`); a second (:func:`judge_range`) writes a run
of the mismatches where the caller keeps them and judges the run there
(:func:`conformance.metrics._compiled.metric_loops.judge_run`), a range of the mismatches at a
time, so that threads may judge ranges at once (``nogil``) and their counts and maxima merge
exactly.
Every array is read as bit patterns; values come from the float32/float64 arrays
themselves, or from a table of every pattern for a 16-bit format.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numba
import numpy as np

from conformance.metrics._compiled.check_loops import as_bits, check_run
from conformance.metrics._compiled.metric_loops import NO_ERROR, RUN, judge_run, scratch, taken, ulp_bin, valued
from conformance.metrics._compiled.pairwise import BLOCK, block_sums, pairwise_sums, tree_shaped, tree_sums
from conformance.reference.compiled_vector import vector_forward_loop
from conformance.ulp_loops import is_nan_bits

__all__ = ["ChunkBits", "Golden", "Judging", "KeptColumns", "cosine_sums", "count_into", "find", "judge_range",
           "pairwise_sums", "piece_sums", "plain_picks", "table_sums", "whole_pieces"]


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


class Golden(NamedTuple):
    """The golden :func:`find` computes itself when ``computed`` is False, a run at a time just
    before it reads the run: from x's values ``x`` into ``sink`` (the golden's values, writable;
    the chunk's golden bits are its memory) by the select loop of
    :class:`conformance.reference.compiled.SelectLoop` (``table``, ``ge``, ``scale``, ``rules``)."""

    computed: bool
    x: Any
    sink: Any
    table: Any
    ge: bool
    scale: bool
    rules: Any


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


@numba.njit(cache=True)
def _add_piece(a, g, lo, n, sums):
    """The cosine sums (dot, aa, gg) of one piece of finite pairs added to ``sums``."""
    _add_sums(pairwise_sums(a, g, lo, n), sums)


@numba.njit(cache=True, inline="always")
def _add_sums(piece, sums):
    sums[0] += piece[0]
    sums[1] += piece[1]
    sums[2] += piece[2]


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


@numba.njit(cache=True)
def table_sums(ab, gb, table, pieces, sums, exp_mask, magnitude):
    """:func:`_cosine_sums` of two 16-bit arrays' bits ``ab``, ``gb`` (their values ``table``'s),
    and the bits of the largest magnitude of their finite pairs (zero: none), as
    ``metrics.exact._cosine_sums`` takes them."""
    top = exp_mask ^ exp_mask
    for i in range(ab.size):
        u, v = ab[i], gb[i]
        if (u & exp_mask) != exp_mask and (v & exp_mask) != exp_mask:
            top = max(top, max(u & magnitude, v & magnitude))
    _cosine_sums(ab, gb, table[:0], table[:0], table, False, pieces, sums, exp_mask)
    return top


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
    the largest finite magnitude's bits taken in.  No branch on the data, over slices read from
    their start (no index may wrap round): vectorised."""
    finite, nan_both, inf_both = 0, 0, 0
    magnitude = exp_mask | mant_mask
    xs, us, vs, ds = xb[lo:lo + n], ab[lo:lo + n], gb[lo:lo + n], db[lo:lo + n] if has_dy else db
    for k in range(n):
        u, v = us[k], vs[k]
        fin = ((u & exp_mask) != exp_mask) & ((v & exp_mask) != exp_mask)
        nan_v = is_nan_bits(v, exp_mask, mant_mask)
        mismatch = (u != v) & ~(is_nan_bits(u, exp_mask, mant_mask) & nan_v)
        special = _special(xs[k], x_exp) | _special(v, exp_mask) | (_special(ds[k], x_exp) if has_dy else False)
        flags[k] = np.uint8(mismatch) | (np.uint8(special & ~mismatch) << 1) | (np.uint8(fin) << 2)
        finite += fin
        nan_both += nan_v & ~mismatch
        inf_both += ((v & magnitude) == exp_mask) & ~mismatch
        largest = max(u & magnitude, v & magnitude)
        top = max(top, largest if fin else largest ^ largest)  # in the bits' own type: vectorised
    return finite, nan_both, inf_both, top


@numba.njit(cache=True, nogil=True)
def _plain_run(xb, db, ab, gb, lo, n, has_dy, exp_mask, mant_mask, x_exp):
    """Whether every pair of the elements ``lo .. lo + n - 1`` has equal bits and no element is
    special (an exponent field all zeros or all ones in x, dy or golden: so every pair is
    finite), and the largest magnitude's bits.  Bitwise reductions in the bits' own type over
    slices read from their start (no index may wrap round), which the compiler vectorises:
    most runs of a dump are so, and need no flags."""
    zero = exp_mask ^ exp_mask
    differ, special, top = zero, zero, zero
    magnitude = exp_mask | mant_mask
    xs, us, vs, ds = xb[lo:lo + n], ab[lo:lo + n], gb[lo:lo + n], db[lo:lo + n] if has_dy else db
    for k in range(n):
        v = vs[k]
        differ |= us[k] ^ v
        odd = _special(xs[k], x_exp) | _special(v, exp_mask)
        if has_dy:  # the same for every element: taken out of the loop
            odd |= _special(ds[k], x_exp)
        special |= exp_mask if odd else zero
        top = max(top, v & magnitude)
    return (differ == 0) & (special == 0), top


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


@numba.njit(cache=True)
def whole_pieces(bits, piece):
    """How many of the chunk's (:class:`ChunkBits` ``bits``) first elements make whole pieces of
    ``piece`` whose cosine sums are :func:`tree_sums` of the blocks :func:`find` sums (0: none)."""
    return bits.actual.size // piece * piece if tree_shaped(piece, RUN) and bits.table.size == 0 else 0


@numba.njit(cache=True, nogil=True)
def find(bits, golden, lo, hi, offset, out_where, start, blocks, whole, special_at, found, exp_mask, mant_mask,
         x_exp):
    """The first pass over the elements ``lo .. hi - 1`` of a chunk (:class:`ChunkBits` ``bits``;
    ``lo`` a multiple of ``RUN``), a run of elements at a time: writes the flat index
    ``offset + i`` of each mismatch (bits differ, not NaN on both sides) at ``start``,
    ``start + 1``, ... of ``out_where``, and the local index ``i`` of each matching element that
    is special (an exponent field all zeros or all ones in x, dy or golden) at ``special_at[0]``,
    ``special_at[1]``, ... (each written one place past its end too); the plain ones are where
    neither list is (:func:`plain_picks`).  The cosine sums of each block of the first ``whole``
    elements go to ``blocks`` (:func:`block_sums`; read by :func:`cosine_sums`).  ``found``
    gets how many mismatches and special matching elements were listed, how many pairs are
    finite, NaN on both sides and an infinity on both sides, and the bits of the largest finite
    magnitude.  A :class:`Golden` not yet ``computed`` is computed a run at a time first, so the
    run's x and golden are read while they are in the first cache.  Ranges of one chunk may be
    found at once on several threads (``nogil``), each with its own lists."""
    xb, db, ab, gb, af, gf, table = bits
    k, n_special, finite, top = start, 0, 0, exp_mask ^ exp_mask  # zero of the bits' type
    nan_both, inf_both = 0, 0
    flags = np.empty(RUN, dtype=np.uint8)
    look = True  # for a plain run: after a plain run (likely one again), and every other run after one that is not
    for at in range(lo, hi, RUN):
        n = min(RUN, hi - at)
        if not golden.computed:
            vector_forward_loop(golden.x[at:at + n], golden.table, golden.sink[at:at + n], golden.ge, golden.scale,
                                golden.rules)
        plain, largest = _plain_run(xb, db, ab, gb, at, n, db.size > 0, exp_mask, mant_mask, x_exp) if look \
            else (False, top)
        look = plain or not look
        if at < whole:  # the run's blocks summed while they are in the first cache, in case all are finite
            block_sums(af, gf, at, n, blocks, at // BLOCK, plain)
        if plain:  # nothing to list: every pair matches, finite, and no element is special
            finite, top = finite + n, max(top, largest)
            continue
        fin, nan, inf, top = _flagged(xb, db, ab, gb, at, n, flags, top, db.size > 0, exp_mask, mant_mask, x_exp)
        k, n_special = _listed(flags, at, n, offset, out_where, k, special_at, n_special)
        finite, nan_both, inf_both = finite + fin, nan_both + nan, inf_both + inf
    found[0], found[1], found[2], found[3], found[4] = k - start, n_special, finite, nan_both, inf_both
    return top


@numba.njit(cache=True)
def cosine_sums(bits, blocks, whole, finite, pieces, sums, exp_mask):
    """Add up the chunk's cosine sums (dot, aa, gg) into ``sums`` by pieces of
    ``pieces.shape[1]``, as numpy's pairwise sum adds them: from :func:`find`'s ``blocks`` when
    the chunk's ``finite`` pairs are all of them, else from the pairs themselves."""
    xb, db, ab, gb, af, gf, table = bits
    piece = pieces.shape[1]
    if whole and finite == ab.size:
        for lo in range(0, whole, piece):
            _add_sums(tree_sums(blocks, lo // BLOCK, piece // BLOCK), sums)
        if whole < ab.size:
            _add_piece(af, gf, whole, ab.size - whole, sums)
    else:
        _cosine_sums(ab, gb, af, gf, table, finite == ab.size, pieces, sums, exp_mask)


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
