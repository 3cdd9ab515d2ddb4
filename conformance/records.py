"""Plain records that flow down the pipeline (cases -> backends -> report).

Backends produce :class:`BackendResult`; the report stages read it.  The
emulator's tile layout and memory hazards travel here as data, so that
``report/`` never imports ``npu_impl/``.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Optional

import numpy as np

Direction = Literal["forward", "backward"]
#: An (input dtype, output dtype) pair by table name: ("float32", "float16").
Pair = tuple[str, str]
HazardKind = Literal["out-of-bounds-write", "write-race"]


@dataclass(frozen=True)
class TileSpan:
    """One tile of one core: elements ``[start, start + length)`` of the output."""

    core: int
    tile: int
    start: int
    length: int
    is_tail: bool = False  # the core's last (shorter) tile

    @property
    def stop(self) -> int:
        return self.start + self.length


@dataclass(frozen=True)
class TileLayout:
    """How a kernel split the output over cores and tiles."""

    tile_elements: int
    spans: tuple[TileSpan, ...]
    align_elements: int = 1  # elements per 32-byte block

    def locate(self, index: int) -> Optional[TileSpan]:
        """The span holding element ``index`` (None when outside every span)."""
        for span in self.spans:
            if span.start <= index < span.stop:
                return span
        return None


@dataclass(frozen=True)
class Hazard:
    """A memory hazard the emulator saw.

    ``index`` is an element index relative to the output tensor's start: negative
    or >= numel for red-zone writes; ``cores`` lists every core that wrote it.
    """

    kind: HazardKind
    index: int
    cores: tuple[int, ...]


class Hazards(Sequence[Hazard]):
    """The emulator's hazards as columns, sorted by index, then kind: a sequence of
    :class:`Hazard` (built when first read one by one) that triage and the report read
    as arrays.  A red-zone write of a whole tile is thousands of records.

    ``kinds[rank[i]]`` is record ``i``'s kind, ``index[i]`` its element and
    ``cores[starts[i]:starts[i + 1]]`` the cores that wrote it (ascending)."""

    def __init__(self, kinds: Sequence[HazardKind], rank: np.ndarray, index: np.ndarray, cores: np.ndarray,
                 starts: np.ndarray) -> None:
        self.kinds, self.rank, self.index, self.cores = tuple(kinds), rank, index, cores
        self.starts = np.append(starts, cores.size)
        self._records: Optional[tuple[Hazard, ...]] = None

    @classmethod
    def of(cls, records: Sequence[Hazard]) -> Hazards:
        """``records`` as columns, in their order."""
        if isinstance(records, Hazards):
            return records
        kinds = sorted({h.kind for h in records})
        lengths = np.array([len(h.cores) for h in records], dtype=np.int64)
        return cls(kinds, np.array([kinds.index(h.kind) for h in records], dtype=np.int64),
                   np.array([h.index for h in records], dtype=np.int64),
                   np.array([c for h in records for c in h.cores], dtype=np.int64),
                   np.cumsum(lengths) - lengths)

    def __len__(self) -> int:
        return int(self.index.size)

    def __getitem__(self, i):  # type: ignore[override]
        return self.records()[i]

    def __iter__(self) -> Iterator[Hazard]:
        return iter(self.records())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Hazards):
            return self.kinds_of() == other.kinds_of() and all(
                np.array_equal(a, b) for a, b in ((self.index, other.index), (self.cores, other.cores),
                                                  (self.starts, other.starts)))
        return isinstance(other, (tuple, list)) and self.records() == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Hazards({list(self.records())!r})"

    def kinds_of(self) -> list[str]:
        """Each record's kind."""
        return np.array(self.kinds, dtype=object)[self.rank].tolist()

    def of_kind(self, kind: HazardKind) -> np.ndarray:
        """The records of ``kind`` (a boolean mask over the records)."""
        return self.rank == self.kinds.index(kind) if kind in self.kinds else np.zeros(len(self), dtype=bool)

    def records(self) -> tuple[Hazard, ...]:
        """The records one by one (built once)."""
        if self._records is None:
            cores, bounds = self.cores.tolist(), self.starts.tolist()
            if len(cores) == len(self):  # one core per record: shared tuples
                alone = {c: (c,) for c in set(cores)}
                who = [alone[c] for c in cores]
            else:
                who = [tuple(cores[a:b]) for a, b in zip(bounds, bounds[1:])]
            self._records = tuple(map(Hazard, self.kinds_of(), self.index.tolist(), who))
        return self._records


@dataclass(frozen=True)
class BackendResult:
    """What one backend returned for one call.

    ``value`` is None only when the backend refused the input, in which case
    ``rejected`` holds its one-line reason.
    """

    value: Optional[np.ndarray]
    layout: Optional[TileLayout] = None
    hazards: Sequence[Hazard] = field(default_factory=tuple)  # the emulator's: :class:`Hazards`
    rejected: Optional[str] = None
    notes: tuple[str, ...] = ()  # what the row's reader should know (e.g. the chip is outside aclnn)
