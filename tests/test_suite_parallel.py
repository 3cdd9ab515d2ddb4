"""Rows on several processes: the same reports as one process, forked lanes that keep a backend's
rows together, interruptions and internal errors as in one process, progress lines per backend."""
from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.unchanged import normalise
from conformance import pool, suite
from conformance.render.console import LineProgress
from tests.helpers import (
    NUMPY_PATH,
    children_on_the_numpy_path,
    cli_command,
    cli_subprocess,
    error_lines,
    keep_small_batches,
    run_cli,
)

#: A numpy kernel whose slope is its dtype's (a warning) and at most 1 (so alpha 1.5 fails, and saves
#: a reproducer, in a row planned last); ``logged`` and ``logged_too`` also log the pid of each process
#: that runs them, ``slow`` pauses too, and ``buggy`` is a backend with a bug in a forked process.
KERNEL = '''
import os
import time

import numpy as np

from conformance.records import BackendResult

LOG = {log!r}
PARENT = os.getpid()  # the process that loads this file, before it forks


def rounded(x, alpha):
    return np.where(x > 0, x, x * x.dtype.type(min(alpha, 1.0)))


def rounded_backward(dy, x, alpha):
    return np.where(x > 0, dy, dy * x.dtype.type(min(alpha, 1.0)))


def logged(x, alpha, pause=0.0):
    with open(LOG, "a") as log:
        log.write(f"{{os.getpid()}}\\n")
    time.sleep(pause)
    return rounded(x, alpha)


logged_too = logged
logged_backward = logged_too_backward = rounded_backward


def slow(x, alpha):
    return logged(x, alpha, pause=0.3)


class Buggy:
    name, profile, variant = "buggy", None, None

    def supports(self, dtype, out_dtype, direction):
        return dtype == out_dtype == "float16"

    def forward(self, x, alpha, *, out_dtype=None):
        with np.errstate(all="ignore"):
            return BackendResult(rounded(x, alpha))

    def backward(self, dy, x, alpha, *, out_dtype=None):
        with np.errstate(all="ignore"):
            return BackendResult(rounded_backward(dy, x, alpha))

    def row_notes(self, *row):
        if os.getpid() != PARENT:
            raise RuntimeError("a bug in a row")
        return ()


buggy = buggy_too = Buggy
'''
ROWS = ["--dtype", "fp16", "--alpha", "0", "--alpha", "0.2", "--alpha", "1.5", "--max-examples", "5"]


def _kernel(tmp_path: Path) -> Path:
    path = tmp_path / "rounded.py"
    path.write_text(KERNEL.format(log=str(tmp_path / "pids.log")))
    return path


def _pids(log: Path) -> set[int]:
    return {int(line) for line in log.read_text().split()} if log.exists() else set()


def _comparable(path: Path, *, run_dir: Path) -> dict:
    """The JSON report without its timings and command line, its paths relative to ``run_dir``."""
    doc = normalise(json.loads(path.read_text()), paths={str(run_dir): "<run>"})
    doc["summary"].pop("command", None)
    return doc


def _argv(kernel: Path, *, jobs: int) -> list[str]:
    """Each logging kernel is a process's first backend when there are two."""
    return ["run", "--backend", f"{kernel}:logged,{kernel}:logged_too,golden", *ROWS, "--json", "r.json",
            "--junit", "r.xml", "--results-dir", "res", "--jobs", str(jobs)]


