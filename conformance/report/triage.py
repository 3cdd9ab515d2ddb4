"""Why it is off: every mismatching element gets exactly one category, by proof.

Categories are tried in ARCHITECTURE.md's order.  A category is claimed only
where it is proved:

- hazards come from the emulator's records (``BackendResult.hazards``);
- a semantic category is claimed for an element only where recomputing the
  golden reference under that category's rule reproduces the actual bits
  (NaN vs NaN counts as equal), *and* the rule is the batch's behaviour: among
  all elements where the rule changes the result, the actual output follows it
  for at least half (saturation: for each of the NaN and ±inf classes present).
  Without that evidence a coincidental match (say a 1-ULP double rounding that
  happens to equal the fp16-slope result) is not called ``alpha-precision``.
  Accepted rules stack: later rules are tried on top of them, so TensorFlow's
  fp16 slope plus its subnormal flush are both recognised;
- ``tail-block`` is proved by confinement: all remaining errors lie in the tail
  tiles or the unaligned tail, and some elements outside that region exist;
- value classes (overflow, NaN, signed zero) and residue (``rounding`` within
  1 ULP, else ``unexplained``) take what is left.

This module reads tile layouts and hazards as data; it never imports the emulator.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Optional, Sequence

import numpy as np

from conformance import categories
from conformance.dtypes import info, is_nan, is_subnormal, ulp_distance
from conformance.records import Hazard, TileLayout
from conformance.reference import golden as ref
from conformance.reference.defaults import default_slopes, frameworks_with_default
from conformance.report.metrics import match_mask

_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Batch:
    """One evaluated input batch, flattened: what went in, what came out, what is right."""

    x: np.ndarray
    dy: Optional[np.ndarray]
    alpha: float
    direction: str
    out_dtype: str
    golden: np.ndarray
    actual: np.ndarray

    def variant(self, index: Optional[np.ndarray] = None, **rule: Any) -> np.ndarray:
        """Golden recomputed under ``rule`` (golden keywords, plus ``alpha``)."""
        if not rule:
            return self.golden if index is None else self.golden[index]
        alpha = rule.pop("alpha", self.alpha)
        flush_output, sat_inputs = rule.pop("flush_output", False), rule.pop("saturate_inputs", False)
        x = self.x if index is None else self.x[index]
        dy = None if self.dy is None else (self.dy if index is None else self.dy[index])
        if sat_inputs:  # per-op saturation: operands saturate when widened to float32
            x, dy = _saturated32(x), None if dy is None else _saturated32(dy)
        if rule.pop("flush_inputs", False):  # DAZ on every read, selected values included
            x, dy = ref.flush_to_zero(x), None if dy is None else ref.flush_to_zero(dy)
        if self.direction == "forward":
            y = ref.leaky_relu(x, alpha, out_dtype=self.out_dtype, **rule)
        else:
            y = ref.leaky_relu_backward(dy, x, alpha, out_dtype=self.out_dtype, **rule)
        return ref.flush_to_zero(y) if flush_output else y

    @cached_property
    def dtypes(self) -> tuple[str, str]:
        return info(self.x.dtype).name, self.out_dtype


def _saturated32(v: np.ndarray) -> np.ndarray:
    """Operands as a saturating float32 unit reads them: NaN -> 0, ±inf -> ±max."""
    return ref.saturated(v.astype(np.float32), info("float32"))


@dataclass(frozen=True)
class Claim:
    """Elements one category explains.  ``index`` is outside [0, n) for red-zone writes."""

    category: str
    index: np.ndarray
    count: int
    summary: str
    detail: dict = field(default_factory=dict)
    in_tensor: bool = True

    def __post_init__(self) -> None:
        categories.check(self.category)


@dataclass
class _State:
    """What is still unexplained, and the semantic rules accepted so far."""

    remaining: np.ndarray
    base: dict = field(default_factory=dict)
    claims: list = field(default_factory=list)

    def claim(self, claim: Claim) -> None:
        self.claims.append(claim)
        if claim.in_tensor:
            self.remaining = np.setdiff1d(self.remaining, claim.index, assume_unique=True)


def triage(batch: Batch, *, mismatches: np.ndarray, hazards: Sequence[Hazard] = (),
           layout: Optional[TileLayout] = None) -> list[Claim]:
    """Explain every mismatching element (flat indices ``mismatches``) by one category."""
    state = _State(np.asarray(mismatches, dtype=np.int64))
    _hazards(batch, state, hazards)
    with np.errstate(all="ignore"):
        for rule in _SEMANTIC:
            if state.remaining.size:
                rule(batch, state)
        _tail(batch, state, layout)
        _value_classes(batch, state)
    return state.claims


# ----------------------------------------------------------------------------- hazards

def _hazards(batch: Batch, state: _State, hazards: Sequence[Hazard]) -> None:
    n = batch.x.size
    oob = sorted({h.index for h in hazards if h.kind == "out-of-bounds-write"})
    if oob:
        cores = sorted({c for h in hazards if h.kind == "out-of-bounds-write" for c in h.cores})
        before = sum(1 for i in oob if i < 0)
        state.claim(Claim("out-of-bounds-write", np.array(oob, dtype=np.int64), len(oob),
                          "the kernel wrote outside the output tensor (red zones before or after it)",
                          {"before": before, "after": len(oob) - before, "cores": cores},
                          in_tensor=False))
    races = [h for h in hazards if h.kind == "write-race" and 0 <= h.index < n]
    if races:
        index = np.array(sorted({h.index for h in races}), dtype=np.int64)
        pairs = sorted({tuple(sorted(h.cores)) for h in races})
        wrong = int(np.isin(index, state.remaining).sum())
        state.claim(Claim("write-race", index, index.size,
                          "elements written by more than one core",
                          {"mismatching": wrong, "cores": [list(p) for p in pairs]}))


# ----------------------------------------------------------------------------- semantics

def _agrees(differs: np.ndarray, agree: np.ndarray) -> bool:
    """The actual output follows a rule on at least half the elements it changes."""
    total = int(differs.sum())
    return total > 0 and 2 * int((differs & agree).sum()) >= total


def _prove(batch: Batch, state: _State, rule: dict, *,
           groups: Optional[Callable[[np.ndarray], list]] = None, neutral: Optional[dict] = None) -> np.ndarray:
    """Remaining elements that ``rule`` (on top of accepted rules) reproduces and changes,
    if proved.  ``neutral`` holds keywords that are context, not the category's own rule."""
    earlier = {k: v for k, v in state.base.items() if k not in rule}  # a rule never is its own baseline
    before_rule = {**earlier, **(neutral or {})}
    trial = {**before_rule, **rule}
    sub = state.remaining
    mine = batch.variant(sub, **trial)
    hit = match_mask(mine, batch.actual[sub]) & ~match_mask(mine, batch.variant(sub, **before_rule))
    if not hit.any():
        return _EMPTY
    full, before = batch.variant(**trial), batch.variant(**before_rule)
    differs, agree = ~match_mask(full, before), match_mask(full, batch.actual)
    masks = groups(batch.golden) if groups else [np.ones(differs.shape, bool)]
    present = [m for m in masks if (differs & m).any()]
    if not present or not all(_agrees(differs & m, agree) for m in present):
        return _EMPTY
    return sub[hit]


