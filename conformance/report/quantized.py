"""Quantized output codes -> one judged row: the exact codes, the code distance, triage, gate.

The metric is the code distance: a row's ``max_ulp`` and ``max_abs`` are the greatest
``|Δcode|`` (one code is one ULP of a quantized dtype), ``max_rel`` the greatest
``|Δcode| / |q_exact - z_out|``.  A finding passes the gate when the backend's policy allows
its category and none of its codes is more than :data:`MAX_CODES` away from exact: the
frameworks' own requantization rules move a code by one step, anything else fails.  The row's
``variant`` is its setting ``S_IN:Z_IN:S_OUT:Z_OUT``.

Codes are judged a chunk at a time (:func:`evaluate_code_chunks`), as float dumps are: one
pass merges the metrics and keeps every differing code with its flat index, and of the
matching ones only what triage can tell apart, per input code: the first and the last place
it holds and how many elements it stands for (every quantized rule but a position split is a
function of the input code, and a split needs only where each rule first and last fails).
Triage then judges that batch and finds what it finds on the whole tensor.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import reduce
from typing import Optional

import numpy as np

from conformance.reference.quantized import QuantParams, exact_table, lookup, setting_text
from conformance.report import metrics as met
from conformance.report.evaluate import Chunk, Finding, Row
from conformance.report.gate import GateConfig, verdict
from conformance.report.messages import MAX_EXAMPLES, Offender
from conformance.report.triage.quantized import QuantBatch, QuantClaim, code_distance, triage_quantized

MAX_CODES = 1  # the largest code difference a named requantization rule may show
_CODES = 256  # codes of an 8-bit dtype


def _relative(diff: np.ndarray, golden: np.ndarray, *, params: QuantParams) -> np.ndarray:
    base = np.abs(golden.astype(np.int64) - params.z_out).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / base)
    return np.where(np.isnan(rel), 0.0, rel)


def code_metrics(actual: np.ndarray, golden: np.ndarray, *, params: QuantParams, part: str,
                 offset: int = 0) -> met.Metrics:
    """Counts and the greatest code distance (with where it is, ``offset`` added) of one comparison."""
    diff = code_distance(actual, golden)
    rel = _relative(diff, golden, params=params)
    worst = int(diff.argmax()) if diff.size else 0
    at = (part, offset + worst) if diff.size and diff[worst] else None
    rel_at = (part, offset + int(rel.argmax())) if diff.size and rel.max() > 0 else None
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
    examples = tuple(Offender(int(batch.position(i)), batch.codes[i], None, batch.golden[i], batch.actual[i],
                              part=part)
                     for i in claim.index[:MAX_EXAMPLES])
    return Finding(claim.category, int(claim.index.size), allowed, claim.summary, dict(claim.detail),
                   examples, None, int(claim.index.size))


# ----------------------------------------------------------------------------- one pass over the chunks

@dataclass
class _Kept:
    """What one pass keeps: the merged metrics, every differing code (flat index, input,
    output), and per input code the first and last flat index of its matching elements and
    how many there are."""

    metrics: list[met.Metrics] = field(default_factory=list)
    where: list[np.ndarray] = field(default_factory=list)
    codes: list[np.ndarray] = field(default_factory=list)
    actual: list[np.ndarray] = field(default_factory=list)
    first: np.ndarray = field(default_factory=lambda: np.full(_CODES, -1, dtype=np.int64))
    last: np.ndarray = field(default_factory=lambda: np.full(_CODES, -1, dtype=np.int64))
    count: np.ndarray = field(default_factory=lambda: np.zeros(_CODES, dtype=np.int64))


def _keep_matching(kept: _Kept, slots: np.ndarray, where: np.ndarray) -> None:
    """Count the matching elements of one chunk (``slots``: code - lowest code) by input code."""
    if not slots.size:
        return
    seen, first = np.unique(slots, return_index=True)
    unseen = kept.first[seen] < 0
    kept.first[seen[unseen]] = where[first[unseen]]
    seen_back, back = np.unique(slots[::-1], return_index=True)
    kept.last[seen_back] = where[slots.size - 1 - back]
    kept.count += np.bincount(slots, minlength=_CODES)


def _scan(chunk: Chunk, kept: _Kept, *, table: np.ndarray, params: QuantParams, part: str) -> None:
    """Metrics of one chunk, its differing codes and its matching ones counted into ``kept``."""
    golden = lookup(table, chunk.x, params=params)
    kept.metrics.append(code_metrics(chunk.actual, golden, params=params, part=part, offset=chunk.offset))
    differ = chunk.actual != golden
    index = np.flatnonzero(differ)
    kept.where.append(index + chunk.offset)
    kept.codes.append(chunk.x[index])
    kept.actual.append(chunk.actual[index])
    same = np.flatnonzero(~differ)
    _keep_matching(kept, chunk.x[same].astype(np.int64) - params.code_range[0], same + chunk.offset)


def _stand_ins(kept: _Kept) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slots, flat indices and weights of the matching elements' stand-ins: a code's first
    place standing for all but one of its elements, its last place for one (one place when
    it holds one element)."""
    slots = np.flatnonzero(kept.count)
    twice = slots[kept.count[slots] > 1]
    where = np.concatenate([kept.first[slots], kept.last[twice]])
    weight = np.concatenate([np.where(kept.count[slots] > 1, kept.count[slots] - 1, 1), np.ones(twice.size, np.int64)])
    return np.concatenate([slots, twice]), where, weight


