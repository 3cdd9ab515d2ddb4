"""Why quantized codes differ from the exact result, proved by recomputation.

Every candidate is a golden variant of :mod:`conformance.reference.quantized`: another
requantization rule (a :class:`QuantSemantics`), another slope, another scale or zero
point, or two rules split at a position.  Each is recomputed on the batch's codes and
scored: ``explained`` (differing codes it reproduces) and ``contradicted`` (codes where it
predicts a change the output does not show).  A candidate proves its claim only with no
contradiction; the first full explanation in catalogue order wins, and the others that
explain as much are named beside it (``also``).  Codes left over are ``unexplained``.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from conformance.reference.defaults import frameworks_with_default
from conformance.reference.quantized import EXACT_QUANT, QuantParams, QuantSemantics, lookup, variant_table

SPLIT_STEP = 8  # boundaries tried for a position split: every multiple of this
REGION_MIN = 16  # differing codes a rule confined to a span must reproduce before it is claimed

#: (rule, category, semantics): the requantization rules triage knows, cheapest first
RULES: tuple[tuple[str, str, QuantSemantics], ...] = (
    ("rounding half away from zero", "rounding", QuantSemantics(rounding="half-away")),
    ("rounding half up", "rounding", QuantSemantics(rounding="half-up")),
    ("float32 scales, division by s_out (ONNX Runtime)", "requantization", QuantSemantics("float32")),
    ("float32 scales, multiply by f32(1/s_out)", "requantization",
     QuantSemantics("float32", requantize="reciprocal")),
    ("float32 scales, fused dequantize, multiply by f32(1/s_out) (PyTorch vector body)", "requantization",
     QuantSemantics("float32", requantize="reciprocal", dequantize="fma")),
    ("float32 scales, zero point added before rounding (PyTorch scalar tail)", "requantization",
     QuantSemantics("float32", requantize="reciprocal", zero_point="before")),
    ("float32 scales, division by s_out, zero point added before rounding", "requantization",
     QuantSemantics("float32", zero_point="before")),
    ("Q31 multiplier with double rounding (gemmlowp; TFLite builtin)", "requantization", QuantSemantics("q31")),
    ("Q8 multiplier, steps of 1/256 (XNNPACK)", "requantization", QuantSemantics("q8")),
    ("codes wrapped around the code range instead of saturating", "code-saturation",
     QuantSemantics(clamp="wrap")),
    ("codes saturated at the narrow range (the lowest code unused)", "code-saturation",
     QuantSemantics(clamp="narrow")),
)


@dataclass(frozen=True)
class QuantBatch:
    """Flat input codes, the setting, the exact codes and the codes computed.  A batch may
    stand for a larger tensor, as triage's ``Batch`` does: ``where`` holds each element's flat
    index in it (ascending), ``numel`` its size, ``weight`` how many of its elements each
    stands for (elements alike in input and output code: every rule but a position split
    is a function of the input code)."""

    codes: np.ndarray
    alpha: float
    params: QuantParams
    golden: np.ndarray
    actual: np.ndarray
    where: Optional[np.ndarray] = None  # None: the elements are the tensor, in order
    numel: Optional[int] = None
    weight: Optional[np.ndarray] = None  # None: one each

    @property
    def size(self) -> int:
        """Elements of the tensor the batch stands for."""
        return int(self.actual.size if self.numel is None else self.numel)

    def count(self, chosen: np.ndarray) -> int:
        """How many of the tensor's elements the batch elements ``chosen`` (a mask, or indices)
        stand for."""
        if self.weight is None:
            return int(np.count_nonzero(chosen) if chosen.dtype == bool else chosen.size)
        return int(self.weight[chosen].sum())

    def position(self, index: np.ndarray) -> np.ndarray:
        """The flat tensor indices of the batch elements ``index``."""
        return index if self.where is None else self.where[index]

    def median(self, values: np.ndarray, *, keep: np.ndarray) -> float:
        """``np.median(values)`` over the tensor's elements that ``keep`` marks, weights counted."""
        if self.weight is None:
            return float(np.median(values))
        order = np.argsort(values, kind="stable")
        ranks = np.cumsum(self.weight[keep][order])
        total = int(ranks[-1])
        middle = np.searchsorted(ranks, [(total - 1) // 2, total // 2], side="right")
        return float(np.mean(values[order][middle]))

    def predict(self, *, semantics: QuantSemantics = EXACT_QUANT, alpha: float | None = None,
                params: QuantParams | None = None) -> np.ndarray:
        """The codes a variant computes on this batch's inputs."""
        table = variant_table(self.alpha if alpha is None else alpha, params=params or self.params,
                              semantics=semantics)
        return lookup(table, self.codes, params=self.params)


@dataclass(frozen=True)
class Candidate:
    """One golden variant's prediction, and what its finding says."""

    category: str
    rule: str
    predicted: np.ndarray
    detail: dict


@dataclass(frozen=True)
class QuantClaim:
    """Differing codes one category explains (``index`` into the batch)."""

    category: str
    index: np.ndarray
    summary: str
    detail: dict


def code_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a - b|`` in codes (int64)."""
    return np.abs(a.astype(np.int64) - b.astype(np.int64))


# ----------------------------------------------------------------------------- candidates

def _rule_candidates(batch: QuantBatch) -> Iterator[Candidate]:
    for rule, category, semantics in RULES:
        yield Candidate(category, rule, batch.predict(semantics=semantics), {"rule": rule})


def _snapped(value: float) -> list[float]:
    """Short decimals near ``value`` (1 to 3 significant digits) and ``1/round(1/value)``."""
    if not np.isfinite(value) or value == 0:
        return [0.0]
    out = [float(f"{value:.{digits}g}") for digits in (1, 2, 3)]
    if abs(value) < 1:
        out.append(1 / round(1 / value))
    return list(dict.fromkeys(out))


def _branch_ratio(batch: QuantBatch, *, negative: bool) -> float:
    """The median of ``(actual - z_out)/(q - z_in)`` over one branch, away from saturation."""
    p = batch.params
    x = batch.codes.astype(np.int64) - p.z_in
    y = batch.actual.astype(np.int64) - p.z_out
    lo, hi = p.code_range
    keep = ((x < 0) if negative else (x > 0)) & (batch.actual > lo) & (batch.actual < hi) & (np.abs(x) >= 4)
    return batch.median(y[keep] / x[keep], keep=keep) if keep.any() else float("nan")


def _slopes(batch: QuantBatch) -> list[float]:
    """Defaults of the frameworks, and slopes fitted to the negative branch."""
    p = batch.params
    fitted = _branch_ratio(batch, negative=True) * p.s_out / p.s_in
    return [a for a in dict.fromkeys([0.0, 0.01, 0.2, 0.3, 1.0, *_snapped(fitted)]) if a != batch.alpha]


def _alpha_candidates(batch: QuantBatch) -> Iterator[Candidate]:
    for alpha in _slopes(batch):
        if np.isfinite(alpha):
            whose = frameworks_with_default(alpha)
            rule = f"slope {alpha!r} instead of {batch.alpha!r}" + (f" (the default of {', '.join(whose)})"
                                                                   if whose else "")
            yield Candidate("alpha-mismatch", rule, batch.predict(alpha=alpha), {"effective_alpha": alpha})


def _param_values(batch: QuantBatch) -> Iterator[tuple[str, float | int]]:
    """(field, value) pairs to try: nearby and defaulted zero points, fitted and swapped scales."""
    p = batch.params
    ratio = _branch_ratio(batch, negative=False)
    for field, z in (("z_in", p.z_in), ("z_out", p.z_out)):
        for value in (0, z - 1, z + 1, z - 2, z + 2, -z, z - 128, z + 128):
            yield field, value
    offsets = batch.actual.astype(np.int64) - batch.golden.astype(np.int64)
    yield "z_out", int(batch.median(offsets, keep=np.ones(offsets.size, dtype=bool))) + p.z_out
    yield "s_in", p.s_out
    yield "s_out", p.s_in
    for value in _snapped(p.s_in / ratio) if ratio > 0 else ():
        yield "s_out", value
    for value in _snapped(ratio * p.s_out) if ratio > 0 else ():
        yield "s_in", value


def _param_candidates(batch: QuantBatch) -> Iterator[Candidate]:
    seen = set()
    for field, value in _param_values(batch):
        if (field, value) in seen or getattr(batch.params, field) == value:
            continue
        seen.add((field, value))
        try:
            other = replace(batch.params, **{field: value})
        except ValueError:  # outside the code range, or a scale <= 0
            continue
        rule = f"{field} {value!r} instead of {getattr(batch.params, field)!r}"
        yield Candidate("quant-params", rule, batch.predict(params=other), {field: value})


def candidates(batch: QuantBatch) -> Iterator[Candidate]:
    """Every single-rule candidate, in catalogue order."""
    yield from _rule_candidates(batch)
    yield from _alpha_candidates(batch)
    yield from _param_candidates(batch)


# ----------------------------------------------------------------------------- scoring

def _score(candidate: Candidate, batch: QuantBatch, mismatch: np.ndarray) -> tuple[int, int]:
    """(explained, contradicted) of ``candidate`` over the whole batch."""
    reproduces = candidate.predicted == batch.actual
    changes = candidate.predicted != batch.golden
    return batch.count(reproduces & mismatch), batch.count(changes & ~reproduces)


def _boundaries(body: np.ndarray, tail: np.ndarray, batch: QuantBatch) -> tuple[int, int] | None:
    """The multiples of :data:`SPLIT_STEP` (lowest, highest) where ``body`` before and ``tail``
    from it on reproduce the batch's codes, or None."""
    n, actual = batch.size, batch.actual
    body_wrong = batch.position(np.flatnonzero(body != actual))
    tail_wrong = batch.position(np.flatnonzero(tail != actual))
    highest = int(body_wrong[0]) if body_wrong.size else n  # body holds on [0, highest)
    lowest = int(tail_wrong[-1]) + 1 if tail_wrong.size else 0  # tail holds on [lowest, n)
    lo = -(-max(lowest, 1) // SPLIT_STEP) * SPLIT_STEP
    hi = min(highest, n - 1) // SPLIT_STEP * SPLIT_STEP
    return (lo, hi) if 0 < lo <= hi < n else None


def _splits(batch: QuantBatch) -> Iterator[Candidate]:
    """Two requantization rules (or the exact one) split at a multiple of :data:`SPLIT_STEP`."""
    paths = [("exact", batch.golden)] + [(c.rule, c.predicted) for c in _rule_candidates(batch)]
    for body_rule, body in paths:
        for tail_rule, tail in paths:
            found = None if tail_rule == body_rule else _boundaries(body, tail, batch)
            if found is not None:
                boundary = _aligned(*found)
                rule = f"{body_rule} before element {boundary}, {tail_rule} from it on"
                yield Candidate("position-split", rule, batch.actual.copy(),
                                {"boundary": boundary, "boundaries": list(found), "body": body_rule,
                                 "tail": tail_rule})


def _aligned(lo: int, hi: int) -> int:
    """The multiple of the largest power of two in ``[lo, hi]``: vector kernels end their body on
    a whole number of blocks."""
    step = 1 << max(hi.bit_length(), 1)
    while step > SPLIT_STEP and -(-lo // step) * step > hi:
        step //= 2
    return -(-lo // step) * step


def _alignment(candidate: Candidate) -> int:
    """How many trailing zero bits a split's boundary has (more: the likelier block end)."""
    boundary = candidate.detail["boundary"]
    return (boundary & -boundary).bit_length()


def _claim(candidate: Candidate, index: np.ndarray, batch: QuantBatch, *, contradicted: int,
           also: Sequence[str] = ()) -> QuantClaim:
    worst = int(code_distance(batch.actual[index], batch.golden[index]).max())
    detail = {**candidate.detail, "rule": candidate.rule, "explained": batch.count(index),
              "contradicted": contradicted, "max_code_diff": worst}
    if also:
        detail["also"] = list(also)
    return QuantClaim(candidate.category, index, f"{candidate.rule} reproduces these codes", detail)


def _full(batch: QuantBatch, mismatch: np.ndarray, found: Sequence[Candidate]) -> list[QuantClaim]:
    """The first candidate explaining every differing code, with the others that do too."""
    total = batch.count(mismatch)
    full = [c for c in found if _score(c, batch, mismatch) == (total, 0)]
    if not full:  # the splits at the most aligned boundary first
        full = sorted(_splits(batch), key=_alignment, reverse=True)
    if not full:
        return []
    return [_claim(full[0], np.flatnonzero(mismatch), batch, contradicted=0, also=[c.rule for c in full[1:]])]


def _span(candidate: Candidate, batch: QuantBatch, left: np.ndarray) -> tuple[int, int, np.ndarray]:
    """The widest span of positions where ``candidate`` reproduces every code (right or not)
    that holds the most of the differing codes ``left`` it reproduces: (start, stop, those)."""
    off = np.flatnonzero(candidate.predicted != batch.actual)  # where it fails: the span's walls
    hits = np.flatnonzero(left & (candidate.predicted == batch.actual))
    if hits.size == 0:
        return 0, 0, hits
    room = np.searchsorted(off, hits)  # hits between the same two walls share a span
    counts = np.bincount(room)
    best = int(np.argmax(counts))
    start = int(off[best - 1]) + 1 if best > 0 else 0
    stop = int(off[best]) if best < off.size else batch.size
    return start, stop, hits[room == best]


def _regional(batch: QuantBatch, left: np.ndarray, found: Sequence[Candidate]) -> Optional[QuantClaim]:
    """A candidate confined to a span of positions, reproducing every code inside it: the one
    that explains the most differing codes left, claimed when they are at least
    :data:`REGION_MIN` and half of those left (a whole tensor only: a reduced batch lacks the
    codes between its samples)."""
    if batch.where is not None:
        return None
    best = max(((_span(c, batch, left), c) for c in found), key=lambda sc: sc[0][2].size, default=None)
    if best is None:
        return None
    (start, stop, index), candidate = best
    if index.size < REGION_MIN or 2 * index.size < batch.count(left):
        return None
    claim = _claim(candidate, index, batch, contradicted=0)
    where = f"elements {start} to {stop - 1}"
    return replace(claim, summary=f"{candidate.rule} reproduces these codes in {where} only",
                   detail={**claim.detail, "region": {"kind": "span", "start": start, "stop": stop}})


def _greedy(batch: QuantBatch, mismatch: np.ndarray, found: Sequence[Candidate]) -> list[QuantClaim]:
    """Uncontradicted candidates taking the differing codes left, most first, a candidate
    confined to a span where it explains more than any candidate on the whole tensor; the
    rest unexplained."""
    left, claims = mismatch.copy(), []
    while left.any():
        scored = [(batch.count((c.predicted == batch.actual) & left), c) for c in found
                  if _score(c, batch, mismatch)[1] == 0]
        best = max(scored, key=lambda sc: sc[0], default=(0, None))
        regional = _regional(batch, left, found)
        if regional is not None and batch.count(regional.index) > best[0]:  # a span explaining more
            best = (0, None)
        if best[1] is None or best[0] == 0:
            if regional is None:
                break
            claims.append(regional)
            left[regional.index] = False
            continue
        index = np.flatnonzero(left & (best[1].predicted == batch.actual))
        claims.append(_claim(best[1], index, batch, contradicted=0))
        left[index] = False
    if left.any():
        index = np.flatnonzero(left)
        claims.append(QuantClaim("unexplained", index, "no quantized rule of the catalogue reproduces these codes",
                                 {"max_code_diff": int(code_distance(batch.actual[index], batch.golden[index]).max())}))
    return claims


def triage_quantized(batch: QuantBatch) -> list[QuantClaim]:
    """The claims that cover every differing code of ``batch``, by proof where one exists."""
    mismatch = batch.actual != batch.golden
    if not mismatch.any():
        return []
    found = list(candidates(batch))
    return _full(batch, mismatch, found) or _greedy(batch, mismatch, found)
