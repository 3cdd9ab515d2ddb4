"""What a rule's finding says: its summary with the equally good alternatives, the elements it
explains and contradicts (weighted on a reduced batch), and each category's own counts."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Optional

import numpy as np
import pytest

from conformance import jit
from conformance.dtypes import info
from conformance.metrics.exact import match_mask
from conformance.reference import golden as ref
from conformance.triage import attribution
from conformance.triage.claims import Batch, Claim
from conformance.triage.rules import Rule, rule
from conformance.triage.search import stack_semantics

RELU = rule("alpha-mismatch", "slope 0", {"alpha": 0.0}, slope=0.0)
FLUSH = rule("subnormal-flush", "DAZ and FTZ", daz=True, ftz=True)
NARROWED = rule("input-precision", "inputs rounded to float16", input_dtype="float16")
SATURATED = rule("saturation", "NaN became 0 and ±inf became ±max", saturate=True)
TRUNCATED = rule("rounding", "results rounded toward zero", rounding="rtz")


def compiled_configuration(monkeypatch: pytest.MonkeyPatch, *, enabled: bool = True) -> None:
    """Attribution's choice of path as with the compiled paths on (``enabled``) or off: only they
    read a reduced batch's leading mismatches as views (``_mismatch_selector``), predicted a piece
    of two at a time here, and predict only the other elements for the contradictions.  What each
    path computes is numpy either way."""
    configuration = SimpleNamespace(enabled=lambda: enabled, in_parallel=jit.in_parallel, ranges=jit.ranges)
    monkeypatch.setattr(attribution, "jit", configuration)
    monkeypatch.setattr(attribution, "PIECE", 2)


def float32_batch(x: np.ndarray, stack: list[Rule], *, dy: Optional[np.ndarray] = None, **reduced: object) -> Batch:
    """Float32 at alpha 0.2, the actual output computed under ``stack``."""
    direction = "forward" if dy is None else "backward"
    actual = ref.compute(direction, x, 0.2, dy=dy, out_dtype="float32", semantics=stack_semantics(stack))
    golden = ref.compute(direction, x, 0.2, dy=dy, out_dtype="float32")
    return Batch(x, dy, 0.2, direction, "float32", golden, actual, **reduced)


def _claims(batch: Batch, stack: list[Rule], alternatives: Optional[dict] = None, *,
            leading: bool = False) -> list[Claim]:
    mis = np.flatnonzero(~match_mask(batch.actual, batch.golden))
    selector = attribution._mismatch_selector(batch, mis, leading=leading)
    return attribution.attribute(selector, mis, stack, alternatives or {}, whole=batch)


def _detail(batch: Batch, stack: list[Rule], *, leading: bool = False) -> dict:
    (claim,) = _claims(batch, stack, leading=leading)
    return claim.detail


def test_equally_good_alternatives_are_in_the_summary_and_their_other_categories_listed() -> None:
    same = rule("alpha-mismatch", "slope 0 by a select")
    other = rule("formulation", "max(x, 0)")
    neutral = rule(None, "in float32")
    also = rule("formulation", "relu")
    batch = float32_batch(np.array([-3.0, -5.0, 2.0], dtype=np.float32), [RELU])
    (claim,) = _claims(batch, [RELU], {RELU: [same, other, neutral, also]})
    assert claim.summary == ("slope 0; or equally: slope 0 by a select; or equally: max(x, 0); or equally: in float32"
                             "; or equally: relu")
    assert claim.detail["alternatives"] == ["slope 0 by a select", "max(x, 0)", "in float32", "relu"]
    assert claim.detail["alternative_categories"] == ["formulation"]
    assert claim.detail["alpha"] == 0.0 and claim.detail["explained"] == 2


def test_a_finding_without_alternatives_has_its_own_summary_and_no_alternatives() -> None:
    batch = float32_batch(np.array([-3.0, -5.0], dtype=np.float32), [RELU])
    (claim,) = _claims(batch, [RELU], {RELU: []})
    assert claim.summary == "slope 0"
    assert "alternatives" not in claim.detail and "alternative_categories" not in claim.detail


def test_contradicted_counts_the_elements_the_rule_changes_that_the_output_does_not_follow() -> None:
    """x = -7 and -9 kept their exact result, x = -11 holds 1.5: the slope changes all three and
    the output follows none; x = 4 holds 1.5 too, but the slope does not change it."""
    x = np.array([-3.0, -5.0, -7.0, -9.0, -11.0, 4.0, 6.0], dtype=np.float32)
    batch = float32_batch(x, [RELU])
    batch.actual[2:4] = batch.golden[2:4]
    batch.actual[4] = batch.actual[5] = np.float32(1.5)
    detail = _detail(batch, [RELU])
    assert (detail["explained"], detail["contradicted"]) == (2, 3)


@pytest.mark.parametrize("leading", [False, True], ids=["gathered", "leading"])
def test_contradicted_on_a_reduced_batch_counts_what_each_sampled_element_stands_for(
        leading: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mismatches first, then a sample standing for 2.75 and 4.0 elements each: the slope is
    contradicted at both (their exact result kept), 6.75 elements, 7 when rounded."""
    if leading:
        compiled_configuration(monkeypatch)
    x = np.array([-3.0, -5.0, -7.0, -9.0, 2.0], dtype=np.float32)
    batch = float32_batch(x, [RELU], where=np.arange(5) * 10, numel=50, weight=np.array([2.75, 4.0, 8.0]))
    batch.actual[2:] = batch.golden[2:]
    detail = _detail(batch, [RELU], leading=leading)
    assert (detail["explained"], detail["contradicted"]) == (2, 7)


