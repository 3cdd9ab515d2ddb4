"""Shared helpers: best-of-n wall time, calls timed in alternation, peak traced memory of a call."""
from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable


def best_time(fn: Callable[[], object], *, repeat: int = 5) -> float:
    """The fastest of ``repeat`` runs, in seconds (the least disturbed by a noisy machine)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def alternated(*fns: Callable[[], object], rounds: int = 5) -> list[float]:
    """The best time of each call, the calls run in turn ``rounds`` times (the same load for all)."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], best_time(fn, repeat=1))
    return best


def peak_bytes(fn: Callable[[], object]) -> int:
    """Peak memory traced during ``fn`` (numpy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
