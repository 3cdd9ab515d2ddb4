"""One backend result -> one judged row: golden, metrics, triage, gate.

``evaluate`` judges one input batch; ``merge_rows`` combines the batches of one
(backend, dtype, out_dtype, direction, alpha) into one row, exactly (counts are
summed, maxima maxed, cosine sums rescaled, findings merged by category).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import reduce
from typing import Any, Optional

import numpy as np

from conformance import categories
from conformance.dtypes import info
from conformance.records import BackendResult, TileLayout
from conformance.reference import golden as ref
from conformance.report import metrics as met
from conformance.report import plots as plotting
from conformance.report.gate import GateConfig, finding_allowed, verdict
from conformance.report.messages import MAX_EXAMPLES, Offender, failure_message
from conformance.report.summary import RowKey
from conformance.report.text import Shape
from conformance.report.triage import Batch, Claim, special_values, triage
from conformance.report.triage.sampling import SAMPLING

LayoutFn = Callable[[int], Optional[TileLayout]]
Values = Callable[[int], tuple[Any, Any, Any, Any]]  # flat index -> x, dy, expected, actual


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
class Row(RowKey):
    """The judged result for one (backend, dtype, out_dtype, direction, alpha)."""

    metrics: met.Metrics
    findings: tuple[Finding, ...]
    verdict: str
    parts: tuple[str, ...] = ()
    shapes: tuple[Shape, ...] = ()  # the shape of each part's input array, aligned with parts
    notes: tuple[str, ...] = ()  # what the reader of the row should know, e.g. a default slope was used
    plots: Optional[plotting.Plots] = None  # bounded counts the HTML report draws (None: no differences)

    def shape_of(self, part: str) -> Optional[Shape]:
        """The input shape of the batch labelled ``part`` (None when unknown)."""
        return dict(zip(self.parts, self.shapes)).get(part) if len(self.shapes) == len(self.parts) else None

    @property
    def message(self) -> str:
        """torch.testing-style failure text."""
        return failure_message(self)


# ----------------------------------------------------------------------------- findings

def _examples(claim: Claim, values: Values, *, layout: Optional[TileLayout], part: str,
              hazard_cores: dict[int, int]) -> tuple[Offender, ...]:
    out = []
    for i in (int(v) for v in claim.index[:MAX_EXAMPLES]):
        span = layout.locate(i) if layout is not None else None
        core = span.core if span is not None else hazard_cores.get(i)
        if not claim.in_tensor:
            out.append(Offender(i, None, None, None, None, core, None, part))
            continue
        out.append(Offender(i, *values(i), core, span.tile if span is not None else None, part))
    return tuple(out)


def _finding(claim: Claim, *, violations: int, backend: str, config: GateConfig,
             examples: tuple[Offender, ...], profile: Optional[str] = None) -> Finding:
    allowed = finding_allowed(claim.category, violations=violations, backend=backend,
                              config=config, profile=profile)
    return Finding(claim.category, claim.count, allowed, claim.summary, dict(claim.detail),
                   examples, None, violations)


Violating = Callable[[np.ndarray], np.ndarray]  # flat indices -> mask: outside tolerance


def _violations(claim: Claim, violating: Violating) -> int:
    """Elements of a claim outside tolerance (hazards always count in full)."""
    if not claim.in_tensor or claim.category == "write-race":
        return claim.count
    return int(violating(claim.index).sum())


def _batch_values(batch: Batch) -> Values:
    """Look up an element of ``batch`` by its index there."""
    def values(j: int) -> tuple[Any, Any, Any, Any]:
        dy = batch.dy[j] if batch.dy is not None else None
        return batch.x[j], dy, batch.golden[j], batch.actual[j]

    return values


def _judged(claims: Sequence[Claim], values: Values, *, violations: Sequence[int], backend: str,
            config: GateConfig, layout: Optional[TileLayout], part: str,
            hazard_cores: dict[int, int], profile: Optional[str] = None) -> tuple[Finding, ...]:
    return tuple(_finding(c, violations=v, backend=backend, config=config, profile=profile,
                          examples=_examples(c, values, layout=layout, part=part,
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
    allowed = config.allows(backend, "rejected-input", profile=profile)
    finding = Finding("rejected-input", n, allowed, f"backend refused the input: {result.rejected}",
                      {"reason": result.rejected}, (), None, n)
    return met.empty(elements=n), (finding,)


@dataclass(frozen=True)
class Chunk:
    """A flat piece of one tensor, in native byte order: inputs and the device's output."""

    offset: int  # flat index of the first element in the whole tensor
    x: np.ndarray
    dy: Optional[np.ndarray]
    actual: np.ndarray


