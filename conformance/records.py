"""Plain records that flow down the pipeline (cases -> backends -> report).

Backends produce :class:`BackendResult`; the report stages read it.  The
emulator's tile layout and memory hazards travel here as data, so that
``report/`` never imports ``npu_impl/``.
"""
from __future__ import annotations

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


@dataclass(frozen=True)
class BackendResult:
    """What one backend returned for one call.

    ``value`` is None only when the backend refused the input, in which case
    ``rejected`` holds its one-line reason.
    """

    value: Optional[np.ndarray]
    layout: Optional[TileLayout] = None
    hazards: tuple[Hazard, ...] = field(default_factory=tuple)
    rejected: Optional[str] = None
    notes: tuple[str, ...] = ()  # what the row's reader should know (e.g. the chip is outside aclnn)
