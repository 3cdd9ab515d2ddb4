"""Attribution's ownership rule: each mismatch a stack reproduces goes to the rule it needs that
moves its value most; an element no single rule moves goes to the latest category; what only
neutral context moves, and what the stack does not reproduce, stays unclaimed."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pytest

from conformance import categories
from conformance.dtypes import from_bits, to_bits, ulp_distance
from conformance.metrics.exact import match_mask
from conformance.triage import attribution
from conformance.triage.claims import Batch, Claim
from conformance.triage.rules import Rule, rule
from conformance.triage.search import stack_semantics
from tests.triage.test_attribution_findings import NARROWED, RELU, float32_batch

SLOPE_16 = rule("alpha-precision", "slope rounded to float16", slope_dtype="float16")
FTZ = rule("subnormal-flush", "subnormal products flushed", ftz=True)
DAZ = rule("subnormal-flush", "subnormal inputs read as zero", daz=True)


def _owners(batch: Batch, stack: list[Rule], alternatives: Optional[dict] = None) -> list[Claim]:
    mis = np.flatnonzero(~match_mask(batch.actual, batch.golden))
    selector = attribution._mismatch_selector(batch, mis, leading=False)
    return attribution.attribute(selector, mis, stack, alternatives or {})


def _claimed(claims: list[Claim]) -> dict:
    return {c.category: c.index.tolist() for c in claims}


def _move(batch: Batch, stack: list[Rule], gone: Rule) -> np.ndarray:
    """ULPs the stack's prediction moves when ``gone`` is taken out of it."""
    full = batch.recomputed(semantics=stack_semantics(stack))
    return ulp_distance(full, batch.recomputed(semantics=stack_semantics([r for r in stack if r is not gone]))).ulps


def _above(v: float, ulps: int) -> np.float32:
    """The float32 ``ulps`` steps above ``v``."""
    return from_bits(to_bits(np.array([v], dtype=np.float32)) + np.uint32(ulps), "float32")[0]


def test_removing_a_rule_moves_a_value_by_its_ulps_a_zero_sign_by_half_a_nan_farthest() -> None:
    quiet_nan = from_bits(np.array([0x7FC00001], dtype=np.uint32), "float32")[0]  # another payload
    full = np.array([1.0, 1.0, -0.0, np.nan, 2.0, np.nan, 1.0], dtype=np.float32)
    without = np.array([1.0, _above(1.0, 1), 0.0, 1.0, _above(2.0, 3), quiet_nan, np.nan], dtype=np.float32)
    np.testing.assert_array_equal(attribution._moved(full, without), [0.0, 1.0, 0.5, np.inf, 3.0, 0.0, np.inf])


def test_an_element_two_rules_move_goes_to_the_rule_that_moves_it_most() -> None:
    """Narrowing x to float16 moves -(1 + 2^-11 - 2^-23) farther than the float16 slope does,
    and -(1 + 2^-20) less: the earlier category owns the first, the later one the second."""
    x = np.array([-(1 + 2**-11 - 2**-23), -(1 + 2**-20), 1 + 2**-11 - 2**-23, -3.0], dtype=np.float32)
    stack = [NARROWED, SLOPE_16]
    batch = float32_batch(x, stack)
    narrowing, slope = _move(batch, stack, NARROWED), _move(batch, stack, SLOPE_16)
    assert narrowing[0] > slope[0] > 0 and slope[1] > narrowing[1] > 0  # both move the first two
    assert narrowing[2] > 0 == slope[2] and slope[3] > 0 == narrowing[3]
    assert categories.order("input-precision") < categories.order("alpha-precision")
    assert _claimed(_owners(batch, stack)) == {"input-precision": [0, 2], "alpha-precision": [1, 3]}


def test_an_element_no_single_rule_moves_goes_to_the_latest_category() -> None:
    """x * 0.2 subnormal: slope 0 and flushing each make it -0 alone, so taking either out of the
    stack moves nothing, yet the stack reproduces it; x = -2 is the slope's alone."""
    x = np.array([-1e-39, -3e-39, -2.0], dtype=np.float32)
    for stack in ([RELU, FTZ], [FTZ, RELU]):
        batch = float32_batch(x, stack)
        assert not _move(batch, stack, RELU)[:2].any() and not _move(batch, stack, FTZ)[:2].any()
        assert _claimed(_owners(batch, stack)) == {"subnormal-flush": [0, 1], "alpha-mismatch": [2]}


def test_the_first_rule_of_a_category_owns_what_no_rule_of_it_moves() -> None:
    """DAZ and FTZ each flush x * 0.2 of a subnormal x alone: the element goes to the stack's first
    rule of the category, whose summary comes first."""
    x = np.array([-1e-39, -3e-39], dtype=np.float32)
    for stack in ([DAZ, FTZ], [FTZ, DAZ]):
        (claim,) = _owners(float32_batch(x, stack), stack)
        assert claim.summary == stack[0].summary and claim.index.tolist() == [0, 1]


