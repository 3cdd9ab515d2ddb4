"""How far off: abs/rel/ULP error, positional classes and msprobe-style indicators.

Conventions:

- Two elements *match* when their bit patterns are equal, or when both are NaN
  (any NaN equals any NaN).  Every other pair is a *mismatch*, +0 vs -0 included.
- Absolute error is ``|a - g|`` in float64; it is 0 for matching pairs and for
  equal infinities, and inf when exactly one side is NaN or the infinities differ.
- Relative error is ``|a - g| / |g|``.  Where the golden value is 0 it is 0 if
  the actual value is also zero (of either sign) and inf otherwise; where the
  golden value is ±inf and the actual is not equal, it is inf.  JSON writes it
  as the hex string ``"inf"``.
- ULP error is the ordered-integer distance from the dtype table; pairs with a
  NaN on either side are excluded from it (they are counted as NaN positions).
- An element *violates* the tolerance when it mismatches and either
  ``|a-g| > atol + rtol*|g|``, or its ULP error exceeds ``max_ulp``, or its
  NaN/inf position differs, or (with ``strict_zeros``) its zero sign differs.
- msprobe indicators: the one-thousandth / five-thousandths ratios are the
  shares of elements whose relative error is below 0.001 / 0.005; cosine
  similarity is taken over the pairs where both sides are finite; error balance
  is ``(#(a > g) - #(a < g)) / elements`` over finite pairs, so 0 means the
  errors are balanced and +1 means every element is too large.

All counts and sums are kept as accumulators so that :func:`merge` is exact.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from conformance import jit
from conformance.dtypes import from_bits, info, is_nan, ordered, to_bits, widened_patterns
from conformance.records import Metrics, Tolerance, Where


@dataclass(frozen=True)
class Comparison:
    """Metrics plus the element masks triage needs (flat indices of mismatches)."""

    metrics: Metrics
    mismatch_index: np.ndarray  # int64 flat indices, ascending
    violating: np.ndarray  # bool, aligned with mismatch_index
    actual: Optional[np.ndarray] = None  # the values at mismatch_index (None: not kept)
    golden: Optional[np.ndarray] = None


def match_mask(actual: np.ndarray, golden: np.ndarray) -> np.ndarray:
    """Equal bits, or NaN on both sides."""
    same = to_bits(actual) == to_bits(golden)
    return same if same.all() else same | (is_nan(actual) & is_nan(golden))


def _abs_rel(a: np.ndarray, g: np.ndarray, mag: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Absolute and relative error in float64 of mismatching pairs, under the module's
    conventions (equal infinities and zeros of either sign have no error); ``mag`` is |g|."""
    with np.errstate(all="ignore"):
        abs_err = np.abs(a - g)
        abs_err[a == g] = 0.0
        abs_err[np.isnan(abs_err)] = np.inf
        rel = np.divide(abs_err, mag)
        rel[np.isnan(rel) | (g == 0)] = np.inf
        rel[abs_err == 0] = 0.0
    return abs_err, rel


def _argmax(values: np.ndarray, *, part: str) -> tuple[float, Where]:
    """Largest value and where it is (None when everything is 0)."""
    if values.size == 0:
        return 0.0, None
    i = int(np.argmax(values))
    top = float(values[i])
    return top, ((part, i) if top > 0 else None)


def _cosine_sums(a: np.ndarray, g: np.ndarray) -> tuple[float, float, float, int]:
    """Scaled dot/norm sums over pairs where both sides are finite (``a is g`` for a pair
    that matches everywhere: one sum then serves all three).  ``a`` and ``g`` are in their
    own dtype; the sums are taken in float64 (see :func:`_dots`)."""
    tabled = _table_sums(a, g)
    if tabled is not None:
        return tabled
    same = a is g
    found = _finite_top(a, g)
    if found is not None:  # every pair finite: the sums read the arrays as they are
        af, gf, top = a, g, found
    else:
        with np.errstate(invalid="ignore"):  # NaN payloads of bfloat16 warn when tested
            fin = np.isfinite(a) if same else np.isfinite(a) & np.isfinite(g)
            af, gf = (a, g) if fin.all() else (a[fin], g[fin])
            if af.size == 0:
                return 0.0, 0.0, 0.0, 0
            top = max(_abs_max(af), 0.0 if same else _abs_max(gf))
    exp = math.frexp(top)[1] if top > 0 else 0
    if -200 <= exp <= 480:  # no overflow or underflow: sum first, then scale by 2**(-2*exp)
        scale = 2.0 ** (-2 * exp)
        dot, aa, gg = _dots(af, None if same else gf)
        return dot * scale, aa * scale, gg * scale, exp
    return (*_dots(af, None if same else gf, exp=-exp), exp)


