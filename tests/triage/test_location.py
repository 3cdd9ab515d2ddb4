"""Location proofs: tail-block by confinement, stale-block for a block, a stride or a shifted output."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from conformance.dtypes import from_bits, to_bits
from conformance.records import TilePlan, TileSpan
from conformance.reference import golden as ref
from conformance.render.messages import failure_message
from tests.helpers import F16, assert_named, counts, differs, judge, judge_dump, judge_named
from tests.triage.defects import DEFECTS, Defect, exact_result


def _edit(exact: np.ndarray, index: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    out = exact.copy()
    out[index] = fn(out[index])
    return out


def _layout(numel: int, *, cores: int, tile: int) -> TilePlan:
    """Contiguous core ranges; each core's last tile is a shorter tail tile."""
    per = numel // cores
    spans = []
    for core in range(cores):
        start, stop = core * per, (core + 1) * per if core < cores - 1 else numel
        starts = list(range(start, stop, tile))
        spans += [TileSpan(core, t, s, min(tile, stop - s), is_tail=(t == len(starts) - 1))
                  for t, s in enumerate(starts)]
    return TilePlan(tile, tuple(spans), 16)


def _garbage_in(exact: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, int]:
    index = np.arange(start, stop)
    index = index[np.isfinite(exact[index].astype(np.float64))]
    actual = _edit(exact, index, lambda v: from_bits(to_bits(v) ^ 0x0300, v.dtype))
    return actual, differs(actual, exact)


def test_errors_confined_to_tail_tiles_are_tail_block() -> None:
    tile_plan = _layout(F16.size, cores=4, tile=5000)
    tail = next(s for s in tile_plan.spans if s.is_tail and s.core == 2)
    exact = ref.forward(F16, 0.2)
    actual, edited = _garbage_in(exact, tail.start, tail.stop)
    row = judge(F16, actual, 0.2, tile_plan=tile_plan)
    assert counts(row) == {"tail-block": edited}
    detail = row.findings[0].detail
    assert detail["regions"] == [{"core": 2, "tile": tail.tile, "start": tail.start,
                                  "stop": tail.stop}]
    assert row.findings[0].examples[0].core == 2


def test_errors_outside_tail_tiles_are_not_tail_block() -> None:
    tile_plan = _layout(F16.size, cores=4, tile=5000)
    body = next(s for s in tile_plan.spans if not s.is_tail)
    exact = ref.forward(F16, 0.2)
    actual, _ = _garbage_in(exact, body.start, body.stop)
    assert "tail-block" not in counts(judge(F16, actual, 0.2, tile_plan=tile_plan))


@pytest.mark.parametrize("defect", [d for d in DEFECTS if d.position], ids=str)
def test_a_misplaced_output_is_named_by_its_position_only_when_proved(defect: Defect) -> None:
    x, actual, alpha, keywords = defect.build()
    row = judge_dump(x, actual, alpha, **keywords)
    if defect.category is None:  # a value defect: no position is proved
        assert "stale-block" not in counts(row)
        return
    assert counts(row) == {defect.category: differs(actual, exact_result(x, alpha, **keywords))}
    if defect.says:
        assert_named(row, defect.category, defect.says)


@pytest.mark.parametrize("n", [40, 1000, 4099, 65536])
@pytest.mark.parametrize("k", [1, 3, 17])
def test_errors_at_the_end_are_tail_block_without_a_plan(n: int, k: int) -> None:
    x = F16[np.random.default_rng(n).permutation(F16.size)[:n]]
    actual = ref.forward(x, 0.2)
    actual[-k:] = np.float16(123.0)
    row = judge_named(x, actual, 0.2)
    assert set(counts(row)) == {"tail-block"}
    assert f"last {row.findings[0].detail['last']} elements" in row.findings[0].summary


