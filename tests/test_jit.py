"""conformance.jit: how compiled passes split their work over threads."""
from __future__ import annotations

import os
import threading

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
