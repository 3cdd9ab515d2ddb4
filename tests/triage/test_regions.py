"""Defects that live in one region: a rule that holds in one core, tile or channel; tiles
holding another tile's data; a region processed twice.  Each is built by hand, on plans
written here or taken from a chip profile, and on shapes of several ranks."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.dtypes import info
from conformance.ingest.dumps import kernel_plan_fn
from conformance.records import Row, TilePlan, TileSpan
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.render.messages import failure_message
from tests.helpers import counts, differs, judge


def _plan(numel: int, *, cores: int, tiles: int) -> TilePlan:
    """``cores`` equal ranges of ``tiles`` equal tiles each (the last core takes the rest)."""
    per = numel // cores
    tile = per // tiles
    spans = []
    for core in range(cores):
        start, stop = core * per, (core + 1) * per if core < cores - 1 else numel
        starts = list(range(start, stop, tile))
        spans += [TileSpan(core, t, s, min(tile, stop - s), is_tail=stop - s < tile)
                  for t, s in enumerate(starts)]
    return TilePlan(tile, tuple(spans), 8)


def _profile_plan(numel: int, *, profile: str, dtype: str) -> TilePlan:
    return kernel_plan_fn(profile, None, dtypes=(dtype, dtype), direction="forward")(numel)


def _variant(x: np.ndarray, alpha: float, semantics: Semantics) -> np.ndarray:
    return ref.compute("forward", x, alpha, out_dtype=x.dtype.name, semantics=semantics).reshape(-1)


def _only(row: Row, category: str, *, says: str, elements: int) -> str:
    """The row names every element ``category`` and its summary says ``says``."""
    __tracebackhide__ = True
    assert counts(row) == {category: elements}, failure_message(row)
    (finding,) = row.findings
    assert says in finding.summary, finding.summary
    return finding.summary


def _core_range(tile_plan: TilePlan, core: int) -> tuple[int, int]:
    spans = [s for s in tile_plan.spans if s.core == core]
    return min(s.start for s in spans), max(s.stop for s in spans)


@pytest.mark.parametrize("dtype, numel, profile, core", [
    ("float32", 48 * 3 * 2048 + 1000, None, 7),
    ("float16", 400_000, "ascend910b3", 2),
    ("bfloat16", 300_001, "ascend950", 1),
])
def test_one_core_with_another_slope_is_alpha_mismatch_on_that_core(dtype: str, numel: int,
                                                                    profile: object, core: int) -> None:
    rng = np.random.default_rng(numel)
    x = rng.standard_normal(numel).astype(info(dtype).dtype)
    tile_plan = _plan(numel, cores=48, tiles=3) if profile is None else _profile_plan(numel, profile=str(profile),
                                                                                 dtype=dtype)
    lo, hi = _core_range(tile_plan, core)
    actual = ref.forward(x, 0.2).copy()
    actual[lo:hi] = _variant(x[lo:hi], 0.2, Semantics(slope=0.0))
    row = judge(x, actual, 0.2, tile_plan=tile_plan)
    summary = _only(row, "alpha-mismatch", says=f"core {core} [{lo}, {hi})",
                    elements=differs(actual, ref.forward(x, 0.2)))
    assert "slope 0.0" in summary
    assert row.findings[0].detail["region"] == f"core {core} [{lo}, {hi})"


@pytest.mark.parametrize("cores, tiles, stale, source", [(48, 2, 1, 0), (8, 4, 3, 2), (20, 3, 2, 0)])
def test_one_stale_tile_per_core_states_the_mapping(cores: int, tiles: int, stale: int, source: int) -> None:
    numel = cores * tiles * 1024
    x = np.random.default_rng(cores).standard_normal(numel).astype(np.float32)
    tile_plan = _plan(numel, cores=cores, tiles=tiles)
    exact = ref.forward(x, 0.2)
    actual = exact.copy()
    for core in range(cores):
        (target,) = [s for s in tile_plan.spans if s.core == core and s.tile == stale]
        (held,) = [s for s in tile_plan.spans if s.core == core and s.tile == source]
        actual[target.start:target.stop] = exact[held.start:held.stop]
    row = judge(x, actual, 0.2, tile_plan=tile_plan)
    _only(row, "stale-block", says=f"tile {stale} of each of {cores} cores holds tile {source}'s output",
          elements=differs(actual, exact))


@pytest.mark.parametrize("shape, axis, index, slope", [
    ((2, 16, 8, 8), 1, 3, 0.01),  # one channel of NCHW with a framework default slope
    ((4, 6, 5, 3, 7), 2, 4, 0.3),  # a plane of a 5-D tensor
    ((3, 40, 50), 0, 1, 0.0),  # one batch element
    ((64, 129), 1, 100, 0.25),  # one column
])
def test_a_slope_on_one_axis_slice_names_the_slice(shape: tuple, axis: int, index: int, slope: float) -> None:
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float16)
    exact = ref.forward(x, 0.2).reshape(shape)
    actual = exact.copy()
    where = tuple(index if a == axis else slice(None) for a in range(len(shape)))
    actual[where] = _variant(x[where], 0.2, Semantics(slope=slope)).reshape(actual[where].shape)
    row = judge(x, actual.reshape(-1), 0.2)
    _only(row, "alpha-mismatch", says=f"{index} on axis {axis}", elements=differs(actual, exact))
    assert row.findings[0].detail["axis"] == axis and row.findings[0].detail["index"] == index


@pytest.mark.parametrize("dtype, overlap, profile", [("float32", 64, None), ("float16", 128, "ascend910b1")])
def test_tiles_processed_twice_where_they_overlap_is_formulation_in_that_region(dtype: str, overlap: int,
                                                                                 profile: object) -> None:
    numel = 250_000
    x = np.random.default_rng(5).standard_normal(numel).astype(info(dtype).dtype)
    tile_plan = _plan(numel, cores=24, tiles=4) if profile is None else _profile_plan(numel, profile=str(profile),
                                                                                 dtype=dtype)
    exact = ref.forward(x, 0.2)
    twice = _variant(x, 0.2, Semantics(formulation="twice"))
    actual = exact.copy()
    for s in tile_plan.spans:
        actual[s.start:s.start + overlap] = twice[s.start:s.start + overlap]
    row = judge(x, actual, 0.2, tile_plan=tile_plan)
    _only(row, "formulation", says=f"the first {overlap} elements of each of", elements=differs(actual, exact))


def test_a_batch_element_holding_the_one_before_is_stale_block() -> None:
    """A misplaced block: batch element 2 of a 3-D tensor holds element 1's output."""
    x = np.random.default_rng(8).standard_normal((4, 30, 40)).astype(np.float32)
    exact = ref.forward(x, 0.2).reshape(x.shape)
    actual = exact.copy()
    actual[2] = exact[1]
    row = judge(x, actual.reshape(-1), 0.2)
    _only(row, "stale-block", says="batch element 2 on axis 0 holds the output of the batch element before",
          elements=differs(actual, exact))


