"""How the program ends (``interrupts.exit_now``): its exit code, every exit handler run and
stdout and stderr flushed, then no interpreter teardown (the destructors a framework's modules
run there took seconds and wrote nothing).  Each case runs in a process of its own."""
from __future__ import annotations

import subprocess
import sys

import pytest

ENDING = '''
import atexit, sys
from conformance.interrupts import exit_now

class Torn:
    def __del__(self):
        sys.stderr.write("torn down\\n")

kept = Torn()  # a module global: destroyed in the interpreter's teardown, if it runs
atexit.register(lambda: sys.stderr.write("handler ran\\n"))
sys.stdout.write("printed without a newline")
{end}
'''


def _ended(end: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", ENDING.format(end=end)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("code", [0, 1, 3])
def test_the_program_ends_with_its_code_its_output_flushed_and_its_exit_handlers_run(code: int) -> None:
    done = _ended(f"exit_now({code})")
    assert (done.returncode, done.stdout) == (code, "printed without a newline")
    assert done.stderr.splitlines() == ["handler ran"]


def test_the_interpreters_teardown_is_skipped_where_a_plain_exit_runs_it() -> None:
    assert "torn down" not in _ended("exit_now(0)").stderr
    assert "torn down" in _ended("sys.exit(0)").stderr  # the same script, ended as Python ends it


def test_a_closed_stdout_does_not_change_the_code() -> None:
    done = _ended("sys.stdout.close(); exit_now(1)")  # closing it wrote what it held
    assert (done.returncode, done.stdout) == (1, "printed without a newline")
    assert "handler ran" in done.stderr