def _finite_top(a: np.ndarray, g: np.ndarray) -> Optional[float]:
    """Compiled, of float32/float64 pairs: the largest magnitude when every pair is finite (as
    the numpy path's ``_abs_max`` of both), else None (the numpy path takes the finite pairs)."""
    if not (jit.enabled() and a.size and a.dtype.name in ("float32", "float64") and g.dtype == a.dtype):
        return None
    from conformance.metrics._compiled import metric_loops  # numba, imported on the first compiled call

    rec = info(a.dtype)
    bits = [jit.read_only(np.ascontiguousarray(to_bits(v))) for v in (a, g)]
    word = rec.uint.type
    finite, top = metric_loops.finite_magnitude(*bits, word(rec.exp_mask), word(rec.exp_mask | rec.mant_mask))
    return float(from_bits([int(top)], a.dtype)[0]) if finite else None


def _table_sums(a: np.ndarray, g: np.ndarray) -> Optional[tuple[float, float, float, int]]:
    """Compiled, of 16-bit pairs (each value read from the table of every pattern's): the
    cosine sums as this module's numpy path takes them, from the finite pairs' unscaled sums and
    their largest magnitude (:func:`scaled_cosine`: a 16-bit magnitude never needs the scaled
    sums); None where the numpy path computes them."""
    if not (jit.enabled() and a.size and a.dtype == g.dtype and info(a.dtype).bits == 16):
        return None
    from conformance.metrics._compiled import scan_loops  # numba, imported on the first compiled call

    rec = info(a.dtype)
    word, table = rec.uint.type, jit.read_only(widened_patterns(rec.name))
    ab, gb = (jit.read_only(np.ascontiguousarray(to_bits(v)).reshape(-1)) for v in (a, g))
    sums = np.zeros(3)
    top = scan_loops.table_sums(ab, gb, table, np.empty((2, DOT_PIECE)), sums, word(rec.exp_mask),
                                word(rec.exp_mask | rec.mant_mask))
    return scaled_cosine([float(v) for v in sums], float(table[int(top)]), a, g)


DOT_PIECE = 1 << 16  # elements widened to float64 at a time (in cache)


def _dots(a: np.ndarray, g: Optional[np.ndarray], *, exp: int = 0) -> tuple[float, float, float]:
    """``a.g``, ``a.a`` and ``g.g`` (``g`` None: all three ``a.a``) of the values widened to
    float64 and scaled by ``2**exp``: pairwise sums (numpy's, the same on every machine,
    unlike a threaded BLAS dot) of pieces, added up in order; compiled for unscaled float32
    and float64 values (``scan_loops.piece_sums``, the same sums)."""
    if not exp and jit.enabled() and a.dtype.name in ("float32", "float64") and (g is None or g.dtype == a.dtype):
        from conformance.metrics._compiled import scan_loops  # numba, imported on the first compiled call

        sums = np.zeros(3)
        a = jit.read_only(np.ascontiguousarray(a))
        scan_loops.piece_sums(a, a if g is None else jit.read_only(np.ascontiguousarray(g)), DOT_PIECE, sums)
        dot, aa, gg = (float(s) for s in sums)
        return (aa, aa, aa) if g is None else (dot, aa, gg)
    dot = aa = gg = 0.0
    for lo in range(0, a.size, DOT_PIECE):
        pa = _widened(a[lo:lo + DOT_PIECE], exp)
        aa += float(np.add.reduce(pa * pa))
        if g is not None:
            pg = _widened(g[lo:lo + DOT_PIECE], exp)
            dot += float(np.add.reduce(pa * pg))
            gg += float(np.add.reduce(pg * pg))
    return (aa, aa, aa) if g is None else (dot, aa, gg)


def _widened(v: np.ndarray, exp: int) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # NaN payloads of bfloat16 warn when widened
        w = v.astype(np.float64)
    return _scaled(w, exp) if exp else w


def _abs_max(v: np.ndarray) -> float:
    return max(float(v.max()), -float(v.min()))


