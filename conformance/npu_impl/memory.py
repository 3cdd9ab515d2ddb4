"""Emulated memories: global memory (GM) with red zones and writer tracking, and the UB arena.

- :class:`GmTensor` is one GM tensor with a red zone before and after it, filled
  with a sentinel.  Every element write records the core that made it, so the
  emulator can report writes into a red zone (``out-of-bounds-write``) and
  elements written by two cores (``write-race``) as :class:`Hazard` records.
- :class:`UbArena` is one core's Unified Buffer: a fixed number of bytes that
  starts as deterministic garbage (never zeros), with 32-byte aligned
  allocations and a clear error on over-allocation.
"""
from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

import numpy as np

from conformance.errors import GmFault, UbOverflowError
from conformance.npu_impl.chips import BLOCK_BYTES
from conformance.records import HazardKind, Hazards

SENTINEL_BYTE = 0xA5  # red-zone fill: 0xA5A5 (fp16 -0.0226), 0xA5A5A5A5 (fp32 -2.9e-16)
_GARBAGE_SEED = 0x0A5C3D
_NO_WRITER = -1


@lru_cache(maxsize=1)
def _garbage_pattern() -> np.ndarray:
    """64 KiB of fixed pseudo-random bytes: what 'uninitialised' memory holds here."""
    return np.random.default_rng(_GARBAGE_SEED).integers(0, 256, 1 << 16, dtype=np.uint8)


def fill_garbage(raw: np.ndarray) -> None:
    """Fill a byte array with the deterministic garbage pattern (doubling memcpy)."""
    pattern = _garbage_pattern()
    first = min(raw.size, pattern.size)
    raw[:first] = pattern[:first]
    done = first
    while done < raw.size:
        step = min(done, raw.size - done)
        raw[done:done + step] = raw[:step]
        done += step


def _bytes_of(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1).view(np.uint8)


class GmTensor:
    """A GM tensor of ``numel`` elements with ``red_zone`` sentinel elements on each side.

    Indices are relative to the tensor's first element; the red zones are
    ``[-red_zone, 0)`` and ``[numel, numel + red_zone)``.
    """

    def __init__(self, numel: int, dtype: np.dtype, *, red_zone: int, init: np.ndarray | None = None):
        self.numel, self.red_zone, self.dtype = numel, red_zone, np.dtype(dtype)
        self.data = np.empty(numel + 2 * red_zone, dtype=self.dtype)
        for zone in (self.data[:red_zone], self.data[red_zone + numel:]):  # the body is filled below
            _bytes_of(zone).fill(SENTINEL_BYTE)
        if init is None:
            fill_garbage(_bytes_of(self.body))
        else:
            self.body[...] = init.reshape(-1)
        self.writers = np.full(self.data.size, _NO_WRITER, dtype=np.int8)
        self._events: dict[HazardKind, list[tuple[np.ndarray, int]]] = defaultdict(list)

    @property
    def body(self) -> np.ndarray:
        """The tensor itself, without red zones (a view)."""
        return self.data[self.red_zone:self.red_zone + self.numel]

    def _span(self, start: int, count: int) -> slice:
        lo = start + self.red_zone
        if lo < 0 or lo + count > self.data.size:
            raise GmFault(f"access [{start}, {start + count}) leaves the red zone of a "
                          f"{self.numel}-element tensor (red zone {self.red_zone})")
        return slice(lo, lo + count)

    def read(self, start: int, count: int) -> np.ndarray:
        """Elements ``[start, start + count)`` (red zones read as sentinel); a view."""
        return self.data[self._span(start, count)]

    def write(self, start: int, values: np.ndarray, *, core: int) -> None:
        """Store ``values`` at ``start`` on behalf of ``core``, recording hazards."""
        span = self._span(start, values.size)
        writers = self.writers[span]
        if start < 0 or start + values.size > self.numel:
            self._record_out_of_bounds(start, values.size, core)
        if values.size and writers.max() > _NO_WRITER:
            self._record_races(start, writers, core)
        self.data[span] = values
        writers.fill(core)

    def _record_out_of_bounds(self, start: int, count: int, core: int) -> None:
        idx = np.arange(start, start + count)
        outside = idx[(idx < 0) | (idx >= self.numel)]
        self._events["out-of-bounds-write"].append((outside, core))

    def _record_races(self, start: int, writers: np.ndarray, core: int) -> None:
        clash = np.flatnonzero((writers != _NO_WRITER) & (writers != core))
        for other in np.unique(writers[clash]):
            self._events["write-race"].append((clash[writers[clash] == other] + start, int(other)))
        if clash.size:
            self._events["write-race"].append((clash + start, core))

    def hazards(self) -> Hazards | tuple[()]:
        """Every red-zone write and race, one record per element and kind listing every core
        that wrote it (ascending), sorted by index, then kind."""
        kinds = sorted(kind for kind, events in self._events.items() if events)
        if not kinds:
            return ()
        parts = [_flatten(rank, self._events[kind]) for rank, kind in enumerate(kinds)]
        index, rank, core = (np.concatenate(column) for column in zip(*parts))
        order = np.lexsort((core, rank, index))
        index, rank, core = index[order], rank[order], core[order]
        new_pair = np.ones(index.size, dtype=bool)
        new_pair[1:] = (index[1:] != index[:-1]) | (rank[1:] != rank[:-1])
        fresh = new_pair.copy()
        fresh[1:] |= core[1:] != core[:-1]
        index, rank, core, new_pair = index[fresh], rank[fresh], core[fresh], new_pair[fresh]
        first = np.flatnonzero(new_pair)  # one record per run of equal (index, kind)
        return Hazards(kinds, rank[first], index[first], core, first)


