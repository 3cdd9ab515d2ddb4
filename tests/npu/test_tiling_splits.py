"""The tiling's splitting rules stated by their docstrings, on hand-worked cases: a last block
shorter than one 32-byte block joins its neighbour, the article model's aligned split (former
cores one unit more, the remainder on the last), an even split, and the article model's
accepted fractions of the UB."""
from __future__ import annotations

import pytest

from conformance.dtypes import info
from conformance.npu_impl.chips import PROFILES
from conformance.npu_impl.kernel import KernelSpec, plan_for
from conformance.npu_impl.tiling import merged_short_last, split_cores, split_even
from conformance.npu_impl.variants import VARIANTS


@pytest.mark.parametrize("ranges, merged", [
    ([(0, 512), (512, 512), (1024, 5)], [(0, 512), (512, 517)]),
    ([(0, 512), (512, 5)], [(0, 517)]),
    ([(0, 512), (512, 512), (1024, 8)], [(0, 512), (512, 512), (1024, 8)]),  # one whole block: kept
    ([(0, 5)], [(0, 5)]),
    ([], []),
])
def test_a_last_block_shorter_than_one_copy_block_joins_the_one_before(ranges, merged) -> None:
    assert merged_short_last(ranges, align=8) == merged


@pytest.mark.parametrize("numel, cores, expected", [
    (83, 3, [(0, 32), (32, 24), (56, 27)]),  # 10 units of 8: 4, 3, 3; the 3 left over go last
    (80, 3, [(0, 32), (32, 24), (56, 24)]),
    (5, 4, [(0, 5)]),  # less than one unit: one core takes it all
    (16, 4, [(0, 8), (8, 8)]),  # no core gets less than one unit
])
def test_the_article_split_deals_whole_units_former_cores_first(numel, cores, expected) -> None:
    assert split_cores(numel, cores, align=8) == expected


@pytest.mark.parametrize("numel, cores, expected", [
    (10, 4, [(0, 3), (3, 3), (6, 2), (8, 2)]),
    (2, 4, [(0, 1), (1, 1)]),
    (0, 4, [(0, 0)]),
])
def test_the_even_split_deals_single_elements(numel, cores, expected) -> None:
    assert split_even(numel, cores) == expected


def _f32_spec() -> KernelSpec:
    return KernelSpec("forward", info("float32"), info("float32"), 0.01, VARIANTS["reference"],
                      PROFILES["ascend910b1"])


def test_the_article_model_takes_a_fraction_in_0_to_1() -> None:
    whole = plan_for(1000, _f32_spec(), cores=2, usable_fraction=1.0)
    assert whole.tile_elements == PROFILES["ascend910b1"].ub_bytes // 4 // 8 * 8
    for fraction in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="usable_fraction"):
            plan_for(1000, _f32_spec(), cores=2, usable_fraction=fraction)


@pytest.mark.parametrize("numel, former", [(1000, 1), (7, 0), (8, 0), (24, 1)])
def test_the_article_model_counts_the_cores_that_take_one_unit_more(numel: int, former: int) -> None:
    plan = plan_for(numel, _f32_spec(), cores=2, usable_fraction=0.5)
    assert plan.former_cores == former and plan.model == "article"
    assert (plan.numel, plan.align_elements) == (numel, 8)
    assert sum(c.length for c in plan.cores) == numel
