"""The metric pass over mismatching pairs compiled with numba (``conformance.jit`` says when).

The same values as the numpy path of :func:`conformance.metrics.exact.compare`: absolute,
relative and ULP error under that module's conventions, the first index of each maximum,
the violation mask and the counts, in one pass.  The pairs are judged a run at a time: one
loop without branches (vectorised) writes each pair's errors (:func:`judge_run`), then the
run's maxima are taken in (:func:`taken`).
"""
from __future__ import annotations

from typing import Optional

import numba
import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

from conformance.jit import read_only
from conformance.ulp_loops import is_nan_bits, masks, ordered_bits

__all__ = ["NO_ERROR", "RUN", "class_counts", "finite_magnitude", "judge_run", "maxima", "merged", "mismatch_pass",
           "scratch", "slopes", "taken", "ulp_bin", "ulp_bin_counts", "valued", "within_rounding"]


RUN = 512  # pairs a vectorised loop judges at a time: their errors stay in the first cache


def mismatch_pass(ab: np.ndarray, gb: np.ndarray, a: np.ndarray, g: np.ndarray, bad: np.ndarray, *,
                   rtol: float, atol: float, max_ulp: int, strict_zeros: bool, bits: int,
                   mant_bits: int) -> tuple[list[tuple[float, int]], list[int]]:
    """((max, first index) of abs, rel and ULP error; the eight counts), ``bad`` filled in."""
    counts = np.zeros(8, dtype=np.int64)
    best = _mismatch_loop(ab, gb, a, g, bad, counts, rtol, atol, max_ulp, strict_zeros,
                          *masks(ab.dtype.type, bits=bits, mant_bits=mant_bits))
    return maxima(best), [int(c) for c in counts]


def merged(first: tuple, then: tuple) -> tuple:
    """The maxima :func:`taken` kept over two consecutive ranges, the first range's, then the
    next's: a maximum of the next range is taken only when strictly larger (the first index
    wins a tie, as one pass over both ranges keeps it)."""
    tops, at = list(first[:3]), list(first[3:])
    for k in range(3):
        if then[k] > tops[k]:
            tops[k], at[k] = then[k], then[3 + k]
    return (*tops, *at)


def maxima(best: tuple) -> list[tuple[float, int]]:
    """(max, first index) of abs, rel and ULP error from the maxima :func:`taken` kept."""
    top_abs, top_rel, top_ulp, at_abs, at_rel, at_ulp = best
    found = [float(top_abs), float(top_rel), int(float(top_ulp))]  # as the numpy path rounds it
    return [(t, int(i)) for t, i in zip(found, (at_abs, at_rel, at_ulp))]


@numba.njit(cache=True)
def _mismatch_loop(ab, gb, a, g, bad, counts, rtol, atol, max_ulp, strict_zeros, magnitude, exp_mask, mant_mask):
    best = NO_ERROR
    errs, ulps = scratch()
    nothing = np.empty(0, dtype=np.int64)
    for lo in range(0, a.size, RUN):
        n = min(RUN, a.size - lo)
        judge_run(ab, gb, lo, a, g, lo, n, bad, errs, ulps, counts, rtol, atol, max_ulp, strict_zeros, magnitude,
                  exp_mask, mant_mask)
        best = taken(best, errs, ulps, n, nothing, lo, 0)
    return valued(best)


#: What :func:`taken` starts from: the maxima (abs and rel errors by their bits, ULPs), their places.
NO_ERROR = (np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0))


@numba.njit(cache=True)
def scratch():
    """Room for the abs and rel errors and the ULP errors of one run of pairs."""
    return np.empty((2, RUN), dtype=np.float64), np.empty(RUN, dtype=np.int64)


