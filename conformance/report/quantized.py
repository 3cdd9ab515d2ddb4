"""Quantized output codes -> one judged row: the exact codes, the code distance, triage, gate.

The metric is the code distance: a row's ``max_ulp`` and ``max_abs`` are the greatest
``|Δcode|`` (one code is one ULP of a quantized dtype), ``max_rel`` the greatest
``|Δcode| / |q_exact - z_out|``.  A finding passes the gate when the backend's policy allows
its category and none of its codes is more than :data:`MAX_CODES` away from exact: the
frameworks' own requantization rules move a code by one step, anything else fails.  The row's
``variant`` is its setting ``S_IN:Z_IN:S_OUT:Z_OUT``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from conformance.reference.quantized import QuantParams, exact_table, lookup, setting_text
from conformance.report import metrics as met
from conformance.report.evaluate import Finding, Row
from conformance.report.gate import GateConfig, verdict
from conformance.report.messages import MAX_EXAMPLES, Offender
from conformance.report.triage.quantized import QuantBatch, QuantClaim, code_distance, triage_quantized

MAX_CODES = 1  # the largest code difference a named requantization rule may show


def _relative(diff: np.ndarray, golden: np.ndarray, *, params: QuantParams) -> np.ndarray:
    base = np.abs(golden.astype(np.int64) - params.z_out).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / base)
    return np.where(np.isnan(rel), 0.0, rel)


def code_metrics(actual: np.ndarray, golden: np.ndarray, *, params: QuantParams, part: str) -> met.Metrics:
    """Counts and the greatest code distance (with where it is) of one comparison."""
    diff = code_distance(actual, golden)
    rel = _relative(diff, golden, params=params)
    worst = int(diff.argmax()) if diff.size else 0
    at = (part, worst) if diff.size and diff[worst] else None
    rel_at = (part, int(rel.argmax())) if diff.size and rel.max() > 0 else None
    mismatches = int(np.count_nonzero(diff))
    top = int(diff[worst]) if diff.size else 0
    return met.Metrics(int(diff.size), mismatches, mismatches, float(top), at,
                       float(rel.max()) if rel.size else 0.0, rel_at, top, at, 0, 0, 0,
                       int((rel < 1e-3).sum()), int((rel < 5e-3).sum()),
                       int((actual.astype(np.int64) > golden).sum()), int((actual.astype(np.int64) < golden).sum()))


def _finding(claim: QuantClaim, batch: QuantBatch, *, backend: str, profile: Optional[str],
             config: GateConfig, part: str) -> Finding:
    within = claim.detail.get("max_code_diff", 0) <= MAX_CODES
    allowed = within and config.allows(backend, claim.category, profile=profile)
    examples = tuple(Offender(int(i), batch.codes[i], None, batch.golden[i], batch.actual[i], part=part)
                     for i in claim.index[:MAX_EXAMPLES])
    return Finding(claim.category, int(claim.index.size), allowed, claim.summary, dict(claim.detail),
                   examples, None, int(claim.index.size))


def evaluate_codes(codes: np.ndarray, actual: np.ndarray, alpha: float, *, params: QuantParams,
                   backend: str, profile: Optional[str] = None, config: GateConfig,
                   label: str = "codes") -> Row:
    """Judge ``actual`` (the codes a backend computed from ``codes``) against the exact result."""
    flat, out = np.asarray(codes).reshape(-1), np.asarray(actual).reshape(-1)
    golden = lookup(exact_table(alpha, params=params), flat, params=params)
    batch = QuantBatch(flat, alpha, params, golden, out)
    findings = tuple(_finding(c, batch, backend=backend, profile=profile, config=config, part=label)
                     for c in triage_quantized(batch))
    return Row(backend, profile, setting_text(params), params.dtype, params.dtype, "forward", float(alpha),
               code_metrics(out, golden, params=params, part=label), findings,
               verdict([f.allowed for f in findings]), parts=(label,), shapes=(tuple(np.shape(codes)),))