def _accept(state: _State, rule: dict, claim: Claim) -> None:
    state.base.update(rule)
    state.claim(claim)


def _informative_slopes(batch: Batch, index: np.ndarray) -> np.ndarray:
    """actual / input on the negative side, where the exact result is a normal number."""
    g, a = batch.golden[index].astype(np.float64), batch.actual[index].astype(np.float64)
    normal = np.abs(g) >= info(batch.out_dtype).smallest_normal
    if batch.direction == "forward":
        v = batch.x[index].astype(np.float64)
        side = v < 0
    else:
        v, xs = batch.dy[index].astype(np.float64), batch.x[index]
        side = (xs.astype(np.float64) <= 0) | is_nan(xs)
    ok = side & normal & np.isfinite(a) & np.isfinite(v) & (v != 0) & np.isfinite(g)
    return a[ok] / v[ok]


def _close_to(alpha: float, c: float) -> bool:
    """Within what rounding alpha to a 16-bit dtype could do (that is alpha-precision)."""
    return abs(c - alpha) <= abs(alpha) * 2.0 ** -8


def _slope_candidates(batch: Batch, estimate: float) -> list[float]:
    """Framework defaults near the estimate, then the estimate at 1..7 significant digits."""
    cands = [d for d in default_slopes() if abs(d - estimate) <= 0.05 * max(abs(d), 1e-6)]
    cands += [float(f"{estimate:.{k}g}") for k in range(1, 8)] + [estimate]
    unique = list(dict.fromkeys(cands))
    return [c for c in unique if np.isfinite(c) and not _close_to(batch.alpha, c)]