@numba.njit(cache=True, inline="always")
def _errors(u, v, x, y, rtol, atol, max_ulp, strict_zeros, magnitude, exp_mask, mant_mask):
    """One mismatching pair (values ``x``, ``y`` in float64, bits ``u``, ``v``): whether it
    violates the tolerance, its abs, rel and ULP error (abs and rel never NaN), and its eight
    flags (violation, NaN position, inf position, zero sign, rel < 1e-3, rel < 5e-3, above,
    below).  Selects and bitwise tests only: no branch on the data, so a loop of them is
    vectorised."""
    nan_pos = is_nan_bits(u, exp_mask, mant_mask) | is_nan_bits(v, exp_mask, mant_mask)
    abs_err = 0.0 if x == y else abs(x - y)
    abs_err = np.inf if abs_err != abs_err else abs_err
    mag = abs(y)
    rel = abs_err / (mag if mag != 0 else 1.0)
    rel = np.inf if (rel != rel) | (mag == 0) else rel
    rel = 0.0 if abs_err == 0 else rel
    d = ordered_bits(u, magnitude) - ordered_bits(v, magnitude)
    ulps = 0 if nan_pos else (-d if d < 0 else d)
    inf_pos = ((abs(x) == np.inf) | (abs(y) == np.inf)) & ~nan_pos
    zero_sign = (x == 0) & (y == 0)
    bad = (abs_err > mag * rtol + atol) | (ulps > max_ulp) | nan_pos | inf_pos | (strict_zeros & zero_sign)
    finite = (abs(x) < np.inf) & (abs(y) < np.inf)
    return bad, abs_err, rel, ulps, (bad, nan_pos, inf_pos, zero_sign, rel < 1e-3, rel < 5e-3,
                                     finite & (x > y), finite & (x < y))


@numba.njit(cache=True, nogil=True)
def judge_run(ab, gb, lo, a, g, at, n, bad, errs, ulps, counts, rtol, atol, max_ulp, strict_zeros, magnitude,
              exp_mask, mant_mask):
    """Judge the pairs ``lo .. lo + n - 1`` (at most :data:`RUN`) of the bits ``ab``, ``gb``,
    whose values are ``a[at:at + n]``, ``g[at:at + n]``: whether each violates the tolerance
    into ``bad``, their abs and rel errors into ``errs`` and ULP errors into ``ulps`` (from 0),
    their eight flags added to ``counts``.  One loop without branches: vectorised."""
    c0, c1, c2, c3, c4, c5, c6, c7 = 0, 0, 0, 0, 0, 0, 0, 0
    abs_errs, rel_errs = errs[0], errs[1]
    for k in range(n):
        j = lo + k
        x, y = np.float64(a[at + k]), np.float64(g[at + k])
        bad[j], abs_errs[k], rel_errs[k], ulps[k], flags = _errors(ab[j], gb[j], x, y, rtol, atol, max_ulp,
                                                                   strict_zeros, magnitude, exp_mask, mant_mask)
        c0, c1, c2, c3 = c0 + flags[0], c1 + flags[1], c2 + flags[2], c3 + flags[3]
        c4, c5, c6, c7 = c4 + flags[4], c5 + flags[5], c6 + flags[6], c7 + flags[7]
    counts[0] += c0
    counts[1] += c1
    counts[2] += c2
    counts[3] += c3
    counts[4] += c4
    counts[5] += c5
    counts[6] += c6
    counts[7] += c7


@numba.njit(cache=True, nogil=True)
def _largest(e, n):
    """The largest of the integers ``e[:n]`` (n >= 1): a vectorised reduction."""
    top = e[0]
    for k in range(1, n):
        top = max(top, e[k])
    return top


@numba.njit(cache=True, nogil=True)
def _first(e, n, value):
    for k in range(n):
        if e[k] == value:
            return k
    return 0


