"""One backend result -> one judged row: golden, metrics, triage, gate.

``evaluate`` judges one input batch (``conformance.judge.chunked`` a tensor given in
chunks); ``merge_rows`` combines the batches of one
(backend, dtype, out_dtype, direction, alpha) into one row, exactly (counts are
summed, maxima maxed, cosine sums rescaled, findings merged by category).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import reduce
from typing import Any, Optional

import numpy as np

from conformance import categories
from conformance.dtypes import info
from conformance.judge import other_checks
from conformance.judge import plots as plotting
from conformance.judge.gate import GateConfig, finding_gated, verdict
from conformance.metrics import exact as met
from conformance.records import MAX_EXAMPLES, BackendResult, Finding, Offender, Row, Shape, TilePlan
from conformance.reference import golden as ref
from conformance.triage import Batch, Claim, triage
from conformance.triage.hazards import first_cores

PlanFn = Callable[[int], Optional[TilePlan]]
Values = Callable[[int], tuple[Any, Any, Any, Any]]  # flat index -> x, dy, expected, actual


# ----------------------------------------------------------------------------- findings

def _examples(claim: Claim, values: Values, *, tile_plan: Optional[TilePlan], part: str,
              hazard_cores: dict[int, int]) -> tuple[Offender, ...]:
    out = []
    for i in (int(v) for v in claim.index[:MAX_EXAMPLES]):
        span = tile_plan.locate(i) if tile_plan is not None else None
        core = span.core if span is not None else hazard_cores.get(i)
        if not claim.in_tensor:
            out.append(Offender(i, None, None, None, None, core, None, part))
            continue
        out.append(Offender(i, *values(i), core, span.tile if span is not None else None, part))
    return tuple(out)


def _finding(claim: Claim, *, violations: int, backend: str, config: GateConfig,
             examples: tuple[Offender, ...], profile: Optional[str] = None) -> Finding:
    gated = finding_gated(claim.category, violations=violations, backend=backend, config=config, profile=profile)
    return Finding(claim.category, claim.count, gated, claim.summary, dict(claim.detail),
                   examples, None, violations)


Violating = Callable[[np.ndarray], np.ndarray]  # flat indices -> mask: outside tolerance


def violations_of(claim: Claim, violating: Violating) -> int:
    """Elements of a claim outside tolerance (``categories.VIOLATE_IN_FULL`` and writes outside
    the tensor count in full)."""
    if not claim.in_tensor or claim.category in categories.VIOLATE_IN_FULL:
        return claim.count
    return int(np.count_nonzero(violating(claim.index)))


def batch_values(batch: Batch) -> Values:
    """Look up an element of ``batch`` by its index there."""
    def values(j: int) -> tuple[Any, Any, Any, Any]:
        dy = batch.dy[j] if batch.dy is not None else None
        return batch.x[j], dy, batch.golden[j], batch.actual[j]

    return values


def judged(claims: Sequence[Claim], values: Values, *, violations: Sequence[int], backend: str,
           config: GateConfig, tile_plan: Optional[TilePlan], part: str,
           hazard_cores: dict[int, int], profile: Optional[str] = None) -> tuple[Finding, ...]:
    return tuple(_finding(c, violations=v, backend=backend, config=config, profile=profile,
                          examples=_examples(c, values, tile_plan=tile_plan, part=part,
                                             hazard_cores=hazard_cores))
                 for c, v in zip(claims, violations, strict=True))


# ----------------------------------------------------------------------------- evaluate

def _actual(result: BackendResult, *, numel: int, out_dtype: str) -> np.ndarray:
    value = np.asarray(result.value)
    if value.size != numel or info(value.dtype).name != out_dtype:
        raise ValueError(f"backend returned {value.dtype}{value.shape}; expected {numel} "
                         f"elements of {out_dtype}")
    return value.reshape(-1)


def _rejected(x: np.ndarray, result: BackendResult, *, backend: str, config: GateConfig,
              profile: Optional[str] = None) -> tuple[met.Metrics, tuple[Finding, ...]]:
    n = int(x.size)
    gated = not config.allows(backend, "rejected-input", profile=profile)
    said = result.rejected if result.malformed else f"backend refused the input: {result.rejected}"
    finding = Finding("rejected-input", n, gated, said,
                      {"reason": result.rejected}, (), None, n)
    return met.empty(elements=n), (finding,)


def row_head(x_dtype: Any, alpha: float, *, out_dtype: Optional[str], direction: str, backend: str,
             profile: Optional[str], variant: Optional[str], label: str, shape: Shape) -> dict:
    """The Row fields every evaluation fills the same way; ``shape`` shapes the shown indices."""
    src, out = ref.resolve_pair(x_dtype, out_dtype)
    return dict(backend=backend, profile=profile, variant=variant, dtype=src.name,
                out_dtype=out.name, direction=direction, alpha=ref.check_alpha(alpha), parts=(label,),
                shapes=(tuple(int(d) for d in shape),))


def evaluate(x: np.ndarray, alpha: float, result: BackendResult, *, direction: str,
             dy: Optional[np.ndarray] = None, out_dtype: Optional[str] = None, backend: str,
             profile: Optional[str] = None, variant: Optional[str] = None,
             config: GateConfig, label: str = "", plan_fn: Optional[PlanFn] = None,
             shape: Optional[Shape] = None, golden: Optional[np.ndarray] = None, plots: bool = True) -> Row:
    """Judge one backend result against the exact reference.

    ``shape`` is the shape the reported indices are shown in: by default x's own;
    pass the whole array's shape when x is a flat chunk whose indices are global.
    ``golden`` is the exact reference of these inputs when the caller already has it
    (flat, of the output dtype; a sweep computes it once for all its backends).
    ``plots``: measure what the HTML report's figures draw (False when no report draws them).
    """
    x = np.asarray(x)
    head = row_head(x.dtype, alpha, out_dtype=out_dtype, direction=direction, backend=backend,
                 profile=profile, variant=variant, label=label, shape=x.shape if shape is None else shape)
    head["notes"] = tuple(result.notes)
    if result.rejected is not None:
        metrics, findings = _rejected(x, result, backend=backend, config=config, profile=profile)
        return Row(**head, metrics=metrics, findings=findings, verdict=verdict([f.gated for f in findings]))
    dy_flat = None if dy is None else np.asarray(dy).reshape(-1)
    actual = _actual(result, numel=x.size, out_dtype=head["out_dtype"])
    expected = golden if golden is not None else ref.compute(direction, x.reshape(-1), head["alpha"],
                                                             dy=dy_flat, out_dtype=head["out_dtype"])
    comp = met.compare(actual, expected, tolerance=config.tolerance(head["out_dtype"]), part=label)
    findings: tuple[Finding, ...] = ()
    measured = None
    if comp.mismatch_index.size or result.hazards:
        tile_plan = result.tile_plan if result.tile_plan is not None else (
            plan_fn(x.size) if plan_fn is not None else None)
        batch = Batch(x.reshape(-1), dy_flat, head["alpha"], direction, head["out_dtype"],
                      expected, actual, shape=head["shapes"][0])
        claims = triage(batch, mismatches=comp.mismatch_index, hazards=result.hazards, tile_plan=tile_plan)
        bad = np.zeros(x.size, dtype=bool)
        bad[comp.mismatch_index[comp.violating]] = True
        findings = judged(claims, batch_values(batch),
                          violations=[violations_of(c, lambda index: bad[index]) for c in claims],
                          backend=backend, config=config, tile_plan=tile_plan, part=label, profile=profile,
                          hazard_cores=first_cores(result.hazards))
        if plots:
            measured = plotting.measure(claims, batch, tile_plan=tile_plan, shape=head["shapes"][0], part=label)
    checks = other_checks.of_batch(actual, expected, mismatch_index=comp.mismatch_index, metrics=comp.metrics)
    return Row(**head, metrics=comp.metrics, findings=findings, plots=measured, other_checks=checks,
               verdict=verdict([f.gated for f in findings]))


# ----------------------------------------------------------------------------- merge

def _merge_two(a: Finding, b: Finding) -> Finding:
    return replace(a, count=a.count + b.count, violations=a.violations + b.violations,
                   detail=categories.merge_detail(a.detail, b.detail, scope="findings"),
                   examples=(a.examples + b.examples)[:MAX_EXAMPLES],
                   reproducer=a.reproducer or b.reproducer)


def merge_findings(rows: Sequence[Row], *, backend: str, config: GateConfig,
                   profile: Optional[str] = None) -> tuple[Finding, ...]:
    """Findings of several batches merged by category, in the triage order."""
    refuted = categories.saturation_refuted((f.category, f.detail) for r in rows for f in r.findings)
    by_cat: dict[str, Finding] = {}
    for finding in (f for r in rows for f in r.findings):
        relabel = categories.relabelled(finding.category, finding.detail, refuted=refuted)
        if relabel is not None:
            finding = replace(finding, category=relabel[0], summary=relabel[1])
        prev = by_cat.get(finding.category)
        by_cat[finding.category] = finding if prev is None else _merge_two(prev, finding)
    merged = [by_cat[c] for c in categories.ordered(by_cat)]  # an unknown name raises
    return tuple(replace(f, gated=finding_gated(f.category, violations=f.violations,
                                                    backend=backend, config=config, profile=profile))
                 for f in merged)


def merge_rows(rows: Sequence[Row], *, config: GateConfig) -> Row:
    """Combine evaluated batches of one (backend, dtype, out_dtype, direction, alpha)."""
    if not rows:
        raise ValueError("merge_rows needs at least one row")
    keys = {r.key for r in rows}
    if len(keys) != 1:
        raise ValueError(f"merge_rows needs rows of one key, got {sorted(map(str, keys))}")
    first = rows[0]
    findings = merge_findings(rows, backend=first.backend, config=config, profile=first.profile)
    metrics = reduce(met.merge, (r.metrics for r in rows))
    checks = other_checks.merged([r.other_checks for r in rows], out_dtype=first.out_dtype, metrics=metrics)
    return replace(first, metrics=metrics, findings=findings, other_checks=checks,
                   verdict=verdict([f.gated for f in findings]),
                   plots=reduce(plotting.merge, (r.plots for r in rows)),
                   parts=tuple(p for r in rows for p in r.parts),
                   shapes=tuple(s for r in rows for s in r.shapes)
                   if all(len(r.shapes) == len(r.parts) for r in rows) else ())