def _hits(batch: Batch, state: _State, rule: dict) -> int:
    """How many remaining elements ``rule`` reproduces (no evidence check)."""
    sub = state.remaining
    return int(match_mask(batch.variant(sub, **{**state.base, **rule}), batch.actual[sub]).sum())


def _best_slope(batch: Batch, state: _State, cands: list[float]) -> Optional[float]:
    """The candidate reproducing most elements, unless alpha rounded to a dtype does as well
    (then the slope is alpha, only rounded: that is ``alpha-precision``)."""
    scores = [_hits(batch, state, {"alpha": c}) for c in cands]
    if not scores or max(scores) == 0:
        return None
    rounded = [_hits(batch, state, {"slope_dtype": d}) for d in _slope_dtypes(batch)]
    return None if max(rounded, default=0) >= max(scores) else cands[int(np.argmax(scores))]


def _alpha_mismatch(batch: Batch, state: _State) -> None:
    slopes = _informative_slopes(batch, state.remaining)
    if slopes.size == 0:
        return
    c = _best_slope(batch, state, _slope_candidates(batch, float(np.median(slopes))))
    if c is None:
        return
    hits = _prove(batch, state, {"alpha": c})
    if batch.out_dtype != "float64" and hits.size:
        hits = np.union1d(hits, _prove(batch, state, {"alpha": c, "opmath": "float32"}))
    if hits.size:
        names = frameworks_with_default(c)
        known = f" ({c!r} is the default of {', '.join(names)})" if names else ""
        _accept(state, {"alpha": c}, Claim(
            "alpha-mismatch", hits, hits.size,
            f"negative side computed with slope {c!r} instead of {batch.alpha!r}{known}",
            {"effective_alpha": c, "expected_alpha": batch.alpha, "default_of": list(names)}))


def _slope_dtypes(batch: Batch) -> list[str]:
    """Dtypes a framework may round the slope to: the 16-bit dtypes in play, and float32
    for float32 tensors (torch, TF and the CANN kernel all hold the slope as float32) and
    for float64 ones (TF's alpha is a float32 attribute)."""
    names = set(batch.dtypes)
    narrow = [d for d in ("float16", "bfloat16") if d in names]
    return narrow + (["float32"] if names & {"float32", "float64"} else [])


def _alpha_precision(batch: Batch, state: _State) -> None:
    for name in _slope_dtypes(batch):
        slope = ref.effective_slope(batch.alpha, slope_dtype=name)
        if slope == batch.alpha:
            continue
        hits = _prove(batch, state, {"slope_dtype": name})
        if hits.size:
            _accept(state, {"slope_dtype": name}, Claim(
                "alpha-precision", hits, hits.size,
                f"slope rounded to {name} ({slope!r}) before multiplying",
                {"slope_dtype": name, "slope": slope, "alpha": batch.alpha}))
            return


_FLUSH_RULES = ({"flush_subnormals": True},  # arithmetic flushes; selected values keep bits
                {"flush_subnormals": True, "flush_output": True},  # every result flushed
                {"flush_subnormals": True, "flush_output": True, "flush_inputs": True})


def _subnormal_flush(batch: Batch, state: _State) -> None:
    opmaths = ({}, {"opmath": "float32"}) if batch.out_dtype != "float64" else ({},)
    for rule in _FLUSH_RULES:
        for extra in opmaths:
            if state.remaining.size:
                _one_flush(batch, state, rule, neutral=extra)


def _one_flush(batch: Batch, state: _State, rule: dict, *, neutral: dict) -> None:
    hits = _prove(batch, state, rule, neutral=neutral)
    if hits.size:
        sub_in = int(is_subnormal(batch.x[hits]).sum())
        if batch.dy is not None:
            sub_in = int((is_subnormal(batch.x[hits]) | is_subnormal(batch.dy[hits])).sum())
        sub_out = int(is_subnormal(batch.golden[hits]).sum())
        _accept(state, {**rule, **neutral}, Claim(
            "subnormal-flush", hits, hits.size,
            "subnormal inputs or outputs flushed to zero",
            {"subnormal_inputs": sub_in, "subnormal_outputs": sub_out}))