@numba.njit(cache=True, nogil=True)
def taken(best, errs, ulps, n, where, lo, offset):
    """The maxima ``best`` (:data:`NO_ERROR` at first) with a run's errors (:func:`judge_run`)
    taken in, each only when strictly larger, at its first place in the run (the first index
    wins a tie, as a loop over the pairs one by one keeps it): the index of pair ``k`` is
    ``where[lo + k] - offset`` (``lo + k`` when ``where`` is empty).  The abs and rel errors are
    compared by their bits (both are at least +0 and never NaN, so their bits order as they
    do: an integer reduction is vectorised, a float one is not); :func:`valued` gives them as
    floats."""
    top_abs, top_rel, top_ulp, at_abs, at_rel, at_ulp = best
    whole = where.size == 0
    bits = errs.view(np.int64)
    found = _largest(bits[0], n)
    if found > top_abs:
        k = lo + _first(bits[0], n, found)
        top_abs, at_abs = found, np.int64(k if whole else where[k] - offset)
    found = _largest(bits[1], n)
    if found > top_rel:
        k = lo + _first(bits[1], n, found)
        top_rel, at_rel = found, np.int64(k if whole else where[k] - offset)
    found = _largest(ulps, n)
    if found > top_ulp:
        k = lo + _first(ulps, n, found)
        top_ulp, at_ulp = found, np.int64(k if whole else where[k] - offset)
    return top_abs, top_rel, top_ulp, at_abs, at_rel, at_ulp


@numba.njit(cache=True)
def valued(best):
    """The maxima :func:`taken` kept with the abs and rel errors as floats (as :func:`merged`
    and :func:`maxima` read them)."""
    cell = np.empty(2, dtype=np.int64)
    cell[0], cell[1] = best[0], best[1]
    values = cell.view(np.float64)
    return values[0], values[1], best[2], best[3], best[4], best[5]


def within_rounding(ab: np.ndarray, gb: np.ndarray, index: Optional[np.ndarray], *, bits: int,
                    mant_bits: int) -> np.ndarray:
    """Which pairs at ``index`` (None: all) of the flat bit patterns ``ab``, ``gb`` are both
    finite and at most 1 ULP apart (as ``ulp_distance(a, g).ulps <= 1`` on finite pairs), in
    one pass."""
    out = np.empty(ab.size if index is None else index.size, dtype=np.bool_)
    found = masks(ab.dtype.type, bits=bits, mant_bits=mant_bits)
    ab, gb = read_only(ab), read_only(gb)
    if index is None:
        _within_all_loop(ab, gb, out, *found)
    else:
        _within_loop(ab, gb, read_only(index), out, *found)
    return out


@numba.njit(cache=True)
def _within(u, v, magnitude, exp_mask):
    finite = (u & exp_mask) != exp_mask and (v & exp_mask) != exp_mask  # no inf or NaN on a side
    d = ordered_bits(u, magnitude) - ordered_bits(v, magnitude)
    return finite and -1 <= d <= 1


@numba.njit(cache=True)
def _within_loop(ab, gb, index, out, magnitude, exp_mask, mant_mask):
    for k in range(index.size):
        out[k] = _within(ab[index[k]], gb[index[k]], magnitude, exp_mask)


@numba.njit(cache=True)
def _within_all_loop(ab, gb, out, magnitude, exp_mask, mant_mask):
    for i in range(ab.size):
        out[i] = _within(ab[i], gb[i], magnitude, exp_mask)


@numba.njit(cache=True, nogil=True)
def finite_magnitude(ab, gb, exp_mask, magnitude):
    """Whether every pair of the bit patterns ``ab``, ``gb`` is finite, and the bits of the
    largest magnitude among them (their bits order as the magnitudes do): vectorised."""
    finite, top = True, magnitude ^ magnitude  # zero of the bits' type
    for i in range(ab.size):
        u, v = ab[i] & magnitude, gb[i] & magnitude
        finite &= ((u & exp_mask) != exp_mask) & ((v & exp_mask) != exp_mask)
        top = max(top, max(u, v))
    return finite, top


def ulp_bin_counts(ab: np.ndarray, gb: np.ndarray, *, bits: int, mant_bits: int) -> np.ndarray:
    """Per ULP bin (:func:`ulp_bin`), how many pairs of the flat bit patterns ``ab``, ``gb`` (at
    most 32 bits) fall in it."""
    counts = np.zeros(66, dtype=np.int64)
    _ulp_bin_loop(read_only(ab), read_only(gb), counts, *masks(ab.dtype.type, bits=bits, mant_bits=mant_bits))
    return counts


