"""The tiling plan: elements over cores, each core's range over UB-sized tiles.

1. Cores: the elements are split into contiguous ranges of whole 32-byte
   units; the first ("former") cores get one unit more than the rest ("tail"
   cores), and the unaligned remainder (< one unit) goes to the last core.
2. Tiles: the tile size is the largest aligned element count whose buffers
   (double-buffered queues plus the formulation's temporaries) fit in the UB
   budget.  Each core's last tile is the shorter tail tile.

``usable_fraction`` switches to the source article's model: that fraction of
the *total* UB holds one tile of the input dtype (the article leaves the rest
for temporaries and overhead: ``blockLen = floor(usable / sizeof(T))``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from conformance.dtypes import info
from conformance.npu_impl.chips import ChipProfile, block_elements
from conformance.npu_impl.memory import round_up
from conformance.records import TileLayout, TileSpan

CoreSplit = Literal["aligned", "even"]
TilingModel = Literal["ub-budget", "article"]


@dataclass(frozen=True)
class UbBuffer:
    """``count`` tile-sized UB buffers of ``dtype`` (a queue has count = BUFFER_NUM)."""

    name: str
    dtype: str
    count: int = 1

    def bytes_for(self, tile_elements: int) -> int:
        return self.count * round_up(tile_elements * np.dtype(_np_dtype(self.dtype)).itemsize, 32)


def _np_dtype(name: str) -> np.dtype:
    return info(name).dtype if name != "bool" else np.dtype(np.bool_)


@dataclass(frozen=True)
class Tile:
    start: int
    length: int


@dataclass(frozen=True)
class CoreRange:
    """One core's contiguous range and its tiles (absolute element indices)."""

    core: int
    start: int
    length: int
    tiles: tuple[Tile, ...]


@dataclass(frozen=True)
class TilingPlan:
    """How ``numel`` elements are split over cores and tiles."""

    numel: int
    tile_elements: int
    align_elements: int
    cores: tuple[CoreRange, ...]
    ub_budget_bytes: int
    ub_tile_bytes: int  # UB bytes the buffers take at tile_elements
    former_cores: int
    model: TilingModel = "ub-budget"

    @property
    def tiles(self) -> int:
        return sum(len(c.tiles) for c in self.cores)

    def layout(self) -> TileLayout:
        """The plan as the record the report stages read."""
        spans = tuple(TileSpan(c.core, i, t.start, t.length,
                               is_tail=(i == len(c.tiles) - 1 and t.length < self.tile_elements))
                      for c in self.cores for i, t in enumerate(c.tiles))
        return TileLayout(self.tile_elements, spans, self.align_elements)


def ub_bytes(buffers: tuple[UbBuffer, ...], tile_elements: int) -> int:
    """UB bytes all ``buffers`` take for a tile of ``tile_elements``."""
    return sum(b.bytes_for(tile_elements) for b in buffers)


def tile_elements_for(budget: int, buffers: tuple[UbBuffer, ...], *, align: int) -> int:
    """The largest multiple of ``align`` whose buffers fit in ``budget`` bytes."""
    per_element = sum(b.count * _np_dtype(b.dtype).itemsize for b in buffers)
    tile = (budget // per_element) // align * align
    while tile > 0 and ub_bytes(buffers, tile) > budget:
        tile -= align
    if tile <= 0:
        raise ValueError(f"UB budget of {budget} B cannot hold one aligned tile of {align} elements")
    return tile


def split_cores(numel: int, cores: int, *, align: int) -> list[tuple[int, int]]:
    """(start, length) per used core: whole ``align`` units, former cores one unit more."""
    units, rest = divmod(numel, align)
    used = max(1, min(cores, units))
    base, former = divmod(units, used)
    ranges, start = [], 0
    for core in range(used):
        length = (base + (core < former)) * align + (rest if core == used - 1 else 0)
        ranges.append((start, length))
        start += length
    return ranges


def split_even(numel: int, cores: int) -> list[tuple[int, int]]:
    """(start, length) per core dealing elements evenly (the first ``numel % cores`` get one more), unaligned."""
    used = max(1, min(cores, numel))
    base, extra = divmod(numel, used)
    lengths = [base + (core < extra) for core in range(used)]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int).tolist()
    return list(zip(starts, lengths))


