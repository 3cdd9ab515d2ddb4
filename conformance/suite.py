"""The conformance suite: which rows, which inputs, run, judge, merge, shrink.

One row per (backend, dtype, out_dtype, direction, alpha).  Each row feeds
the backend a few rich batches (``cases.batches``) rather than many small calls,
the same for every backend of a (dtype, out_dtype, direction, alpha), so the counts
of two such rows compare:

- ``sweep``, ``edges``, ``examples``;
- ``shape N``: the core boundaries of the default chip's elementwise plan;
- in a comparison (``Selection.references``), ``BACKEND shape N``: the boundary
  sizes a backend declares beyond those (cann: its tiling plan's k*tile +/- 1),
  run by every backend and labelled with who declares them;
- otherwise ``BACKEND shape N`` are that backend's own batches (``own``): no other
  backend runs them, they are never compared, and the row's notes say what they add.

Every batch is judged with ``judge.evaluate`` and the batches are merged with
``merge_rows``.  A failing row gets a minimal reproducer per failing category
(see :func:`shrink`), saved as ``.npz`` under the results directory.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

import numpy as np

from conformance import compared, pool, reproducers
from conformance.backends import (
    Backend,
    WorkerSpec,
    boundary_sizes,
    default_backends,
    default_worker,
    get_backend,
    profiles_of,
    skip_reason,
    suite_pairs,
)
from conformance.cases.batches import BatchCache, InputBatch, shared_sizes
from conformance.cases.expected import golden_of
from conformance.config import default_config
from conformance.guard import guarded_call, input_modified, shaped_like
from conformance.judge.agreement import Agreement, Collector, Output
from conformance.judge.evaluate import evaluate, merge_rows
from conformance.judge.gate import GateConfig
from conformance.judged_once import JudgedBatches
from conformance.records import DEFAULT_OP, BackendResult, Direction, Finding, Pair, Row, RowKey
from conformance.reproducers import save_reproducer

SUITE_ALPHAS: tuple[float, ...] = (0.0, 0.01, 0.1, 0.2, 0.3, 1 / 3, 1.0, 1.5)
DIRECTIONS: tuple[Direction, ...] = ("forward", "backward")


@dataclass(frozen=True)
class Selection:
    """What to run: backends, dtype pairs, slopes, directions, the profile/variant of the
    backends that have them, and the workers that serve backends out of process."""

    backends: tuple[str, ...] = field(default_factory=default_backends)
    dtypes: Optional[tuple[str, ...]] = None  # input dtypes, or "src->out" pairs; None: all defaults
    alphas: tuple[float, ...] = SUITE_ALPHAS
    directions: tuple[Direction, ...] = DIRECTIONS
    profile: Optional[str] = None
    variant: Optional[str] = None
    workers: tuple[tuple[str, WorkerSpec], ...] = ()  # (backend name, worker) from --worker
    worker_timeout: float = WorkerSpec.timeout  # per call, for backends served by their default worker
    objects: tuple[tuple[str, Backend], ...] = ()  # backends given as objects (conformance.check), by row name
    references: tuple[str, ...] = ()  # every other row is also compared bit for bit with these backends'
    ops: Optional[tuple[str, ...]] = None  # the operators whose rows run (conformance.ops); None: every one

    def runs_op(self, op: str) -> bool:
        """Whether ``op``'s rows are selected (its slopes are :attr:`alphas`' to select)."""
        return self.ops is None or op in self.ops

    def identity(self, name: str) -> tuple[Optional[str], Optional[str], Optional[WorkerSpec]]:
        """The profile, variant and worker backend ``name`` runs with in this selection."""
        explicit = dict(self.workers).get(name)
        if name in dict(self.objects):
            return None, None, None
        if explicit is not None:
            return None, None, explicit
        profiles, variants = profiles_of(name)
        profile = self.profile if self.profile in profiles else None
        variant = self.variant if self.variant in variants else None
        worker = default_worker(name, profile=profile, variant=variant, timeout=self.worker_timeout)
        return (None, None, worker) if worker is not None else (profile, variant, None)

    def backend(self, name: str) -> Backend:
        """The backend instance (or worker client) that runs ``name``'s rows."""
        given = dict(self.objects).get(name)
        return given if given is not None else backend_for(name, *self.identity(name))

    def pairs_for(self, backend: str) -> tuple[Pair, ...]:
        """Default pairs of ``backend`` whose input dtype was selected, plus explicit pairs; a
        selected dtype none of its pairs takes is planned as (T, T), so its skip says why."""
        default = suite_pairs(self.backend(backend))
        if self.dtypes is None:
            return default
        explicit = tuple(tuple(d.split("->")) for d in self.dtypes if "->" in d)
        kept = tuple(p for p in default if p[0] in self.dtypes and p not in explicit)
        untaken = tuple((d, d) for d in self.dtypes if "->" not in d and all(p[0] != d for p in default))
        return kept + untaken + explicit  # type: ignore[return-value]


