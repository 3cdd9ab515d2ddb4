"""A plug-in that ends the process: ``os._exit`` in-process raises instead (the command line
makes it a ``SystemExit``), so its row fails; a death nothing in-process can stop (SIGKILL)
leaves the report written before the first backend call, which fails; behind ``--worker``
the same kernel is a failing row.  Every death is in a process of its own (one that got through
would end pytest's, exit code 0 included); the processes compute on golden's numpy path."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import NUMPY_PATH, children_on_the_numpy_path, cli_subprocess, run_cli

ONE_ROW = ["--dtype", "fp16", "--alpha", "0.2", "--direction", "forward", "--max-examples", "5"]
KERNEL = '''
import os

import numpy as np
from conformance.records import BackendResult


class Backend:
    name, profile, variant = "vanishing", None, None

    def supports(self, dtype, out_dtype, direction):
        return dtype == out_dtype == "float16"

    def forward(self, x, alpha, *, out_dtype=None):
        {death}

    def backward(self, dy, x, alpha, *, out_dtype=None):
        {death}


def backend():
    return Backend()
'''


OS_EXIT = "os._exit(0)"
SIGKILL = "os.kill(os.getpid(), 9)"


@pytest.fixture(autouse=True)
def numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    children_on_the_numpy_path(monkeypatch)


def _kernel(tmp_path: Path, *, death: str = OS_EXIT) -> str:
    path = tmp_path / "vanishing.py"
    path.write_text(KERNEL.format(death=death))
    return f"{path}:backend"


def test_an_os_exit_in_a_run_is_a_failing_row(tmp_path: Path) -> None:
    done = cli_subprocess("run", "--backend", _kernel(tmp_path), *ONE_ROW, "--json", "r.json", "-q", cwd=tmp_path,
                          small_batches=True)
    assert done.returncode == 1, done.stdout + done.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["verdict"] == "fail" and not doc.get("partial") and len(doc["rows"]) == 1
    assert "os._exit(0)" in doc["rows"][0]["findings"][0]["summary"]


def test_an_os_exit_while_loading_a_kernel_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "exits.py").write_text("import os\nos._exit(0)\n")
    done = cli_subprocess("run", "--backend", f"{tmp_path / 'exits.py'}:f", *ONE_ROW, "-q", cwd=tmp_path)
    assert done.returncode == 2 and "os._exit(0)" in done.stderr, done.stderr


def test_a_killed_run_leaves_a_failing_partial_report(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text('{"verdict": "pass"}')  # an older report: removed, never kept
    done = cli_subprocess("run", "--backend", _kernel(tmp_path, death=SIGKILL), *ONE_ROW, "--json", "r.json",
                          "--junit", "r.xml", "-q", cwd=tmp_path, small_batches=True)
    assert done.returncode == -9, done.stderr  # nothing in-process outlives SIGKILL
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["verdict"] == "fail" and doc["partial"] is True and doc["rows"] == []
    assert 'errors="1"' in (tmp_path / "r.xml").read_text()


def test_a_run_that_finishes_replaces_the_placeholder(tmp_path: Path, capsys) -> None:
    (tmp_path / "r.json").write_text('{"verdict": "fail", "partial": true, "rows": []}')  # as a killed run left it
    done = run_cli(["run", "--backend", "golden", *ONE_ROW, "--json", "r.json", "-q"], capsys, cwd=tmp_path)
    assert done.code == 0, done.text
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["verdict"] == "pass" and not doc.get("partial") and len(doc["rows"]) == 1


# sweep runs built-in backends only: golden's forward is made to vanish, in a process of its own
SWEEP_VANISHING = """
import os, sys
from conformance import cli
from conformance.frameworks.golden_backend import GoldenBackend
GoldenBackend.forward = lambda self, x, alpha, *, out_dtype=None: os._exit(0)
sys.exit(cli.main(sys.argv[1:]))
"""


def test_an_os_exit_in_a_sweep_is_a_failing_row(tmp_path: Path) -> None:
    argv = ["sweep", "--backend", "golden", "--dtype", "fp16", "--range", "0x8000:0x8100", "--workers", "1",
            "--store", "s.sqlite", "--json", "r.json", "-q"]
    done = subprocess.run([sys.executable, "-c", SWEEP_VANISHING, *argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **NUMPY_PATH})
    assert done.returncode == 1, done.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["verdict"] == "fail" and len(doc["rows"]) == 1
    assert "os._exit(0)" in doc["rows"][0]["findings"][0]["summary"]


def test_the_same_kernel_behind_a_worker_is_a_failing_row(tmp_path: Path, capsys) -> None:
    """The kernel dies in the worker's process; the run that reads its rows may be this one."""
    from conformance import suite
    from conformance.worker import client

    worker = shlex.join([sys.executable, "-m", "conformance", "worker", "--backend", _kernel(tmp_path)])
    try:
        done = run_cli(["run", "--worker", worker, "--worker-timeout", "60", *ONE_ROW, "--json", "r.json", "-q"],
                       capsys, cwd=tmp_path)
    finally:
        client.close_all()
        suite.backend_for.cache_clear()
    assert done.code == 1, done.text
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["verdict"] == "fail" and not doc.get("partial")
    assert doc["rows"] and all(r["verdict"] == "fail" for r in doc["rows"])
    assert all(r["findings"][0]["category"] == "rejected-input" for r in doc["rows"])
    assert "worker" in doc["rows"][0]["findings"][0]["summary"]
