"""One backend result -> one judged row: golden, metrics, triage, gate.

``evaluate`` judges one input batch; ``merge_rows`` combines the batches of one
(backend, dtype, out_dtype, direction, alpha) into one row, exactly (counts are
summed, maxima maxed, cosine sums rescaled, findings merged by category).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import reduce
from typing import Any, Callable, Optional, Sequence

import numpy as np

from conformance.dtypes import hex_value, info
from conformance.records import BackendResult, TileLayout
from conformance.reference import golden as ref
from conformance.report import metrics as met
from conformance import categories
from conformance.report.gate import GateConfig, finding_allowed, verdict
from conformance.report.triage import Batch, Claim, triage

MAX_EXAMPLES = 5
LayoutFn = Callable[[int], Optional[TileLayout]]


@dataclass(frozen=True)
class Offender:
    """One example element; values are numpy scalars of their dtype (None when unknown)."""

    index: int
    x: Any
    dy: Any
    expected: Any
    actual: Any
    core: Optional[int] = None
    tile: Optional[int] = None
    part: str = ""

    def describe(self) -> str:
        where = f"index {self.index}" + (f" of {self.part}" if self.part else "")
        if self.core is not None:
            where += f" (core {self.core}" + (f", tile {self.tile})" if self.tile is not None else ")")
        if self.x is None:
            return f"{where}: written outside the tensor"
        dy = f", dy={_show(self.dy)}" if self.dy is not None else ""
        return f"{where}: x={_show(self.x)}{dy}, expected {_show(self.expected)}, " \
               f"actual {_show(self.actual)}"


def _show(v: Any) -> str:
    """Decimal and hex bits of a numpy scalar, e.g. ``-0.2 [0xb266]``."""
    bits = np.asarray(v).view(info(np.asarray(v).dtype).uint).item()
    width = np.asarray(v).dtype.itemsize * 2
    return f"{float(v)!r} [0x{bits:0{width}x}]"


@dataclass(frozen=True)
class Finding:
    """One category's share of a row's differences."""

    category: str
    count: int
    allowed: bool
    summary: str
    detail: dict
    examples: tuple[Offender, ...]
    reproducer: Optional[str] = None
    violations: int = 0  # elements of this finding outside tolerance


@dataclass(frozen=True)
class Row:
    """The judged result for one (backend, dtype, out_dtype, direction, alpha)."""

    backend: str
    profile: Optional[str]
    variant: Optional[str]
    dtype: str
    out_dtype: str
    direction: str
    alpha: float
    metrics: met.Metrics
    findings: tuple[Finding, ...]
    verdict: str
    parts: tuple[str, ...] = ()

    @property
    def key(self) -> tuple:
        return (self.backend, self.profile, self.variant, self.dtype, self.out_dtype,
                self.direction, self.alpha)

    @property
    def title(self) -> str:
        who = self.backend + (f"[{self.profile}/{self.variant}]" if self.profile or self.variant else "")
        return f"{who} {self.dtype}->{self.out_dtype} {self.direction} alpha={self.alpha!r}"

    @property
    def message(self) -> str:
        """torch.testing-style failure text."""
        return failure_message(self)


def _where(at: met.Where) -> str:
    if at is None:
        return ""
    part, index = at
    return f" at index ({index},)" + (f" of {part}" if part else "")


def metric_lines(row: Row) -> list[str]:
    """"Mismatched elements: k / N (p%)" and the greatest differences with their index."""
    m = row.metrics
    lines = [f"Mismatched elements: {m.mismatches} / {m.elements} ({100 * m.mismatch_ratio:.1f}%)"]
    if m.mismatches:
        lines.append(f"Greatest absolute difference: {hex_value(m.max_abs)} ({m.max_abs!r})"
                     f"{_where(m.max_abs_at)}")
        lines.append(f"Greatest relative difference: {m.max_rel!r}{_where(m.max_rel_at)}")
        lines.append(f"Greatest ULP difference: {m.max_ulp}{_where(m.max_ulp_at)}")
    return lines


def failure_message(row: Row, *, offenders: int = MAX_EXAMPLES) -> str:
    """The metric lines, then each finding with its first offenders."""
    lines = metric_lines(row)
    for finding in row.findings:
        lines.append(f"{finding.category} x{finding.count}: {finding.summary}")
        lines += [f"  {ex.describe()}" for ex in finding.examples[:offenders]]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- findings

def _examples(claim: Claim, batch: Batch, *, layout: Optional[TileLayout], part: str,
              hazard_cores: dict[int, int]) -> tuple[Offender, ...]:
    out = []
    for i in (int(v) for v in claim.index[:MAX_EXAMPLES]):
        span = layout.locate(i) if layout is not None else None
        core = span.core if span is not None else hazard_cores.get(i)
        if not claim.in_tensor:
            out.append(Offender(i, None, None, None, None, core, None, part))
            continue
        dy = batch.dy[i] if batch.dy is not None else None
        out.append(Offender(i, batch.x[i], dy, batch.golden[i], batch.actual[i], core,
                            span.tile if span is not None else None, part))
    return tuple(out)


def _finding(claim: Claim, *, violations: int, backend: str, config: GateConfig,
             examples: tuple[Offender, ...]) -> Finding:
    allowed = finding_allowed(claim.category, violations=violations, backend=backend,
                              config=config)
    return Finding(claim.category, claim.count, allowed, claim.summary, dict(claim.detail),
                   examples, None, violations)


def _violations(claim: Claim, comp: met.Comparison) -> int:
    """Elements of a claim outside tolerance (hazards always count in full)."""
    if not claim.in_tensor or claim.category == "write-race":
        return claim.count
    bad = comp.mismatch_index[comp.violating]
    return int(np.isin(claim.index, bad, assume_unique=True).sum())


def _findings(batch: Batch, comp: met.Comparison, result: BackendResult, *, backend: str,
              config: GateConfig, layout: Optional[TileLayout], part: str) -> tuple[Finding, ...]:
    claims = triage(batch, mismatches=comp.mismatch_index, hazards=result.hazards, layout=layout)
    cores = {h.index: h.cores[0] for h in result.hazards if h.cores}
    return tuple(_finding(c, violations=_violations(c, comp), backend=backend, config=config,
                          examples=_examples(c, batch, layout=layout, part=part, hazard_cores=cores))
                 for c in claims)


# ----------------------------------------------------------------------------- evaluate

def _golden(x: np.ndarray, alpha: float, *, direction: str, dy: Optional[np.ndarray],
            out_dtype: str) -> np.ndarray:
    if direction == "forward":
        return ref.leaky_relu(x, alpha, out_dtype=out_dtype)
    if dy is None:
        raise ValueError("backward evaluation needs dy")
    return ref.leaky_relu_backward(dy, x, alpha, out_dtype=out_dtype)


def _actual(result: BackendResult, *, numel: int, out_dtype: str) -> np.ndarray:
    value = np.asarray(result.value)
    if value.size != numel or info(value.dtype).name != out_dtype:
        raise ValueError(f"backend returned {value.dtype}{value.shape}; expected {numel} "
                         f"elements of {out_dtype}")
    return value.reshape(-1)


def _rejected(x: np.ndarray, result: BackendResult, *, backend: str,
              config: GateConfig) -> tuple[met.Metrics, tuple[Finding, ...]]:
    n = int(x.size)
    allowed = config.allows(backend, "rejected-input")
    finding = Finding("rejected-input", n, allowed, f"backend refused the input: {result.rejected}",
                      {"reason": result.rejected}, (), None, n)
    return met.empty(elements=n), (finding,)


def evaluate(x: np.ndarray, alpha: float, result: BackendResult, *, direction: str,
             dy: Optional[np.ndarray] = None, out_dtype: Optional[str] = None, backend: str,
             profile: Optional[str] = None, variant: Optional[str] = None,
             config: GateConfig, label: str = "", layout_fn: Optional[LayoutFn] = None) -> Row:
    """Judge one backend result against the exact reference."""
    x = np.asarray(x)
    src, out = ref.resolve_pair(x.dtype, out_dtype)
    alpha = ref.check_alpha(alpha)
    head = dict(backend=backend, profile=profile, variant=variant, dtype=src.name,
                out_dtype=out.name, direction=direction, alpha=alpha, parts=(label,))
    if result.rejected is not None:
        metrics, findings = _rejected(x, result, backend=backend, config=config)
        return Row(**head, metrics=metrics, findings=findings, verdict=verdict([f.allowed for f in findings]))
    dy_flat = None if dy is None else np.asarray(dy).reshape(-1)
    expected = _golden(x.reshape(-1), alpha, direction=direction, dy=dy_flat, out_dtype=out.name)
    actual = _actual(result, numel=x.size, out_dtype=out.name)
    comp = met.compare(actual, expected, tolerance=config.tolerance(out.name), part=label)
    findings: tuple[Finding, ...] = ()
    if comp.mismatch_index.size or result.hazards:
        layout = result.layout if result.layout is not None else (
            layout_fn(x.size) if layout_fn is not None else None)
        batch = Batch(x.reshape(-1), dy_flat, alpha, direction, out.name, expected, actual)
        findings = _findings(batch, comp, result, backend=backend, config=config,
                             layout=layout, part=label)
    return Row(**head, metrics=comp.metrics, findings=findings,
               verdict=verdict([f.allowed for f in findings]))


# ----------------------------------------------------------------------------- merge

_SUMMED = frozenset({"before", "after", "mismatching", "subnormal_inputs", "subnormal_outputs",
                     "nan_to_zero", "inf_to_max", "explained", "contradicted"})


def _merge_detail(a: dict, b: dict) -> dict:
    """Counts add up, ``max_ulp`` is maxed, everything else keeps the first batch's value."""
    out = {**b, **a}
    for key in _SUMMED & a.keys() & b.keys():
        out[key] = a[key] + b[key]
    if "max_ulp" in a and "max_ulp" in b:
        out["max_ulp"] = max(a["max_ulp"], b["max_ulp"])
    return out