@dataclass(frozen=True)
class Options:
    """How to run: seed, hypothesis example count, gate config, where reproducers go, and on how
    many processes the rows may run (:func:`processes`)."""

    config: GateConfig = field(default_factory=default_config)  # the built-in policy
    seed: int = 0
    max_examples: int = 100
    results_dir: Optional[Path] = Path("results")
    jobs: int = 1
    plots: bool = True  # the rows keep what the HTML report draws (``judge.plots``); False: no report draws it


@dataclass(frozen=True)
class RowSpec(RowKey):
    """One row to run: its key, and where its backend runs."""

    worker: Optional[WorkerSpec] = None  # None: in-process
    given: Optional[Backend] = field(default=None, compare=False, repr=False)  # Selection.objects


@dataclass
class SuiteResult:
    """Judged rows, rows skipped as unsupported (with why), and what cut the run short, if anything:
    the ``KeyboardInterrupt`` of Ctrl-C or its subclass ``interrupts.Terminated`` for SIGTERM."""

    rows: list[Row] = field(default_factory=list)
    skipped: list[tuple[RowSpec, str]] = field(default_factory=list)
    agreement: list[Agreement] = field(default_factory=list)  # with the selection's references, if any
    own_batches: list[str] = field(default_factory=list)  # backends whose rows ran boundary batches of their own
    interruption: Optional[KeyboardInterrupt] = None

    @property
    def interrupted(self) -> bool:
        return self.interruption is not None


# ----------------------------------------------------------------------------- planning

@functools.cache
def backend_for(name: str, profile: Optional[str], variant: Optional[str],
                worker: Optional[WorkerSpec] = None) -> Backend:
    """One backend instance per (name, profile, variant), or the client of ``worker``."""
    if worker is not None:
        from conformance.worker.client import connect

        return connect(worker)
    return get_backend(name, profile=profile, variant=variant)


def _specs_for(backend: Backend, name: str, selection: Selection) -> Iterable[tuple[RowSpec, Optional[str]]]:
    """Every row of ``name``, with the reason it is skipped (None: it runs)."""
    worker, given = selection.identity(name)[2], dict(selection.objects).get(name)
    for dtype, out in selection.pairs_for(name):
        for direction in selection.directions:
            why = None if backend.supports(dtype, out, direction) else skip_reason(backend, dtype, out, direction)
            for alpha in selection.alphas:
                yield RowSpec(name, getattr(backend, "profile", None), getattr(backend, "variant", None), dtype, out,
                              direction, alpha, worker, given), why


def plan(selection: Selection, *, meanwhile: Optional[Callable[[list[RowSpec]], object]] = None
         ) -> tuple[list[RowSpec], list[tuple[RowSpec, str]]]:
    """Rows to run, and rows skipped because the backend does not support them (with why).  The
    selection's workers start first, each importing its framework in its own process; when there
    are some, ``meanwhile`` is given the rows of the backends in this process before their hellos
    are read (what it builds needs no worker)."""
    names = selection.backends if selection.runs_op(DEFAULT_OP) else ()
    workers = {name: selection.identity(name)[2] for name in names}
    if any(w is not None for w in workers.values()):
        from conformance.worker.client import launch

        for worker in filter(None, workers.values()):
            launch(worker)
    here = {name: list(_specs_for(selection.backend(name), name, selection)) for name in names
            if workers[name] is None}
    if meanwhile is not None and len(here) < len(workers):
        meanwhile([spec for specs in here.values() for spec, why in specs if why is None])
    rows, skipped = [], []
    for name in names:
        for spec, why in here[name] if name in here else _specs_for(selection.backend(name), name, selection):
            if why is None:
                rows.append(spec)
            else:
                skipped.append((spec, why))
    return rows, skipped


