"""A tensor's chunks' golden: written into memory an earlier chunk's golden held, or left to the
compiled scan, with the bits of the golden computed afresh."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.dtypes import to_bits
from conformance.metrics import chunk_golden
from conformance.records import Chunk
from conformance.reference import golden

pytest.importorskip("numba", reason="numba (the fast extra) is not installed")


def _x(name: str, n: int, *, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(n) * 4).astype(name)


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("name, out", [("float32", "float32"), ("float64", "float64"), ("float16", "float16"),
                                       ("float16", "float32")])
def test_a_golden_written_into_room_has_the_bits_of_a_new_one(direction: str, name: str, out: str) -> None:
    n = 1 << 17  # a 16-bit forward this large is read from the table of every pattern
    x, dy = _x(name, n, seed=1), _x(name, n, seed=2)
    fresh = golden.compute(direction, x, 0.2, dy=dy, out_dtype=out)
    room = np.empty_like(fresh)
    got = golden.compute(direction, x, 0.2, dy=dy, out_dtype=out, into=room)
    assert np.shares_memory(got, room) and np.array_equal(to_bits(got), to_bits(fresh))


def test_room_of_another_size_or_dtype_is_not_written() -> None:
    x = _x("float32", 1000, seed=3)
    for room in (np.zeros(999, np.float32), np.zeros(1000, np.float64), np.zeros(2000, np.float32)[::2]):
        got = golden.compute("forward", x, 0.2, into=room)
        assert not np.shares_memory(got, room) and not room.any()


@pytest.mark.parametrize("direction, name, fused", [("forward", "float32", True), ("forward", "float64", True),
                                                    ("backward", "float32", False), ("forward", "float16", False)])
def test_each_slot_reuses_its_last_golden_and_a_fused_one_is_left_to_the_scan(direction: str, name: str,
                                                                              fused: bool) -> None:
    goldens = chunk_golden.Goldens(direction=direction, alpha=0.2, out_dtype=name)
    chunks = [Chunk(k * 4096, _x(name, 4096, seed=k), _x(name, 4096, seed=k + 9), None) for k in range(3)]
    first, second = goldens(chunks[0], 1), goldens(chunks[1], 2)
    third = goldens(chunks[2], 1)
    assert (chunk_golden.fused_loop(direction, 0.2, x=name, out=name) is not None) == fused
    assert np.shares_memory(first, third) and np.shares_memory(first, second) == fused
    if not fused:
        want = golden.compute(direction, chunks[2].x, 0.2, dy=chunks[2].dy, out_dtype=name)
        assert np.array_equal(to_bits(third), to_bits(want))
    goldens.clear()
    assert not goldens.held
