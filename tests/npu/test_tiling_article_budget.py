"""The article's UB-budget model (``usable_fraction``), worked by hand from its rule: the budget is
``floor(fraction * total UB)`` bytes, one tile of the widest GM dtype fills it (``floor(budget /
sizeof(T))`` elements, aligned down to a 32-byte block), the elements are dealt over cores in whole
32-byte units with the former cores one unit more; a budget under one aligned tile is refused."""
from __future__ import annotations

import pytest

from conformance.dtypes import info
from conformance.npu_impl.chips import PROFILES
from conformance.npu_impl.kernel import KernelSpec, plan_for
from conformance.npu_impl.variants import VARIANTS

UB_910B1 = 192 * 1024  # the total UB of ascend910b1 (docs/domain.md)


def _spec(src: str, out: str) -> KernelSpec:
    return KernelSpec("forward", info(src), info(out), 0.01, VARIANTS["reference"], PROFILES["ascend910b1"])


def test_the_articles_example_budgets_60_percent_of_the_ub_for_one_fp32_tile() -> None:
    """0.6 * 196,608 B = 117,964.8 B, floored; 117,964 / 4 = 29,491 elements, aligned down to 29,488."""
    plan = plan_for(1_000_000, _spec("float32", "float32"), cores=1, usable_fraction=0.6)
    assert plan.ub_budget_bytes == 117_964
    assert plan.tile_elements == 29_488
    assert plan.ub_tile_bytes == 29_488 * 4


def test_the_widest_gm_dtype_sizes_the_tile() -> None:
    """fp32 in, fp16 out: the fp32 side is the widest (4 B) and sets the tile and its bytes."""
    plan = plan_for(100_000, _spec("float32", "float16"), cores=4, usable_fraction=0.5)
    assert plan.ub_budget_bytes == UB_910B1 // 2 == 98_304
    assert plan.tile_elements == 98_304 // 4 == 24_576
    assert plan.ub_tile_bytes == 98_304


def test_a_budget_under_one_aligned_tile_is_refused_with_the_reason() -> None:
    """0.0001 of the UB is 19 B: fewer than one 32-byte block of fp32."""
    with pytest.raises(ValueError, match="cannot hold one aligned tile of 8 elements"):
        plan_for(1000, _spec("float32", "float32"), cores=2, usable_fraction=0.0001)


@pytest.mark.parametrize("numel, cores, lengths, former", [
    (1003, 2, [504, 499], 1),  # 125 whole units of 8, 3 elements left: 63 + 62 units, the 3 on the last
    (1003, 4, [256, 248, 248, 251], 1),  # 125 units: 32 + 31 + 31 + 31
    (1030, 3, [344, 344, 342], 2),  # 128 units, 6 left: 43 + 43 + 42
    (9, 2, [9], 0),  # one unit: one core takes it all
])
def test_former_cores_take_one_whole_unit_more(numel: int, cores: int, lengths: list[int], former: int) -> None:
    plan = plan_for(numel, _spec("float32", "float32"), cores=cores, usable_fraction=0.5)
    assert [c.length for c in plan.cores] == lengths
    assert plan.former_cores == former
