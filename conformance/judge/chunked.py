"""A tensor judged a chunk at a time: ``conformance compare`` on a dump of any size.

One pass computes golden and the metrics chunk by chunk (merged exactly by
``metrics.exact.merge``) and keeps every mismatching element plus a weighted stride sample of
the matching ones (the evidence a rule is contradicted by).  Triage then judges all
mismatches as one batch, as :func:`conformance.judge.evaluate.evaluate` would.

The kept elements are written where the batch holds them: columns reserved for the whole
tensor (memory is taken only by what is written), the mismatches first, the evidence
after them, so that joining the chunks copies nothing.  With the compiled paths
(:mod:`conformance.jit`, :mod:`.scan_loops`) the next chunks are read and their golden
computed on a reader thread while one is judged (:mod:`conformance.metrics.chunk_pipeline`;
the golden splits the first chunk a range per thread itself): a first pass finds the chunk's
mismatches, its special matching elements and the NaN and infinities both sides hold, and
adds up its cosine sums; a second writes the mismatches and judges them, counting what other
tools' checks say of them (float32 and float64 outputs; :mod:`.other_checks`), a range per
thread, and the evidence's plain elements are picked meanwhile; the numpy path
(:func:`numpy_scan`) stays the model the compiled one is tested against, and gives the same
bits.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import reduce
from typing import Any, NamedTuple, Optional, TypeVar

import numpy as np

from conformance import jit
from conformance.dtypes import from_bits, info, to_bits, widened_patterns
from conformance.judge import other_checks
from conformance.judge import plots as plotting
from conformance.judge.evaluate import PlanFn, batch_values, judged, row_head, violations_of
from conformance.judge.gate import GateConfig, verdict
from conformance.metrics import chunk_golden, chunk_pipeline, first_pass
from conformance.metrics import exact as met
from conformance.records import MAX_EXAMPLES, Chunk, Finding, Metrics, OtherCheck, Row, Shape, TilePlan, Tolerance
from conformance.reference import golden as ref
from conformance.triage import Batch, special_values, triage
from conformance.triage.sampling import SAMPLING

__all__ = ["Kept", "Reader", "evaluate_chunks", "numpy_scan"]

T = TypeVar("T")
Reader = Callable[[], Iterable[Chunk]]  # the tensor's chunks, in order, each time it is called
RESERVED = 1 << 28  # elements a column reserves at most at first; a larger tensor's grow as needed
SPLIT = 1 << 16  # mismatches of a chunk judged on one thread at least (fewer: not worth a thread)


@dataclass(frozen=True)
class _Context:
    """What every chunk of one row is judged with."""

    alpha: float
    direction: str
    out_dtype: str
    tolerance: Tolerance
    backend: str
    config: GateConfig
    label: str
    tile_plan: Callable[[], Optional[TilePlan]]  # the whole tensor's plan, computed when needed
    profile: Optional[str] = None  # the policy entry backend[profile], when it has one
    shape: Optional[Shape] = None  # the whole tensor's N-D shape


def _lazy_plan(plan_fn: Optional[PlanFn], *, numel: int) -> Callable[[], Optional[TilePlan]]:
    @functools.cache
    def tile_plan() -> Optional[TilePlan]:
        return plan_fn(numel) if plan_fn is not None else None

    return tile_plan


# ----------------------------------------------------------------------------- what is kept

_FIELDS = ("where", "x", "dy", "golden", "actual", "violating")


class Kept:
    """The kept elements of a tensor's chunks, one column per field (``violating`` for the
    mismatches only), written in place: each column is reserved for the whole tensor up to
    ``RESERVED`` elements (unwritten pages take no memory) and grows past that only."""

    def __init__(self, chunk: Chunk, *, numel: int, where: np.dtype) -> None:
        self.most, self.size = numel + 1, 0  # the compiled scan writes one place past what it keeps
        size = min(self.most, RESERVED)
        x, out = chunk.x.dtype, chunk.actual.dtype
        dtypes = (where, x, None if chunk.dy is None else x, out, out, np.dtype(bool))
        self.columns = {name: None if d is None else np.empty(size, d) for name, d in zip(_FIELDS, dtypes)}
        self.tally: Optional[plotting.Tally] = None  # what the compiled scan counted of the mismatches
        self.shared = np.zeros(2, dtype=np.int64)  # matching elements that are NaN, that are an infinity
        self.checks: Optional[np.ndarray] = None  # other tools' checks counted by the compiled scan

    def reserve(self, k: int) -> None:
        """Room for ``k`` more elements."""
        room = self.columns["x"].size
        if self.size + k <= room:
            return
        grown = min(max(self.size + k, 2 * room), self.most)
        for name, col in self.columns.items():
            if col is not None:
                self.columns[name] = np.empty(grown, col.dtype)
                self.columns[name][:self.size] = col[:self.size]

    def append(self, values: dict[str, Optional[np.ndarray]]) -> None:
        """Write ``values`` (a field's array, or None) after the kept elements."""
        k = int(values["x"].size)
        self.reserve(k)
        for name, v in values.items():
            if v is not None and self.columns[name] is not None:
                self.columns[name][self.size:self.size + k] = v
        self.size += k

    def column(self, name: str) -> Optional[np.ndarray]:
        col = self.columns[name]
        return None if col is None else col[:self.size]


@dataclass(frozen=True)
class _Sample:
    """One chunk's evidence: a stride sample of its matching elements, what each stands for."""

    values: dict  # the Kept fields but ``violating``
    weight: np.ndarray  # float64


def _stride(count: int, *, most: int) -> tuple[int, int, float]:
    """Every how-many-th of ``count`` elements a stride sample of at most ``most`` takes, how
    many that is, and the weight of each."""
    if count <= most:
        return 1, count, 1.0
    step = -(-count // most)
    kept = -(-count // step)
    return step, kept, count / kept


def _sample(chunk: Chunk, expected: np.ndarray, index: np.ndarray, weight: np.ndarray, *,
            where: np.dtype) -> _Sample:
    values = {"where": (index + chunk.offset).astype(where, copy=False), "x": chunk.x[index],
              "dy": None if chunk.dy is None else chunk.dy[index], "golden": expected[index],
              "actual": chunk.actual[index]}
    return _Sample(values, weight)


# ----------------------------------------------------------------------------- the scan of a chunk

def numpy_scan(chunk: Chunk, expected: np.ndarray, ctx: _Context, kept: Kept) -> tuple[Metrics, _Sample]:
    """The numpy path: the chunk compared (``metrics.compare``), its mismatches written to
    ``kept``, a stride sample of its matching elements, special values and plain ones apart."""
    comp = met.compare(chunk.actual, expected, tolerance=ctx.tolerance, part=ctx.label, offset=chunk.offset)
    index = comp.mismatch_index
    kept.shared += np.subtract(other_checks.specials(expected), other_checks.specials(expected[index]))
    if index.size:
        kept.append({"where": index + chunk.offset, "x": chunk.x[index],
                     "dy": None if chunk.dy is None else chunk.dy[index],
                     "golden": comp.golden, "actual": comp.actual, "violating": comp.violating})
    matching = np.ones(chunk.x.size, dtype=bool)
    matching[index] = False
    others = np.flatnonzero(matching)
    special = special_values(chunk.x[others], expected[others], None if chunk.dy is None else chunk.dy[others])
    evidence = _evidence(others[special], others[~special])
    return comp.metrics, _sample(chunk, expected, *evidence, where=kept.columns["where"].dtype)


def _evidence(special: np.ndarray, plain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stride sample of a chunk's matching elements, special values and plain ones apart
    (local indices, ascending), and what each stands for."""
    (special_step, _, special_weight), (plain_step, _, plain_weight) = _strides(special.size, plain.size)
    return _joined(special[::special_step], special_weight, plain[::plain_step], plain_weight)


def _strides(special: int, plain: int) -> tuple[tuple[int, int, float], tuple[int, int, float]]:
    """:func:`_stride` of a chunk's special and plain matching elements."""
    return _stride(special, most=SAMPLING.chunk_special), _stride(plain, most=SAMPLING.chunk_plain)


def _joined(special: np.ndarray, special_weight: float, plain: np.ndarray,
            plain_weight: float) -> tuple[np.ndarray, np.ndarray]:
    """The picked special and plain elements in one ascending list, with their weights."""
    keep = np.concatenate([special, plain])
    weight = np.concatenate([np.full(special.size, special_weight), np.full(plain.size, plain_weight)])
    order = np.argsort(keep, kind="stable")
    return keep[order], weight[order]


class _Masks(NamedTuple):
    """The output format's magnitude, exponent and mantissa masks; x's sign, mantissa and
    exponent masks and its exponent's shift (the mantissa's bits), in x's bits' type."""

    out: tuple[int, int, int]
    x_sign: Any
    x_mant: Any
    x_exp: Any
    x_shift: Any


def _operands(chunk: Chunk, expected: np.ndarray) -> tuple[Any, _Masks]:
    """The chunk's bits as the compiled scan reads them (``scan_loops.ChunkBits``), and its masks."""
    from conformance.metrics._compiled.scan_loops import ChunkBits  # numba

    out, src = info(chunk.actual.dtype), info(chunk.x.dtype)
    xb = to_bits(chunk.x)
    nothing = np.empty(0, dtype=np.float64)
    native = out.bits > 16
    bits = ChunkBits(xb, to_bits(chunk.dy) if chunk.dy is not None else np.empty(0, xb.dtype),
                     to_bits(chunk.actual), to_bits(expected), chunk.actual if native else nothing,
                     expected if native else nothing, nothing if native else widened_patterns(out.name))
    kind = xb.dtype.type
    return ChunkBits(*map(jit.read_only, bits)), _Masks(_masks(out), kind(src.sign_mask), kind(src.mant_mask),
                                                         kind(src.exp_mask), kind(src.mant_bits))


def _masks(rec: Any) -> tuple[int, int, int]:
    from conformance.ulp_loops import masks

    return masks(rec.uint.type, bits=rec.bits, mant_bits=rec.mant_bits)


def compiled_scan(chunk: Chunk, expected: np.ndarray, ctx: _Context, kept: Kept,
                  room: first_pass.Room) -> tuple[Metrics, _Sample]:
    """:func:`numpy_scan` in compiled passes (the same metrics, kept elements and sample):
    one finds the mismatches (:mod:`conformance.metrics.first_pass`), a second judges them,
    each split by ranges over threads, while the evidence's plain elements are picked."""
    from conformance.metrics._compiled import metric_loops  # numba, imported on the first compiled call

    bits, masks = _operands(chunk, expected)
    kept.reserve(chunk.actual.size + 1)  # the scan writes one place past the mismatches
    kept.tally = kept.tally or plotting.Tally(chunk.x.dtype, chunk.actual.dtype)
    start = kept.size
    golden = chunk_golden.scan_golden(chunk, expected, direction=ctx.direction, alpha=ctx.alpha,
                                      out_dtype=ctx.out_dtype)
    end, top, kinds, sums = first_pass.find(bits, golden, offset=chunk.offset, where=kept.columns["where"],
                                            start=start, room=room, masks=(*masks.out, masks.x_exp))
    kept.shared += kinds[2:]
    evidence = functools.partial(_compiled_evidence, kept.columns["where"], start, end, chunk.offset, room.at, kinds)
    best, counts, picked = _judged(bits, masks, kept, ctx.tolerance, offset=chunk.offset, lo=start, hi=end,
                                   meanwhile=evidence)
    k, kept.size = end - start, end
    kept.tally.count += k
    top = float(from_bits([int(top)], chunk.actual.dtype)[0])  # the largest finite magnitude
    metrics = met.loop_metrics(metric_loops.maxima(best), counts,
                               elements=int(chunk.actual.size), mismatches=k, part=ctx.label, offset=chunk.offset,
                               cosine=met.scaled_cosine([float(s) for s in sums], top, chunk.actual, expected))
    return metrics, _sample(chunk, expected, *picked, where=kept.columns["where"].dtype)


def _judged(bits: Any, masks: _Masks, kept: Kept, tol: Tolerance, *, offset: int, lo: int, hi: int,
            meanwhile: Callable[[], T]) -> tuple[tuple, list[int], T]:
    """The second pass over the mismatches ``lo:hi`` the first pass found, a range per thread,
    each with its own counts, bins and classes, merged exactly into the tally: the maxima (the
    first index wins a tie), the eight counts, and what ``meanwhile()`` gave (run on the calling
    thread before its range)."""
    from conformance.metrics._compiled import (
        metric_loops,
        scan_loops,  # numba, imported on the first compiled call
    )

    tally = kept.tally
    assert tally is not None
    cols = {name: None if c is None else to_bits(c) if name in ("x", "dy", "golden", "actual") else c
            for name, c in kept.columns.items()}
    out = scan_loops.KeptColumns(cols["where"], cols["x"], cols["dy"] if cols["dy"] is not None
                                 else np.empty(0, bits.x.dtype), cols["golden"], cols["actual"], cols["violating"])
    judging = scan_loops.Judging(tol.rtol, tol.atol, tol.max_ulp, tol.strict_zeros, *masks.out, masks.x_sign,
                                 masks.x_mant, masks.x_exp, masks.x_shift)
    closeness = _closeness(bits.actual_values.dtype, checked=kept.checks is not None)

    def part(a: int, b: int) -> tuple[tuple, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        counts, bins, classes = np.zeros(8, np.int64), np.zeros_like(tally.ulp), np.zeros_like(tally.classes)
        checks = np.zeros(0 if kept.checks is None else kept.checks.size, np.int64)
        best = scan_loops.judge_range(bits, offset, out, a, b, counts, bins, classes, judging, checks, closeness)
        return best, counts, bins, classes, checks

    mine, *others = jit.ranges(lo, hi, least=SPLIT)
    (done, first), *rest = jit.in_parallel([lambda: (meanwhile(), part(*mine)),
                                            *(functools.partial(part, a, b) for a, b in others)])
    parts = [first, *rest]
    for _, _, bins, classes, checks in parts:
        tally.ulp += bins
        tally.classes += classes
        if kept.checks is not None:
            kept.checks[:-1] += checks[:-1]  # counts; the last is the largest absolute error's bits
            kept.checks[-1] = max(kept.checks[-1], checks[-1])
    best = reduce(metric_loops.merged, [p[0] for p in parts])
    return best, [int(c) for c in sum(p[1] for p in parts)], done


@functools.cache
def _closeness(values: np.dtype, *, checked: bool) -> Any:
    """The tolerances the compiled scan counts other tools' checks by, in the output's dtype
    (float64 zeros, never read, when it counts none)."""
    from conformance.metrics._compiled.check_loops import Closeness  # numba, imported on the first compiled call

    if not checked:
        return Closeness(*np.zeros(len(Closeness._fields)))
    return Closeness(*other_checks.loop_tolerances(values.name))


def _compiled_evidence(where: np.ndarray, lo: int, hi: int, offset: int, special_at: np.ndarray,
                       kinds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_evidence` of a chunk the compiled scan read: its mismatches ``where[lo:hi]``
    (flat), its special matching elements (local), and how many are special and plain."""
    from conformance.metrics._compiled import scan_loops  # numba, imported on the first compiled call

    n_special, n_plain = int(kinds[0]), int(kinds[1])
    (special_step, _, special_weight), (plain_step, plain_count, plain_weight) = _strides(n_special, n_plain)
    plain = np.empty(plain_count, dtype=np.int64)
    scan_loops.plain_picks(where, lo, hi, offset, special_at, n_special, plain_step, plain)
    return _joined(special_at[:n_special][::special_step], special_weight, plain, plain_weight)


# ----------------------------------------------------------------------------- the tensor

def _reduced(kept: Kept, samples: list[_Sample], ctx: _Context, *,
             numel: int) -> tuple[Batch, np.ndarray, np.ndarray]:
    """The kept elements as one batch standing for the tensor, its mismatches first (so
    they are the batch's first positions and need no weights), then the evidence; the
    batch positions of the mismatches, and which are outside tolerance."""
    mismatches = kept.size
    for s in samples:
        kept.append(s.values)
    violating = kept.columns["violating"][:mismatches]
    weight = np.concatenate([s.weight for s in samples])
    batch = Batch(kept.column("x"), kept.column("dy"), ctx.alpha, ctx.direction, ctx.out_dtype,
                  kept.column("golden"), kept.column("actual"), where=kept.column("where"), numel=numel,
                  weight=weight, shape=ctx.shape)
    return batch, _positions(mismatches), violating


def _positions(n: int) -> np.ndarray:
    """``np.arange(n)``; compiled, a range per thread."""
    if not jit.enabled() or n < SPLIT:
        return np.arange(n)
    from conformance.metrics._compiled import scan_loops  # numba, imported on the first compiled call

    out = np.empty(n, dtype=np.int64)
    jit.in_parallel([functools.partial(scan_loops.count_into, out, lo, hi) for lo, hi in jit.ranges(0, n, least=SPLIT)])
    return out


def _violating_at(violating: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Which of the mismatches ``index`` are outside tolerance.  Claims split the mismatches
    (each goes to one), so an index as long as they are holds every one: no gather."""
    return violating if index.size == violating.size else violating[index]


def _mismatch_findings(kept: Kept, samples: list[_Sample], ctx: _Context, *, numel: int,
                       shape: Shape, plots: bool) -> tuple[tuple[Finding, ...], Optional[plotting.Plots]]:
    """Triage of every mismatch of the tensor at once, on a batch of the mismatches and a
    weighted sample of the matching elements (the evidence a rule is contradicted by);
    ``tail-block`` is judged on the whole tensor's plan and size.  Also the row's plot data
    (``plots``; None without)."""
    batch, mismatches, violating = _reduced(kept, samples, ctx, numel=numel)
    claims = triage(batch, mismatches=mismatches, tile_plan=ctx.tile_plan())
    del mismatches
    drawn = plotting.measure(claims, batch, tile_plan=ctx.tile_plan(), shape=shape, part=ctx.label,
                             tally=kept.tally) if plots else None
    counts = [violations_of(c, functools.partial(_violating_at, violating)) for c in claims]
    where = batch.where[:violating.size]  # the mismatches' flat indices, ascending
    values = batch_values(batch)
    claims = [replace(c, index=where[c.index[:MAX_EXAMPLES]]) for c in claims]  # only examples are read on
    return judged(claims, lambda i: values(int(np.searchsorted(where, where.dtype.type(i)))),  # no int64 copy
                  violations=counts, backend=ctx.backend, config=ctx.config, profile=ctx.profile,
                  tile_plan=ctx.tile_plan(), part=ctx.label, hazard_cores={}), drawn


class _Judge:
    """The scan of each chunk of one row, into the kept elements of the whole tensor."""

    def __init__(self, ctx: _Context, *, numel: int) -> None:
        self.ctx, self.numel = ctx, numel
        self.where = np.dtype(np.int32 if numel <= np.iinfo(np.int32).max else np.int64)
        self.scratch = first_pass.Room() if jit.enabled() else None
        self.kept: Optional[Kept] = None

    def __call__(self, chunk: Chunk, expected: np.ndarray) -> tuple[Metrics, _Sample]:
        if self.kept is None:
            self.kept = Kept(chunk, numel=self.numel, where=self.where)
            if self.scratch is not None and info(chunk.actual.dtype).name in other_checks.LOOP_DTYPES:
                from conformance.metrics._compiled.check_loops import COUNTS  # numba

                self.kept.checks = np.zeros(len(COUNTS), dtype=np.int64)
        if self.scratch is None:
            return numpy_scan(chunk, expected, self.ctx, self.kept)
        return compiled_scan(chunk, expected, self.ctx, self.kept, self.scratch)


def evaluate_chunks(read: Reader, *, numel: int, dtype: Any, alpha: float, direction: str,
                    out_dtype: str, backend: str, config: GateConfig,
                    profile: Optional[str] = None, label: str = "",
                    plan_fn: Optional[PlanFn] = None, shape: Optional[Shape] = None,
                    advance: Callable[[int], None] = lambda n: None, plots: bool = True) -> Row:
    """Judge a tensor of ``numel`` elements that ``read()`` gives as consecutive flat chunks:
    the chunks' golden, metrics and kept elements, then triage of all the mismatches as one
    batch; ``tail-block`` is judged on the whole tensor's tiling plan.  ``advance(n)`` is
    told of each chunk done; ``plots``: keep what the HTML report draws (``judge.plots``).
    With the compiled paths and more than one thread, the next chunks are read and their
    golden computed while one is judged (:mod:`.chunk_pipeline`)."""
    head = row_head(dtype, alpha, out_dtype=out_dtype, direction=direction, backend=backend,
                    profile=profile, variant=None, label=label, shape=(numel,) if shape is None else shape)
    ctx = _Context(head["alpha"], direction, head["out_dtype"], config.tolerance(head["out_dtype"]),
                   backend, config, label, _lazy_plan(plan_fn, numel=numel), profile, head["shapes"][0])
    judge = _Judge(ctx, numel=numel)
    goldens = chunk_golden.Goldens(direction=ctx.direction, alpha=ctx.alpha, out_dtype=ctx.out_dtype)
    metrics, samples = [], []
    judged = chunk_pipeline.read_ahead(read(), golden=goldens, judge=judge,
                                       ahead=judge.scratch is not None and jit.threads() > 1)
    with contextlib.closing(judged):  # on an error or Ctrl-C here, the chunks not begun are cancelled
        for chunk, (m, s) in judged:
            metrics.append(m)
            samples.append(s)
            advance(int(chunk.x.size))
    goldens.clear()  # triage's memory
    kept = judge.kept
    total = reduce(met.merge, metrics) if metrics else met.empty()
    checks = _other_checks(kept, metrics=total, out_dtype=ctx.out_dtype)
    findings, drawn = _mismatch_findings(kept, samples, ctx, numel=numel, shape=head["shapes"][0], plots=plots) \
        if total.mismatches and kept is not None else ((), None)
    return Row(**head, metrics=total, findings=findings, plots=drawn, other_checks=checks,
               verdict=verdict([f.gated for f in findings]))


def _other_checks(kept: Optional[Kept], *, metrics: Metrics, out_dtype: str) -> tuple[OtherCheck, ...]:
    """Other tools' checks of the whole tensor: on its mismatches (counted by the compiled scan,
    else on the kept elements, before the evidence is added) and the NaN and infinities the
    matching elements hold."""
    if kept is None:
        return ()
    nan_both, inf_both = (int(n) for n in kept.shared)
    if kept.checks is None:
        counts = other_checks.mismatch_tally(kept.column("actual"), kept.column("golden"), nan_both=nan_both,
                                             inf_both=inf_both)
    else:
        top = float(from_bits([int(kept.checks[-1])], kept.columns["actual"].dtype)[0])
        counts = other_checks.loop_tally(kept.checks, max_abs=top, nan_both=nan_both, inf_both=inf_both)
    return other_checks.decided(counts, out_dtype=out_dtype, metrics=metrics)


def warm() -> None:
    """Compile (or load) the chunk scan for every dtype pair the golden runs, forward and
    backward, on chunks read from a file (read-only) and given in memory (writable)."""
    from conformance.metrics._compiled import scan_loops  # numba
    from conformance.reference.golden import SUPPORTED_PAIRS
    from conformance.triage._compiled import slope_loops  # numba: the triage of a large batch's slopes

    slope_loops.warm()
    scan_loops.count_into(np.empty(2, dtype=np.int64), 0, 2)  # a large tensor's mismatch positions (_positions)
    for (name, out), direction, writable in ((p, d, w) for p in sorted(SUPPORTED_PAIRS)
                                             for d in ("forward", "backward") for w in (True, False)):
        x = np.linspace(-3, 3, 8).astype(info(name).dtype)
        x.setflags(write=writable)
        dy = None if direction == "forward" else x
        actual = ref.compute(direction, x, 0.01, dy=dy, out_dtype=out)
        actual.setflags(write=writable)
        evaluate_chunks(lambda x=x, dy=dy, a=actual: [Chunk(0, x, dy, a)], numel=x.size, dtype=x.dtype, alpha=0.2,
                        direction=direction, out_dtype=out, backend="dump", config=GateConfig())