def _flatten(rank: int, events: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One kind's events as three columns: element index, the kind's rank, the writing core."""
    index = np.concatenate([np.asarray(indices, dtype=np.int64).reshape(-1) for indices, _ in events])
    core = np.concatenate([np.full(np.size(indices), core, dtype=np.int64) for indices, core in events])
    return index, np.full(index.size, rank, dtype=np.int64), core


def round_up(value: int, unit: int) -> int:
    """``value`` rounded up to a multiple of ``unit``."""
    return -(-value // unit) * unit


class UbArena:
    """One core's Unified Buffer: ``capacity`` bytes of deterministic garbage."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.raw = np.empty(capacity, dtype=np.uint8)
        fill_garbage(self.raw)
        self.used = 0
        self.names: list[str] = []

    def alloc(self, dtype: np.dtype, elements: int, *, name: str) -> np.ndarray:
        """A 32-byte aligned buffer of ``elements`` of ``dtype`` (contents: whatever was there)."""
        dt = np.dtype(dtype)
        size = round_up(elements * dt.itemsize, BLOCK_BYTES)
        if self.used + size > self.capacity:
            raise UbOverflowError(
                f"UB over-allocation: {name!r} needs {size} B but only {self.capacity - self.used} "
                f"of {self.capacity} B remain (allocated: {', '.join(self.names) or 'nothing'})")
        view = self.raw[self.used:self.used + elements * dt.itemsize].view(dt)
        self.used += size
        self.names.append(name)
        return view


class GmInput:
    """A read-only GM tensor wrapping an array without copying it.

    Reads that reach past either end return the red-zone sentinel there,
    exactly as a :class:`GmTensor` would; reads beyond the red zone fault.
    """

    def __init__(self, array: np.ndarray, *, red_zone: int):
        self.body = array.reshape(-1)
        self.numel, self.red_zone, self.dtype = self.body.size, red_zone, self.body.dtype

    def read(self, start: int, count: int) -> np.ndarray:
        """Elements ``[start, start + count)``: a view when inside the tensor."""
        if 0 <= start and start + count <= self.numel:
            return self.body[start:start + count]
        if start < -self.red_zone or start + count > self.numel + self.red_zone:
            raise GmFault(f"read [{start}, {start + count}) leaves the red zone of a "
                          f"{self.numel}-element tensor (red zone {self.red_zone})")
        out = np.empty(count, dtype=self.dtype)
        _bytes_of(out).fill(SENTINEL_BYTE)
        lo, hi = max(start, 0), min(start + count, self.numel)
        if lo < hi:
            out[lo - start:hi - start] = self.body[lo:hi]
        return out
