"""`agree` on several processes: a (dtype, out_dtype, direction, alpha) group in one process, never
helped by another, a group with a worker's row kept here, and the report of one process."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.unchanged import normalise
from conformance import compared, pool
from conformance.judge.agreement import Collector
from conformance.records import RowKey
from tests.helpers import children_on_the_numpy_path, cli_subprocess, keep_small_batches, run_cli

#: Three kernels: exact in fp16 for alpha <= 1, and each logs the process that runs it.
KERNEL = '''
import os

import numpy as np

LOG = {log!r}


def rounded(x, alpha):
    with open(LOG, "a") as log:
        log.write(f"{{os.getpid()}}\\n")
    return np.where(x > 0, x, x * x.dtype.type(min(alpha, 1.0)))


def rounded_backward(dy, x, alpha):
    return np.where(x > 0, dy, dy * x.dtype.type(min(alpha, 1.0)))


twice = rounded
twice_backward = rounded_backward
'''
ROWS = ["--dtype", "fp16", "--alpha", "0,0.2,1.5", "--max-examples", "5", "--json", "r.json"]


def _argv(kernel: Path, *, jobs: int) -> list[str]:
    return ["agree", "--backend", f"golden,{kernel}:rounded,{kernel}:twice", *ROWS, "--jobs", str(jobs)]


def _pids(log: Path) -> set[int]:
    return {int(line) for line in log.read_text().split()} if log.exists() else set()


def test_two_processes_give_the_report_of_one(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """One process (this one), then two (a new process: this one may run framework threads)."""
    children_on_the_numpy_path(monkeypatch)
    keep_small_batches(monkeypatch)
    kernel, log = tmp_path / "rounded.py", tmp_path / "pids.log"
    kernel.write_text(KERNEL.format(log=str(log)))
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    serial = run_cli(_argv(kernel, jobs=1), capsys, cwd=tmp_path / "one")
    assert serial.code == 0, serial.text
    log.unlink()
    parallel = cli_subprocess(*_argv(kernel, jobs=2), cwd=tmp_path / "two", small_batches=True)
    assert parallel.returncode == 0, parallel.stdout + parallel.stderr
    assert len(_pids(log)) == 2  # the run and a forked process each ran groups
    reports = [normalise(json.loads((tmp_path / d / "r.json").read_text()), paths={str(tmp_path / d): "<run>"})
               for d in ("one", "two")]
    assert reports[0]["agreement"] and reports[0] == reports[1]
    assert parallel.stdout == serial.out


def _key(backend: str, direction: str, alpha: float) -> RowKey:
    return RowKey(backend, None, None, "float16", "float16", direction, alpha)  # type: ignore[arg-type]


def test_a_group_is_one_pool_group_kept_here_when_a_worker_serves_a_row() -> None:
    specs = [_key(b, d, a) for b in ("golden", "served") for d in ("forward", "backward") for a in (0.1, 0.2)]
    served = [s.backend == "served" and s.direction == "forward" for s in specs]
    tasks = compared.comparison_tasks(specs, range(len(specs)), served=served, extra=2)
    groups = {t.group for t in tasks[:-2]}
    assert len(groups) == 4 and all(t.index == i for i, t in enumerate(tasks))
    assert all(t.here == (specs[t.index].direction == "forward") for t in tasks[:-2])
    assert tasks[-2].group == tasks[-1].group not in groups and tasks[-1].here


def test_without_sharing_a_lane_never_helps_another_with_its_group() -> None:
    scheduler = pool.Scheduler([pool.Task(i, g) for i, g in enumerate("aaab")], shared=False)
    assert scheduler.next(0).group == "a" and scheduler.next(1).group == "b"
    assert scheduler.next(1) is None  # a is lane 0's
    assert [scheduler.next(0).index, scheduler.next(0).index, scheduler.next(0)] == [1, 2, None]


def test_one_lane_runs_the_tasks_in_order_and_hands_the_agreements_back() -> None:
    collector, seen = Collector(()), []

    def run(i: int) -> str:
        collector.found = [*collector.found, f"agreement {i}"]
        return f"row {i}"

    tasks = [pool.Task(i, "g") for i in (2, 0, 1)]
    compared.run_compared(tasks, run, collector=collector, lanes=1,  # type: ignore[arg-type]
                          finished=lambda i, row, seconds: seen.append((i, row)))
    assert seen == [(2, "row 2"), (0, "row 0"), (1, "row 1")]
    assert collector.found == ["agreement 2", "agreement 0", "agreement 1"]