def test_a_subnormal_flush_counts_its_subnormal_inputs_and_outputs_forward() -> None:
    """Flushed: three subnormal x, and x = -5e-38, whose product -1e-38 is subnormal."""
    x = np.array([-1e-39, -1e-37, -5e-38, -1e-39, -2.0, -1e-39, 3e-39], dtype=np.float32)
    detail = _detail(float32_batch(x, [FLUSH]), [FLUSH])
    assert (detail["explained"], detail["subnormal_inputs"], detail["subnormal_outputs"]) == (5, 4, 5)


def test_a_subnormal_flush_counts_a_subnormal_x_or_dy_as_an_input_backward() -> None:
    """Flushed: a subnormal dy (x normal), both subnormal, x subnormal with dy = 2 (dx = 2 became
    0.4, a normal output), and dy subnormal at a positive subnormal x."""
    x = np.array([-5e-38, -1e-39, 3e-39, 3e-39, -1.0], dtype=np.float32)
    dy = np.array([1e-39, 1e-39, 2.0, 1e-39, 1.0], dtype=np.float32)
    batch = float32_batch(x, [FLUSH], dy=dy)
    assert np.flatnonzero(~match_mask(batch.actual, batch.golden)).tolist() == [0, 1, 2, 3]
    detail = _detail(batch, [FLUSH])
    assert (detail["explained"], detail["subnormal_inputs"], detail["subnormal_outputs"]) == (4, 4, 3)


def test_a_rounding_rule_reports_its_largest_distance_in_ulps_over_its_own_elements() -> None:
    """x = 9 holds 1.5, far from golden: a mismatch the truncation does not explain, not counted."""
    x = np.array([-3.0, -7.0, -0.7, 5.0, -(2.0 ** 127), 9.0], dtype=np.float32)
    batch = float32_batch(x, [TRUNCATED])
    batch.actual[5] = np.float32(1.5)
    detail = _detail(batch, [TRUNCATED])
    assert (detail["explained"], detail["max_ulp"]) == (3, 1)


def test_saturation_counts_nan_made_zero_and_infinities_made_max() -> None:
    x = np.array([np.nan, -np.inf, np.inf, -1.0, np.nan, np.nan], dtype=np.float32)
    detail = _detail(float32_batch(x, [SATURATED]), [SATURATED])
    assert (detail["explained"], detail["nan_to_zero"], detail["inf_to_max"]) == (5, 3, 2)
    assert detail["confirmed_by_inf"] is True


def test_saturation_of_nan_alone_is_not_confirmed_by_an_infinity() -> None:
    x = np.array([np.nan, -1.0, np.nan, 3.0], dtype=np.float32)
    detail = _detail(float32_batch(x, [SATURATED]), [SATURATED])
    assert (detail["nan_to_zero"], detail["inf_to_max"], detail["confirmed_by_inf"]) == (2, 0, False)


