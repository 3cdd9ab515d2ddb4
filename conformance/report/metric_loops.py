"""The metric pass over mismatching pairs compiled with numba (``conformance.jit`` says when).

The same values as the numpy path of :func:`conformance.report.metrics.compare`: absolute,
relative and ULP error under that module's conventions, the first index of each maximum,
the violation mask and the counts, in one pass.
"""
from __future__ import annotations

import numba
import numpy as np

from conformance.ulp_loops import is_nan_bits, masks, ordered_bits

__all__ = ["mismatch_pass"]


def mismatch_pass(ab: np.ndarray, gb: np.ndarray, a: np.ndarray, g: np.ndarray, bad: np.ndarray, *,
                   rtol: float, atol: float, max_ulp: int, strict_zeros: bool, bits: int,
                   mant_bits: int) -> tuple[list[tuple[float, int]], list[int]]:
    """((max, first index) of abs, rel and ULP error; the eight counts), ``bad`` filled in."""
    tops = np.zeros(2, dtype=np.float64)
    ulp_top = np.zeros(1, dtype=np.int64)
    where = np.zeros(3, dtype=np.int64)
    counts = np.zeros(8, dtype=np.int64)
    _mismatch_loop(ab, gb, a, g, bad, tops, ulp_top, where, counts, rtol, atol, max_ulp, strict_zeros,
                   *masks(ab.dtype.type, bits=bits, mant_bits=mant_bits))
    found = [float(tops[0]), float(tops[1]), int(float(ulp_top[0]))]  # as the numpy path rounds it
    return [(t, int(i)) for t, i in zip(found, where)], [int(c) for c in counts]


@numba.njit(cache=True)
def _mismatch_loop(ab, gb, a, g, bad, tops, ulp_top, where, counts, rtol, atol, max_ulp, strict_zeros,
                   magnitude, exp_mask, mant_mask):
    for i in range(a.size):
        x, y = a[i], g[i]
        nan_a = is_nan_bits(ab[i], exp_mask, mant_mask)
        nan_g = is_nan_bits(gb[i], exp_mask, mant_mask)
        abs_err = 0.0 if x == y else abs(x - y)
        if abs_err != abs_err:
            abs_err = np.inf
        mag = abs(y)
        rel = abs_err / mag if mag != 0 else np.inf
        if rel != rel or y == 0:
            rel = np.inf
        if abs_err == 0:
            rel = 0.0
        ulps = 0
        if not (nan_a or nan_g):
            ulps = ordered_bits(ab[i], magnitude) - ordered_bits(gb[i], magnitude)
            ulps = -ulps if ulps < 0 else ulps
        nan_pos = nan_a or nan_g
        inf_pos = (np.isinf(x) or np.isinf(y)) and not nan_pos
        zero_sign = x == 0 and y == 0
        bad[i] = (abs_err > mag * rtol + atol or ulps > max_ulp or nan_pos or inf_pos
                  or (strict_zeros and zero_sign))
        for j, v in enumerate((abs_err, rel)):
            if v > tops[j]:
                tops[j], where[j] = v, i
        if ulps > ulp_top[0]:
            ulp_top[0], where[2] = ulps, i
        finite = np.isfinite(x) and np.isfinite(y)
        for j, flag in enumerate((bad[i], nan_pos, inf_pos, zero_sign, rel < 1e-3, rel < 5e-3,
                                  finite and x > y, finite and x < y)):
            counts[j] += flag