def _scaled(v: np.ndarray, exp: int) -> np.ndarray:
    """``v * 2**exp``, exactly as ``np.ldexp`` rounds it, by one multiply when the factor
    is a normal float64 (``ldexp`` is several times slower than a multiply)."""
    if -1022 <= exp <= 1023:
        return v * (2.0 ** exp)
    return np.ldexp(v, exp)


def _native(v: np.ndarray, wide: np.ndarray) -> np.ndarray:
    """``v`` itself where numpy compares and tests it (its own float types: half the bytes
    of ``wide``, its float64 copy), else ``wide`` (bfloat16)."""
    return v if v.dtype.kind == "f" else wide


def _position_classes(a: np.ndarray, g: np.ndarray, *, nan_a: np.ndarray,
                      nan_g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Masks of mismatching pairs: NaN on one side; inf vs finite or the other infinity;
    both zero (so of different sign: the bits differ).  ``nan_a``, ``nan_g`` from the bit
    patterns; no pair is NaN on both sides (that pair matches)."""
    nan_pos = nan_a | nan_g
    inf_pos = (np.isinf(a) | np.isinf(g)) & ~nan_pos
    zero_sign = (a == 0) & (g == 0)
    return nan_pos, inf_pos, zero_sign


def _mismatching(actual: np.ndarray, golden: np.ndarray) -> tuple[np.ndarray, ...]:
    """The pairs that do not match (the bits differ and not both are NaN): their flat
    indices (ascending), actual and golden values, and which of those are NaN."""
    index = np.flatnonzero(to_bits(actual) != to_bits(golden))
    act, gold = actual[index], golden[index]
    nan_a, nan_g = is_nan(act), is_nan(gold)
    both = nan_a & nan_g
    if both.any():
        keep = ~both
        index, act, gold, nan_a, nan_g = index[keep], act[keep], gold[keep], nan_a[keep], nan_g[keep]
    return index, act, gold, nan_a, nan_g


def _ulps(act: np.ndarray, gold: np.ndarray, *, nan: np.ndarray) -> np.ndarray:
    """ULP distances as :func:`conformance.dtypes.ulp_distance` gives them (0 where ``nan``)."""
    if jit.enabled():  # the NaN mask it finds is ``nan``: both come from the bit patterns
        from conformance import ulp_loops  # numba, imported on the first compiled call

        rec = info(act.dtype)
        return ulp_loops.ulp_and_nan(to_bits(act), to_bits(gold), bits=rec.bits, mant_bits=rec.mant_bits)[0]
    dist = ordered(act) - ordered(gold)
    np.abs(dist, out=dist)
    dist[nan] = 0
    return dist


def compare(actual: np.ndarray, golden: np.ndarray, *, tolerance: Tolerance,
            part: str = "", offset: int = 0) -> Comparison:
    """Compare two equally shaped arrays of one dtype, element by element.  ``offset`` is
    the flat index of the first element in the whole tensor (for a chunk of it): the
    extremes' positions are reported in the whole tensor; ``mismatch_index`` stays local.

    Matching pairs have no error, no ULP distance and no position class, so the errors are
    computed on the mismatching pairs only; the cosine sums take every finite pair."""
    actual, golden = np.ravel(actual), np.ravel(golden)
    index, act, gold, nan_a, nan_g = _mismatching(actual, golden)
    if index.size == 0:
        return _identical(golden)
    if jit.enabled():
        return _compiled_comparison(actual, golden, index, act, gold, tolerance=tolerance, part=part, offset=offset)
    with np.errstate(invalid="ignore"):  # NaN payloads of bfloat16 warn when widened
        a, g = act.astype(np.float64), gold.astype(np.float64)
    mag = np.abs(g)
    abs_err, rel = _abs_rel(a, g, mag)
    ulps = _ulps(act, gold, nan=nan_a | nan_g)
    na, ng = _native(act, a), _native(gold, g)
    nan_pos, inf_pos, zero_sign = _position_classes(na, ng, nan_a=nan_a, nan_g=nan_g)
    with np.errstate(invalid="ignore"):
        mag *= tolerance.rtol
        mag += tolerance.atol
        bad = (abs_err > mag) | (ulps > tolerance.max_ulp)
    bad |= nan_pos | inf_pos | (zero_sign if tolerance.strict_zeros else False)
    errors = _Errors(a, g, abs_err, rel, ulps, index, offset, np.isfinite(na) & np.isfinite(ng))
    metrics = _metrics(errors, actual, golden, part=part,
                       counts=(_count(bad), _count(nan_pos), _count(inf_pos), _count(zero_sign)))
    return Comparison(metrics, index.astype(np.int64, copy=False), bad, act, gold)


def _compiled_comparison(actual: np.ndarray, golden: np.ndarray, index: np.ndarray, act: np.ndarray,
                         gold: np.ndarray, *, tolerance: Tolerance, part: str, offset: int) -> Comparison:
    """:func:`compare` of the mismatching pairs in one compiled pass (the same values, the
    same first index of each maximum); the cosine sums stay numpy's pairwise sums."""
    from conformance.metrics._compiled import metric_loops  # numba, imported on the first compiled call

    rec = info(act.dtype)
    bad = np.empty(act.size, dtype=np.bool_)
    tops, counts = metric_loops.mismatch_pass(*_loop_operands(act, gold), bad, rtol=tolerance.rtol, atol=tolerance.atol,
                                  max_ulp=tolerance.max_ulp, strict_zeros=tolerance.strict_zeros,
                                  bits=rec.bits, mant_bits=rec.mant_bits)
    tops = [(top, int(index[i])) for top, i in tops]
    metrics = loop_metrics(tops, counts, elements=int(actual.size), mismatches=int(index.size), part=part,
                           offset=offset, cosine=_cosine_sums(actual, golden))
    return Comparison(metrics, index.astype(np.int64, copy=False), bad, act, gold)


def loop_metrics(tops: Sequence[tuple[float, int]], counts: Sequence[int], *, elements: int, mismatches: int,
                 part: str, offset: int, cosine: tuple[float, float, float, int]) -> Metrics:
    """The record of a compiled pass: (maximum, index in the compared arrays) of abs, rel and
    ULP error, the eight counts of ``metric_loops.judge_run`` and the cosine sums."""
    at = [None if top <= 0 else (part, offset + i) for top, i in tops]
    n, k = elements, mismatches
    violations, nan_pos, inf_pos, zero_signs, within_1e3, within_5e3, above, below = counts
    dot, aa, gg, exp = cosine
    return Metrics(
        elements=n, mismatches=k, violations=violations,
        max_abs=float(tops[0][0]), max_abs_at=at[0], max_rel=float(tops[1][0]), max_rel_at=at[1],
        max_ulp=int(tops[2][0]), max_ulp_at=at[2], nan_positions=nan_pos, inf_positions=inf_pos,
        zero_signs=zero_signs, within_1e3=n - k + within_1e3, within_5e3=n - k + within_5e3,
        above=above, below=below, cos_dot=dot, cos_aa=aa, cos_gg=gg, cos_exp=exp)


def scaled_cosine(sums: Sequence[float], top: float, actual: np.ndarray,
                  golden: np.ndarray) -> tuple[float, float, float, int]:
    """:func:`_cosine_sums` from the unscaled sums and the largest finite magnitude a compiled
    pass found (the same pieces, in the same order); outside the exponents those sums hold
    without overflow or underflow, the sums of the scaled values, as that function takes them."""
    exp = math.frexp(top)[1] if top > 0 else 0
    if -200 <= exp <= 480:
        scale = 2.0 ** (-2 * exp)
        return sums[0] * scale, sums[1] * scale, sums[2] * scale, exp
    return _cosine_sums(actual, golden)


def _loop_operands(act: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, ...]:
    """Bits and values of both sides, as the compiled pass reads them: float32/float64 as
    they are (it widens each value), 16-bit formats widened to float64."""
    if info(act.dtype).bits > 16:
        return to_bits(act), to_bits(gold), act, gold
    with np.errstate(invalid="ignore"):  # NaN payloads of bfloat16 warn when widened
        return to_bits(act), to_bits(gold), act.astype(np.float64), gold.astype(np.float64)


def _count(mask: np.ndarray) -> int:
    return int(np.count_nonzero(mask))


@dataclass(frozen=True)
class _Errors:
    """Element-wise errors of the mismatching pairs, and where they are."""

    a: np.ndarray
    g: np.ndarray
    abs_err: np.ndarray
    rel: np.ndarray
    ulps: np.ndarray
    index: np.ndarray  # in the compared arrays
    offset: int  # of the compared arrays in the whole tensor
    finite: np.ndarray  # both sides finite


def _identical(golden: np.ndarray) -> Comparison:
    """The fast path: every element matches, so only the cosine sums need work."""
    _, _, gg, exp = _cosine_sums(golden, golden)
    n = int(golden.size)
    metrics = replace(empty(elements=n), within_1e3=n, within_5e3=n, cos_dot=gg, cos_aa=gg,
                      cos_gg=gg, cos_exp=exp)
    return Comparison(metrics, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))