def _value_groups(before: np.ndarray) -> list[np.ndarray]:
    return [is_nan(before), np.isinf(before.astype(np.float64))]


_SATURATION_RULES = ({"saturate": True},  # the result saturates
                     {"saturate": True, "saturate_inputs": True})  # every op saturates


def _saturation(batch: Batch, state: _State) -> None:
    rules = _SATURATION_RULES if batch.dtypes[0] != "float64" else _SATURATION_RULES[:1]  # no fp32 unit
    for rule in rules:
        if state.remaining.size:
            _one_saturation(batch, state, rule)


def _one_saturation(batch: Batch, state: _State, rule: dict) -> None:
    hits = _prove(batch, state, rule, groups=_value_groups)
    if hits.size:
        g = batch.golden[hits]
        nan_zero, inf_max = int(is_nan(g).sum()), int(np.isinf(g.astype(np.float64)).sum())
        confirmed = bool(np.isinf(batch.variant(**state.base).astype(np.float64)).any())
        _accept(state, rule, Claim(
            "saturation", hits, hits.size,
            "NaN became 0 and/or ±inf became ±max (saturation mode)",
            {"nan_to_zero": nan_zero, "inf_to_max": inf_max, "confirmed_by_inf": confirmed}))


def _grad_at_zero(batch: Batch, state: _State) -> None:
    if batch.direction != "backward":
        return
    hits = _prove(batch, state, {"grad_rule": "ge"})
    if hits.size:
        _accept(state, {"grad_rule": "ge"}, Claim(
            "grad-at-zero", hits, hits.size,
            "backward at x == 0 used slope 1 (dx = dy) instead of alpha",
            {"rule": "x >= 0"}))


def _nan_gradient(batch: Batch, state: _State) -> None:
    if batch.direction != "backward":
        return
    for rule, words in (("dy", "dy"), ("zero", "0")):
        hits = _prove(batch, state, {"nan_grad": rule})
        if hits.size:
            _accept(state, {"nan_grad": rule}, Claim(
                "nan-gradient", hits, hits.size,
                f"backward at x = NaN gave {words} instead of alpha*dy", {"nan_grad": rule}))
            return


def _input_precision(batch: Batch, state: _State) -> None:
    """fp32/fp64 operands narrowed to fp16/bf16 before computing."""
    if batch.dtypes[0] not in ("float32", "float64"):
        return
    for narrow in ("float16", "bfloat16"):
        for context in ({}, {"opmath": "float32"}):
            rule = {"input_dtype": narrow}
            hits = _prove(batch, state, rule, neutral=context)
            hits = hits[~_non_finite_symptom(batch, hits)]
            if hits.size:
                _accept(state, {**rule, **context}, Claim(
                    "input-precision", hits, hits.size,
                    f"inputs rounded to {narrow} before computing (precision lost)",
                    {"input_dtype": narrow, "context": context}))


def _non_finite_symptom(batch: Batch, index: np.ndarray) -> np.ndarray:
    """Where the actual value is inf or NaN but golden is finite: an operand overflowed
    when narrowed, and the value classes (``overflow``, ``spurious-nan``) name that."""
    a, g = batch.actual[index].astype(np.float64), batch.golden[index].astype(np.float64)
    return ~np.isfinite(a) & np.isfinite(g)


_SEMANTIC = (_input_precision, _alpha_mismatch, _alpha_precision, _subnormal_flush, _saturation,
             _grad_at_zero, _nan_gradient)


# ----------------------------------------------------------------------------- location

