"""A tensor's chunks and their golden, read ahead on a thread of their own.

While the calling thread judges chunk k, a reader thread reads chunks k+1 and k+2 and
computes their golden (both release the GIL: ``pread`` and the golden's compiled loops),
so a large dump is judged on two cores and neither waits for the other's every chunk.
What the caller sees is what a plain loop gives: the chunks in order, each judged on the
calling thread; an error of the reader (a file that shrank, a golden that refuses an
input) is raised where the plain loop would have raised it, after the chunks before it
were handed on; Ctrl-C and SIGTERM reach the calling thread, which is never left waiting
for more than the chunk being read, and the chunks not yet begun are cancelled.  The
reader thread (``jit.pool("read")``) is apart from :func:`conformance.jit.in_parallel`'s
pool, so a judge or a golden that splits its own work over that pool never waits for the
reader, nor the reader for it.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Optional, TypeVar

import numpy as np

from conformance import jit
from conformance.records import Chunk

__all__ = ["read_ahead"]

T = TypeVar("T")
Golden = Callable[[Chunk, int], np.ndarray]  # a chunk's golden, given the chunk and its slot
Item = Optional[tuple[Chunk, np.ndarray]]  # a chunk and its golden; None after the last chunk
DEPTH = 2  # chunks the reader thread reads ahead: it need not wait for the judge of each
SLOTS = DEPTH + 2  # chunks' goldens in use at once, at most: judged, read ahead, being computed, and one spare


def _next(chunks: Iterator[Chunk], golden: Golden, count: int) -> Item:
    chunk = next(chunks, None)
    return None if chunk is None else (chunk, golden(chunk, count % SLOTS))


def read_ahead(chunks: Iterable[Chunk], *, golden: Golden, judge: Callable[[Chunk, np.ndarray], T],
               ahead: bool) -> Iterator[tuple[Chunk, T]]:
    """Each chunk of ``chunks`` and ``judge(chunk, golden(chunk, slot))``, in order; with ``ahead``
    the next :data:`DEPTH` chunks are read and their goldens computed on the reader thread
    meanwhile (an error of it raised here by ``Future.result`` after the chunks before it; the
    chunks not yet begun are cancelled when the caller stops early).  A golden computed on the
    calling thread (the first chunk's, every chunk's without ``ahead``) runs while nothing else
    does, and the compiled golden splits it a range per thread; on the reader thread it runs
    whole (:func:`conformance.jit.split` splits no work of a pool's thread).  The k-th chunk's
    slot is ``k % SLOTS``: no other chunk of that slot is judged, or held for judging, while its
    golden is computed, so ``golden`` may write it into room of the slot's own."""
    items = iter(chunks)
    item, asked = _next(items, golden, 0), 1
    queued: deque[Future[Item]] = deque()
    try:
        while item is not None:
            chunk, expected = item
            while ahead and len(queued) < DEPTH:
                queued.append(jit.pool("read", size=1).submit(_next, items, golden, asked))
                asked += 1
            result = judge(chunk, expected)
            del item, expected  # the reader's next chunks may take this one's memory
            yield chunk, result
            if not ahead:
                item, asked = _next(items, golden, asked), asked + 1
            else:
                item = queued.popleft().result()
    finally:
        for future in queued:
            future.cancel()
