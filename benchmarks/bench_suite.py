"""Wall time of the default conformance suite, and of its exhaustive 16-bit part.

Run: ``.venv/bin/python -m benchmarks.bench_suite`` (``--part sweep`` for the 16-bit part only,
``--part suite`` for the suite alone, ``--part fixed`` for the fixed costs of a small run;
``--jobs N`` processes, default the cores available; ``--serial`` also times ``--jobs 1`` right
after, for the ratio).  Targets (2 cores): the default
suite <= 60 s after set-up; the exhaustive 16-bit part <= 5 s.

- The suite is ``conformance run`` with ``make conformance``'s reports, in a process of its own
  (imports, the keras worker's start and the quantized rows included), timed from outside:
  wall, and the CPU seconds of it and every process it started.
- The 16-bit part is every 16-bit row of the default suite fed only its 65,536-pattern sweep batch
  and judged with ``judge.evaluate``, on the suite's processes (``suite.row_tasks``: the same
  grouping).  Each process warms each backend up once, with a 4-element call, before its first
  timed call (TensorFlow's import takes seconds), so the figure is the sweep work itself (JAX's
  compiles for the sweep's shapes included): the busiest process's timed seconds and CPU seconds
  (the CPU figure holds on a loaded machine), next to the wall time warm-ups included.
- The fixed costs are a small ``conformance run`` (cann and golden, fp16, 20 examples, JSON and
  JUnit written) and a ``conformance.check`` of a numpy kernel, repeated in this process as the
  test suite and the pytest plugin repeat them: the CPU seconds of the first and of a later one.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Optional

from conformance import pool, suite
from conformance.cases.edges import edge_pool
from conformance.dtypes import info

WARMED: set[tuple] = set()  # backends warmed up in this process


def _warm_up(spec: suite.RowSpec) -> None:
    """One tiny call, once per backend and process, so framework imports and start-up are not timed."""
    key = (spec.backend, spec.profile, spec.variant)
    if key in WARMED:
        return
    WARMED.add(key)
    tiny = suite.InputBatch("warm-up", edge_pool(spec.dtype).values[:4])
    suite.run_batch(replace(spec, direction="forward"), tiny, config=suite.Options().config)


def sweep_part(selection: suite.Selection, *, jobs: int) -> tuple[float, float, float, dict[str, float], int]:
    """Every 16-bit row's sweep batch on ``jobs`` processes: (the timed seconds and CPU seconds of
    the busiest process, the wall time with warm-ups, timed seconds per backend, rows)."""
    specs = [s for s in suite.plan(selection)[0] if info(s.dtype).bits == 16]
    inputs = suite.Inputs(seed=0, max_examples=0, alphas=selection.alphas)

    def run(i: int) -> tuple[int, str, float, float]:
        spec = specs[i]
        _warm_up(spec)
        start, cpu = time.perf_counter(), time.process_time()
        suite.run_batch(spec, inputs.exhaustive16(spec.dtype, spec.direction), config=suite.Options().config)
        return os.getpid(), spec.backend, time.perf_counter() - start, time.process_time() - cpu

    per_process: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
    per_backend: dict[str, float] = defaultdict(float)

    def deliver(i: int, result: tuple[int, str, float, float], seconds: float) -> None:
        pid, backend, timed, cpu = result
        per_process[pid][0] += timed
        per_process[pid][1] += cpu
        per_backend[backend] += timed

    start = time.perf_counter()
    tasks = suite.row_tasks(specs)
    if jobs > 1:
        pool.run_tasks(tasks, run, jobs=jobs, deliver=deliver)
    else:
        for task in tasks:
            deliver(task.index, run(task.index), 0.0)
    busiest = max(per_process.values())
    return busiest[0], busiest[1], time.perf_counter() - start, dict(per_backend), len(specs)


def whole_suite(*, jobs: int) -> tuple[float, float, str]:
    """``conformance run`` as ``make conformance`` runs it, in a new process: (wall s, CPU s of it and
    its children, its last line)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "conformance", "run", "--json", f"{tmp}/conformance.json",
                               "--junit", f"{tmp}/junit.xml", "--results-dir", f"{tmp}/results", "--jobs",
                               str(jobs), "-q"], capture_output=True, text=True, cwd=tmp)
        wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    last = (done.stdout.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return wall, cpu, last


SMALL_RUN = ("run", "--backend", "cann,golden", "--dtype", "fp16", "--max-examples", "20", "--jobs", "1", "-q")


def _small_run(tmp: str) -> None:
    from conformance import cli

    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        cli.main([*SMALL_RUN, "--json", f"{tmp}/r.json", "--junit", f"{tmp}/r.xml", "--results-dir", f"{tmp}/res"])


def _small_check() -> None:
    import numpy as np

    import conformance

    def kernel(x: np.ndarray, alpha: float) -> np.ndarray:
        return np.where(x > 0, x, x * x.dtype.type(alpha)).astype(x.dtype)
    conformance.check(kernel, dtypes=["float16", "float32"], max_examples=20)


def fixed_costs(*, repeats: int) -> dict[str, tuple[float, float]]:
    """CPU seconds of the first and the mean of the later ``repeats - 1`` in-process runs, by kind."""
    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, once in (("run", lambda: _small_run(tmp)), ("check", _small_check)):
            seconds = []
            for _ in range(repeats):
                cpu = time.process_time()
                once()
                seconds.append(time.process_time() - cpu)
            found[name] = (seconds[0], sum(seconds[1:]) / max(1, len(seconds) - 1))
    return found


def _print_fixed(repeats: int) -> None:
    for name, (first, later) in fixed_costs(repeats=repeats).items():
        print(f"fixed costs, {name}: {first:.2f} s CPU the first time, {later:.2f} s each of {repeats - 1} "
              f"later runs in the same process", flush=True)


def _print_suite(jobs: int) -> None:
    wall, cpu, last = whole_suite(jobs=jobs)
    print(f"default suite, --jobs {jobs}: {wall:.1f} s wall, {cpu:.1f} s CPU ({last}; target <= 60 s)", flush=True)


def _print_sweep(jobs: int) -> None:
    if jobs > 1 and not pool.can_fork():  # a framework runs threads here already: measure in a new process
        subprocess.run([sys.executable, "-m", "benchmarks.bench_suite", "--part", "sweep", "--jobs", str(jobs)],
                       check=False)
        return
    busiest, cpu, wall, per_backend, rows = sweep_part(suite.Selection(), jobs=jobs)
    detail = ", ".join(f"{b} {t:.1f} s" for b, t in per_backend.items())
    print(f"exhaustive 16-bit part, --jobs {jobs}: {rows} rows x 65,536 patterns, {busiest:.1f} s in the busiest "
          f"process, {cpu:.1f} s of its CPU ({wall:.1f} s wall with warm-ups; {detail}; target <= 5 s)", flush=True)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("all", "sweep", "suite", "fixed"), default="all")
    parser.add_argument("--repeats", type=int, default=5, help="--part fixed: runs of each kind")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--serial", action="store_true", help="also time --jobs 1, right after")
    args = parser.parse_args(argv if argv is not None else [])
    runs = [args.jobs, 1] if args.serial and args.jobs != 1 else [args.jobs]
    for jobs in runs if args.part in ("all", "suite") else ():
        _print_suite(jobs)
    for jobs in runs if args.part in ("all", "sweep") else ():
        _print_sweep(jobs)
    if args.part in ("all", "fixed"):
        _print_fixed(max(2, args.repeats))


if __name__ == "__main__":
    main(sys.argv[1:])
