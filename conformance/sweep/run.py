"""Running a sweep: chunk tasks, the single-process and the Dask executors, the merged rows.

A :class:`ChunkTask` is plain package data (specs, a range, the gate config) and
:func:`run_chunk` is a package-level function, so a Dask worker needs only the
package installed: nothing else is pickled.  Each chunk computes its inputs and the
exact golden ONCE and judges every backend of the chunk against it with the
report's own ``evaluate``; the chunk rows are merged with ``merge_rows`` (exact).

Each chunk row is stored with the fingerprint of the code that computed it; planning
reuses only the stored rows that :meth:`Store.verified` accepts for this process's
fingerprint, and recomputes the others.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from conformance.backends import default_worker
from conformance.dtypes import info
from conformance.errors import UsageError
from conformance.extras import require_installed
from conformance.guard import guarded_call, input_modified
from conformance.judge.evaluate import evaluate, merge_rows
from conformance.judge.gate import GateConfig
from conformance.records import BackendResult, Row
from conformance.reference import golden as ref
from conformance.sweep import pairs as bits
from conformance.sweep import twins
from conformance.sweep.fingerprint import fingerprint
from conformance.sweep.spec import Segment, SweepSpec, chunk_plan, finite_slopes, segments
from conformance.sweep.store import Store, describe_rejected, row_text

SWEPT_ALPHA = float("nan")  # Row.alpha of a slope sweep (one object: rows of one sweep share the key)
CONNECT_TIMEOUT = 10.0  # seconds to reach a --scheduler before giving up
_SCHEDULER = re.compile(r"(tcp|tls)://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}))"
                        r":([0-9]{1,5})", re.ASCII)


@dataclass(frozen=True)
class ChunkTask:
    """Patterns ``[lo, hi)`` of a group of specs that share inputs (they differ in backend only)."""

    specs: tuple[SweepSpec, ...]
    lo: int
    hi: int
    config: GateConfig
    single_thread: bool = False  # a worker process: torch and friends on one thread
    plots: bool = True  # the rows keep what the HTML report draws (``judge.plots``)


@dataclass(frozen=True)
class ChunkDone:
    """A finished chunk: (spec key, fingerprint, stored row text) per backend, how long it took, and
    (pair key, fingerprint, differing patterns) per pair of its backends."""

    lo: int
    hi: int
    rows: tuple[tuple[str, str, str], ...]
    seconds: float
    pairs: tuple[tuple[str, str, int], ...] = ()
    cpu: float = 0.0  # CPU seconds of the process that ran it, while it ran (a shared machine's wall misleads)


# ----------------------------------------------------------------------------- one chunk

def _shift(where: Optional[tuple[str, int]], offset: int) -> Optional[tuple[str, int]]:
    return None if where is None else (where[0], where[1] + offset)


def shifted(row: Row, offset: int) -> Row:
    """A row judged on a slice whose first element is pattern ``offset``, with pattern indices."""
    m = row.metrics
    metrics = replace(m, max_abs_at=_shift(m.max_abs_at, offset), max_rel_at=_shift(m.max_rel_at, offset),
                      max_ulp_at=_shift(m.max_ulp_at, offset))
    findings = tuple(replace(f, examples=tuple(replace(e, index=e.index + offset) for e in f.examples))
                     for f in row.findings)
    return replace(row, metrics=metrics, findings=findings)


def _segment_label(spec: SweepSpec, alpha: float) -> str:
    if not spec.sweep_alpha:
        return spec.label
    bits = int(np.asarray(alpha).astype(info(spec.dtype).dtype).view(info(spec.dtype).uint))
    return f"alpha={alpha!r} [0x{bits:04x}]"


def _backend(spec: SweepSpec):  # noqa: ANN202 - a Backend or a worker client
    from conformance.suite import backend_for

    worker = default_worker(spec.backend, profile=spec.profile, variant=spec.variant)
    return backend_for(spec.backend, None if worker else spec.profile, None if worker else spec.variant, worker)


def spec_fingerprint(spec: SweepSpec) -> str:
    """The fingerprint of the code that computes ``spec``'s rows in this process."""
    return fingerprint(_backend(spec))


@dataclass(frozen=True)
class _Called:
    """One backend's call on a segment: its result and the copies of the inputs it was handed."""

    result: BackendResult
    handed: tuple[np.ndarray, Optional[np.ndarray]]