# ----------------------------------------------------------------------------- inputs

Pooled = dict[tuple[str, str, str], tuple[tuple[int, str], ...]]  # (dtype, out, dir) -> (size, who declares it)


class Inputs(BatchCache):
    """Input batches for rows, built once per key and shared by every backend.  ``pooled``: the
    boundary sizes of a comparison (:func:`pooled_sizes`), which every backend runs."""

    def __init__(self, *, seed: int, max_examples: int, alphas: Sequence[float], pooled: Optional[Pooled] = None):
        super().__init__(seed=seed, max_examples=max_examples, alphas=alphas)
        self.pooled = pooled or {}

    def batches(self, spec: RowSpec) -> list[InputBatch]:
        """The batches every backend runs for this (dtype, out_dtype, direction, alpha), the
        pooled boundary batches of a comparison (labelled with who declares them), then the
        boundary batches of ``spec``'s backend alone."""
        d = spec.direction
        common = shared_sizes(spec.dtype, spec.out_dtype, d)
        pooled = dict(self.pooled.get((spec.dtype, spec.out_dtype, d), ()))
        own = self.own_sizes(spec)
        return [self.exhaustive16(spec.dtype, d), self.edges(spec.dtype, spec.out_dtype, d, spec.alpha),
                self.examples(spec.dtype, spec.out_dtype, d), *self.shapes(spec.dtype, spec.out_dtype, d, common),
                *(replace(b, label=f"{pooled[n]} {b.label}")
                  for n, b in zip(pooled, self.shapes(spec.dtype, spec.out_dtype, d, tuple(pooled)))),
                *(replace(b, label=f"{spec.backend} {b.label}", own=True)
                  for b in self.shapes(spec.dtype, spec.out_dtype, d, own))]

    def own_sizes(self, spec: RowSpec) -> tuple[int, ...]:
        """The boundary sizes ``spec``'s backend declares that no other backend runs."""
        key = (spec.dtype, spec.out_dtype, spec.direction)
        others = {*shared_sizes(*key), *dict(self.pooled.get(key, ()))}  # type: ignore[arg-type]
        return tuple(n for n in boundary_sizes(backend_of(spec), *key) if n not in others)  # type: ignore[arg-type]


def pooled_sizes(specs: Sequence[RowSpec]) -> Pooled:
    """For a comparison, per (dtype, out_dtype, direction): every boundary size a backend of
    ``specs`` declares beyond the shared ones, with the backends that declare it (``cann``), so
    that every backend runs it and a defect at one backend's tile boundary shows as a difference."""
    found: dict[tuple[str, str, str], dict[int, list[str]]] = {}
    for spec in {(s.backend, s.dtype, s.out_dtype, s.direction): s for s in specs}.values():
        key = (spec.dtype, spec.out_dtype, spec.direction)
        common = shared_sizes(*key)  # type: ignore[arg-type]
        for n in boundary_sizes(backend_of(spec), *key):  # type: ignore[arg-type]
            if n not in common:
                found.setdefault(key, {}).setdefault(n, []).append(spec.backend)
    return {k: tuple((n, "+".join(who)) for n, who in sorted(d.items())) for k, d in found.items()}


def planned(selection: Selection, options: Options) -> tuple[list[RowSpec], list[tuple[RowSpec, str]]]:
    """:func:`plan`, the input batches of the rows in this process built while the workers start."""
    return plan(selection, meanwhile=functools.partial(_built_ahead, seed=options.seed, alphas=selection.alphas,
                                                       max_examples=options.max_examples,
                                                       pooled=bool(selection.references)))


def _built_ahead(rows: Sequence[RowSpec], *, seed: int, max_examples: int, alphas: Sequence[float],
                 pooled: bool) -> None:
    """Build the input batches of ``rows`` into the process's memo (``cases.batches.BATCHES``), as
    the run's own :class:`Inputs` will ask for them: while the workers start, so that neither this
    process nor the ones it forks builds them afterwards."""
    inputs = Inputs(seed=seed, max_examples=max_examples, alphas=alphas, pooled=pooled_sizes(rows) if pooled else None)
    for spec in rows:
        inputs.batches(spec)


