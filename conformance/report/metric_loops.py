"""The metric pass over mismatching pairs compiled with numba (``conformance.jit`` says when).

The same values as the numpy path of :func:`conformance.report.metrics.compare`: absolute,
relative and ULP error under that module's conventions, the first index of each maximum,
the violation mask and the counts, in one pass.
"""
from __future__ import annotations

import math
from typing import Optional

import numba
import numpy as np

from conformance.jit import read_only
from conformance.ulp_loops import is_nan_bits, masks, ordered_bits

__all__ = ["class_counts", "judge", "maxima", "merged", "mismatch_pass", "slopes", "ulp_bin_counts", "within_rounding"]


def mismatch_pass(ab: np.ndarray, gb: np.ndarray, a: np.ndarray, g: np.ndarray, bad: np.ndarray, *,
                   rtol: float, atol: float, max_ulp: int, strict_zeros: bool, bits: int,
                   mant_bits: int) -> tuple[list[tuple[float, int]], list[int]]:
    """((max, first index) of abs, rel and ULP error; the eight counts), ``bad`` filled in."""
    counts = np.zeros(8, dtype=np.int64)
    best = _mismatch_loop(ab, gb, a, g, bad, counts, rtol, atol, max_ulp, strict_zeros,
                          *masks(ab.dtype.type, bits=bits, mant_bits=mant_bits))
    return maxima(best), [int(c) for c in counts]


def merged(first: tuple, then: tuple) -> tuple:
    """The maxima :func:`judge` kept over two consecutive ranges, the first range's, then the
    next's: a maximum of the next range is taken only when strictly larger (the first index
    wins a tie, as one pass over both ranges keeps it)."""
    tops, at = list(first[:3]), list(first[3:])
    for k in range(3):
        if then[k] > tops[k]:
            tops[k], at[k] = then[k], then[3 + k]
    return (*tops, *at)


def maxima(best: tuple) -> list[tuple[float, int]]:
    """(max, first index) of abs, rel and ULP error from the maxima :func:`judge` kept."""
    top_abs, top_rel, top_ulp, at_abs, at_rel, at_ulp = best
    found = [float(top_abs), float(top_rel), int(float(top_ulp))]  # as the numpy path rounds it
    return [(t, int(i)) for t, i in zip(found, (at_abs, at_rel, at_ulp))]


@numba.njit(cache=True)
def _mismatch_loop(ab, gb, a, g, bad, counts, rtol, atol, max_ulp, strict_zeros, magnitude, exp_mask, mant_mask):
    best = (0.0, 0.0, np.int64(0), np.int64(0), np.int64(0), np.int64(0))  # no error yet
    for i in range(a.size):
        bad[i], best, flags = judge(np.float64(a[i]), np.float64(g[i]), ab[i], gb[i], i, best, rtol, atol,
                                    max_ulp, strict_zeros, magnitude, exp_mask, mant_mask)
        for j, flag in enumerate(flags):
            counts[j] += flag
    return best


@numba.njit(cache=True, inline="always")
def judge(x, y, u, v, i, best, rtol, atol, max_ulp, strict_zeros, magnitude, exp_mask, mant_mask):
    """One mismatching pair at index ``i`` (values ``x``, ``y`` in float64, bits ``u``, ``v``):
    whether it violates the tolerance, the maxima ``best`` (abs, rel, ULP error, then their
    first indices) with its errors taken in, and its eight flags (violation, NaN position,
    inf position, zero sign, rel < 1e-3, rel < 5e-3, above, below), which the caller counts.
    Scalars only: a compiled function that takes arrays pays for their reference counts on
    every call."""
    nan_a = is_nan_bits(u, exp_mask, mant_mask)
    nan_g = is_nan_bits(v, exp_mask, mant_mask)
    abs_err = 0.0 if x == y else abs(x - y)
    abs_err = np.inf if abs_err != abs_err else abs_err
    mag = abs(y)
    rel = abs_err / (mag if mag != 0 else 1.0)  # selects and bitwise tests: no branch on the data
    rel = np.inf if (rel != rel) | (mag == 0) else rel
    rel = 0.0 if abs_err == 0 else rel
    nan_pos = nan_a | nan_g
    d = ordered_bits(u, magnitude) - ordered_bits(v, magnitude)
    ulps = 0 if nan_pos else (-d if d < 0 else d)
    inf_pos = (np.isinf(x) | np.isinf(y)) & ~nan_pos
    zero_sign = (x == 0) & (y == 0)
    bad = (abs_err > mag * rtol + atol) | (ulps > max_ulp) | nan_pos | inf_pos | (strict_zeros & zero_sign)
    top_abs, top_rel, top_ulp, at_abs, at_rel, at_ulp = best
    if abs_err > top_abs:
        top_abs, at_abs = abs_err, i
    if rel > top_rel:
        top_rel, at_rel = rel, i
    if ulps > top_ulp:
        top_ulp, at_ulp = ulps, i
    finite = np.isfinite(x) & np.isfinite(y)
    return bad, (top_abs, top_rel, top_ulp, at_abs, at_rel, at_ulp), (
        bad, nan_pos, inf_pos, zero_sign, rel < 1e-3, rel < 5e-3, finite & (x > y), finite & (x < y))


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


def ulp_bin_counts(ab: np.ndarray, gb: np.ndarray, *, bits: int, mant_bits: int) -> np.ndarray:
    """Per ULP bin, how many pairs of the flat bit patterns ``ab``, ``gb`` (at most 32 bits)
    fall in it: bin 0 a distance of 0, bin k a distance in [2^(k-1), 2^k), bin 65 NaN."""
    counts = np.zeros(66, dtype=np.int64)
    _ulp_bin_loop(read_only(ab), read_only(gb), counts, *masks(ab.dtype.type, bits=bits, mant_bits=mant_bits))
    return counts


@numba.njit(cache=True)
def _ulp_bin_loop(ab, gb, counts, magnitude, exp_mask, mant_mask):
    for i in range(ab.size):
        if is_nan_bits(ab[i], exp_mask, mant_mask) or is_nan_bits(gb[i], exp_mask, mant_mask):
            counts[65] += 1
            continue
        d = ordered_bits(ab[i], magnitude) - ordered_bits(gb[i], magnitude)
        d = -d if d < 0 else d
        k = 0 if d == 0 else math.frexp(float(d))[1]  # exact: d < 2**33
        counts[k] += 1


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