def _merge_two(a: Finding, b: Finding) -> Finding:
    return replace(a, count=a.count + b.count, violations=a.violations + b.violations,
                   detail=_merge_detail(a.detail, b.detail),
                   examples=(a.examples + b.examples)[:MAX_EXAMPLES],
                   reproducer=a.reproducer or b.reproducer)


def _saturation_refuted(rows: Sequence[Row]) -> bool:
    """Some batch had ±inf and did not saturate it while NaN still became a number."""
    return any(f.category == "lost-nan" for r in rows for f in r.findings) and not any(
        f.category == "saturation" and f.detail.get("confirmed_by_inf") for r in rows
        for f in r.findings)


def _relabel_unconfirmed(finding: Finding) -> Finding:
    """An unconfirmed saturation finding (no ±inf to tell) is a lost NaN when refuted."""
    return replace(finding, category="lost-nan", summary="a NaN result became a number")


def merge_findings(rows: Sequence[Row], *, backend: str, config: GateConfig) -> tuple[Finding, ...]:
    """Findings of several batches merged by category, in the triage order."""
    refuted = _saturation_refuted(rows)
    by_cat: dict[str, Finding] = {}
    for finding in (f for r in rows for f in r.findings):
        if refuted and finding.category == "saturation":
            finding = _relabel_unconfirmed(finding)
        prev = by_cat.get(finding.category)
        by_cat[finding.category] = finding if prev is None else _merge_two(prev, finding)
    merged = [by_cat[c] for c in categories.ordered(by_cat)]  # an unknown name raises
    return tuple(replace(f, allowed=finding_allowed(f.category, violations=f.violations,
                                                    backend=backend, config=config))
                 for f in merged)


def merge_rows(rows: Sequence[Row], *, config: GateConfig) -> Row:
    """Combine evaluated batches of one (backend, dtype, out_dtype, direction, alpha)."""
    if not rows:
        raise ValueError("merge_rows needs at least one row")
    keys = {r.key for r in rows}
    if len(keys) != 1:
        raise ValueError(f"merge_rows needs rows of one key, got {sorted(map(str, keys))}")
    first = rows[0]
    findings = merge_findings(rows, backend=first.backend, config=config)
    return replace(first, metrics=reduce(met.merge, (r.metrics for r in rows)),
                   findings=findings, verdict=verdict([f.allowed for f in findings]),
                   parts=tuple(p for r in rows for p in r.parts))
