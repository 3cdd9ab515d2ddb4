"""Quantized output codes -> one judged row: the exact codes, the code distance, triage, gate.

The metric is the code distance: a row's ``max_ulp`` and ``max_abs`` are the greatest
``|Δcode|`` (one code is one ULP of a quantized dtype), ``max_rel`` the greatest
``|Δcode| / |q_exact - z_out|``.  A finding passes the gate when the backend's policy allows
its category and none of its codes is more than :data:`MAX_CODES` away from exact: the
frameworks' own requantization rules move a code by one step, anything else fails.  The row's
``variant`` is its setting ``S_IN:Z_IN:S_OUT:Z_OUT``.

Codes are judged a chunk at a time (:func:`evaluate_code_chunks`), as float dumps are, in
memory bounded whatever the tensor's size: one pass merges the metrics and keeps, per class
of elements (input code, output code), how many there are, the first few places and the last
one.  Every quantized rule but a position split is a function of the input code, so it
scores a class as a whole; a split needs only where each rule first and last fails; a
finding's examples are its first places.  Triage then judges a batch of those places, each
weighted by the elements it stands for, and finds what it finds on the whole tensor.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Optional

import numpy as np

from conformance.judge.gate import GateConfig, verdict
from conformance.metrics import exact as met
from conformance.records import MAX_EXAMPLES, Chunk, Finding, Offender, Row
from conformance.reference.quantized import QuantParams, exact_table, lookup, setting_text
from conformance.triage.quantized import QuantBatch, QuantClaim, code_distance, triage_quantized
from conformance.triage.quantized_layout import LAYOUT_MAX_CODES, claim_code_layout

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
    gated = not (within and config.allows(backend, claim.category, profile=profile))
    examples = tuple(Offender(int(batch.position(i)), batch.codes[i], None, batch.golden[i], batch.actual[i],
                              part=part)
                     for i in claim.index[:MAX_EXAMPLES])
    count = batch.count(claim.index)
    return Finding(claim.category, count, gated, claim.summary, dict(claim.detail), examples, None, count)


# ----------------------------------------------------------------------------- one pass over the chunks

_CLASSES = _CODES * _CODES  # (input code, output code) pairs: every quantized rule but a split tells them apart


@dataclass
class _Kept:
    """What one pass keeps, bounded whatever the tensor's size: the chunks' metrics, and per
    class of elements (input code, output code) how many there are, the first
    :data:`MAX_EXAMPLES` places and the last place."""

    metrics: list[met.Metrics] = field(default_factory=list)
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint16))  # the class of each first place
    where: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # the first places
    last: np.ndarray = field(default_factory=lambda: np.full(_CLASSES, -1, np.int64))
    count: np.ndarray = field(default_factory=lambda: np.zeros(_CLASSES, np.int64))


def _grouped(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A stable order of ``keys`` by class, each element's rank within its class in that order,
    and the place in that order where each class ends."""
    order = np.argsort(keys, kind="stable")  # a radix sort on uint16
    ordered = keys[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    bounds = np.concatenate([starts, [ordered.size]])
    rank = np.arange(ordered.size) - np.repeat(starts, np.diff(bounds))
    return order, rank, bounds[1:] - 1


def _keep_places(kept: _Kept, keys: np.ndarray, *, offset: int) -> None:
    """Count one chunk's classes (``keys``), keep their last places and the first places of all so far."""
    kept.count += np.bincount(keys, minlength=_CLASSES)
    order, rank, ends = _grouped(keys)
    kept.last[keys[order[ends]]] = order[ends] + offset
    first = order[rank < MAX_EXAMPLES]
    both_keys = np.concatenate([kept.keys, keys[first]])
    both_where = np.concatenate([kept.where, first + offset])  # earlier chunks first: a class's places ascend
    order, rank, _ = _grouped(both_keys)
    chosen = order[rank < MAX_EXAMPLES]
    kept.keys, kept.where = both_keys[chosen], both_where[chosen]


def _scan(chunk: Chunk, kept: _Kept, *, table: np.ndarray, params: QuantParams, part: str) -> None:
    """Metrics of one chunk, and its elements' classes and places kept."""
    golden = lookup(table, chunk.x, params=params)
    kept.metrics.append(code_metrics(chunk.actual, golden, params=params, part=part, offset=chunk.offset))
    lo = params.code_range[0]
    keys = ((chunk.x.astype(np.int64) - lo) * _CODES + (chunk.actual.astype(np.int64) - lo)).astype(np.uint16)
    _keep_places(kept, keys, offset=chunk.offset)


def _batch(kept: _Kept, *, alpha: float, params: QuantParams, table: np.ndarray, numel: int) -> QuantBatch:
    """A batch standing for the tensor, by flat index: each class's first places, one element
    each, and, for a class with more elements, its last place standing for the rest."""
    more = np.flatnonzero(kept.count > MAX_EXAMPLES)
    keys = np.concatenate([kept.keys.astype(np.int64), more])
    where = np.concatenate([kept.where, kept.last[more]])
    weight = np.concatenate([np.ones(kept.keys.size, np.int64), kept.count[more] - MAX_EXAMPLES])
    order = np.argsort(where, kind="stable")
    lo = params.code_range[0]
    codes = (keys[order] // _CODES + lo).astype(params.storage)
    actual = (keys[order] % _CODES + lo).astype(params.storage)
    return QuantBatch(codes, alpha, params, lookup(table, codes, params=params), actual,
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
               metrics, findings, verdict([f.gated for f in findings]), parts=(label,),
               shapes=((numel,) if shape is None else tuple(shape),))


def evaluate_codes(codes: np.ndarray, actual: np.ndarray, alpha: float, *, params: QuantParams,
                   backend: str, profile: Optional[str] = None, config: GateConfig,
                   label: str = "codes") -> Row:
    """Judge ``actual`` (the codes a backend computed from ``codes``) against the exact result."""
    flat, out = np.asarray(codes).reshape(-1), np.asarray(actual).reshape(-1)
    row = evaluate_code_chunks(lambda: [Chunk(0, flat, None, out)], numel=int(flat.size), alpha=alpha,
                               params=params, backend=backend, profile=profile, config=config, label=label,
                               shape=tuple(np.shape(codes)))
    return judged_whole(row, codes, actual, params=params, config=config, profile=profile, label=label)


def _unexplained(findings: Sequence[Finding]) -> int:
    return sum(f.count for f in findings if f.category == "unexplained")


def judged_whole(row: Row, codes: np.ndarray, actual: np.ndarray, *, params: QuantParams, config: GateConfig,
                 profile: Optional[str] = None, label: str = "codes") -> Row:
    """``row`` of ``actual`` (codes of ``codes``' shape), judged again on the whole tensor when its
    triage left codes unexplained: as output in another layout that the quantized rules explain
    in full, else with rules confined to a span of positions where they leave fewer codes
    unexplained.  Both need every code's place, which the chunked judge's bounded batch does not
    keep; a tensor over ``LAYOUT_MAX_CODES`` codes keeps ``row``."""
    if not _unexplained(row.findings):
        return row
    flat, out = np.asarray(codes).reshape(-1), np.asarray(actual).reshape(-1)
    if flat.size > LAYOUT_MAX_CODES:
        return row
    table = exact_table(row.alpha, params=params)
    batch = QuantBatch(flat, row.alpha, params, lookup(table, flat, params=params), out)
    claims = claim_code_layout(batch, tuple(np.shape(codes)))
    if claims is None:
        claims = [(c, batch) for c in triage_quantized(batch)]
        if _unexplained([_finding(c, b, backend=row.backend, profile=profile, config=config, part=label)
                         for c, b in claims]) >= _unexplained(row.findings):
            return row
    findings = tuple(_finding(c, b, backend=row.backend, profile=profile, config=config, part=label)
                     for c, b in claims)
    return replace(row, findings=findings, verdict=verdict([f.gated for f in findings]))
