"""Rounds of the whole-batch rules: more than ``select_sample`` remaining mismatches are selected on
a sample and attributed on all of them; the leftovers are triaged in full, as stacks grown from
the sampled round's stack first, then from nothing.  The stacks that claimed are returned."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conformance.metrics.exact import match_mask
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.triage import attribution, sampling
from conformance.triage.claims import Batch, State
from tests.triage.test_attribution_findings import compiled_configuration

FLUSHED = np.array([1001, 2002, 3003])  # subnormal x flushed: a stride sample of the mismatches misses them
MOST_ROUNDS = 8


def _rounds(monkeypatch: pytest.MonkeyPatch, *, select_sample: int) -> list[int]:
    """Sampled rounds above ``select_sample`` remaining mismatches, each on about 64 of them;
    returns the remaining mismatches each sampled round starts with.  A round that claims
    nothing ends them: more than ``MOST_ROUNDS`` fail the test rather than loop."""
    monkeypatch.setattr(sampling, "SAMPLING", replace(sampling.SAMPLING, select_sample=select_sample,
                                                     sampled_mismatches=64))
    rounds: list[int] = []
    real = attribution.sampled_round

    def counted(batch: Batch, state: State) -> list:
        rounds.append(state.remaining.size)
        assert len(rounds) <= MOST_ROUNDS, f"sampled rounds do not end: {rounds}"
        return real(batch, state)

    monkeypatch.setattr(attribution, "sampled_round", counted)
    return rounds


def _slope_batch(*, leftovers: str, flushed: np.ndarray = FLUSHED) -> Batch:
    """Forward float32: slope 0.01 on the negative side, and subnormal x at ``flushed`` either
    flushed or holding values no rule says (``leftovers``)."""
    x = np.random.default_rng(7).standard_normal(4096).astype(np.float32)
    x[flushed] = -np.float32(1e-39)
    actual = ref.forward(x, 0.01).copy()
    actual[flushed] = np.float32(-0.0) if leftovers == "flushed" else np.float32([3e5, 7e5, -9e5][:flushed.size])
    return Batch(x, None, 0.2, "forward", "float32", ref.forward(x, 0.2), actual)


def _claim_semantics(batch: Batch) -> tuple[list[list[str]], State]:
    state = State(np.flatnonzero(~match_mask(batch.actual, batch.golden)))
    stacks = attribution.claim_semantics(batch, state)
    return [[str(r.category) for r in s] for s in stacks], state


def test_leftovers_of_a_sampled_round_are_a_stack_grown_from_its_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = _rounds(monkeypatch, select_sample=256)
    batch = _slope_batch(leftovers="flushed")
    stacks, state = _claim_semantics(batch)
    mismatches = np.count_nonzero(~match_mask(batch.actual, batch.golden))
    assert rounds == [mismatches]
    assert stacks == [["alpha-mismatch"], ["alpha-mismatch", "subnormal-flush"]]
    assert [(c.category, c.count) for c in state.claims] == [("alpha-mismatch", mismatches - 3),
                                                             ("subnormal-flush", 3)]
    np.testing.assert_array_equal(state.claims[1].index, FLUSHED)
    assert state.by_rules == state.claims and state.remaining.size == 0


def test_a_single_leftover_of_a_sampled_round_is_triaged_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    _rounds(monkeypatch, select_sample=256)
    stacks, state = _claim_semantics(_slope_batch(leftovers="flushed", flushed=FLUSHED[1:2]))
    assert stacks == [["alpha-mismatch"], ["alpha-mismatch", "subnormal-flush"]]
    assert state.claims[-1].category == "subnormal-flush" and state.claims[-1].index.tolist() == [FLUSHED[1]]
    assert state.remaining.size == 0


def test_leftovers_no_rule_explains_add_no_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = _rounds(monkeypatch, select_sample=256)
    stacks, state = _claim_semantics(_slope_batch(leftovers="garbage"))
    assert len(rounds) == 1 and stacks == [["alpha-mismatch"]]
    np.testing.assert_array_equal(state.remaining, FLUSHED)


def test_a_sampled_round_claiming_every_mismatch_is_the_only_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = _rounds(monkeypatch, select_sample=256)
    batch = _slope_batch(leftovers="flushed")
    batch.actual[FLUSHED] = ref.forward(batch.x[FLUSHED], 0.01)
    stacks, state = _claim_semantics(batch)
    assert len(rounds) == 1 and stacks == [["alpha-mismatch"]] and state.remaining.size == 0


def test_as_many_mismatches_as_select_sample_are_selected_on_all_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = _slope_batch(leftovers="flushed")
    mismatches = int(np.count_nonzero(~match_mask(batch.actual, batch.golden)))
    rounds = _rounds(monkeypatch, select_sample=mismatches)
    stacks, state = _claim_semantics(batch)
    assert rounds == [] and stacks == [["alpha-mismatch", "subnormal-flush"]] and state.remaining.size == 0
    rounds = _rounds(monkeypatch, select_sample=mismatches - 1)
    _claim_semantics(_slope_batch(leftovers="flushed"))
    assert rounds == [mismatches]


def test_a_sampled_round_that_claims_nothing_ends_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = _rounds(monkeypatch, select_sample=256)
    x = np.random.default_rng(3).standard_normal(4096).astype(np.float32)
    actual = np.random.default_rng(4).standard_normal(x.size).astype(np.float32) * np.float32(1e6)
    batch = Batch(x, None, 0.2, "forward", "float32", ref.forward(x, 0.2), actual)
    stacks, state = _claim_semantics(batch)
    assert len(rounds) == 1 and stacks == [] and state.claims == [] and state.remaining.size == x.size


def test_a_sampled_round_returns_its_stack_and_claims_by_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    _rounds(monkeypatch, select_sample=256)
    batch = _slope_batch(leftovers="flushed")
    state = State(np.flatnonzero(~match_mask(batch.actual, batch.golden)))
    stack = attribution.sampled_round(batch, state)
    assert [r.category for r in stack] == ["alpha-mismatch"]
    (claim,) = state.by_rules
    assert state.claims == [claim] and claim.count == claim.detail["explained"]
    np.testing.assert_array_equal(state.remaining, FLUSHED)


def test_a_sampled_stack_whose_claims_are_all_left_to_the_value_classes_ends_the_rules(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs narrowed to float16 that all overflowed: the stack chosen on the sample is
    ``input-precision``, whose claim leaves every non-finite symptom to ``overflow``; it claims
    nothing, so no stack is returned and the rounds end."""
    rounds = _rounds(monkeypatch, select_sample=256)
    rng = np.random.default_rng(11)
    x = (-np.exp(rng.uniform(np.log(1e5), np.log(1e7), 1024))).astype(np.float32)
    actual = ref.compute("forward", x, 0.2, out_dtype="float32", semantics=Semantics(input_dtype="float16"))
    assert np.isinf(actual).all()
    batch = Batch(x, None, 0.2, "forward", "float32", ref.forward(x, 0.2), actual)
    stacks, state = _claim_semantics(batch)
    assert rounds == [1024] and stacks == [] and state.claims == [] and state.remaining.size == 1024