def _call(spec: SweepSpec, seg: Segment) -> _Called:
    out = spec.out_dtype if spec.out_dtype != spec.dtype else None
    given_x, given_dy = seg.x.copy(), None if seg.dy is None else seg.dy.copy()  # the backend's own copies
    result = guarded_call(_backend(spec), spec.direction, given_x, seg.alpha, dy=given_dy,  # type: ignore[arg-type]
                          out_dtype=out)
    return _Called(result, (given_x, given_dy))


def _evaluated(spec: SweepSpec, seg: Segment, result: BackendResult, golden: np.ndarray, *,
               config: GateConfig, plots: bool) -> Row:
    return evaluate(seg.x, seg.alpha, result, direction=spec.direction, dy=seg.dy, out_dtype=spec.out_dtype,
                    backend=spec.backend, profile=spec.profile, variant=spec.variant, config=config,
                    label=_segment_label(spec, seg.alpha), golden=golden, shape=(spec.size,), plots=plots)


def _judge_segment(specs: Sequence[SweepSpec], seg: Segment, golden: np.ndarray, *, config: GateConfig,
                   plots: bool = True) -> dict[SweepSpec, tuple[Row, Optional[np.ndarray]]]:
    """Each spec's row of the segment and its output (None: it returned none).  A backend whose
    output has the bits of one already judged gets its row derived (``twins``); the results
    with a tile plan are judged first, as the others' rows derive from theirs.  ``plots``: the
    rows keep what the HTML report draws."""
    called = {spec: _call(spec, seg) for spec in specs}
    judged: list[tuple[Row, BackendResult]] = []
    out = {}
    for spec in sorted(specs, key=lambda s: called[s].result.tile_plan is None):
        result = called[spec].result
        row = next((twins.derived(r, result, backend=spec.backend, profile=spec.profile, variant=spec.variant,
                                  config=config) for r, done in judged if twins.derivable(r, done, result)), None)
        if row is None:
            row = _evaluated(spec, seg, result, golden, config=config, plots=plots)
            judged.append((row, result))
        row = shifted(input_modified(row, kept=(seg.x, seg.dy), handed=called[spec].handed, config=config),
                      seg.start)
        value = None if result.value is None else np.asarray(result.value).reshape(-1)
        out[spec] = (replace(row, alpha=SWEPT_ALPHA) if spec.sweep_alpha else row), value
    return out


def _single_thread() -> None:
    """A worker process of a cluster with a worker per core: its libraries and this package's
    compiled passes (``CONFORMANCE_THREADS``) on one thread, the results the same."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CONFORMANCE_THREADS"):
        os.environ.setdefault(name, "1")
    torch = sys.modules.get("torch")  # imported later, it reads OMP_NUM_THREADS
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@functools.lru_cache(maxsize=1)
def _threadpools(modules: int):  # noqa: ANN202 - a threadpoolctl.ThreadpoolController
    """The process's thread pools, found again only when a module was imported since (finding
    them reads every loaded library: milliseconds a chunk)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def run_chunk(task: ChunkTask) -> ChunkDone:
    """Judge every spec of ``task`` on its patterns; golden once per slope segment.  BLAS runs on
    one thread, so float sums (the cosine's dot products) do not depend on the executor."""
    if task.single_thread:
        _single_thread()
    with _threadpools(len(sys.modules)).limit(limits=1, user_api="blas"):
        return _run_chunk(task)


def _run_chunk(task: ChunkTask) -> ChunkDone:
    began, cpu = time.perf_counter(), time.process_time()
    group = task.specs[0]
    judged: dict[SweepSpec, list[Row]] = {s: [] for s in task.specs}
    pairs = bits.pairs_of(task.specs)
    differ = dict.fromkeys(pairs, 0)
    for seg in segments(group, task.lo, task.hi):
        golden = ref.compute(group.direction, seg.x, seg.alpha, dy=seg.dy, out_dtype=group.out_dtype)
        rows = _judge_segment(task.specs, seg, golden, config=task.config, plots=task.plots)
        outputs = {spec: value for spec, (_, value) in rows.items()}
        for spec in task.specs:
            judged[spec].append(rows[spec][0])
        for a, b in pairs:
            differ[(a, b)] += bits.count(outputs[a], outputs[b], size=seg.x.size)
    prints = {s: spec_fingerprint(s) for s in task.specs}
    rows = tuple((s.key, prints[s], row_text(merge_rows(judged[s], config=task.config))) for s in task.specs)
    counted = tuple((bits.pair_key(p), bits.pair_fingerprint(prints[p[0]], prints[p[1]]), n)
                    for p, n in differ.items())
    return ChunkDone(task.lo, task.hi, rows, time.perf_counter() - began, counted, time.process_time() - cpu)


# ----------------------------------------------------------------------------- planning