def test_two_processes_give_the_reports_of_one(tmp_path: Path, capsys, monkeypatch) -> None:
    """One process (this one) and two (a run in a new process: this one may have started framework
    threads, which a fork does not survive), both on their small batches."""
    children_on_the_numpy_path(monkeypatch)
    keep_small_batches(monkeypatch)
    kernel, log = _kernel(tmp_path), tmp_path / "pids.log"
    (tmp_path / "one").mkdir()
    serial = run_cli(_argv(kernel, jobs=1), capsys, cwd=tmp_path / "one")
    assert serial.code == 1, serial.text  # the kernels' alpha-1.5 rows fail
    assert _pids(log) == {os.getpid()}
    log.unlink()
    (tmp_path / "two").mkdir()
    parallel = cli_subprocess(*_argv(kernel, jobs=2), cwd=tmp_path / "two", small_batches=True)
    assert parallel.returncode == 1, parallel.stdout + parallel.stderr
    assert len(_pids(log)) == 2  # the run and a forked process each ran a kernel
    assert _comparable(tmp_path / "two" / "r.json", run_dir=tmp_path / "two") == \
        _comparable(tmp_path / "one" / "r.json", run_dir=tmp_path / "one")
    junit = [re.sub(r'(time|timestamp)="[^"]*"', "", (tmp_path / d / "r.xml").read_text()) for d in ("one", "two")]
    assert junit[0] == junit[1]
    assert parallel.stdout == serial.out
    saved = sorted(p.name for p in (tmp_path / "one" / "res").iterdir())  # each kernel's alpha-1.5 rows
    assert len(saved) == 4 and saved == sorted(p.name for p in (tmp_path / "two" / "res").iterdir())
    assert all((tmp_path / "one" / "res" / n).read_bytes() == (tmp_path / "two" / "res" / n).read_bytes()
               for n in saved)


def test_a_small_run_and_a_process_with_framework_threads_stay_alone(monkeypatch) -> None:
    """A comparison runs on several processes too (its groups apart: ``conformance.compared``)."""
    options = suite.Options(jobs=4)
    monkeypatch.setattr(pool, "can_fork", lambda: True)
    assert suite.processes(suite.Selection(), options, rows=4 * suite.ROWS_PER_JOB) == 4
    assert suite.processes(suite.Selection(), options, rows=2 * suite.ROWS_PER_JOB - 1) == 1
    assert suite.processes(suite.Selection(references=("torch",)), options, rows=400) == 4
    assert suite.processes(suite.Selection(), suite.Options(jobs=1), rows=400) == 1
    monkeypatch.setattr(pool, "can_fork", lambda: False)
    assert suite.processes(suite.Selection(), options, rows=400) == 1


def test_a_framework_that_started_threads_keeps_the_rows_here(monkeypatch) -> None:
    for name in pool.THREADED:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delitem(sys.modules, "jax._src.xla_bridge", raising=False)
    assert pool.can_fork()
    monkeypatch.setitem(sys.modules, "torch", sys)  # imported: its thread pool may have started
    assert not pool.can_fork()