@dataclass(frozen=True)
class _Context:
    """What every chunk of one row is judged with."""

    alpha: float
    direction: str
    out_dtype: str
    tolerance: met.Tolerance
    backend: str
    config: GateConfig
    label: str
    layout: Callable[[], Optional[TileLayout]]  # the whole tensor's plan, computed when needed
    profile: Optional[str] = None  # the policy entry backend[profile], when it has one
    shape: Optional[Shape] = None  # the whole tensor's N-D shape


def _lazy_layout(fixed: Optional[TileLayout], layout_fn: Optional[LayoutFn], *,
                 numel: int) -> Callable[[], Optional[TileLayout]]:
    @functools.cache
    def layout() -> Optional[TileLayout]:
        return fixed if fixed is not None else layout_fn(numel) if layout_fn is not None else None

    return layout


def _head(x_dtype: Any, alpha: float, *, out_dtype: Optional[str], direction: str, backend: str,
          profile: Optional[str], variant: Optional[str], label: str, shape: Shape) -> dict:
    """The Row fields every evaluation fills the same way; ``shape`` shapes the shown indices."""
    src, out = ref.resolve_pair(x_dtype, out_dtype)
    return dict(backend=backend, profile=profile, variant=variant, dtype=src.name,
                out_dtype=out.name, direction=direction, alpha=ref.check_alpha(alpha), parts=(label,),
                shapes=(tuple(int(d) for d in shape),))


def evaluate(x: np.ndarray, alpha: float, result: BackendResult, *, direction: str,
             dy: Optional[np.ndarray] = None, out_dtype: Optional[str] = None, backend: str,
             profile: Optional[str] = None, variant: Optional[str] = None,
             config: GateConfig, label: str = "", layout_fn: Optional[LayoutFn] = None,
             shape: Optional[Shape] = None, golden: Optional[np.ndarray] = None) -> Row:
    """Judge one backend result against the exact reference.

    ``shape`` is the shape the reported indices are shown in: by default x's own;
    pass the whole array's shape when x is a flat chunk whose indices are global.
    ``golden`` is the exact reference of these inputs when the caller already has it
    (flat, of the output dtype; a sweep computes it once for all its backends).
    """
    x = np.asarray(x)
    head = _head(x.dtype, alpha, out_dtype=out_dtype, direction=direction, backend=backend,
                 profile=profile, variant=variant, label=label, shape=x.shape if shape is None else shape)
    head["notes"] = tuple(result.notes)
    if result.rejected is not None:
        metrics, findings = _rejected(x, result, backend=backend, config=config, profile=profile)
        return Row(**head, metrics=metrics, findings=findings, verdict=verdict([f.allowed for f in findings]))
    dy_flat = None if dy is None else np.asarray(dy).reshape(-1)
    actual = _actual(result, numel=x.size, out_dtype=head["out_dtype"])
    expected = golden if golden is not None else ref.compute(direction, x.reshape(-1), head["alpha"],
                                                             dy=dy_flat, out_dtype=head["out_dtype"])
    comp = met.compare(actual, expected, tolerance=config.tolerance(head["out_dtype"]), part=label)
    findings: tuple[Finding, ...] = ()
    plots = None
    if comp.mismatch_index.size or result.hazards:
        layout = result.layout if result.layout is not None else (
            layout_fn(x.size) if layout_fn is not None else None)
        batch = Batch(x.reshape(-1), dy_flat, head["alpha"], direction, head["out_dtype"],
                      expected, actual, shape=head["shapes"][0])
        claims = triage(batch, mismatches=comp.mismatch_index, hazards=result.hazards, layout=layout)
        bad = np.zeros(x.size, dtype=bool)
        bad[comp.mismatch_index[comp.violating]] = True
        findings = _judged(claims, _batch_values(batch),
                           violations=[_violations(c, lambda index: bad[index]) for c in claims],
                           backend=backend, config=config, layout=layout, part=label, profile=profile,
                           hazard_cores={h.index: h.cores[0] for h in result.hazards if h.cores})
        plots = plotting.measure(claims, batch, layout=layout, shape=head["shapes"][0], part=label)
    return Row(**head, metrics=comp.metrics, findings=findings, plots=plots,
               verdict=verdict([f.allowed for f in findings]))


Reader = Callable[[], Iterable[Chunk]]  # the tensor's chunks, in order, each time it is called


@dataclass(frozen=True)
class _Kept:
    """Elements of one chunk kept for triage: where they are in the tensor (ascending) and
    their values."""

    where: np.ndarray
    x: np.ndarray
    dy: Optional[np.ndarray]
    golden: np.ndarray
    actual: np.ndarray


