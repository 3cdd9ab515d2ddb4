"""Proof by generated PReLU defects: a per-channel slope, a wrong axis, a clip, a formulation or a
dweight reduction order planted on random shapes, axes and dtypes must be named with its planted
category element by element; the clean outputs of the same cases get no finding."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from conformance.cases.prelu_defects import PlantedPrelu, cases
from conformance.triage.prelu import Operands, PreluClaim, triage_dweight, triage_elementwise

REQUIRED = 0.999  # share of planted elements named right
CASES = [pytest.param(40, id="40-cases"), pytest.param(400, id="400-cases", marks=pytest.mark.exhaustive)]


def triaged(planted: PlantedPrelu, actual: np.ndarray) -> list[PreluClaim]:
    """Triage of ``actual`` as the output of ``planted``'s part."""
    c = planted.case
    if planted.part == "dweight":
        return triage_dweight(c.dy, c.x, c.weight, planted.golden, actual, channel_axis=c.channel_axis,
                              tile=planted.tile)
    operand = c.x if planted.part == "y" else c.dy
    return triage_elementwise(Operands(c.x, operand, c.weight, c.channel_axis), planted.golden, actual,
                              forward=planted.part == "y")


def named(planted: PlantedPrelu) -> dict[int, str]:
    """Flat index -> the category triage named it with."""
    return {int(i): claim.category for claim in triaged(planted, planted.actual)
            for i in np.flatnonzero(claim.mask.reshape(-1))}


def score(generated: list[PlantedPrelu]) -> tuple[float, Counter, list[str]]:
    """(share of planted elements named right, (planted, named) of the others, cases with a finding where
    nothing was planted)."""
    right, total, wrong, false = 0, 0, Counter(), []
    for planted in generated:
        names, where = named(planted), set(planted.planted.tolist())
        for i in where:
            name = names.get(i, "unexplained")
            right += name == planted.category
            wrong.update([(planted.category, name)] if name != planted.category else [])
        total += len(where)
        false += [str(planted)] if set(names) - where else []
    return right / total, wrong, false


@pytest.mark.parametrize("count", CASES)
def test_generated_prelu_defects_are_named_with_their_planted_category(count: int) -> None:
    generated = cases(count)
    share, wrong, false = score(generated)
    assert not false
    assert share >= REQUIRED, (share, wrong.most_common(5))
    assert {p.category for p in generated} >= {"alpha-mismatch", "formulation", "reduction-order"}
    assert {p.case.x.ndim for p in generated} == {1, 2, 3, 4, 5}
    assert {str(p.case.x.dtype) for p in generated} == {"float32", "float16", "bfloat16"}


@pytest.mark.parametrize("count", CASES)
def test_the_clean_outputs_of_the_generated_cases_get_no_finding(count: int) -> None:
    assert [str(p) for p in cases(count) if triaged(p, p.golden.copy())] == []


def test_every_kind_of_planting_is_drawn() -> None:
    names = " | ".join(p.name for p in cases(40))
    for words in ("a default", "a random slope", "the weight on axis", "the weight clipped to", "max(0,x)",
                  "x >= 0 selects", "sum in"):
        assert words in names


def test_a_slope_whose_few_ratios_all_round_off_it_is_recovered() -> None:
    planted = cases(1, seed=844)[0]  # bfloat16 dx, 8 elements per channel, two random slopes
    assert planted.case.x.dtype.name == "bfloat16" and planted.category == "alpha-mismatch"
    names = named(planted)
    assert all(names.get(i) == "alpha-mismatch" for i in planted.planted.tolist())
