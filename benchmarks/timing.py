"""Shared helpers: best-of-n wall time and peak traced memory of a call."""
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


def peak_bytes(fn: Callable[[], object]) -> int:
    """Peak memory traced during ``fn`` (numpy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