@pytest.mark.parametrize("cores", [1, 8])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_errors_in_the_last_partial_block_are_tail_block_with_a_plan(cores: int, k: int) -> None:
    import conformance.npu_impl as npu

    x = F16[:4099]  # 4099 halves: the last 32-byte block holds 3
    run = npu.leaky_relu(x, 0.2, cores=cores)
    actual = ref.forward(x, 0.2)
    actual[-k:] = np.float16(0.0)
    row = judge(x, actual, 0.2, backend="dump", tile_plan=run.tile_plan)
    assert set(counts(row)) == {"tail-block"}, \
        failure_message(row)


def _with_subnormals_at(n: int, slots: np.ndarray) -> np.ndarray:
    """float32 inputs of magnitude 1e-3 and more, with positive subnormals at ``slots`` only."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(n) * 10).astype(np.float32)
    x[np.abs(x) < 1e-3] = np.float32(1.0)
    x[slots] = np.float32(1e-40) * (1 + np.arange(slots.size, dtype=np.float32))
    return x


_ZEROED = {  # where a position defect writes zeros: every slot of it
    "stride": np.arange(1, 4096, 4),
    "block": np.arange(1200, 1600),
    "tail": np.arange(3000, 4096),
}


@pytest.mark.parametrize("where", sorted(_ZEROED))
def test_a_flush_seen_only_inside_a_zeroed_position_is_the_position(where: str) -> None:
    # Flushing reproduces the zeros written over the subnormal results, but every element
    # it explains lies where the position defect wrote zeros: the position alone explains
    # them all, a second cause explains nothing more.
    zeroed = _ZEROED[where]
    x = _with_subnormals_at(4096, zeroed[5::40])
    actual = ref.forward(x, 0.2)
    actual[zeroed] = np.float32(0.0)
    row = judge_named(x, actual, 0.2)
    category = "tail-block" if where == "tail" else "stale-block"
    assert counts(row) == {category: differs(actual, ref.forward(x, 0.2))}, \
        failure_message(row)


def test_a_flush_over_the_whole_batch_beside_a_stale_block_names_both() -> None:
    # The flush explains subnormal results outside the block too, so it is a cause of its
    # own and keeps the zeroed subnormal results inside the block (both explain those).
    x = _with_subnormals_at(4096, np.arange(3, 4096, 97))
    exact = ref.forward(x, 0.2)
    block = np.arange(1200, 1600)
    actual = ref.flush_to_zero(exact)
    actual[block] = np.float32(0.0)
    row = judge_named(x, actual, 0.2)
    flushed = np.flatnonzero(exact != ref.flush_to_zero(exact))
    inside = np.intersect1d(flushed, block)
    assert flushed.size > 30 and inside.size > 2
    assert counts(row) == {"subnormal-flush": flushed.size, "stale-block": block.size - inside.size}, \
        failure_message(row)


def test_each_core_whose_last_tile_holds_its_first_is_proved_by_values_not_place() -> None:
    """Cores of three tiles and a final core of two (its last one short): every core's last
    tile holds its first tile's output (a ping-pong buffer reused too early).  Two offsets map
    the regions; both are proved value by value, and the short tail is no ``tail-block``."""
    t, spans, start = 64, [], 0
    for core, lengths in enumerate([(64, 64, 64)] * 3 + [(64, 40)]):
        for i, length in enumerate(lengths):
            spans.append(TileSpan(core, i, start, length, is_tail=i == len(lengths) - 1 and length < t))
            start += length
    plan = TilePlan(t, tuple(spans))
    x = np.random.default_rng(5).standard_normal(start).astype(np.float16)
    exact = ref.forward(x, 0.2)
    actual = exact.copy()
    for core in range(4):
        mine = [s for s in spans if s.core == core]
        actual[mine[-1].start:mine[-1].stop] = exact[mine[0].start:mine[0].start + mine[-1].length]
    row = judge(x, actual, 0.2, backend="dump", tile_plan=plan)
    assert counts(row) == {"stale-block": differs(actual, exact)}, failure_message(row)
    summary = row.findings[0].summary
    assert "tile 2 of each of 3 cores holds tile 0's output" in summary and "tile 1 of core 3" in summary
