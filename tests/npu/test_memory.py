"""Emulated GM and UB: red zones, writer tracking, races, capacity, deterministic garbage."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.errors import GmFault, UbOverflowError
from conformance.npu_impl.memory import SENTINEL_BYTE, GmInput, GmTensor, UbArena
from conformance.records import Hazard, Hazards


def _gm(numel: int = 16, zone: int = 8) -> GmTensor:
    return GmTensor(numel, np.float32, red_zone=zone)


def test_red_zones_hold_the_sentinel() -> None:
    gm = _gm()
    zone_bytes = np.concatenate([gm.data[:8], gm.data[-8:]]).view(np.uint8)
    assert (zone_bytes == SENTINEL_BYTE).all()


def test_write_inside_the_tensor_is_no_hazard() -> None:
    gm = _gm()
    gm.write(0, np.ones(16, np.float32), core=3)
    assert gm.hazards() == () and (gm.body == 1).all() and (gm.writers[8:24] == 3).all()


def test_write_past_the_end_is_an_out_of_bounds_hazard() -> None:
    gm = _gm()
    gm.write(12, np.ones(8, np.float32), core=1)
    hazards = gm.hazards()
    assert [(h.kind, h.index, h.cores) for h in hazards] == [
        ("out-of-bounds-write", i, (1,)) for i in range(16, 20)]


def test_write_before_the_start_is_an_out_of_bounds_hazard() -> None:
    gm = _gm()
    gm.write(-2, np.ones(4, np.float32), core=0)
    assert [h.index for h in gm.hazards()] == [-2, -1]


def test_two_cores_writing_one_element_is_a_race_naming_both() -> None:
    gm = _gm()
    gm.write(0, np.zeros(8, np.float32), core=0)
    gm.write(6, np.ones(8, np.float32), core=1)
    races = [h for h in gm.hazards() if h.kind == "write-race"]
    assert [(h.index, h.cores) for h in races] == [(6, (0, 1)), (7, (0, 1))]


def test_same_core_rewriting_is_not_a_race() -> None:
    gm = _gm()
    gm.write(0, np.zeros(8, np.float32), core=2)
    gm.write(4, np.ones(8, np.float32), core=2)
    assert gm.hazards() == ()


def _plain_hazards(gm: GmTensor) -> list[tuple[str, int, tuple[int, ...]]]:
    """The records spelled out element by element: every core seen per (index, kind)."""
    cores: dict[tuple[int, str], set[int]] = {}
    for kind, events in gm._events.items():
        for indices, core in events:
            for index in indices.tolist():
                cores.setdefault((index, kind), set()).add(core)
    return [(kind, index, tuple(sorted(who))) for (index, kind), who in sorted(cores.items())]


def test_hazards_list_every_core_per_element_and_kind_in_index_order() -> None:
    """Overlapping writes by many cores, reaching both red zones: one record per element and kind."""
    gm = GmTensor(64, np.float32, red_zone=40)
    rng = np.random.default_rng(3)
    for _ in range(60):
        start, count = int(rng.integers(-40, 70)), int(rng.integers(1, 35))
        gm.write(start, np.ones(count, np.float32), core=int(rng.integers(0, 6)))
    want = _plain_hazards(gm)
    assert {kind for kind, _, _ in want} == {"out-of-bounds-write", "write-race"}
    assert any(len(cores) > 2 for _, _, cores in want)
    assert [(h.kind, h.index, h.cores) for h in gm.hazards()] == want


def test_the_hazard_columns_equal_their_records_and_only_them() -> None:
    """The columns compare as the records they hold: with the records, with columns built
    from them, and unequal when one core differs."""
    gm = GmTensor(64, np.float32, red_zone=40)
    rng = np.random.default_rng(5)
    for _ in range(40):
        gm.write(int(rng.integers(-40, 70)), np.ones(int(rng.integers(1, 35)), np.float32),
                 core=int(rng.integers(0, 6)))
    hazards, records = gm.hazards(), tuple(gm.hazards())
    assert hazards == records and hazards == Hazards.of(records) and Hazards.of(records) == hazards
    assert len(hazards) == len(records) and hazards[3] == records[3]
    changed = list(records)
    changed[5] = Hazard(changed[5].kind, changed[5].index, (*changed[5].cores, 9))
    assert hazards != tuple(changed) and hazards != Hazards.of(changed) and hazards != records[:-1]


def test_access_beyond_the_red_zone_faults() -> None:
    gm = _gm()
    with pytest.raises(GmFault, match=r"access \[20, 28\) leaves the red zone"):
        gm.write(20, np.ones(8, np.float32), core=0)
    with pytest.raises(GmFault, match=r"access \[-9, -7\) leaves the red zone"):
        gm.read(-9, 2)


def test_fresh_gm_is_deterministic_garbage_not_zeros() -> None:
    a, b = _gm(1024), _gm(1024)
    assert np.array_equal(a.body.view(np.uint32), b.body.view(np.uint32))
    assert np.count_nonzero(a.body.view(np.uint32)) > 1000


def test_gm_input_reads_sentinel_past_its_ends_without_copying_inside() -> None:
    x = np.arange(8, dtype=np.float32)
    gm = GmInput(x, red_zone=8)
    assert np.shares_memory(gm.read(2, 4), x)
    edge = gm.read(6, 4)
    assert edge[:2].tolist() == [6.0, 7.0] and (edge[2:].view(np.uint8) == SENTINEL_BYTE).all()
    with pytest.raises(GmFault, match=r"read \[10, 18\) leaves the red zone"):
        gm.read(10, 8)


def test_ub_allocations_are_32_byte_aligned() -> None:
    ub = UbArena(1024)
    a = ub.alloc(np.float16, 3, name="a")
    b = ub.alloc(np.float32, 5, name="b")
    offsets = [x.__array_interface__["data"][0] - ub.raw.__array_interface__["data"][0] for x in (a, b)]
    assert offsets == [0, 32] and ub.used == 64


def test_ub_over_allocation_is_a_clear_error() -> None:
    ub = UbArena(4096)
    ub.alloc(np.float32, 1000, name="queue")
    with pytest.raises(UbOverflowError, match="'tmp' needs 128 B but only 96 of 4096 B remain"):
        ub.alloc(np.float32, 32, name="tmp")


def test_ub_starts_as_garbage_not_zeros() -> None:
    buf = UbArena(4096).alloc(np.uint32, 1024, name="x")
    assert np.count_nonzero(buf) > 1000
    assert np.array_equal(buf, UbArena(4096).alloc(np.uint32, 1024, name="x")), "deterministic"
