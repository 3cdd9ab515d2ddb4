"""The plan's records worked by hand: a UB buffer's bytes (each of its ``count`` buffers rounded up
to a 32-byte block), ``ubFormer`` with an extra size (``(UB - extra) * 8 / bufferDivisor``, aligned
down to one 256-byte repeat), the UB bytes the plan's buffers take, and which tiles the plan's
record marks as tails (a core's last tile, when shorter than a whole tile)."""
from __future__ import annotations

import pytest

from conformance.dtypes import info
from conformance.npu_impl.chips import PROFILES
from conformance.npu_impl.kernel import KernelSpec, plan_for
from conformance.npu_impl.tiling import ComputeParams, UbBuffer, ub_former
from conformance.npu_impl.variants import VARIANTS

FP32_TILE_950 = 15_872  # 253,952 B * 8 / (4 buffers * 32 bits), a multiple of 64 (docs/commands/tiling.md)


def _spec(dtype: str, profile: str = "ascend950", direction: str = "forward") -> KernelSpec:
    return KernelSpec(direction, info(dtype), info(dtype), 0.2, VARIANTS["reference"], PROFILES[profile])


@pytest.mark.parametrize("buffer, elements, expected", [
    (UbBuffer("in0", "float16", 2), 5, 64),  # 10 B -> one 32-byte block, twice
    (UbBuffer("in0", "float16", 2), 16, 64),  # 32 B exactly
    (UbBuffer("in0", "float16", 2), 17, 128),  # 34 B -> two blocks, twice
    (UbBuffer("wide0", "float32"), 9, 64),  # 36 B -> two blocks, once
    (UbBuffer("mask", "bool"), 33, 64),  # one byte a lane
    (UbBuffer("out", "bfloat16", 3), 0, 0),
])
def test_a_ub_buffer_takes_whole_32_byte_blocks_per_copy(buffer: UbBuffer, elements: int, expected: int) -> None:
    assert buffer.bytes_for(elements) == expected


def test_a_ub_buffer_knows_its_lane_width() -> None:
    assert [UbBuffer("b", d).bits for d in ("bool", "float16", "bfloat16", "float32")] == [8, 16, 16, 32]


@pytest.mark.parametrize("ub, extra, expected", [
    (8192, 4096, 256),  # (8192 - 4096) * 8 / (4 * 32) = 256, a multiple of 64
    (8192, 0, 512),
    (8192, 3000, 320),  # 5192 * 8 / 128 = 324.5 -> 324 -> aligned down to 320
])
def test_ub_former_leaves_the_extra_size_out(ub: int, extra: int, expected: int) -> None:
    assert ub_former(ub, ComputeParams(32, 32, 4, extra_size=extra)) == expected


def test_ub_former_counts_the_extra_buffers_in_the_divisor() -> None:
    """(4 + 4) buffers of 32 bits: 8192 * 8 / 256 = 256 elements."""
    assert ub_former(8192, ComputeParams(32, 32, 4, extra_buffer_num=4)) == 256


def test_a_ub_smaller_than_the_extra_size_is_refused_as_such() -> None:
    with pytest.raises(ValueError, match="smaller than the extra size"):
        ub_former(4095, ComputeParams(32, 32, 4, extra_size=4096))


def test_a_ub_that_is_all_extra_size_holds_no_tile() -> None:
    with pytest.raises(ValueError, match="cannot hold one aligned tile of 64 elements"):
        ub_former(4096, ComputeParams(32, 32, 4, extra_size=4096))


@pytest.mark.parametrize("dtype, tile, buffer_bytes", [
    ("float32", FP32_TILE_950, 253_952),  # 4 buffers of 15,872 fp32: the whole UB
    ("float16", 10_496, 251_904),  # 6 slots of 32 bits for 10,496 elements
])
def test_the_plan_records_the_ub_its_buffers_take(dtype: str, tile: int, buffer_bytes: int) -> None:
    plan = plan_for(100_000, _spec(dtype))
    assert (plan.tile_elements, plan.ub_tile_bytes, plan.ub_budget_bytes) == (tile, buffer_bytes, 253_952)


def _tails(numel: int, dtype: str, *, cores: int | None = None) -> list[tuple[int, int, int, bool]]:
    """(core, tile number within the core, length, is_tail) per span of the plan's record."""
    spans = plan_for(numel, _spec(dtype), cores=cores).tile_plan().spans
    return [(s.core, s.tile, s.length, s.is_tail) for s in spans]


def test_a_full_last_tile_is_not_a_tail() -> None:
    assert _tails(2 * FP32_TILE_950, "float32", cores=1) == [(0, 0, FP32_TILE_950, False), (0, 1, FP32_TILE_950, False)]


def test_a_short_last_tile_is_the_only_tail() -> None:
    assert _tails(2 * FP32_TILE_950 + 1, "float32", cores=1) == [
        (0, 0, FP32_TILE_950, False), (0, 1, FP32_TILE_950, False), (0, 2, 1, True)]


def test_the_record_carries_the_tile_and_block_sizes() -> None:
    record = plan_for(4097, _spec("bfloat16")).tile_plan()
    assert (record.tile_elements, record.align_elements) == (10_496, 16)


def test_every_cores_short_last_tile_is_a_tail() -> None:
    """4,097 bf16 on ascend950: blocks of 1,536, 1,536 and 1,025, each one tile shorter than 10,496."""
    assert _tails(4097, "bfloat16") == [(0, 0, 1536, True), (1, 0, 1536, True), (2, 0, 1025, True)]


@pytest.mark.parametrize("numel, dtype, blocks", [
    (31, "float32", 1),  # up to 4 KB of data: one block
    (4097, "bfloat16", 3),
    (0, "float32", 0),
])
def test_every_block_but_the_last_is_a_former_one(numel: int, dtype: str, blocks: int) -> None:
    plan = plan_for(numel, _spec(dtype))
    assert (len(plan.cores), plan.former_cores, plan.model) == (blocks, max(0, blocks - 1), "elewise")


def test_the_plan_counts_bytes_in_whole_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tests.helpers import run_cli

    run = run_cli(["tiling", "--numel", "100000", "--dtype", "float32", "--profile", "ascend950", "--json"], capsys)
    data = json.loads(run.out)
    assert [type(data[k]) for k in ("ub_budget_bytes", "ub_tile_bytes", "tile_elements")] == [int, int, int]
    assert data["ub_tile_bytes"] == 253_952


@pytest.mark.parametrize("profile, blocks", [("ascend910a", [1025]), ("ascend910b1", [1024, 1])])
def test_a_one_element_last_block_joins_its_neighbour_only_without_datacopypad(profile: str,
                                                                               blocks: list[int]) -> None:
    """1,025 fp32: two cores' worth of data, blocks of 1,024 and 1 (docs/explanation/emulated-kernel.md);
    without DataCopyPad the 1-element block would be copied as a whole 32-byte block shifted back
    over its neighbour's elements, so the plan joins it to the block before."""
    assert [c.length for c in plan_for(1025, _spec("float32", profile)).cores] == blocks