def _top(values: np.ndarray, e: _Errors, *, part: str) -> tuple[float, Where]:
    """Largest value and its index in the whole tensor (None when everything is 0)."""
    top, at = _argmax(values, part=part)
    return top, (None if at is None else (part, e.offset + int(e.index[at[1]])))


def _metrics(e: _Errors, a_all: np.ndarray, g_all: np.ndarray, *, part: str,
             counts: tuple[int, int, int, int]) -> Metrics:
    """Assemble the record: errors of the mismatching pairs, cosine sums of all pairs
    (``a_all``, ``g_all`` in their own dtype)."""
    violations, nan_pos, inf_pos, zero_signs = counts
    n, k = int(a_all.size), int(e.index.size)
    max_abs, abs_at = _top(e.abs_err, e, part=part)
    max_rel, rel_at = _top(e.rel, e, part=part)
    max_ulp, ulp_at = _top(e.ulps, e, part=part)
    dot, aa, gg, exp = _cosine_sums(a_all, g_all)
    return Metrics(
        elements=n, mismatches=k, violations=violations,
        max_abs=max_abs, max_abs_at=abs_at, max_rel=max_rel, max_rel_at=rel_at,
        max_ulp=int(max_ulp), max_ulp_at=ulp_at, nan_positions=nan_pos,
        inf_positions=inf_pos, zero_signs=zero_signs,
        within_1e3=n - k + _count(e.rel < 1e-3), within_5e3=n - k + _count(e.rel < 5e-3),
        above=_count(e.finite & (e.a > e.g)), below=_count(e.finite & (e.a < e.g)),
        cos_dot=dot, cos_aa=aa, cos_gg=gg, cos_exp=exp)