def _batch(kept: _Kept, *, alpha: float, params: QuantParams, table: np.ndarray, numel: int) -> QuantBatch:
    """The differing codes and the matching ones' stand-ins as one batch, by flat index."""
    slots, rep_where, rep_weight = _stand_ins(kept)
    mismatches = sum(w.size for w in kept.where)
    where = np.concatenate([*kept.where, rep_where])
    codes = np.concatenate([*kept.codes, (slots + params.code_range[0]).astype(params.storage)])
    actual = np.concatenate([*kept.actual, table[slots].astype(params.storage)])  # a stand-in matches
    weight = np.concatenate([np.ones(mismatches, np.int64), rep_weight])
    order = np.argsort(where, kind="stable")
    codes = codes[order]
    return QuantBatch(codes, alpha, params, lookup(table, codes, params=params), actual[order],
                      where=where[order], numel=numel, weight=weight[order])


Reader = Callable[[], Iterable[Chunk]]  # the codes' chunks (x: input codes, actual: output codes), in order


def evaluate_code_chunks(read: Reader, *, numel: int, alpha: float, params: QuantParams, backend: str,
                         profile: Optional[str] = None, config: GateConfig, label: str = "codes",
                         shape: Optional[tuple[int, ...]] = None,
                         advance: Callable[[int], None] = lambda n: None) -> Row:
    """Judge ``numel`` output codes that ``read()`` gives as consecutive flat chunks beside
    their input codes, against the exact result; ``advance(n)`` is told of each chunk done."""
    table = exact_table(alpha, params=params)
    kept = _Kept()
    for chunk in read():
        _scan(chunk, kept, table=table, params=params, part=label)
        advance(int(chunk.x.size))
    metrics = reduce(met.merge, kept.metrics) if kept.metrics else met.empty()
    findings: tuple[Finding, ...] = ()
    if metrics.mismatches:
        batch = _batch(kept, alpha=alpha, params=params, table=table, numel=numel)
        findings = tuple(_finding(c, batch, backend=backend, profile=profile, config=config, part=label)
                         for c in triage_quantized(batch))
    return Row(backend, profile, setting_text(params), params.dtype, params.dtype, "forward", float(alpha),
               metrics, findings, verdict([f.allowed for f in findings]), parts=(label,),
               shapes=((numel,) if shape is None else tuple(shape),))


def evaluate_codes(codes: np.ndarray, actual: np.ndarray, alpha: float, *, params: QuantParams,
                   backend: str, profile: Optional[str] = None, config: GateConfig,
                   label: str = "codes") -> Row:
    """Judge ``actual`` (the codes a backend computed from ``codes``) against the exact result."""
    flat, out = np.asarray(codes).reshape(-1), np.asarray(actual).reshape(-1)
    return evaluate_code_chunks(lambda: [Chunk(0, flat, None, out)], numel=int(flat.size), alpha=alpha,
                                params=params, backend=backend, profile=profile, config=config, label=label,
                                shape=tuple(np.shape(codes)))