# ----------------------------------------------------------------------------- running

def backend_of(spec: RowSpec) -> Backend:
    """The backend object that runs ``spec`` (one per name, profile and variant, or the given object)."""
    if spec.given is not None:
        return spec.given
    if spec.worker is not None:
        return backend_for(spec.backend, None, None, spec.worker)
    return backend_for(spec.backend, spec.profile, spec.variant)


def run_batch(spec: RowSpec, batch: InputBatch, *, config: GateConfig) -> Row:
    """Call the backend on its own copy of one batch and judge the result against golden of the
    untouched batch; a backend that wrote into its copy gets an ``input-modified`` finding."""
    return run_batch_output(spec, batch, config=config).row


def run_batch_output(spec: RowSpec, batch: InputBatch, *, config: GateConfig,
                     judged: Optional[JudgedBatches] = None, plots: bool = True) -> Output:
    """:func:`run_batch`, keeping the backend's actual output next to the judged row (the golden of
    an unchanged copy of one of the suite's batches is computed once for every backend: ``golden_of``;
    with ``judged``, a result another backend already returned is judged once: :class:`JudgedBatches`)."""
    backend = backend_of(spec)
    out = spec.out_dtype if spec.out_dtype != spec.dtype else None
    x, dy = batch.x.copy(), None if batch.dy is None else batch.dy.copy()
    result = shaped_like(guarded_call(backend, spec.direction, x, spec.alpha, dy=dy, out_dtype=out),
                         numel=batch.x.size, out_dtype=spec.out_dtype)
    row = None if judged is None else judged.reuse(spec, batch, result, config=config)
    if row is None:
        golden = golden_of(spec, batch) if result.rejected is None else None
        row = judge_batch(spec, batch, result, config=config, golden=golden, plots=plots)
        if judged is not None:
            judged.keep(spec, batch, result, row)
    row = input_modified(row, kept=(batch.x, batch.dy), handed=(x, dy), config=config)
    return Output(batch.label, batch.x, batch.dy, result.value, row)


def judge_batch(spec: RowSpec, batch: InputBatch, result: BackendResult, *, config: GateConfig,
                golden: Optional[np.ndarray] = None, plots: bool = True) -> Row:
    """Judge a backend's result for one batch (also used for results computed elsewhere);
    ``golden``: the batch's exact reference when the caller has it."""
    return evaluate(batch.x, spec.alpha, result, direction=spec.direction, dy=batch.dy,
                    out_dtype=spec.out_dtype, backend=spec.backend, profile=spec.profile,
                    variant=spec.variant, config=config, label=batch.label, golden=golden, plots=plots)


def run_row(spec: RowSpec, inputs: Inputs, *, options: Options, collector: Optional[Collector] = None,
            judged: Optional[JudgedBatches] = None) -> Row:
    """Every batch of one row, judged and merged; failing rows get reproducers.  A ``collector``
    gets the row's actual outputs, for the agreement with a reference backend; ``judged``: the
    results of the row's group judged already (:class:`JudgedBatches`)."""
    batches = inputs.batches(spec)
    outputs = [run_batch_output(spec, b, config=options.config, judged=judged, plots=options.plots) for b in batches]
    if collector is not None:
        collector.add([o for b, o in zip(batches, outputs) if not b.own])
    parts = [(b, o.row) for b, o in zip(batches, outputs)]
    row = merge_rows([r for _, r in parts], config=options.config)
    note = own_batches_note(spec.backend, parts)
    noting = getattr(backend_of(spec), "row_notes", None)  # a backend object of a user's may lack it
    said = noting(spec.dtype, spec.out_dtype, spec.direction, spec.alpha) if noting is not None else ()
    notes = (*row.notes, *([note] if note is not None else []), *said)
    row = replace(row, notes=notes) if notes != row.notes else row
    if row.verdict != "fail" or options.results_dir is None:
        return row
    return attach_reproducers(row, spec, parts, options=options)


