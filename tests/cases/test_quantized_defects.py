"""Proof by generated quantized defects: a requantization rule, a slope or a wrong parameter
planted on the whole tensor or in one or two spans must be named with its planted category,
code by code; codes nothing planted stay without a finding."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conformance.cases.quantized_defects import CHANGED_MIN, generate_quantized
from conformance.reference.quantized import QuantParams, exact_table, lookup
from conformance.selftest_generated import name_generated, tally
from conformance.triage.quantized import REGION_MIN, QuantBatch, triage_quantized

REQUIRED = 0.999  # share of planted codes named right
CASES = [pytest.param(60, id="60-cases"), pytest.param(600, id="600-cases", marks=pytest.mark.exhaustive)]


@pytest.mark.parametrize("count", CASES)
def test_generated_quantized_defects_are_named_with_their_planted_category(count: int) -> None:
    cases = [generate_quantized(seed) for seed in range(count)]
    scored = [name_generated(case) for case in cases]
    share, false = tally(scored)
    assert false == 0, [str(s.case) for s in scored if s.false_findings][:5]
    assert share >= REQUIRED, [str(s.case) for s in scored if not all(ok for *_, ok in s.pairs)][:5]
    planted = {d.category for c in cases for d in c.defects}
    assert planted == {"rounding", "requantization", "code-saturation", "alpha-mismatch", "quant-params"}
    assert {len(c.defects) for c in cases} == {1, 2} and any(" in [" in str(c.defects[0]) for c in cases)


def test_a_planted_rule_changes_as_many_codes_as_triage_claims_a_span_on() -> None:
    assert CHANGED_MIN >= REGION_MIN


def test_a_span_that_explains_more_beats_a_rule_of_the_whole_tensor_that_explains_a_few() -> None:
    params = QuantParams(0.1462, 163, 0.0719, 136, "quint8")
    codes = np.random.default_rng(5).integers(0, 256, size=4000).astype(np.uint8)
    golden = lookup(exact_table(0.1, params=params), codes, params=params)
    wrong = lookup(exact_table(0.1, params=replace(params, z_in=164)), codes, params=params)
    actual = golden.copy()
    actual[1:2690] = wrong[1:2690]
    claims = triage_quantized(QuantBatch(codes, 0.1, params, golden, actual))
    assert [c.category for c in claims] == ["quant-params"]
    assert claims[0].detail["z_in"] == 164 and claims[0].index.size == int((actual != golden).sum())


def test_codes_flipped_at_random_stay_unexplained() -> None:
    case = generate_quantized(3)
    rng = np.random.default_rng(9)
    actual = case.golden.copy()
    where = rng.choice(actual.size, size=40, replace=False)
    actual[where] = (actual[where].astype(np.int64) ^ 0x41).astype(actual.dtype)
    claims = triage_quantized(QuantBatch(case.x, case.alpha, case.params, case.golden, actual))
    assert [c.category for c in claims] == ["unexplained"]