def test_sigterm_stops_every_process_and_keeps_the_finished_rows(tmp_path: Path) -> None:
    """Two kernels, one per process; SIGTERM once both run and the fast one's last row has failed
    (its reproducer appears after its other rows finished), while the slow one is still running."""
    kernel, log = _kernel(tmp_path), tmp_path / "pids.log"
    argv = cli_command("run", "--backend", f"{kernel}:logged,{kernel}:slow", "--dtype", "fp16", "--max-examples",
                       "5", "--direction", "forward", "--json", "r.json", "--results-dir", "res", "--jobs", "2",
                       small_batches=True)
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **NUMPY_PATH})
    try:
        deadline = time.monotonic() + 120
        while len(_pids(log)) < 2 or not list((tmp_path / "res").glob("*.npz")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, out + err
    assert "Traceback" not in out + err and "INCOMPLETE" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["partial"] is True and doc["verdict"] == "fail" and 1 <= len(doc["rows"]) < 16
    for pid in _pids(log):  # the forked process is gone too
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_an_internal_error_in_a_forked_process_is_exit_3_with_its_traceback(tmp_path: Path, monkeypatch) -> None:
    children_on_the_numpy_path(monkeypatch)
    kernel = _kernel(tmp_path)
    done = cli_subprocess("run", "--backend", f"{kernel}:buggy,{kernel}:buggy_too", "--dtype", "fp16",
                          "--max-examples", "5", "--json", "r.json", "--jobs", "2", cwd=tmp_path, small_batches=True)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and "internal error: RuntimeError: a bug in a row" in lines[0]
    saved = Path(re.search(r"traceback saved to (\S+);", lines[0]).group(1))
    text = saved.read_text()
    saved.unlink()
    assert "in a forked suite process" in text and "in row_notes" in text  # the child's own frames
    assert json.loads((tmp_path / "r.json").read_text())["partial"] is True


def _tasks(groups: str, *, here: str = "") -> list[pool.Task]:
    return [pool.Task(i, g, here=g in here) for i, g in enumerate(groups)]


def test_a_lane_keeps_its_group_then_takes_the_largest_free_one() -> None:
    scheduler = pool.Scheduler(_tasks("aabbbc"))
    taken = [scheduler.next(lane).group for lane in (0, 1, 0, 1, 0, 1)]
    assert taken == ["b", "a", "b", "a", "b", "c"]  # lane 1 finds b taken, keeps a, then takes c
    assert scheduler.next(0) is None and scheduler.next(1) is None


def test_a_lane_helps_another_only_when_no_group_is_free() -> None:
    scheduler = pool.Scheduler(_tasks("aaaa"))
    assert [scheduler.next(lane).index for lane in (0, 1, 0, 1)] == [0, 1, 2, 3]


def test_the_groups_of_this_process_go_to_lane_0_first_and_only() -> None:
    scheduler = pool.Scheduler(_tasks("wwaaa", here="w"))
    assert scheduler.next(0).group == "w" and scheduler.next(1).group == "a"
    assert [scheduler.next(1).group, scheduler.next(1).group, scheduler.next(1)] == ["a", "a", None]
    assert scheduler.next(0).group == "w" and scheduler.next(0) is None


def _meeting(log: Path) -> Callable[[int], tuple[int, int]]:
    """A task that logs its process and waits until a second process has logged too (each
    process then holds a group of its own), and returns ``i * 10`` and its pid."""

    def task(i: int) -> tuple[int, int]:
        with open(log, "a") as out:
            out.write(f"{os.getpid()}\n")
        deadline = time.monotonic() + 60
        while len(_pids(log)) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        return i * 10, os.getpid()

    return task


def test_results_and_errors_come_back_from_forked_processes(tmp_path: Path) -> None:
    got: dict[int, tuple[int, int]] = {}
    pool.run_tasks(_tasks("aabb"), _meeting(tmp_path / "pids.log"), jobs=2,
                   deliver=lambda i, result, seconds: got.update({i: result}))
    assert {i: value for i, (value, _) in got.items()} == {0: 0, 1: 10, 2: 20, 3: 30}
    assert len({pid for _, pid in got.values()}) == 2

    def raising(i: int) -> int:
        if os.getpid() != parent:
            raise ValueError(f"task {i}")
        return i

    parent = os.getpid()
    with pytest.raises(ValueError, match="task") as caught:
        pool.run_tasks(_tasks("aabb"), raising, jobs=2, deliver=lambda *_: None)
    assert "in a forked suite process" in str(caught.value.__cause__)


def test_progress_says_when_each_backend_running_side_by_side_is_done() -> None:
    out, now = io.StringIO(), [0.0]
    with LineProgress(stream=out, every=10, clock=lambda: now[0]) as progress:
        task = progress.add_task("run", total=5, groups={"a": 3, "b": 2})
        for group in "abab":
            progress.update(task, advance=1, group=group)
        now[0] = 11.0
        progress.update(task, advance=1, group="a")
    lines = out.getvalue().splitlines()
    assert lines[0] == "run progress: b done (2 rows); 4/5 rows, 0 s"
    assert lines[1] == "run progress: a done (3 rows); 5/5 rows, 11 s"
    assert lines[-1] == "run progress: finished; 5/5 rows, 11 s"
