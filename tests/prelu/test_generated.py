"""Proof by generated PReLU defects: a per-channel slope, a wrong axis, a clip, a formulation or a
dweight reduction order planted on random shapes, axes and dtypes must be named with its planted
category element by element; the clean outputs of the same cases get no finding."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from conformance.cases import regional_defects
from conformance.cases.defects import Planted
from conformance.cases.prelu_defects import cases
from conformance.selftest_generated import name_generated, tally

REQUIRED = 0.999  # share of planted elements named right
CASES = [pytest.param(40, id="40-cases"), pytest.param(400, id="400-cases", marks=pytest.mark.exhaustive)]


def _wrong(generated: list[Planted]) -> Counter:
    """(planted, named) of the planted elements named otherwise."""
    return Counter((p, n) for s in map(name_generated, generated) for p, n, ok in s.pairs if not ok)


@pytest.mark.parametrize("count", CASES)
def test_generated_prelu_defects_are_named_with_their_planted_category(count: int) -> None:
    generated = cases(count)
    share, false = tally([name_generated(p) for p in generated])
    assert false == 0
    assert share >= REQUIRED, (share, _wrong(generated).most_common(5))
    assert {p.defects[0].category for p in generated} >= {"alpha-mismatch", "formulation", "reduction-order"}
    assert {p.prelu.part for p in generated} == {"y", "dx", "dweight"}
    assert {p.x.ndim for p in generated} == {1, 2, 3, 4, 5}
    assert {str(p.x.dtype) for p in generated} == {"float32", "float16", "bfloat16"}


@pytest.mark.parametrize("count", CASES)
def test_the_clean_outputs_of_the_generated_cases_get_no_finding(count: int) -> None:
    clean = [replace(p, actual=p.golden.copy(), accept={}) for p in cases(count)]
    assert [str(c) for c in clean if name_generated(c).false_findings] == []


def test_every_kind_of_planting_is_drawn() -> None:
    names = " | ".join(p.defects[0].name for p in cases(40))
    for words in ("a default", "a random slope", "the weight on axis", "the weight clipped to", "max(0,x)",
                  "x >= 0 selects", "sum in"):
        assert words in names


def test_a_slope_whose_few_ratios_all_round_off_it_is_recovered() -> None:
    planted = cases(1, seed=844)[0]  # bfloat16 dx, 8 elements per channel, two random slopes
    assert planted.x.dtype.name == "bfloat16" and planted.defects[0].category == "alpha-mismatch"
    assert all(ok for *_, ok in name_generated(planted).pairs)


def test_a_planted_case_accepts_exactly_the_elements_its_defect_changed() -> None:
    for planted in cases(12):
        changed = (planted.golden.view(f"u{planted.golden.itemsize}")
                   != planted.actual.view(f"u{planted.actual.itemsize}")).reshape(-1).nonzero()[0]
        assert sorted(planted.accept) == changed.tolist()
        assert set(planted.accept.values()) == {(planted.defects[0].category,)}
        assert planted.golden.shape == (planted.prelu.weight.shape if planted.prelu.part == "dweight"
                                        else planted.x.shape)


def test_selftest_generated_draws_the_prelu_cases_among_its_own() -> None:
    corpus = regional_defects.cases(16, seed=0)
    prelu = [c for c in corpus if c.prelu is not None]
    assert [c.seed for c in prelu] == [4, 12]
    assert [str(c) for c in prelu] == [str(p) for p in (cases(1, seed=4) + cases(1, seed=12))]