@pytest.mark.parametrize("leading", [False, True], ids=["gathered", "leading"])
def test_saturation_is_confirmed_by_an_infinity_of_the_whole_batch_outside_the_mismatches(
        leading: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The infinity was not saturated (not a mismatch): the selector on the leading mismatches
    does not hold it, the whole batch does."""
    if leading:
        compiled_configuration(monkeypatch)
    x = np.array([np.nan, np.nan, -1.0, np.inf], dtype=np.float32)
    batch = float32_batch(x, [SATURATED], where=np.arange(4), numel=4, weight=np.ones(2))
    batch.actual[3] = batch.golden[3]
    detail = _detail(batch, [SATURATED], leading=leading)
    assert (detail["nan_to_zero"], detail["inf_to_max"], detail["contradicted"]) == (2, 0, 1)
    assert detail["confirmed_by_inf"] is True


def test_narrowed_inputs_leave_an_operand_that_overflowed_to_the_value_classes() -> None:
    """x = -1e6 rounded to float16 is -inf: a non-finite actual where golden is finite, which the
    value classes name (``overflow``); the other narrowed elements are ``input-precision``."""
    x = np.array([-1e6, -1.0001, 3.0001, -2.0, -7e5], dtype=np.float32)
    batch = float32_batch(x, [NARROWED])
    assert np.isinf(batch.actual[[0, 4]]).all() and np.isfinite(batch.golden).all()
    (claim,) = _claims(batch, [NARROWED])
    assert (claim.category, claim.index.tolist(), claim.count, claim.detail["explained"]) == (
        "input-precision", [1, 2], 2, 2)
    assert info(batch.out_dtype).name == "float32"


def test_narrowed_inputs_that_only_overflowed_make_no_finding() -> None:
    x = np.array([-1e6, -7e5, 2.0], dtype=np.float32)
    assert _claims(float32_batch(x, [NARROWED]), [NARROWED]) == []


def test_each_rule_of_a_stack_is_contradicted_only_where_it_changes_the_prediction() -> None:
    """DAZ owns the positive subnormal x (+0); at x = -7, left exact, the slope is contradicted
    and DAZ, which changes nothing there, is not."""
    daz = rule("subnormal-flush", "DAZ", daz=True)
    x = np.array([1e-39, -3.0, -7.0, 2e-39, 5.0], dtype=np.float32)
    batch = float32_batch(x, [daz, RELU])
    batch.actual[2] = batch.golden[2]
    claims = {c.category: c for c in _claims(batch, [daz, RELU])}
    assert (claims["subnormal-flush"].index.tolist(), claims["alpha-mismatch"].index.tolist()) == ([0, 3], [1])
    assert claims["subnormal-flush"].detail["contradicted"] == 0
    assert claims["alpha-mismatch"].detail["contradicted"] == 1


@pytest.mark.parametrize("stack", [[SATURATED, NARROWED], [NARROWED, SATURATED]], ids=["saturation-first", "last"])
def test_saturation_is_confirmed_by_an_infinity_the_rest_of_its_stack_makes(stack: list[Rule]) -> None:
    """x = -1e6 narrowed to float16 is -inf before saturation makes it -max: the stack without
    saturation holds an infinity that golden does not."""
    x = np.array([-1e6, np.nan, -3.0001, 2.0, np.nan], dtype=np.float32)
    batch = float32_batch(x, stack)
    assert not np.isinf(batch.golden).any()
    claims = {c.category: c for c in _claims(batch, stack)}
    assert claims["saturation"].index.tolist() == [1, 4]
    assert (claims["saturation"].detail["nan_to_zero"], claims["saturation"].detail["confirmed_by_inf"]) == (2, True)


def test_each_rule_of_a_stack_names_its_own_equally_good_alternatives() -> None:
    daz = rule("subnormal-flush", "DAZ", daz=True)
    also = rule("formulation", "max(x, 0)")
    x = np.array([1e-39, -3.0, 2e-39, -5.0], dtype=np.float32)
    batch = float32_batch(x, [daz, RELU])
    claims = {c.category: c for c in _claims(batch, [daz, RELU], {RELU: [also], daz: []})}
    assert claims["alpha-mismatch"].summary == "slope 0; or equally: max(x, 0)"
    assert claims["alpha-mismatch"].detail["alternative_categories"] == ["formulation"]
    assert claims["subnormal-flush"].summary == "DAZ" and "alternatives" not in claims["subnormal-flush"].detail