def own_batches_note(backend: str, parts: Sequence[tuple[InputBatch, Row]]) -> Optional[str]:
    """What the row's own boundary batches (run on no other backend) add to its counts."""
    own = [(b, r) for b, r in parts if b.own]
    if not own:
        return None
    counts: dict[str, int] = {}
    for _, r in own:
        for f in r.findings:
            counts[f.category] = counts.get(f.category, 0) + f.count
    found = ", ".join(f"{c} ×{n:,}" for c, n in sorted(counts.items())) or "no finding"
    elements = sum(b.x.size for b, _ in own)
    return (f"{len(own)} boundary batches of {backend} alone ({elements:,} elements, run on no other "
            f"backend) add: {found}")


RowDone = Callable[[RowSpec, Row, float], None]  # a finished row, and the seconds it took
Finished = Callable[[int, Row, float], None]  # the same, by the row's index in the plan
ROWS_PER_JOB = 8  # a run of fewer rows per process runs in this process alone: forking would cost more


@dataclass(frozen=True)
class ExtraRow:
    """A row of another kind that the suite runs after its own (the quantized rows): ``run()``
    judges it, ``spec`` is what ``on_row`` is told, and it runs beside the rows of the selected
    backend ``beside`` (in the process that has that backend's framework imported already)."""

    spec: object
    beside: str
    run: Callable[[], Row]
    here: bool = False  # served by a worker, whose pipes belong to this process: never run in a forked one


def run_suite(selection: Selection, options: Options, *, on_row: Optional[RowDone] = None,
              specs: Optional[list[RowSpec]] = None, extra: Sequence[ExtraRow] = ()) -> SuiteResult:
    """Run the selection, then ``extra``; Ctrl-C or SIGTERM stops it and returns the completed rows
    marked interrupted.  The rows run on up to ``options.jobs`` processes (:func:`processes`); the
    result lists them in the planned order, whichever finished first.  With references, the rows run
    grouped by (dtype, out_dtype, direction, alpha), references first, each group in one process, so
    only one group's outputs are kept there (:mod:`conformance.compared`)."""
    todo, skipped = planned(selection, options) if specs is None else (specs, [])
    refs = selection.references
    pooled = pooled_sizes(todo) if refs else None  # a comparison: the same inputs, boundaries too
    inputs = Inputs(seed=options.seed, max_examples=options.max_examples, alphas=selection.alphas, pooled=pooled)
    result = SuiteResult(skipped=skipped)
    collector = Collector(refs) if refs else None
    judged = JudgedBatches()  # a comparison's rows run grouped: see comparison_order
    done: dict[int, Row] = {}
    n = len(todo)

    def run(i: int) -> Row:
        if i >= n:
            return extra[i - n].run()
        if collector is None:
            return run_row(todo[i], inputs, options=options)
        return run_row(todo[i], inputs, options=options, collector=collector, judged=judged)

    def finished(i: int, row: Row, seconds: float) -> None:
        done[i] = row
        if on_row is not None:
            on_row(todo[i] if i < n else extra[i - n].spec, row, seconds)  # type: ignore[arg-type]
    try:
        lanes = processes(selection, options, rows=n + len(extra))
        if collector is not None:
            tasks = compared.comparison_tasks(todo, comparison_order(todo, refs), extra=len(extra),
                                              served=[s.worker is not None for s in todo])
            compared.run_compared(tasks, run, collector=collector, lanes=lanes, finished=finished,
                                  prepare=lambda: [inputs.batches(s) for s in todo])
        else:
            run_tasks(row_tasks(todo, extra), run, lanes=lanes, finished=finished)
    except KeyboardInterrupt as exc:
        result.interruption = exc
    result.rows = [done[i] for i in sorted(done)]
    result.own_batches = list(dict.fromkeys(todo[i].backend for i in sorted(done)
                                            if i < n and inputs.own_sizes(todo[i])))
    if collector is not None:  # in the planned order of the rows compared, then of their references
        place = {(s.backend, s.dtype, s.out_dtype, s.direction, s.alpha): i for i, s in enumerate(todo)}
        result.agreement = sorted(collector.found, key=lambda a: (
            place.get((a.backend, a.dtype, a.out_dtype, a.direction, a.alpha), n),
            place.get((a.reference, a.dtype, a.out_dtype, a.direction, a.alpha), n)))
    return result