@dataclass(frozen=True)
class _Scan:
    """One chunk after golden and metrics: its mismatches and a sample of its matching
    elements (the evidence), with what each sampled element stands for."""

    metrics: met.Metrics
    mismatches: _Kept
    violating: np.ndarray  # bool, aligned with the mismatches
    evidence: _Kept
    weight: np.ndarray  # float64, aligned with the evidence


def _stride_sample(index: np.ndarray, *, most: int) -> tuple[np.ndarray, float]:
    """At most ``most`` of ``index``, evenly spaced (deterministic), and the weight of each."""
    if index.size <= most:
        return index, 1.0
    step = -(-index.size // most)
    kept = index[::step]
    return kept, index.size / kept.size


def _kept(chunk: Chunk, expected: np.ndarray, index: np.ndarray, *, where: np.dtype,
          values: tuple[Optional[np.ndarray], Optional[np.ndarray]] = (None, None)) -> _Kept:
    """The elements ``index`` of a chunk; ``values``: golden and actual there, when at hand."""
    golden, actual = values
    return _Kept((index + chunk.offset).astype(where, copy=False), chunk.x[index],
                 None if chunk.dy is None else chunk.dy[index],
                 expected[index] if golden is None else golden,
                 chunk.actual[index] if actual is None else actual)


def _evidence(chunk: Chunk, expected: np.ndarray, mismatches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stride sample of the chunk's matching elements, special values and plain ones
    apart (local indices, ascending), and what each stands for."""
    matching = np.ones(chunk.x.size, dtype=bool)
    matching[mismatches] = False
    others = np.flatnonzero(matching)
    special = special_values(chunk.x[others], expected[others], None if chunk.dy is None else chunk.dy[others])
    spec, w_spec = _stride_sample(others[special], most=SAMPLING.chunk_special)
    plain, w_plain = _stride_sample(others[~special], most=SAMPLING.chunk_plain)
    keep = np.concatenate([spec, plain])
    weight = np.concatenate([np.full(spec.size, w_spec), np.full(plain.size, w_plain)])
    order = np.argsort(keep, kind="stable")
    return keep[order], weight[order]


def _scan(chunk: Chunk, ctx: _Context, *, where: np.dtype) -> _Scan:
    """Golden and metrics of one chunk, and the elements triage keeps (``where``: the
    dtype of their flat indices)."""
    expected = ref.compute(ctx.direction, chunk.x, ctx.alpha, dy=chunk.dy, out_dtype=ctx.out_dtype)
    comp = met.compare(chunk.actual, expected, tolerance=ctx.tolerance, part=ctx.label,
                       offset=chunk.offset)
    evidence, weight = _evidence(chunk, expected, comp.mismatch_index)
    mismatches = _kept(chunk, expected, comp.mismatch_index, where=where, values=(comp.golden, comp.actual))
    return _Scan(comp.metrics, mismatches, comp.violating, _kept(chunk, expected, evidence, where=where), weight)


def _joined(parts: list[dict], name: str) -> Optional[np.ndarray]:
    """One field of every part, joined; each part's field is dropped as it is read (memory)."""
    pieces = [p.pop(name) for p in parts]
    return None if pieces[0] is None else np.concatenate(pieces)


def _reduced(scans: list[_Scan], ctx: _Context, *, numel: int) -> tuple[Batch, np.ndarray, np.ndarray]:
    """Every chunk's kept elements as one batch standing for the tensor, its mismatches
    first (so they are the batch's first positions and need no weights), then the
    evidence; the batch positions of the mismatches, and which are outside tolerance.
    Empties ``scans``, one field at a time, so the pieces are freed as they are joined."""
    parts = [dict(vars(s.mismatches)) for s in scans] + [dict(vars(s.evidence)) for s in scans]
    violating = np.concatenate([s.violating for s in scans])
    weight = np.concatenate([s.weight for s in scans])
    scans.clear()
    where, x, dy = _joined(parts, "where"), _joined(parts, "x"), _joined(parts, "dy")
    golden, actual = _joined(parts, "golden"), _joined(parts, "actual")
    batch = Batch(x, dy, ctx.alpha, ctx.direction, ctx.out_dtype, golden, actual,
                  where=where, numel=numel, weight=weight, shape=ctx.shape)
    return batch, np.arange(violating.size), violating


def _mismatch_findings(scans: list[_Scan], ctx: _Context, *, numel: int,
                       shape: Shape) -> tuple[tuple[Finding, ...], Optional[plotting.Plots]]:
    """Triage of every mismatch of the tensor at once, on a batch of the mismatches and a
    weighted sample of the matching elements (the evidence a rule is contradicted by);
    ``tail-block`` is judged on the whole tensor's plan and size.  Also the row's plot data."""
    batch, mismatches, violating = _reduced(scans, ctx, numel=numel)
    claims = triage(batch, mismatches=mismatches, layout=ctx.layout())
    del mismatches
    plots = plotting.measure(claims, batch, layout=ctx.layout(), shape=shape, part=ctx.label)
    counts = [_violations(c, lambda index: violating[index]) for c in claims]
    where = batch.where[:violating.size]  # the mismatches' flat indices, ascending
    values = _batch_values(batch)
    claims = [replace(c, index=where[c.index[:MAX_EXAMPLES]]) for c in claims]  # only examples are read on
    return _judged(claims, lambda i: values(int(np.searchsorted(where, where.dtype.type(i)))),  # no int64 copy
                   violations=counts, backend=ctx.backend, config=ctx.config, profile=ctx.profile,
                   layout=ctx.layout(), part=ctx.label, hazard_cores={}), plots


def evaluate_chunks(read: Reader, *, numel: int, dtype: Any, alpha: float, direction: str,
                    out_dtype: str, backend: str, config: GateConfig,
                    profile: Optional[str] = None, label: str = "",
                    layout_fn: Optional[LayoutFn] = None, shape: Optional[Shape] = None,
                    advance: Callable[[int], None] = lambda n: None) -> Row:
    """Judge a tensor of ``numel`` elements that ``read()`` gives as consecutive flat chunks.

    One pass computes golden and the metrics chunk by chunk (merged exactly by
    ``metrics.merge``) and keeps the mismatching elements plus a weighted stride sample of
    the matching ones.  Triage then judges all mismatches as one batch, as :func:`evaluate`
    would, with the sample as the evidence that contradicts a rule; ``tail-block`` is judged
    on the whole tensor's tiling plan.  ``advance(n)`` is told of each chunk done."""
    head = _head(dtype, alpha, out_dtype=out_dtype, direction=direction, backend=backend,
                 profile=profile, variant=None, label=label, shape=(numel,) if shape is None else shape)
    ctx = _Context(head["alpha"], direction, head["out_dtype"], config.tolerance(head["out_dtype"]),
                   backend, config, label, _lazy_layout(None, layout_fn, numel=numel), profile,
                   head["shapes"][0])
    where = np.dtype(np.int32 if numel <= np.iinfo(np.int32).max else np.int64)
    scans = []
    for chunk in read():
        scans.append(_scan(chunk, ctx, where=where))
        advance(int(chunk.x.size))
    metrics = reduce(met.merge, (s.metrics for s in scans)) if scans else met.empty()
    findings, plots = _mismatch_findings(scans, ctx, numel=numel, shape=head["shapes"][0]) \
        if metrics.mismatches else ((), None)
    return Row(**head, metrics=metrics, findings=findings, plots=plots,
               verdict=verdict([f.allowed for f in findings]))


# ----------------------------------------------------------------------------- merge

#: Across batches, ``confirmed_by_inf`` keeps the first batch's value: whether some batch
#: refutes a saturation is judged on every batch's own value (``_saturation_refuted``)
#: before the findings merge, and the merged detail reports the first batch's.
_KEEP_FIRST = frozenset({"confirmed_by_inf"})


def _merge_two(a: Finding, b: Finding) -> Finding:
    return replace(a, count=a.count + b.count, violations=a.violations + b.violations,
                   detail=categories.merge_detail(a.detail, b.detail, keep_first=_KEEP_FIRST),
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


def merge_findings(rows: Sequence[Row], *, backend: str, config: GateConfig,
                   profile: Optional[str] = None) -> tuple[Finding, ...]:
    """Findings of several batches merged by category, in the triage order."""
    refuted = _saturation_refuted(rows)
    by_cat: dict[str, Finding] = {}
    for finding in (f for r in rows for f in r.findings):
        if refuted and finding.category == "saturation" and "limit" not in finding.detail:  # a clamp is proved
            finding = _relabel_unconfirmed(finding)
        prev = by_cat.get(finding.category)
        by_cat[finding.category] = finding if prev is None else _merge_two(prev, finding)
    merged = [by_cat[c] for c in categories.ordered(by_cat)]  # an unknown name raises
    return tuple(replace(f, allowed=finding_allowed(f.category, violations=f.violations,
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
    return replace(first, metrics=reduce(met.merge, (r.metrics for r in rows)),
                   findings=findings, verdict=verdict([f.allowed for f in findings]),
                   plots=reduce(plotting.merge, (r.plots for r in rows)),
                   parts=tuple(p for r in rows for p in r.parts),
                   shapes=tuple(s for r in rows for s in r.shapes)
                   if all(len(r.shapes) == len(r.parts) for r in rows) else ())
