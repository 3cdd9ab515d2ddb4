"""The roofline estimate of `conformance tiling`, worked by hand on small plans.

Its model (``tiling.roofline``): the cores share the GM bandwidth evenly; a tile's copy stage moves
its elements' GM bytes at that share, its compute stage runs ``vector_ops`` instructions over the
tile's bytes at the vector unit's rate (bytes per cycle times the clock).  Single-buffered, a core
runs its tiles' stages one after another; double-buffered, each tile costs its slower stage and the
pipeline fills once with the first tile's faster stage.  The launch takes as long as its slowest core.
"""
from __future__ import annotations

import pytest

from conformance.npu_impl.chips import PROFILES
from conformance.npu_impl.tiling import CoreRange, Tile, TilingPlan, roofline

# 1,600 B/s of GM and 400 B/s of vector work: numbers whose stage times are easy to add by hand.
PROFILE = PROFILES["ascend910b1"].with_knobs(gm_bytes_per_s=1600.0, vector_bytes_per_cycle=4, clock_hz=100.0)


def _plan(*tile_lengths: tuple[int, ...]) -> TilingPlan:
    """A plan whose cores hold tiles of these lengths, one after another."""
    cores, start = [], 0
    for core, lengths in enumerate(tile_lengths):
        tiles = []
        for length in lengths:
            tiles.append(Tile(start, length))
            start += length
        cores.append(CoreRange(core, tiles[0].start if tiles else start, sum(lengths), tuple(tiles)))
    return TilingPlan(start, 8, 8, tuple(cores), 0, 0, 0)


def test_two_cores_share_the_bandwidth_and_the_slowest_core_sets_the_time() -> None:
    """8 GM bytes per element at 800 B/s per core: 0.01 s per element to move; 3 ops on 4-byte lanes at
    400 B/s: 0.03 s per element to compute.  Core 0 (tiles of 4 and 2): 0.24 s serial,
    0.12 + 0.06 + the 0.04 s fill = 0.22 s pipelined; core 1 (a tile of 4): 0.16 s either way."""
    est = roofline(_plan((4, 2), (4,)), profile=PROFILE, gm_bytes_per_element=8, vector_ops=3, compute_itemsize=4)
    assert est.single_buffered_s == pytest.approx(0.24)
    assert est.double_buffered_s == pytest.approx(0.22)
    assert (est.gm_bytes, est.vector_ops_per_element) == (80, 3)
    assert (est.gm_bytes_per_s, est.vector_bytes_per_s) == (1600.0, 400.0)


def test_the_slowest_core_need_not_be_the_first() -> None:
    """Core 1's tiles of 4 and 4 take 0.32 s serial, 0.24 + 0.04 = 0.28 s pipelined; core 0's 2, 0.08 s."""
    est = roofline(_plan((2,), (4, 4)), profile=PROFILE, gm_bytes_per_element=8, vector_ops=3, compute_itemsize=4)
    assert est.single_buffered_s == pytest.approx(0.32)
    assert est.double_buffered_s == pytest.approx(0.28)


def test_one_core_has_the_whole_bandwidth() -> None:
    """4 GM bytes per element at 1,600 B/s: 0.0025 s per element; 1 op on 2-byte lanes at 400 B/s:
    0.005 s.  Tiles of 8 and 8: 0.12 s serial; 0.04 + 0.04 + the 0.02 s fill = 0.10 s pipelined."""
    est = roofline(_plan((8, 8)), profile=PROFILE, gm_bytes_per_element=4, vector_ops=1, compute_itemsize=2)
    assert est.single_buffered_s == pytest.approx(0.12)
    assert est.double_buffered_s == pytest.approx(0.10)
    assert est.gm_bytes == 64


def test_copy_bound_tiles_fill_the_pipeline_with_the_compute_stage() -> None:
    """20 GM bytes per element at 1,600 B/s: 0.0125 s; 1 op on 2-byte lanes: 0.005 s per element.
    Tiles of 8 and 8 on one core: 0.28 s serial; 0.1 + 0.1 + the 0.04 s fill = 0.24 s pipelined."""
    est = roofline(_plan((8, 8)), profile=PROFILE, gm_bytes_per_element=20, vector_ops=1, compute_itemsize=2)
    assert est.single_buffered_s == pytest.approx(0.28)
    assert est.double_buffered_s == pytest.approx(0.24)


def test_an_empty_plan_takes_no_time() -> None:
    est = roofline(_plan(), profile=PROFILE, gm_bytes_per_element=8, vector_ops=3, compute_itemsize=4)
    assert (est.single_buffered_s, est.double_buffered_s, est.gm_bytes) == (0.0, 0.0, 0)


def test_a_core_without_tiles_takes_no_time_but_shares_the_bandwidth() -> None:
    """Core 1's tile of 4 at 800 B/s (two cores): 0.04 s to move, 0.12 s to compute, 0.16 s either way."""
    est = roofline(_plan((), (4,)), profile=PROFILE, gm_bytes_per_element=8, vector_ops=3, compute_itemsize=4)
    assert est.single_buffered_s == pytest.approx(0.16)
    assert est.double_buffered_s == pytest.approx(0.16)


def test_the_article_plan_of_an_empty_tensor_takes_no_time() -> None:
    """The article model gives an empty tensor one core with no tiles."""
    from conformance.dtypes import info
    from conformance.npu_impl.kernel import KernelSpec, plan_for
    from conformance.npu_impl.variants import VARIANTS

    spec = KernelSpec("forward", info("float32"), info("float32"), 0.2, VARIANTS["reference"], PROFILE)
    plan = plan_for(0, spec, cores=4, usable_fraction=0.6)
    assert [len(c.tiles) for c in plan.cores] == [0]
    est = roofline(plan, profile=PROFILE, gm_bytes_per_element=8, vector_ops=3, compute_itemsize=4)
    assert (est.single_buffered_s, est.double_buffered_s) == (0.0, 0.0)


def test_each_figure_names_its_source() -> None:
    est = roofline(_plan((8,)), profile=PROFILES["ascend910b1"], gm_bytes_per_element=8, vector_ops=3,
                   compute_itemsize=4)
    assert est.gm_bytes_per_s == 1.6e12 and est.vector_bytes_per_s == 256 * 1.8e9
    assert "HBM" in est.gm_bytes_per_s_source
    assert "256 B per vector repeat" in est.vector_source and "clock" in est.vector_source