def in_order(order: Iterable[int], run: Callable[[int], Row], *, finished: Finished) -> None:
    """``run`` each index of ``order`` here, one after another, timed."""
    for i in order:
        start = time.perf_counter()
        finished(i, run(i), time.perf_counter() - start)


def processes(selection: Selection, options: Options, *, rows: int) -> int:
    """How many processes run ``rows`` rows: ``options.jobs``, but at least ``ROWS_PER_JOB`` rows
    each; one when this process cannot be forked safely (``pool.can_fork``: a framework already
    runs threads here)."""
    if not pool.can_fork():
        return 1
    return max(1, min(options.jobs, rows // ROWS_PER_JOB))


def row_tasks(specs: Sequence[RowSpec], extra: Sequence[ExtraRow] = ()) -> list[pool.Task]:
    """The rows as pool tasks: grouped by the backend that runs them (an extra row with the first
    of its ``beside`` backend), those of a backend served by a worker kept in this process."""
    def group(s: RowSpec) -> str:
        return f"{s.backend}|{s.profile}|{s.variant}|{s.worker}"

    first = {s.backend: group(s) for s in reversed(specs)}
    return [*(pool.Task(i, group(s), here=s.worker is not None) for i, s in enumerate(specs)),
            *(pool.Task(len(specs) + j, first.get(e.beside, e.beside), here=e.here) for j, e in enumerate(extra))]


def run_tasks(tasks: Sequence[pool.Task], run: Callable[[int], Row], *, lanes: int, finished: Finished) -> None:
    """Every task, ``finished(index, row, seconds)`` as each ends: here, in order, or with ``lanes``
    > 1 on forked processes too (:mod:`conformance.pool`: a backend's rows stay in one process while
    they can; a backend served by a worker runs here, where its pipes are)."""
    if lanes <= 1:
        return in_order([t.index for t in tasks], run, finished=finished)
    pool.run_tasks(tasks, run, jobs=lanes, deliver=finished)


def comparison_order(specs: Sequence[RowSpec], references: Sequence[str]) -> list[int]:
    """Indices of ``specs`` grouped by (dtype, out_dtype, direction, alpha) in order of first
    appearance, the references first within a group (in their order), then the others as planned."""
    first: dict[tuple, int] = {}
    for s in specs:
        first.setdefault((s.dtype, s.out_dtype, s.direction, s.alpha), len(first))

    def rank(i: int) -> tuple[int, int, int]:
        s = specs[i]
        ref = references.index(s.backend) if s.backend in references else len(references)
        return first[(s.dtype, s.out_dtype, s.direction, s.alpha)], ref, i
    return sorted(range(len(specs)), key=rank)


# ----------------------------------------------------------------------------- reproducers

def _fails_with(spec: RowSpec, batch: InputBatch, category: str, *, config: GateConfig) -> bool:
    """The batch still fails its row with a not-allowed finding of ``category``."""
    row = run_batch(spec, batch, config=config)
    return any(f.category == category and f.gated for f in row.findings)


def shrink(spec: RowSpec, batch: InputBatch, finding: Finding, *, config: GateConfig) -> InputBatch:
    """The smallest candidate of ``batch`` that still fails ``spec``'s row with ``finding.category``
    (see :func:`conformance.reproducers.smallest`)."""
    return reproducers.smallest(batch, finding, fails=lambda b: _fails_with(spec, b, finding.category, config=config))


def attach_reproducers(row: Row, spec: RowSpec, parts: Sequence[tuple[InputBatch, Row]], *,
                       options: Options) -> Row:
    """Shrink and save one reproducer per failing category; record the paths in the findings."""
    findings = []
    for finding in row.findings:
        part = reproducers.failing_part(parts, finding.category) if finding.gated else None
        if part is not None and options.results_dir is not None:
            small = shrink(spec, part[0], part[1], config=options.config)
            path = save_reproducer(spec, small, finding, results_dir=options.results_dir)
            finding = replace(finding, reproducer=str(path))
        findings.append(finding)
    return replace(row, findings=tuple(findings))
