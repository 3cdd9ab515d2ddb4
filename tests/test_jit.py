"""conformance.jit: how compiled passes split their work over threads."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from conformance import jit
from conformance.errors import UsageError


def test_in_parallel_keeps_the_order_and_runs_the_first_call_here(monkeypatch):
    monkeypatch.setenv("CONFORMANCE_THREADS", "2")
    names = jit.in_parallel([lambda: threading.current_thread().name, lambda: threading.current_thread().name])
    assert names[0] == threading.current_thread().name and names[1].startswith("conformance-pass")
    assert jit.in_parallel([lambda k=k: k * k for k in range(7)]) == [k * k for k in range(7)]


def test_one_thread_runs_every_call_here(monkeypatch):
    monkeypatch.setenv("CONFORMANCE_THREADS", "1")
    here = threading.current_thread().name
    assert jit.in_parallel([lambda: threading.current_thread().name] * 3) == [here] * 3


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_thread_count_is_one_line_saying_what_to_set(monkeypatch, value):
    monkeypatch.setenv("CONFORMANCE_THREADS", value)
    with pytest.raises(UsageError, match="CONFORMANCE_THREADS"):
        jit.threads()


def test_threads_default_to_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.delenv("CONFORMANCE_THREADS", raising=False)
    assert jit.threads() == len(os.sched_getaffinity(0))


def test_a_forked_child_runs_its_calls_on_threads_of_its_own(monkeypatch):
    """The parent's pool has an idle thread; the child has none of it, so it must make its own."""
    monkeypatch.setenv("CONFORMANCE_THREADS", "2")
    assert jit.in_parallel([lambda: 1, lambda: 2]) == [1, 2]  # the pool exists, its thread idle
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            got = jit.in_parallel([lambda: 3, lambda: threading.current_thread().name])
            os.write(write, repr(got).encode())
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(child, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    if done[0] == 0:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    said = os.read(read, 1000).decode()
    os.close(read)
    assert done[0] == child, "the child's in_parallel never returned"
    assert said.startswith("[3, 'conformance-pass"), said


@pytest.mark.parametrize(("threads", "lo", "hi", "least", "want"), [
    ("2", 0, 10, 11, [(0, 10)]),
    ("2", 0, 10, 10, [(0, 5), (5, 10)]),
    ("3", 5, 6, 1, [(5, 5), (5, 5), (5, 6)]),
    ("1", 0, 1 << 20, 1, [(0, 1 << 20)]),
])
def test_ranges_are_consecutive_one_per_thread_from_the_least_size(monkeypatch, threads, lo, hi, least, want):
    monkeypatch.setenv("CONFORMANCE_THREADS", threads)
    assert jit.ranges(lo, hi, least=least) == want