def test_a_rule_that_only_turns_a_zeros_sign_owns_it() -> None:
    """x * 0.2 underflows to -0 at x = -1e-45, and the select-and-merge makes it +0: half a ULP,
    the merge's; at x = -1e-39 the flush moves the subnormal product far more than the sign."""
    merge = rule("formulation", "select-and-merge", formulation="merge", predicate="ge")
    x = np.array([-1e-45, -3.0, -1e-39], dtype=np.float32)
    stack = [merge, FTZ]
    batch = float32_batch(x, stack)
    assert _move(batch, stack, FTZ)[0] == 0 and _move(batch, stack, merge)[0] == 0
    assert np.signbit(batch.golden[0]) and not np.signbit(batch.actual[0])
    assert _claimed(_owners(batch, stack)) == {"formulation": [0], "subnormal-flush": [2]}


def test_mismatches_the_stack_does_not_reproduce_stay_unclaimed() -> None:
    x = np.array([-1e-39, -2.0, -4.0, -8.0], dtype=np.float32)
    stack = [RELU, FTZ]
    batch = float32_batch(x, stack)
    batch.actual[2:] = np.float32(1.5)  # wrong, and no rule of the stack says 1.5
    assert _claimed(_owners(batch, stack)) == {"subnormal-flush": [0], "alpha-mismatch": [1]}


def test_a_mismatch_every_rule_moves_but_the_stack_does_not_reproduce_stays_unclaimed() -> None:
    """Both rules move x = -(1 + 2^-11 - 2^-23), but its output holds 1.5, which the stack does not say."""
    x = np.array([-(1 + 2**-11 - 2**-23), -(1 + 2**-20), -3.0], dtype=np.float32)
    stack = [NARROWED, SLOPE_16]
    batch = float32_batch(x, stack)
    assert _move(batch, stack, NARROWED)[0] > 0 and _move(batch, stack, SLOPE_16)[0] > 0
    batch.actual[0] = np.float32(1.5)
    assert _claimed(_owners(batch, stack)) == {"alpha-precision": [1, 2]}


@pytest.mark.parametrize("context", [rule(None, "the slope in float16", slope_dtype="float16"),
                                     rule(None, "results truncated", rounding="rtz")], ids=["far", "one-ulp"])
def test_an_element_only_a_neutral_rule_moves_stays_unclaimed(context: Rule) -> None:
    """A rule without a category (neutral context) names nothing: the elements it alone moves,
    by one ULP or many, stay for ``rounding``; those a named rule moves go to it."""
    x = np.array([-3.0, -1e-39, -0.7, -2e-39], dtype=np.float32)
    stack = [context, DAZ]
    batch = float32_batch(x, stack)
    assert np.flatnonzero(~match_mask(batch.actual, batch.golden)).tolist() == [0, 1, 2, 3]
    assert _claimed(_owners(batch, stack)) == {"subnormal-flush": [1, 3]}


def test_an_element_no_rule_moves_goes_to_the_latest_category_beside_a_neutral_rule() -> None:
    context = rule(None, "results truncated", rounding="rtz")
    x = np.array([-1e-39, -3e-39, -2.0], dtype=np.float32)
    stack = [context, RELU, FTZ]
    batch = float32_batch(x, stack)
    assert not any(_move(batch, stack, r)[:2].any() for r in stack)
    assert _claimed(_owners(batch, stack)) == {"subnormal-flush": [0, 1], "alpha-mismatch": [2]}


def test_a_stack_of_neutral_rules_alone_claims_nothing() -> None:
    context = rule(None, "computed with the slope in float16", slope_dtype="float16")
    x = np.array([-3.0, -5.0], dtype=np.float32)
    assert _owners(float32_batch(x, [context]), [context]) == []


def test_one_rule_claims_the_mismatches_it_reproduces_and_no_other() -> None:
    x = np.array([-3.0, 2.0, -5.0, -7.0, -1.0], dtype=np.float32)
    batch = float32_batch(x, [RELU])
    batch.actual[3] = np.float32(9.0)
    (claim,) = _owners(batch, [RELU])
    assert (claim.category, claim.index.tolist(), claim.count) == ("alpha-mismatch", [0, 2, 4], 3)
    assert claim.detail["explained"] == 3


def test_a_rule_reproducing_no_mismatch_makes_no_claim() -> None:
    x = np.array([-3.0, -5.0], dtype=np.float32)
    batch = float32_batch(x, [RELU])
    assert _owners(batch, [FTZ]) == []