def tail_regions(layout: TileLayout, numel: int) -> list[tuple[int, int, dict]]:
    """(start, stop, description) of the tail regions: the tail tile of each core that has
    body tiles too, the tensor's last tile when it is shorter, the unaligned tail (last
    partial block plus the block before it, which a shifted-back copy overlaps) and
    anything past the last span."""
    tiles_per_core = Counter(s.core for s in layout.spans)
    last = max(layout.spans, key=lambda s: s.start, default=None)
    spans = [s for s in layout.spans if s.is_tail and (tiles_per_core[s.core] > 1 or s is last)]
    regions = [(s.start, s.stop, {"core": s.core, "tile": s.tile, "start": s.start, "stop": s.stop})
               for s in spans]
    align = max(layout.align_elements, 1)
    if numel % align:
        lo = max(0, numel - numel % align - align)
        regions.append((lo, numel, {"unaligned_tail": True, "start": lo, "stop": numel}))
    covered = max((s.stop for s in layout.spans), default=0)
    if covered < numel:
        regions.append((covered, numel, {"uncovered": True, "start": covered, "stop": numel}))
    return regions


def _confined(rest: np.ndarray, regions: list[tuple[int, int, dict]], numel: int) -> list[dict]:
    """The regions holding the errors, if they hold all of them, are at least half wrong
    (a tail defect garbles its tail, not one value class) and leave elements outside.
    Each error counts against the smallest region that holds it, so a 1-element dropped
    tile is not diluted by the wider unaligned-tail region around it."""
    mask = np.zeros(numel, dtype=bool)
    used, left = [], rest
    for lo, hi, desc in sorted(regions, key=lambda r: r[1] - r[0]):
        inside = (left >= lo) & (left < hi)
        if inside.any():
            mask[lo:hi] = True
            used.append(desc)
            left = left[~inside]
    dense = 2 * rest.size >= int(mask.sum())
    return used if left.size == 0 and dense and not mask.all() else []


def _beyond_rounding(batch: Batch, index: np.ndarray) -> np.ndarray:
    """The elements of ``index`` that the 1-ULP residue rule would not take."""
    a, g = batch.actual[index], batch.golden[index]
    finite = np.isfinite(a.astype(np.float64)) & np.isfinite(g.astype(np.float64))
    return index[~(finite & (ulp_distance(a, g).ulps <= 1))]


def _tail(batch: Batch, state: _State, layout: Optional[TileLayout]) -> None:
    """Errors beyond 1-ULP residue, confined to the tail regions, are ``tail-block``."""
    rest = _beyond_rounding(batch, state.remaining) if layout is not None else _EMPTY
    if rest.size == 0:
        return
    used = _confined(rest, tail_regions(layout, batch.x.size), batch.x.size)
    if not used:
        return
    lo, hi = int(rest.min()), int(rest.max()) + 1
    state.claim(Claim(
        "tail-block", rest, rest.size,
        "the remaining errors all lie in tail tiles or the unaligned tail; the rest is clean",
        {"start": lo, "stop": hi, "regions": used, "align_elements": layout.align_elements}))


# ----------------------------------------------------------------------------- value classes

def _classes(actual: np.ndarray, golden: np.ndarray) -> list[tuple[str, np.ndarray, str]]:
    a, g = actual.astype(np.float64), golden.astype(np.float64)
    nan_a, nan_g = is_nan(actual), is_nan(golden)
    both_zero = (a == 0) & (g == 0)
    finite = np.isfinite(a) & np.isfinite(g)
    return [
        ("overflow", np.isfinite(g) & np.isinf(a), "finite results became ±inf"),
        ("spurious-nan", nan_a & ~nan_g, "NaN where the exact result is a number"),
        ("lost-nan", nan_g & ~nan_a, "a NaN result became a number"),
        ("signed-zero", both_zero & (np.signbit(a) != np.signbit(g)), "zero with the wrong sign"),
        ("rounding", finite & (ulp_distance(actual, golden).ulps <= 1),
         "within 1 ULP of the exact result (double rounding or another compute precision)"),
        ("unexplained", np.ones(a.shape, bool), "differences no rule explains"),
    ]


def _value_classes(batch: Batch, state: _State) -> None:
    rest = state.remaining
    if rest.size == 0:
        return
    taken = np.zeros(rest.size, dtype=bool)
    for category, mask, summary in _classes(batch.actual[rest], batch.golden[rest]):
        mine = mask & ~taken
        if mine.any():
            taken |= mine
            detail = {"max_ulp": _max_ulp(batch, rest[mine])}
            state.claim(Claim(category, rest[mine], int(mine.sum()), summary, detail))


def _max_ulp(batch: Batch, index: np.ndarray) -> int:
    return ulp_distance(batch.actual[index], batch.golden[index]).max()
