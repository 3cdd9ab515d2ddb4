"""A comparison's rows (``Selection.references``) on several processes, a group at a time in one.

A comparison compares rows within their group, one (dtype, out_dtype, direction, alpha): the
collector (``judge.agreement.Collector``) keeps the group's reference outputs, and
``judged_once.JudgedBatches`` the results judged on its batches, in the process that ran them.
So every row of a group runs in one process, one after another, references first (the order
``suite.comparison_order`` gives); the group is a :mod:`conformance.pool` group that no second
process helps with.  A group with a row served by a worker runs in this process, where the
worker's pipes are, and so do the rows that run after the suite's own (the PReLU/RReLU rows,
which keep their own collector here).

The agreements a row finds travel back with it, wherever it ran, and are the collector's
``found`` once the rows are done (or interrupted); the suite sorts them into the planned order.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from conformance import pool
from conformance.judge.agreement import Agreement, Collector
from conformance.records import Row, RowKey

RunRow = Callable[[int], Row]
Finished = Callable[[int, Row, float], None]  # a row's index in the plan, the row, the seconds it took


def comparison_tasks(specs: Sequence[RowKey], order: Sequence[int], *, served: Sequence[bool],
                     extra: int = 0) -> list[pool.Task]:
    """The rows of ``specs`` as pool tasks in ``order``, a group per (dtype, out_dtype, direction,
    alpha), kept here when one of its rows is ``served`` by a worker; then ``extra`` rows (indices
    after the rows), one group kept here."""
    def group(i: int) -> str:
        s = specs[i]
        return f"{s.dtype}|{s.out_dtype}|{s.direction}|{s.alpha!r}"

    here = {group(i) for i in order if served[i]}
    n = len(specs)
    return [*(pool.Task(i, group(i), here=group(i) in here) for i in order),
            *(pool.Task(i, "after the rows", here=True) for i in range(n, n + extra))]


def run_compared(tasks: Sequence[pool.Task], run: RunRow, *, collector: Collector, lanes: int,
                 finished: Finished, prepare: Callable[[], object] = lambda: None) -> None:
    """Every task's row on ``lanes`` processes (one: here, in order), ``finished`` told of each as
    it ends; the agreements the rows found are ``collector.found`` afterwards.  ``prepare`` builds
    what every process would otherwise build for itself (the input batches, hypothesis's draws
    among them): it runs here before the other processes fork, which then share it."""
    found: list[Agreement] = []

    def compared(i: int) -> tuple[Row, list[Agreement]]:
        row = run(i)
        new, collector.found = collector.found, []
        return row, new

    def deliver(i: int, result: tuple[Row, list[Agreement]], seconds: float) -> None:
        found.extend(result[1])
        finished(i, result[0], seconds)
    try:
        if lanes > 1:
            prepare()
            pool.run_tasks(tasks, compared, jobs=lanes, deliver=deliver, shared=False)
        else:
            for task in tasks:
                deliver(task.index, *_timed(compared, task.index))
    finally:
        collector.found = [*found, *collector.found]


def _timed(run: Callable[[int], tuple[Row, list[Agreement]]], i: int) -> tuple[tuple[Row, list[Agreement]], float]:
    start = time.perf_counter()
    result = run(i)
    return result, time.perf_counter() - start