def empty(*, elements: int = 0) -> Metrics:
    """Metrics of a comparison that produced no values (e.g. a refused call)."""
    return Metrics(elements, 0, 0, 0.0, None, 0.0, None, 0, None, 0, 0, 0, 0, 0, 0, 0)


def _bigger(a: tuple[float, Where], b: tuple[float, Where]) -> tuple[float, Where]:
    return b if b[0] > a[0] else a


def _merge_cosine(m: Metrics, n: Metrics) -> dict:
    """Rescale both sets of sums to the larger exponent, then add.  A side with no
    nonzero finite pair carries no exponent, so the other side's sums are kept as they are."""
    if m.cos_aa == m.cos_gg == 0 or n.cos_aa == n.cos_gg == 0:
        keep = n if m.cos_aa == m.cos_gg == 0 else m
        return dict(cos_dot=keep.cos_dot, cos_aa=keep.cos_aa, cos_gg=keep.cos_gg, cos_exp=keep.cos_exp)
    exp = max(m.cos_exp, n.cos_exp)
    fm, fn = 2.0 ** (2 * (m.cos_exp - exp)), 2.0 ** (2 * (n.cos_exp - exp))
    return dict(cos_dot=m.cos_dot * fm + n.cos_dot * fn, cos_aa=m.cos_aa * fm + n.cos_aa * fn,
                cos_gg=m.cos_gg * fm + n.cos_gg * fn, cos_exp=exp)


_SUMMED = ("elements", "mismatches", "violations", "nan_positions", "inf_positions",
           "zero_signs", "within_1e3", "within_5e3", "above", "below")


def merge(m: Metrics, n: Metrics) -> Metrics:
    """Metrics of the concatenation of two comparisons."""
    sums = {name: getattr(m, name) + getattr(n, name) for name in _SUMMED}
    max_abs, abs_at = _bigger((m.max_abs, m.max_abs_at), (n.max_abs, n.max_abs_at))
    max_rel, rel_at = _bigger((m.max_rel, m.max_rel_at), (n.max_rel, n.max_rel_at))
    max_ulp, ulp_at = _bigger((m.max_ulp, m.max_ulp_at), (n.max_ulp, n.max_ulp_at))
    return replace(m, **sums, max_abs=max_abs, max_abs_at=abs_at, max_rel=max_rel,
                   max_rel_at=rel_at, max_ulp=int(max_ulp), max_ulp_at=ulp_at,
                   **_merge_cosine(m, n))