@numba.njit(cache=True, inline="always")
def ulp_bin(u, v, magnitude, exp_mask, mant_mask):
    """The ULP bin of a pair of at most 32 bits: 65 when either is NaN, else 0 for a distance
    of 0 and k for a distance in [2^(k-1), 2^k) (its bit length)."""
    d = ordered_bits(u, magnitude) - ordered_bits(v, magnitude)
    d = -d if d < 0 else d
    length = 0 if d == 0 else 64 - np.int64(leading_zeros(np.uint64(d)))
    return 65 if is_nan_bits(u, exp_mask, mant_mask) | is_nan_bits(v, exp_mask, mant_mask) else length


@numba.njit(cache=True)
def _ulp_bin_loop(ab, gb, counts, magnitude, exp_mask, mant_mask):
    for i in range(ab.size):
        counts[ulp_bin(ab[i], gb[i], magnitude, exp_mask, mant_mask)] += 1


def class_counts(xb: np.ndarray, *, mant_bits: int, exp_mask: int, sign_mask: int) -> np.ndarray:
    """``np.bincount`` of each pattern's class code ``exponent field * 4 + sign * 2 + (mantissa != 0)``."""
    counts = np.zeros(((exp_mask >> mant_bits) + 1) * 4, dtype=np.int64)
    word = xb.dtype.type
    _class_loop(read_only(xb), counts, word(mant_bits), word(exp_mask), word(sign_mask), word((1 << mant_bits) - 1))
    return counts


@numba.njit(cache=True)
def _class_loop(xb, counts, mant_bits, exp_mask, sign_mask, mant_mask):
    for i in range(xb.size):
        u = xb[i]
        code = np.int64((u & exp_mask) >> mant_bits) * 4
        counts[code + 2 * np.int64((u & sign_mask) != 0) + np.int64((u & mant_mask) != 0)] += 1



def slopes(actual: np.ndarray, operand: np.ndarray, x: np.ndarray, golden: np.ndarray, index: Optional[np.ndarray],
           *, smallest_normal: float, forward: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``triage.claims.observed_slopes`` of float32/float64 arrays in one pass: at ``index``
    (None: all), where actual and the operand (x forward, dy backward) are finite and the
    operand is not zero, the slope actual / operand in float64, whether golden is a finite
    normal number, and whether x lies on the negative side (x < 0 forward; x <= 0 or NaN
    backward)."""
    n = actual.size if index is None else index.size
    out = np.empty(n, dtype=np.float64)
    normal, negative = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.bool_)
    actual, operand, x, golden = (read_only(a) for a in (actual, operand, x, golden))
    if index is None:
        done = _slopes_all_loop(actual, operand, x, golden, out, normal, negative, smallest_normal, forward)
    else:
        done = _slopes_loop(actual, operand, x, golden, read_only(index), out, normal, negative, smallest_normal,
                            forward)
    return out[:done], normal[:done], negative[:done]


@numba.njit(cache=True)
def _slope(a, v, g, w, smallest_normal, forward):
    """Whether the pair shows a slope, the slope, whether golden is normal, whether x is on the negative side."""
    a, v, g, w = np.float64(a), np.float64(v), np.float64(g), np.float64(w)
    shown = np.isfinite(a) and np.isfinite(v) and v != 0
    return shown, a / v if shown else 0.0, abs(g) >= smallest_normal and np.isfinite(g), (
        w < 0 if forward else (w <= 0 or w != w))


@numba.njit(cache=True)
def _slopes_loop(actual, operand, x, golden, index, out, normal, negative, smallest_normal, forward):
    k = 0
    for i in index:
        shown, out[k], normal[k], negative[k] = _slope(actual[i], operand[i], golden[i], x[i], smallest_normal,
                                                       forward)
        k += shown
    return k


@numba.njit(cache=True)
def _slopes_all_loop(actual, operand, x, golden, out, normal, negative, smallest_normal, forward):
    k = 0
    for i in range(actual.size):
        shown, out[k], normal[k], negative[k] = _slope(actual[i], operand[i], golden[i], x[i], smallest_normal,
                                                       forward)
        k += shown
    return k
