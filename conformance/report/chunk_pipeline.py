"""A tensor's chunks and their golden, read one chunk ahead on a thread of their own.

While the calling thread judges chunk k, a reader thread reads chunk k+1 and computes its
golden (both release the GIL: ``pread`` and the golden's compiled loops), so a large dump
is judged on two cores.  What the caller sees is what a plain loop gives: the chunks in
order, each judged on the calling thread; an error of the reader (a file that shrank, a
golden that refuses an input) is raised where the plain loop would have raised it, after
the chunks before it were handed on; Ctrl-C and SIGTERM reach the calling thread, which
is never left waiting for more than the one chunk in flight.  The reader thread is apart
from :func:`conformance.jit.in_parallel`'s pool, so a judge or a golden that splits its
own work over that pool never waits for the reader, nor the reader for it.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import Optional, TypeVar

import numpy as np

from conformance.report.evaluate import Chunk

__all__ = ["judged"]

T = TypeVar("T")
Golden = Callable[[Chunk], np.ndarray]


@dataclass(frozen=True)
class _Next:
    """The next chunk and its golden (None after the last chunk), or the error reading it raised."""

    item: Optional[tuple[Chunk, np.ndarray]]
    error: Optional[Exception] = None

    def get(self) -> Optional[tuple[Chunk, np.ndarray]]:
        if self.error is not None:
            raise self.error
        return self.item


def _next(chunks: Iterator[Chunk], golden: Golden) -> _Next:
    try:
        chunk = next(chunks, None)
        return _Next(None if chunk is None else (chunk, golden(chunk)))
    except Exception as exc:  # raised on the calling thread, in order (:meth:`_Next.get`)
        return _Next(None, exc)


@cache
def _reader() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="conformance-read")


os.register_at_fork(after_in_child=_reader.cache_clear)  # a forked child makes its own (as jit's pool)


def judged(chunks: Iterable[Chunk], *, golden: Golden, judge: Callable[[Chunk, np.ndarray], T],
           ahead: bool) -> Iterator[tuple[Chunk, T]]:
    """Each chunk of ``chunks`` and ``judge(chunk, golden(chunk))``, in order; with ``ahead``
    the next chunk is read and its golden computed on the reader thread meanwhile."""
    items = iter(chunks)
    coming = _next(items, golden)
    while (item := coming.get()) is not None:
        chunk, expected = item
        future: Optional[Future[_Next]] = _reader().submit(_next, items, golden) if ahead else None
        result = judge(chunk, expected)
        del item, expected  # the reader's next chunk may take this one's memory
        yield chunk, result
        coming = future.result() if future is not None else _next(items, golden)
