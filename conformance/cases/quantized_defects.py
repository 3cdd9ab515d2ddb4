"""Generated quantized defects: a requantization rule, a slope, or a wrong scale or zero point
planted into the exact codes of a random setting, on the whole tensor or confined to one or
two spans of positions (two spans: two rules composed, each in its own place).

The planted category of every changed code comes from the planting, never from triage; a
code another planted rule alone also reproduces accepts that rule's category too.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from conformance.cases.defects import Defect, Planted
from conformance.reference.quantized import (
    QDTYPES,
    QuantParams,
    QuantSemantics,
    exact_table,
    lookup,
    variant_table,
)

SIZES = (512, 8192)  # codes per case: at least this many, fewer than that many
SPAN_MIN = 96  # positions a confined rule covers at least
CHANGED_MIN = 16  # codes a planted rule changes at least: triage claims a span's rule on no fewer

#: (category, name, semantics): requantization rules a kernel may use instead of the exact one
_RULES: tuple[tuple[str, str, QuantSemantics], ...] = (
    ("rounding", "rounding half away from zero", QuantSemantics(rounding="half-away")),
    ("rounding", "rounding half up", QuantSemantics(rounding="half-up")),
    ("requantization", "float32 scales, division by s_out", QuantSemantics("float32")),
    ("requantization", "float32 scales, fused dequantize", QuantSemantics("float32", requantize="reciprocal",
                                                                          dequantize="fma")),
    ("requantization", "Q31 multiplier", QuantSemantics("q31")),
    ("requantization", "Q8 multiplier", QuantSemantics("q8")),
    ("code-saturation", "codes wrapped", QuantSemantics(clamp="wrap")),
    ("code-saturation", "narrow range", QuantSemantics(clamp="narrow")),
)


def _params(rng: np.random.Generator) -> QuantParams:
    dtype = str(rng.choice(sorted(QDTYPES)))
    lo, hi = QDTYPES[dtype][1], QDTYPES[dtype][2]
    mid = (lo + hi) // 2
    z_in, z_out = (int(mid + rng.integers(-40, 41)) for _ in range(2))
    s_in, s_out = (float(np.round(rng.uniform(0.005, 0.2), 4)) for _ in range(2))
    if rng.random() < 0.25:  # s_out a power-of-two multiple of s_in: exact ties, where roundings differ
        s_out = s_in * float(rng.choice([2.0, 4.0, 0.5]))
    return QuantParams(s_in, z_in, s_out, z_out, dtype)


def _variant(rng: np.random.Generator, alpha: float, params: QuantParams) -> tuple[Defect, np.ndarray]:
    """One wrong computation of every code: its defect and its table (indexed by code - lowest)."""
    kind = int(rng.integers(0, 3))
    if kind == 0:
        category, name, semantics = _RULES[int(rng.integers(0, len(_RULES)))]
        return Defect(category, name), variant_table(alpha, params=params, semantics=semantics)
    if kind == 1:
        slope = float(rng.choice([0.0, 0.01, 0.2, 0.3, 1.0]))
        slope = slope if slope != alpha else 0.01
        return Defect("alpha-mismatch", f"slope {slope!r}"), exact_table(slope, params=params)
    lo, hi = params.code_range
    field = str(rng.choice(["z_out", "z_in", "z_out-zero"]))
    value = 0 if field == "z_out-zero" else int(np.clip(getattr(params, field) + rng.choice([-2, -1, 1, 2]), lo, hi))
    field = field.removesuffix("-zero")
    if value == getattr(params, field):
        value = lo if value != lo else hi
    wrong = replace(params, **{field: value})
    return Defect("quant-params", f"{field} {value}"), exact_table(alpha, params=wrong)


def _seen_variant(rng: np.random.Generator, alpha: float, params: QuantParams, codes: np.ndarray,
                  golden: np.ndarray, *, at: slice) -> tuple[Defect, np.ndarray]:
    """A variant that changes at least :data:`CHANGED_MIN` codes of the span ``at`` (triage claims a
    span's rule on no fewer), drawn again until one does (the last drawn after a few tries)."""
    for _ in range(8):
        defect, table = _variant(rng, alpha, params)
        wrong = lookup(table, codes, params=params)
        if int(np.count_nonzero(wrong[at] != golden)) >= CHANGED_MIN:
            break
    return defect, wrong


def _alike(alpha: float, params: QuantParams, codes: np.ndarray, actual: np.ndarray, *, at: slice) -> tuple[str, ...]:
    """The categories of the requantization rules that compute every code of the span ``at``
    as ``actual`` has it (on ties, gemmlowp's Q31 rounding is half away from zero)."""
    return tuple(category for category, _, semantics in _RULES
                 if (lookup(variant_table(alpha, params=params, semantics=semantics), codes[at], params=params)
                     == actual[at]).all())


def _unchanged(codes: np.ndarray, golden: np.ndarray) -> bool:
    return bool((codes == golden).all())


def _spans(rng: np.random.Generator, n: int, count: int) -> list[tuple[int, int]]:
    """``count`` disjoint spans of at least :data:`SPAN_MIN` positions, in order."""
    edges = np.sort(rng.choice(n + 1, size=2 * count, replace=False)).tolist()
    if rng.random() < 0.3:  # a span from the tensor's start
        edges[0] = 0
    elif rng.random() < 0.3:  # a span to its end
        edges[-1] = n
    spans = [(int(edges[2 * k]), int(edges[2 * k + 1])) for k in range(count)]
    return [(a, b) for a, b in spans if b - a >= SPAN_MIN] or [(0, n)]


def generate_quantized(seed: int) -> Planted:
    """A quantized case: random codes of a random setting, one rule on the whole tensor, one
    rule in one span, or two rules in two spans."""
    rng = np.random.default_rng([seed, 40])
    params = _params(rng)
    alpha = float(rng.choice([0.2, 0.1, 0.3, np.round(rng.uniform(0.05, 0.5), 3)]))
    n = int(rng.integers(*SIZES))
    lo, hi = params.code_range
    codes = rng.integers(lo, hi + 1, size=n).astype(params.storage)
    golden = lookup(exact_table(alpha, params=params), codes, params=params)
    places = int(rng.choice([0, 1, 2], p=[0.3, 0.4, 0.3]))
    spans = [(0, n)] if places == 0 else _spans(rng, n, places)
    actual, defects, alone, ends = golden.copy(), [], [], np.zeros(n, dtype=bool)
    for a, b in spans:
        defect, wrong = _seen_variant(rng, alpha, params, codes, golden[a:b], at=slice(a, b))
        actual[a:b] = wrong[a:b]
        where = "" if (a, b) == (0, n) else f" in [{a}, {b})"
        defects.append(replace(defect, name=defect.name + where))
        alone.append(wrong)
        # the rule holds before or after one position (it changes nothing on the other side):
        # a position split reproduces the same codes
        ends[a:b] = (a, b) != (0, n) and (_unchanged(wrong[:a], golden[:a]) or _unchanged(wrong[b:], golden[b:]))
    same = np.empty(n, dtype=object)  # per position, the rules that compute its span's codes alike
    for a, b in spans:
        same[a:b] = [_alike(alpha, params, codes, actual, at=slice(a, b))] * (b - a)
    changed = np.flatnonzero(actual != golden)
    accept = {int(i): tuple(dict.fromkeys([*(d.category for d, y in zip(defects, alone) if y[i] == actual[i]),
                                           *same[i], *(("position-split",) if ends[i] else ())]))
              for i in changed}
    return Planted(seed, codes, None, alpha, "forward", params.dtype, golden, actual, tuple(defects),
                   accept, None, params=params)