@dataclass(frozen=True)
class Plan:
    """Every spec's chunks, and the tasks still to run (the chunks the store lacks or whose stored
    rows it rejected: ``recomputed`` counts those by reason)."""

    chunks: dict[SweepSpec, list[tuple[int, int]]]
    tasks: tuple[ChunkTask, ...]
    fingerprints: dict[SweepSpec, str]
    recomputed: dict[SweepSpec, Counter]
    pairs: tuple[bits.Pair, ...] = ()  # every pair of backends that share inputs

    @property
    def stored(self) -> int:
        """Chunk rows the plan takes from the store."""
        return sum(len(c) for c in self.chunks.values()) - sum(len(t.specs) for t in self.tasks)

    def describe_recomputed(self) -> str:
        """``n chunk row(s) recomputed: fingerprint changed k, ...`` over every spec ('' when none)."""
        return describe_rejected(sum(self.recomputed.values(), Counter()))

    @property
    def patterns(self) -> int:
        """Patterns the tasks cover (a chunk counts once, whatever its backends)."""
        return sum(t.hi - t.lo for t in self.tasks)


def make_plan(specs: Sequence[SweepSpec], store: Store, *, start: int, stop: Optional[int], chunk: int,
              config: GateConfig, fresh: bool = False, single_thread: bool = False, plots: bool = True) -> Plan:
    """Group specs by their inputs, plan their chunks, keep the chunks not yet stored
    (``fresh``: drop the stored ones of this plan first).  ``plots``: the rows keep what the HTML
    report draws, and a stored row of mismatches without it is computed again."""
    chunks: dict[SweepSpec, list[tuple[int, int]]] = {s: [] for s in specs}  # report in the specs' order
    tasks: list[ChunkTask] = []
    prints = {s: spec_fingerprint(s) for s in specs}
    recomputed: dict[SweepSpec, Counter] = {}
    groups: dict[SweepSpec, list[SweepSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.group(), []).append(spec)
    pairs: list[bits.Pair] = []
    for members in groups.values():
        size = members[0].size
        plan = chunk_plan(size, start=start, stop=size if stop is None else stop, chunk=chunk)
        mine = bits.pairs_of(members)
        if fresh:
            for key in [s.key for s in members] + [bits.pair_key(p) for p in mine]:
                store.forget(key, plan)
        checked = {s: store.verified(s, plan, fingerprint=prints[s], plots=plots) for s in members}
        counted = [_pair_counts(p, plan, store, prints=prints) for p in mine]
        for s in members:
            chunks[s], recomputed[s] = plan, checked[s].rejected
        for lo, hi in plan:
            missing = tuple(s for s in members if (lo, hi) not in checked[s].rows)
            if any((lo, hi) not in c for c in counted):  # a pair lacks its count: every backend again
                missing = tuple(members)
            if missing:
                tasks.append(ChunkTask(missing, lo, hi, config, single_thread, plots))
        pairs += mine
    return Plan(chunks, tuple(tasks), prints, recomputed, tuple(pairs))


def _pair_counts(pair: bits.Pair, chunks: Sequence[tuple[int, int]], store: Store, *,
                 prints: dict[SweepSpec, str]) -> dict[tuple[int, int], int]:
    printed = bits.pair_fingerprint(prints[pair[0]], prints[pair[1]])
    return store.pair_counts(bits.pair_key(pair), chunks, fingerprint=printed)


def pair_totals(plan: Plan, store: Store) -> list[bits.PairTotal]:
    """Per pair of backends, the patterns whose bits differ over the chunks the store holds."""
    out = []
    for pair in plan.pairs:
        chunks = plan.chunks[pair[0]]
        found = _pair_counts(pair, chunks, store, prints=plan.fingerprints)
        out.append(bits.PairTotal(*pair, differing=sum(found.values()),
                                  swept=sum(hi - lo for lo, hi in found),
                                  planned=sum(hi - lo for lo, hi in chunks)))
    return out


def finish(rows: Sequence[Row], spec: SweepSpec, *, config: GateConfig, recomputed: str = "") -> Row:
    """The stored chunk rows of one spec merged into its report row (one part: the sweep);
    ``recomputed`` says which stored rows were rejected and computed again."""
    row = merge_rows(rows, config=config)
    notes = row.notes + ((recomputed,) if recomputed else ())
    if spec.sweep_alpha:
        n = len(finite_slopes(spec.dtype))
        notes += (f"alpha swept over every finite {info(spec.dtype).short} slope ({n:,} patterns); "
                  "each offender's part names its slope",)
    if spec.x_class is not None:
        notes += (f"dy swept against x={spec.x_class}",)
    return replace(row, parts=(spec.label,), shapes=((spec.size,),), notes=notes)


def report_rows(plan: Plan, store: Store, *, config: GateConfig) -> list[tuple[SweepSpec, Row]]:
    """One merged row per spec from what the store holds (a partial row when chunks are missing;
    none when it holds no chunk of the spec)."""
    out = []
    for spec, chunks in plan.chunks.items():
        found = store.verified(spec, chunks, fingerprint=plan.fingerprints[spec]).rows
        rows = [found[c] for c in chunks if c in found]
        if rows:
            rows = [replace(r, alpha=SWEPT_ALPHA) for r in rows] if spec.sweep_alpha else rows
            out.append((spec, finish(rows, spec, config=config,
                                     recomputed=describe_rejected(plan.recomputed[spec]))))
    return out


# ----------------------------------------------------------------------------- executors

Executor = Callable[[Sequence[ChunkTask]], Iterator[ChunkDone]]


def serial(tasks: Sequence[ChunkTask]) -> Iterator[ChunkDone]:
    """Every task in this process, in order."""
    for task in tasks:
        yield run_chunk(task)


def _quick_malloc_environ() -> dict:
    """The workers' environment from Dask's config without ``MALLOC_TRIM_THRESHOLD_``: setting
    it turns off glibc's adaptive mmap threshold, so every large numpy temporary is mapped and
    zeroed afresh, which made a chunk 5x slower in a worker than in this process (measured)."""
    import dask

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    return environ


def check_scheduler(address: str) -> str:
    """``address`` when it reads ``tcp://HOST:PORT`` (or tls://), else a UsageError saying so."""
    match = _SCHEDULER.fullmatch(address)
    if match is None or not 1 <= int(match.group(3)) <= 65535:
        raise UsageError(f"--scheduler {address[:60]!r} is not a Dask scheduler address; pass "
                         "tcp://HOST:PORT (port 1-65535), e.g. tcp://127.0.0.1:8786")
    return address


def _client(scheduler: Optional[str], cluster: object):  # noqa: ANN202 - a distributed.Client
    """A client of ``scheduler`` (or the embedded ``cluster``); a scheduler that does not answer
    within :data:`CONNECT_TIMEOUT` is a UsageError."""
    from distributed import Client

    if scheduler is None:
        return Client(cluster, set_as_default=False)
    try:
        return Client(check_scheduler(scheduler), set_as_default=False, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(f"--scheduler {scheduler}: no Dask scheduler answered within {CONNECT_TIMEOUT:g} s "
                         f"({type(exc).__name__}); start one there or drop --scheduler") from None


@contextmanager
def dask_executor(*, workers: int, scheduler: Optional[str] = None) -> Iterator[Executor]:
    """Tasks on Dask: an existing cluster at ``scheduler``, or a quiet embedded LocalCluster
    with ``workers`` single-threaded worker processes."""
    require_installed("dask", "distributed", "threadpoolctl", backend="conformance sweep")
    import dask
    from distributed import LocalCluster, as_completed

    with dask.config.set({"distributed.nanny.pre-spawn-environ": _quick_malloc_environ()}):
        cluster = None
        if scheduler is None:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=":0", silence_logs=logging.ERROR,  # no fixed port: no clash
                                   scheduler_kwargs={"dashboard": False})
        client = _client(scheduler, cluster)

        def execute(tasks: Sequence[ChunkTask]) -> Iterator[ChunkDone]:
            futures = client.map(run_chunk, [replace(t, single_thread=True) for t in tasks], pure=False)
            try:
                for future in as_completed(futures, loop=client.loop):
                    done = future.result()
                    future.release()
                    yield done
            finally:
                client.cancel(futures)

        try:
            yield execute
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


def run_plan(plan: Plan, store: Store, execute: Executor, *,
             advance: Callable[[int], None] = lambda n: None) -> None:
    """Run the plan's tasks and store each chunk as it finishes."""
    expected = {s.key: fp for s, fp in plan.fingerprints.items()}
    for done in execute(plan.tasks):
        for key, fp, _ in done.rows:
            if expected.get(key) != fp:
                raise UsageError("a --scheduler worker runs other code than this process (another backend "
                                 "fingerprint); install the same conformance and frameworks on the cluster")
        store.put(((key, done.lo, done.hi, fp, text) for key, fp, text in done.rows), seconds=done.seconds,
                  pairs=((key, done.lo, done.hi, fp, n) for key, fp, n in done.pairs))
        advance(done.hi - done.lo)

