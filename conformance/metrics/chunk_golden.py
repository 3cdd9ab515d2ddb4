"""The golden of a tensor's chunks, for :func:`conformance.judge.chunked.evaluate_chunks`.

Each chunk's golden is written into memory that an earlier chunk's golden held, once no one
reads that one any more (:data:`conformance.metrics.chunk_pipeline.SLOTS`): fresh memory, whose
first-touch page faults cost as much as the loop, is paid for by the first chunks only.  Where
the compiled scan computes the golden itself, a run at a time just before it reads it
(forward, float32 and float64 inputs and outputs: :func:`fused_loop`), so x and the golden are
read while they are in the first cache, only that memory is handed on: the scan's
``scan_loops.Golden`` (:func:`scan_golden`) says how to fill it.
"""
from __future__ import annotations

import functools
from typing import Any, Optional

import numpy as np

from conformance import jit
from conformance.dtypes import info
from conformance.records import Chunk
from conformance.reference import golden as ref

__all__ = ["Goldens", "fused_loop", "scan_golden"]


class Goldens:
    """Each chunk's golden, given the chunk and its slot (``chunk_pipeline.read_ahead``), in the
    memory of the last golden of that slot; a golden the scan computes, in one memory for every
    chunk (it is only read while its own chunk is judged).  :meth:`clear` lets that memory go."""

    def __init__(self, *, direction: str, alpha: float, out_dtype: str) -> None:
        self.direction, self.alpha, self.out = direction, alpha, info(out_dtype)
        self.held: dict[int, np.ndarray] = {}  # the last golden of each slot (compiled paths only)

    def __call__(self, chunk: Chunk, slot: int) -> np.ndarray:
        fused = fused_loop(self.direction, self.alpha, x=chunk.x.dtype.name, out=self.out.name) is not None
        slot = 0 if fused else slot
        into = self.held.pop(slot, None)
        if fused:
            from conformance.reference.compiled import room  # numba, imported on the first compiled call

            expected = room(into, size=chunk.x.size, dtype=self.out.dtype)
        else:
            expected = ref.compute(self.direction, chunk.x, self.alpha, dy=chunk.dy, out_dtype=self.out.name,
                                   into=into)
        if jit.enabled():
            self.held[slot] = expected
        return expected

    def clear(self) -> None:
        self.held.clear()


def fused_loop(direction: str, alpha: float, *, x: str, out: str) -> Optional[Any]:
    """The select loop of the exact golden (``reference.compiled.SelectLoop``) when the compiled
    scan computes it (forward, float32 and float64 inputs and outputs), else None: the golden is
    computed before the scan."""
    if not jit.enabled() or direction != "forward":
        return None
    return _select_loop(x, alpha, out=out)


@functools.cache
def _select_loop(x: str, alpha: float, *, out: str) -> Optional[Any]:
    from conformance.reference import compiled  # numba, imported on the first compiled call

    return compiled.exact_forward(x, alpha, out_dtype=out)


def scan_golden(chunk: Chunk, expected: np.ndarray, *, direction: str, alpha: float, out_dtype: str) -> Any:
    """What the compiled scan computes the chunk's golden by (``scan_loops.Golden``): where it is
    fused into the scan (:func:`fused_loop`), ``expected`` is the memory :class:`Goldens` gave for
    it; else the golden is there already."""
    from conformance.metrics._compiled.scan_loops import Golden  # numba, imported on the first compiled call

    loop = fused_loop(direction, alpha, x=chunk.x.dtype.name, out=info(out_dtype).name)
    if loop is None:
        return _already_computed()
    return Golden(False, jit.read_only(chunk.x), expected, *loop)


@functools.cache
def _already_computed() -> Any:
    """A ``scan_loops.Golden`` that says the golden is there (its loop never runs)."""
    from conformance.metrics._compiled.scan_loops import Golden  # numba, imported on the first compiled call

    nothing = np.empty(0, dtype=np.float32)
    return Golden(True, jit.read_only(nothing), nothing, *_select_loop("float32", 1.0, out="float32"))
