"""A core that runs several tiles: CopyIn of tile i + 1 overlaps Compute and CopyOut of tile i
(two buffers per queue, ping-pong slot ``i & 1``), and every tile still computes its own input,
forward and backward, with or without DataCopyPad, with a tail that is or is not 32-byte aligned.
The expected values are the chip's golden semantics, element by element."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.npu_impl import PROFILES, leaky_relu, leaky_relu_backward
from conformance.npu_impl.variants import chip_semantics
from conformance.reference import golden
from tests.helpers import assert_same_bits

#: ubFormer by hand, (UB * 8 / (BufferNum * maxDtypeBits)) aligned down to a 256-byte repeat:
#: 910B1 fp32 188,416 B / 16 B a lane; 910A fp16 (native, 4 buffers of 16 bits) 253,952 B / 8 B;
#: ascend950 fp32 253,952 B / 16 B.
TILE = {("ascend910b1", "float32"): 11_776, ("ascend910a", "float16"): 31_744, ("ascend950", "float32"): 15_872}
#: The backward's two inputs make 6 buffers: 188,416 B / 24 B a lane = 7,850 -> 7,808; 253,952 B / 12 B
#: = 21,162 -> 21,120 (a multiple of 128); 253,952 B / 24 B = 10,581 -> 10,560.
BACKWARD_TILE = {("ascend910b1", "float32"): 7_808, ("ascend910a", "float16"): 21_120,
                 ("ascend950", "float32"): 10_560}
CASES = [pytest.param(p, d, extra, id=f"{p}-{d}-tail{extra}") for (p, d) in TILE for extra in (37, 64)]


def _values(n: int, dtype: str, seed: int) -> np.ndarray:
    """Distinct values of both signs, so a tile computed from another tile's input shows."""
    return (np.random.default_rng(seed).standard_normal(n) * 50).astype(dtype)


def _lengths(plan: object) -> list[list[int]]:
    return [[t.length for t in c.tiles] for c in plan.cores]  # type: ignore[attr-defined]


@pytest.mark.parametrize("profile, dtype, extra", CASES)
def test_one_core_computes_each_of_its_tiles_from_its_own_input(profile: str, dtype: str, extra: int) -> None:
    tile = TILE[(profile, dtype)]
    x = _values(3 * tile + extra, dtype, seed=extra)
    r = leaky_relu(x, 0.3, profile=profile, cores=1)
    assert _lengths(r.plan) == [[tile, tile, tile, extra]]
    assert r.hazards == ()
    expected = golden.forward(x, 0.3, semantics=chip_semantics(PROFILES[profile], dtype))
    assert_same_bits(r.y, expected, what=f"{profile} {dtype}, four tiles on one core")


@pytest.mark.parametrize("profile, dtype, extra", CASES)
def test_the_backward_reads_both_inputs_of_each_tile(profile: str, dtype: str, extra: int) -> None:
    tile = BACKWARD_TILE[(profile, dtype)]
    x, dy = _values(2 * tile + extra, dtype, seed=1), _values(2 * tile + extra, dtype, seed=2)
    r = leaky_relu_backward(dy, x, 0.3, profile=profile, cores=1)
    assert _lengths(r.plan) == [[tile, tile, extra]]
    assert r.hazards == ()
    expected = golden.backward(dy, x, 0.3, semantics=chip_semantics(PROFILES[profile], dtype))
    assert_same_bits(r.dx, expected, what=f"{profile} {dtype} backward, three tiles on one core")


def test_two_cores_of_two_tiles_each_take_turns() -> None:
    """ascend950 fp32, 4 * 15,872 + 64 elements on 2 cores: blocks of 32,256 (63 * 512) and 31,296."""
    x = _values(4 * 15_872 + 64, "float32", seed=3)
    r = leaky_relu(x, 0.3, profile="ascend950", cores=2)
    assert _lengths(r.plan) == [[15_872, 15_872, 512], [15_872, 15_424]]
    assert r.hazards == ()
    expected = golden.forward(x, 0.3, semantics=chip_semantics(PROFILES["ascend950"], "float32"))
    assert_same_bits(r.y, expected, what="two cores, several tiles each")


@pytest.mark.parametrize("profile, direction", [
    ("ascend950", "forward"),  # fp16 cast up to fp32, Compare + Muls + Select, cast back
    ("ascend910b1", "forward"),  # the LeakyRelu instruction in fp16
    ("ascend910b1", "backward"),  # Compare + Muls + Select in fp16
])
def test_a_lower_cores_overlapping_copy_lands_on_top_of_its_neighbours_values(profile: str, direction: str) -> None:
    """Highest core first within a turn: core k writes after core k + 1, so the lanes core k's
    32-byte DataCopy rounds up into k + 1's range (``core-overlap``: unaligned ranges) keep what
    core k's output buffer held there, lanes it did not compute.  Every raced element is wrong, and
    only those."""
    from tests.helpers import bits_differ

    x, dy = _values(3001, "float16", seed=4), _values(3001, "float16", seed=5)
    semantics = chip_semantics(PROFILES[profile], "float16")
    if direction == "forward":
        r = leaky_relu(x, 0.3, profile=profile, variant="core-overlap")
        actual, expected = r.y, golden.forward(x, 0.3, semantics=semantics)
    else:
        r = leaky_relu_backward(dy, x, 0.3, profile=profile, variant="core-overlap")
        actual, expected = r.dx, golden.backward(dy, x, 0.3, semantics=semantics)
    raced = {h.index for h in r.hazards if h.kind == "write-race"}
    assert len(raced) > 20 and set(np.flatnonzero(bits_differ(actual, expected))) == raced


def test_tail_overrun_overruns_only_the_tensors_end() -> None:
    """Only the tensor's last, shorter tile is copied at full tile length: the other cores' last tiles,
    shorter too, keep their exact copies, so every hazard is a write past the tensor's end, none a race."""
    x = _values(3 * 15_872 + 40, "float32", seed=6)
    r = leaky_relu(x, 0.3, profile="ascend950", variant="tail-overrun", cores=3)
    assert sum(c.tiles[-1].length < 15_872 for c in r.plan.cores) >= 2
    assert r.hazards and {h.kind for h in r.hazards} == {"out-of-bounds-write"}
    assert min(h.index for h in r.hazards) == x.size


@pytest.mark.parametrize("profile", ["ascend910b1", "ascend950"])
def test_with_datacopypad_a_one_element_last_block_is_copied_exactly(profile: str) -> None:
    """1,025 fp32: blocks of 1,024 and 1.  DataCopyPad copies the 1-element block at its real length,
    so nothing reaches back into the first core's block: no race, golden values."""
    x = _values(1025, "float32", seed=7)
    r = leaky_relu(x, 0.3, profile=profile)
    assert [c.length for c in r.plan.cores] == [1024, 1]
    assert r.hazards == ()
    assert_same_bits(r.y, golden.forward(x, 0.3, semantics=chip_semantics(PROFILES[profile], "float32")),
                     what=f"{profile}, a 1-element last block")


def test_tail_overrun_of_a_one_element_tail_writes_a_whole_tile() -> None:
    """ascend950 fp32 on one core, 15,873 elements: tiles of 15,872 and 1; the 1-element tail is
    copied out at full tile length, 15,871 elements past the tensor's end, each recorded."""
    x = _values(15_873, "float32", seed=8)
    r = leaky_relu(x, 0.3, profile="ascend950", variant="tail-overrun", cores=1)
    assert [h.index for h in r.hazards] == list(range(15_873, 2 * 15_872))
    assert {h.kind for h in r.hazards} == {"out-of-bounds-write"}
