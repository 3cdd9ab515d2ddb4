"""The tiling plan: elements over cores (blocks), each block over UB-sized tiles.

The default model is opbase's elementwise tiling, ``ElewiseTiling`` in
``src/op_common/atvoss/elewise/elewise_tiling.cpp`` (hicann/opbase), fed by
``ElewiseBaseTiling::DoTiling`` in ``pkg_inc/op_common/atvoss/elewise/elewise_tiling.h``:

1. ``coreNum = ceil(n * minDtypeBits / MIN_TILING_BITS_SIZE_PER_CORE)``, capped at the
   vector cores (``GetCoreNumAiv``);
2. ``blockFormer = roundup(ceil(n / coreNum), CACHE_LINE_BYTE_LENGTH)`` *elements*;
   ``blockNum = ceil(n / blockFormer)``; the last block takes the remainder;
3. ``ubFormer = (ubSize - extraSize) * 8 / bufferDivisor`` aligned down to
   ``REPEAT_BYTES * 8 / minDtypeBits`` elements, with
   ``bufferDivisor = (BufferNum + extraBufferNum) * maxDtypeBits``;
4. each block loops over tiles of ``ubFormer``, the last one shorter.

``usable_fraction`` switches to the source article's model instead: that
fraction of the *total* UB holds one tile of the widest GM dtype
(``blockLen = floor(usable / sizeof(T))``), the elements split over cores in
whole 32-byte units, former cores one unit more.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from conformance.dtypes import info
from conformance.npu_impl.chips import ChipProfile, block_elements
from conformance.npu_impl.memory import round_up
from conformance.records import TilePlan, TileSpan

CoreSplit = Literal["aligned", "even"]
TilingModel = Literal["elewise", "article"]

# opbase src/op_common/atvoss/elewise/elewise_tiling.cpp
REPEAT_BYTES = 256
MIN_TILING_BITS_SIZE_PER_CORE = 32768  # 4 KB of data per core at least
CACHE_LINE_BYTE_LENGTH = 512  # named for bytes, applied to the element count
BITS_NUM = 8


@dataclass(frozen=True)
class UbBuffer:
    """``count`` tile-sized UB buffers of ``dtype`` (a queue has count = BUFFER_NUM)."""

    name: str
    dtype: str
    count: int = 1

    @property
    def bits(self) -> int:
        return _np_dtype(self.dtype).itemsize * 8

    def bytes_for(self, tile_elements: int) -> int:
        return self.count * round_up(tile_elements * _np_dtype(self.dtype).itemsize, 32)


def _np_dtype(name: str) -> np.dtype:
    return info(name).dtype if name != "bool" else np.dtype(np.bool_)


@dataclass(frozen=True)
class ComputeParams:
    """opbase's ``ComputeParams`` for one DAG: dtype widths and the UB buffer count."""

    min_dtype_bits: int
    max_dtype_bits: int
    buffer_num: int
    extra_size: int = 0
    extra_buffer_num: int = 0

    @property
    def buffer_divisor(self) -> int:
        return (self.buffer_num + self.extra_buffer_num) * self.max_dtype_bits

    @classmethod
    def of(cls, buffers: tuple[UbBuffer, ...], *, gm_bits: tuple[int, ...]) -> ComputeParams:
        """The DAG's params from its UB buffers (each counts as one maxDtypeBits slot)."""
        bits = [b.bits for b in buffers] + list(gm_bits)
        return cls(min(bits), max(bits), sum(b.count for b in buffers))


def ub_former(ub_size: int, params: ComputeParams) -> int:
    """Elements per tile: ``GetMaxElemNum`` in opbase ``elewise_tiling.cpp``."""
    if ub_size < params.extra_size:
        raise ValueError(f"UB of {ub_size} B is smaller than the extra size {params.extra_size} B")
    elements = (ub_size - params.extra_size) * BITS_NUM // params.buffer_divisor
    align = REPEAT_BYTES * BITS_NUM // params.min_dtype_bits
    tile = elements // align * align
    if tile <= 0:
        raise ValueError(f"UB of {ub_size} B cannot hold one aligned tile of {align} elements")
    return tile