def test_a_core_holding_another_cores_output_is_stale_block() -> None:
    numel = 16 * 8192
    x = np.random.default_rng(9).standard_normal(numel).astype(np.float32)
    tile_plan = _plan(numel, cores=16, tiles=2)
    exact = ref.forward(x, 0.2)
    actual = exact.copy()
    lo, hi = _core_range(tile_plan, 5)
    actual[lo:hi] = exact[lo - 8192:hi - 8192]
    row = judge(x, actual, 0.2, tile_plan=tile_plan)
    _only(row, "stale-block", says="8192 elements before", elements=differs(actual, exact))


def test_a_slope_on_every_core_is_a_whole_batch_rule_without_a_region() -> None:
    numel = 8 * 4096
    x = np.random.default_rng(10).standard_normal(numel).astype(np.float32)
    actual = _variant(x, 0.2, Semantics(slope=0.01))
    row = judge(x, actual, 0.2, tile_plan=_plan(numel, cores=8, tiles=2))
    assert set(counts(row)) == {"alpha-mismatch"} and "region" not in row.findings[0].detail


@pytest.mark.parametrize(("family", "from_end", "w", "says"), [
    ("tiles", True, 24, "the last 24 elements of each of 32 tiles"),
    ("cores", False, 40, "the first 40 elements of each of 8 cores' ranges"),
    ("cores", True, 17, "the last 17 elements of each of 8 cores' ranges"),
    ("rows", False, 30, "the first 30 elements of each of 40 rows of 40x300"),
    ("rows", True, 12, "the last 12 elements of each of 40 rows of 40x300"),
])
def test_a_rule_on_a_prefix_or_suffix_of_every_segment_names_it(family: str, from_end: bool, w: int,
                                                                   says: str) -> None:
    plan = _plan(12_000, cores=8, tiles=4)  # 8 cores of 4 tiles of 375, or 40 rows of 300
    x = np.random.default_rng(9).standard_normal(12_000).astype(np.float16)
    exact, wrong = ref.forward(x, 0.2), ref.forward(x, 0.01)
    actual = exact.copy()
    if family == "rows":
        segments = [(r * 300, r * 300 + 300) for r in range(40)]
    elif family == "tiles":
        segments = [(s.start, s.stop) for s in plan.spans]
    else:
        segments = [(c * 1500, c * 1500 + 1500) for c in range(8)]
    for lo, hi in segments:
        at = slice(hi - w, hi) if from_end else slice(lo, lo + w)
        actual[at] = wrong[at]
    shape = (40, 300) if family == "rows" else (12_000,)
    row = judge(x.reshape(shape), actual.reshape(shape), 0.2, tile_plan=None if family == "rows" else plan)
    assert counts(row) == {"alpha-mismatch": differs(actual, exact)}, failure_message(row)
    assert says in row.findings[0].summary