def split_tiles(start: int, length: int, tile: int) -> tuple[Tile, ...]:
    """A core's range cut into tiles of ``tile`` elements; the last one may be shorter."""
    return tuple(Tile(s, min(tile, start + length - s)) for s in range(start, start + length, tile))


def make_plan(numel: int, *, profile: ChipProfile, buffers: tuple[UbBuffer, ...], itemsizes: tuple[int, ...],
              cores: Optional[int] = None, usable_fraction: Optional[float] = None,
              split: CoreSplit = "aligned") -> TilingPlan:
    """The plan for ``numel`` elements; ``itemsizes`` are the GM tensors' element sizes."""
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    align = max(block_elements(size) for size in itemsizes)
    budget, model, buffers = _budget(profile, buffers, itemsizes, usable_fraction)
    tile = tile_elements_for(budget, buffers, align=align)
    n_cores = profile.vector_cores if cores is None else cores
    ranges = split_cores(numel, n_cores, align=align) if split == "aligned" else split_even(numel, n_cores)
    core_ranges = tuple(CoreRange(i, s, n, split_tiles(s, n, tile)) for i, (s, n) in enumerate(ranges))
    former = divmod(numel // align, len(ranges))[1] if split == "aligned" and numel >= align else 0
    return TilingPlan(numel, tile, align, core_ranges, budget, ub_bytes(buffers, tile), former, model)


def _budget(profile: ChipProfile, buffers: tuple[UbBuffer, ...], itemsizes: tuple[int, ...],
            usable_fraction: Optional[float]) -> tuple[int, TilingModel, tuple[UbBuffer, ...]]:
    """(budget bytes, model, buffers that must fit) for the UB-budget or the article model."""
    if usable_fraction is None:
        return profile.ub_usable_bytes, "ub-budget", buffers
    if not 0 < usable_fraction <= 1:
        raise ValueError(f"usable_fraction must be in (0, 1], got {usable_fraction}")
    widest = max(itemsizes)
    dtype = {2: "float16", 4: "float32", 8: "float64"}[widest]
    return math.floor(profile.ub_bytes * usable_fraction), "article", (UbBuffer("tile", dtype, 1),)


@dataclass(frozen=True)
class Roofline:
    """Estimated kernel time from GM bytes over bandwidth against vector work."""

    gm_bytes: int
    vector_ops_per_element: int
    single_buffered_s: float
    double_buffered_s: float
    gm_bytes_per_s: float
    gm_bytes_per_s_source: str
    vector_bytes_per_s: float
    vector_source: str


def roofline(plan: TilingPlan, *, profile: ChipProfile, gm_bytes_per_element: int,
             vector_ops: int, compute_itemsize: int) -> Roofline:
    """Per-tile stage times (copy-in, compute, copy-out), serial vs double-buffered, slowest core."""
    cores = max(1, len(plan.cores))
    per_core_bw = profile.gm_bytes_per_s / cores
    vec = profile.vector_bytes_per_cycle * profile.clock_hz
    single = double = 0.0
    for core in plan.cores:
        stages = [(t.length * gm_bytes_per_element / per_core_bw,
                   t.length * vector_ops * compute_itemsize / vec) for t in core.tiles]
        single = max(single, sum(move + work for move, work in stages))
        double = max(double, sum(max(move, work) for move, work in stages)
                     + (min(stages[0]) if stages else 0.0))
    return Roofline(plan.numel * gm_bytes_per_element, vector_ops, single, double, profile.gm_bytes_per_s,
                    profile.source("gm_bytes_per_s"), vec,
                    f"{profile.source('vector_bytes_per_cycle')}; {profile.source('clock_hz')}")