def core_num(numel: int, *, min_dtype_bits: int, core_limit: int) -> int:
    """Cores the plan asks for: one per 32768 bits of data, at most ``core_limit``."""
    wanted = -(-numel * min_dtype_bits // MIN_TILING_BITS_SIZE_PER_CORE)
    return max(1, min(wanted, core_limit))


def block_former(numel: int, *, min_dtype_bits: int, core_limit: int) -> int:
    """Elements per block: ``ceil(n / coreNum)`` rounded up to 512 elements."""
    cores = core_num(numel, min_dtype_bits=min_dtype_bits, core_limit=core_limit)
    per_core = -(-numel // cores)
    return -(-per_core // CACHE_LINE_BYTE_LENGTH) * CACHE_LINE_BYTE_LENGTH


def elewise_blocks(numel: int, *, min_dtype_bits: int, core_limit: int) -> list[tuple[int, int]]:
    """(start, length) per block: all ``blockFormer`` long but the last, which takes the remainder."""
    if numel == 0:
        return []
    former = block_former(numel, min_dtype_bits=min_dtype_bits, core_limit=core_limit)
    return [(start, min(former, numel - start)) for start in range(0, numel, former)]


def merged_short_last(ranges: list[tuple[int, int]], *, align: int) -> list[tuple[int, int]]:
    """``ranges`` with a last block shorter than one 32-byte block joined to the one before.

    Assumed for chips without DataCopyPad, whose TBE schedule is not public: their copies move
    whole 32-byte blocks, so a sub-block last block would be copied out shifted back over its
    neighbour's elements, a race between two cores that a real schedule does not plan."""
    if len(ranges) < 2 or ranges[-1][1] >= align:
        return ranges
    (start, length), (_, last) = ranges[-2], ranges[-1]
    return [*ranges[:-2], (start, length + last)]


@dataclass(frozen=True)
class Tile:
    start: int
    length: int


@dataclass(frozen=True)
class CoreRange:
    """One core's (block's) contiguous range and its tiles (absolute element indices)."""

    core: int
    start: int
    length: int
    tiles: tuple[Tile, ...]


@dataclass(frozen=True)
class TilingPlan:
    """How ``numel`` elements are split over cores and tiles."""

    numel: int
    tile_elements: int
    align_elements: int  # elements per 32-byte DataCopy block of the widest GM dtype
    cores: tuple[CoreRange, ...]
    ub_budget_bytes: int
    ub_tile_bytes: int  # UB bytes the buffers take at tile_elements
    former_cores: int
    model: TilingModel = "elewise"
    params: Optional[ComputeParams] = None  # the elewise model's inputs

    @property
    def tiles(self) -> int:
        return sum(len(c.tiles) for c in self.cores)

    def tile_plan(self) -> TilePlan:
        """The plan as the record the later stages read (a ``TilePlan``)."""
        spans = tuple(TileSpan(c.core, i, t.start, t.length,
                               is_tail=(i == len(c.tiles) - 1 and t.length < self.tile_elements))
                      for c in self.cores for i, t in enumerate(c.tiles))
        return TilePlan(self.tile_elements, spans, self.align_elements)


def split_cores(numel: int, cores: int, *, align: int) -> list[tuple[int, int]]:
    """(start, length) per used core: whole ``align`` units, former cores one unit more (article model)."""
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


def _core_ranges(ranges: list[tuple[int, int]], tile: int) -> tuple[CoreRange, ...]:
    return tuple(CoreRange(i, s, n, split_tiles(s, n, tile)) for i, (s, n) in enumerate(ranges))


def make_plan(numel: int, *, profile: ChipProfile, params: ComputeParams, gm_itemsizes: tuple[int, ...],
              cores: Optional[int] = None, usable_fraction: Optional[float] = None,
              split: CoreSplit = "aligned") -> TilingPlan:
    """The plan for ``numel`` elements; ``gm_itemsizes`` are the GM tensors' element sizes.

    ``split="even"`` ignores the plan's blocks and deals the elements evenly over every
    core, unaligned (the ``core-overlap`` defect: a host that splits by hand)."""
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    align = max(block_elements(size) for size in gm_itemsizes)
    limit = profile.vector_cores if cores is None else cores
    if usable_fraction is not None:
        return _article_plan(numel, profile=profile, gm_itemsizes=gm_itemsizes, cores=limit,
                             usable_fraction=usable_fraction, align=align)
    ub = profile.ub_usable_bytes
    tile = ub_former(ub, params)
    ranges = elewise_blocks(numel, min_dtype_bits=params.min_dtype_bits, core_limit=limit)
    if split == "even" and ranges:
        ranges = split_even(numel, limit)
    elif not profile.has_datacopy_pad:
        ranges = merged_short_last(ranges, align=align)
    return TilingPlan(numel, tile, align, _core_ranges(ranges, tile), ub,
                      tile * params.buffer_divisor // BITS_NUM, max(0, len(ranges) - 1), "elewise", params)


def _article_plan(numel: int, *, profile: ChipProfile, gm_itemsizes: tuple[int, ...], cores: int,
                  usable_fraction: float, align: int) -> TilingPlan:
    """The article's model: ``usable_fraction`` of the total UB holds one tile of the widest GM dtype."""
    if not 0 < usable_fraction <= 1:
        raise ValueError(f"usable_fraction must be in (0, 1], got {usable_fraction}")
    budget, widest = math.floor(profile.ub_bytes * usable_fraction), max(gm_itemsizes)
    tile = budget // widest // align * align
    if tile <= 0:
        raise ValueError(f"UB budget of {budget} B cannot hold one aligned tile of {align} elements")
    ranges = split_cores(numel, cores, align=align)
    former = divmod(numel // align, len(ranges))[1] if numel >= align else 0
    return TilingPlan(numel, tile, align, _core_ranges(ranges, tile), budget, tile * widest, former, "article")


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