def _reduced(batch: Batch) -> Batch:
    """``batch`` as ``conformance compare`` reduces it: the mismatches first, then every fourth
    matching element standing for four."""
    mis = np.flatnonzero(~match_mask(batch.actual, batch.golden))
    matched = np.setdiff1d(np.arange(batch.x.size), mis)[::4]
    where = np.concatenate([mis, matched])
    return Batch(batch.x[where], None, 0.2, "forward", "float32", batch.golden[where], batch.actual[where],
                 where=where, numel=batch.x.size, weight=np.full(matched.size, 4.0))


def test_a_sampled_round_on_a_reduced_batch_claims_alike_on_views_of_its_leading_mismatches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled configuration reads the leading mismatches as views (and predicts only the
    other elements for the contradictions, which are counted on the whole reduced batch); the
    numpy one gathers them: the same claims."""
    _rounds(monkeypatch, select_sample=256)
    whole = _slope_batch(leftovers="flushed")
    exact = np.flatnonzero(whole.x < -0.5)[::40]  # negatives left exact: the slope is contradicted there
    whole.actual[exact] = whole.golden[exact]
    batch = _reduced(whole)
    found = []
    for enabled in (False, True):
        compiled_configuration(monkeypatch, enabled=enabled)
        state = State(np.flatnonzero(~match_mask(batch.actual, batch.golden)))
        stack = attribution.sampled_round(batch, state)
        found.append(([r.category for r in stack], [(c.category, c.index.tolist(), c.detail["contradicted"])
                                                    for c in state.claims], state.remaining.tolist()))
    assert found[0] == found[1]
    stack, claims, remaining = found[0]
    assert stack == ["alpha-mismatch"] and [c for c, _, _ in claims] == ["alpha-mismatch"]
    assert claims[0][2] > 0  # contradicted on the sample, each element standing for four
    np.testing.assert_array_equal(batch.where[remaining], FLUSHED)  # the flushed three, which the sample missed
