"""When the compiled paths run: numba installed (the ``fast`` extra) and allowed.

:func:`enabled` is False without numba, or with ``CONFORMANCE_COMPILED=0``; every caller
then takes its numpy path, which stays the reference implementation.  numba itself is
imported only by the modules holding compiled loops, and those only on a first compiled
call, so a process that never computes (``conformance --help``, a worker waiting) does not
pay for it.  Compiled code is cached (``cache=True``) in the package's ``__pycache__``, or
under ``NUMBA_CACHE_DIR`` when that is set (numba falls back to a per-user cache directory
when the package directory is read-only).

A compiled pass that releases the GIL (``nogil=True``) may split its work over
:func:`threads` threads with :func:`in_parallel` (or :func:`split`, a range per thread); a pass
split so must give the same bits whatever the number of threads (``CONFORMANCE_THREADS=1`` runs
everything on the calling thread).
"""
from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import TypeVar

import numpy as np

from conformance.errors import UsageError

__all__ = ["available", "enabled", "in_parallel", "pool", "ranges", "read_only", "split", "threads"]

T = TypeVar("T")


@cache
def available() -> bool:
    """True when numba is installed."""
    return importlib.util.find_spec("numba") is not None


def enabled() -> bool:
    """True when compiled paths may run: numba is there and ``CONFORMANCE_COMPILED`` is not 0."""
    return os.environ.get("CONFORMANCE_COMPILED", "1") != "0" and available()


def read_only(a: np.ndarray) -> np.ndarray:
    """``a`` as a C-contiguous read-only view (a copy only when ``a`` is strided): what a compiled
    loop reads.  numba compiles a signature per layout and per writability, so arrays a run
    computes (writable), reads from a file (read-only) or slices (strided) would each compile
    one; given this way they share the one the set-up's warm-up compiled."""
    view = np.ascontiguousarray(a).view()
    view.setflags(write=False)
    return view


def threads() -> int:
    """How many threads one compiled pass may split its work over: ``CONFORMANCE_THREADS``
    when it is set (a whole number, at least 1), else the cores this process may run on."""
    given = os.environ.get("CONFORMANCE_THREADS", "").strip()
    if not given:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    if not given.isdigit() or int(given) < 1:
        raise UsageError(f"CONFORMANCE_THREADS={given!r} is not a whole number of at least 1; "
                         "set it to how many threads a compiled pass may use, or unset it")
    return int(given)


def ranges(lo: int, hi: int, *, least: int) -> list[tuple[int, int]]:
    """``lo:hi`` as consecutive ranges, one per thread (:func:`threads`), or one range when it
    is shorter than ``least``; a range may be empty when there are more threads than places."""
    count = 1 if hi - lo < least else threads()
    cuts = [lo + (hi - lo) * p // count for p in range(count + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


@cache
def pool(name: str, *, size: int) -> ThreadPoolExecutor:
    """The process's pool of ``size`` threads named ``conformance-NAME``, made on first use."""
    return ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"conformance-{name}")


# A forked child has none of its parent's threads, but a pool's record of idle ones: it would
# queue work that no thread takes.  The child makes its own pools.
os.register_at_fork(after_in_child=pool.cache_clear)


_SPLITTING = threading.local()  # .active: this thread runs one of the calls of an in_parallel


def in_parallel(calls: Sequence[Callable[[], T]]) -> list[T]:
    """The results of ``calls`` (functions of no argument), in order: the first runs on the
    calling thread, the others on a shared pool of ``threads() - 1`` threads (all on the
    calling thread when that is 0).  Only calls that release the GIL run at the same time."""
    if len(calls) <= 1 or threads() == 1:
        return [call() for call in calls]
    futures = [pool("pass", size=threads() - 1).submit(call) for call in calls[1:]]
    outer, _SPLITTING.active = getattr(_SPLITTING, "active", False), True
    try:
        first = calls[0]()
    finally:
        _SPLITTING.active = outer
    return [first, *(f.result() for f in futures)]


def split(work: Callable[[int, int], object], n: int, *, least: int) -> None:
    """``work(lo, hi)`` over ``0:n``, a range per thread (:func:`ranges`), unless the work is
    already one of several split over the threads (a call of :func:`in_parallel`, or any work on
    a thread of the process's pools): then on the calling thread alone, since a second split
    would wait for the threads the first one holds."""
    nested = getattr(_SPLITTING, "active", False) or threading.current_thread().name.startswith("conformance-")
    parts = [(0, n)] if nested else ranges(0, n, least=least)
    in_parallel([functools.partial(work, lo, hi) for lo, hi in parts])
