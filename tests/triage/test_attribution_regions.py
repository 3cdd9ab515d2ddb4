"""A rule confined to a region: claimed when it pays for itself and for the region, reproduces at
least three quarters of the region's errors and says them better than one value written over
the region; a whole-batch claim inside the region that the region's rule explains too is
withdrawn, one that explains more keeps its elements."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pytest

from conformance.metrics.exact import match_mask
from conformance.records import TilePlan, TileSpan
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.triage import attribution
from conformance.triage.claims import Batch, Claim, State
from conformance.triage.regions import ranked

SHAPE = (8, 64)
ROW = 3  # the row on axis 0 holding the defect
LO, HI = ROW * 64, (ROW + 1) * 64
IN_ROW = f"row {ROW} on axis 0 of 8x64"


def _x(*, negatives: Optional[int] = None) -> np.ndarray:
    """Normal float32 values of both signs; the row's first ``negatives`` negative, the rest of it
    positive, when given."""
    x = np.random.default_rng(5).standard_normal(SHAPE[0] * SHAPE[1]).astype(np.float32)
    if negatives is not None:
        x[LO:LO + negatives] = -np.abs(x[LO:LO + negatives])
        x[LO + negatives:HI] = np.abs(x[LO + negatives:HI])
    return x


def _actual(x: np.ndarray, *, slope: float, at: slice = slice(LO, HI)) -> np.ndarray:
    """Exact everywhere but ``at``, computed there with ``slope``."""
    actual = ref.forward(x, 0.2).copy()
    actual[at] = ref.forward(x[at], slope)
    return actual


def _regional(x: np.ndarray, actual: np.ndarray, *, claimed: tuple[Claim, ...] = ()) -> State:
    """The regional pass on the errors left after ``claimed``, which the whole-batch rules made."""
    batch = Batch(x, None, 0.2, "forward", "float32", ref.forward(x, 0.2), actual, shape=SHAPE)
    state = State(np.flatnonzero(~match_mask(actual, batch.golden)))
    for claim in claimed:
        state.claim(claim, by_rule=True)
    attribution.claim_regional_semantics(batch, state, None)
    return state


def _errors(x: np.ndarray, actual: np.ndarray) -> np.ndarray:
    return np.flatnonzero(~match_mask(actual, ref.forward(x, 0.2)))


def _whole_batch_claim(category: str, index: list[int]) -> Claim:
    return Claim(category, np.array(index), len(index), "a whole-batch rule", {"explained": len(index)})


def test_two_regions_with_a_slope_of_their_own_are_claimed_the_denser_first() -> None:
    x = _x()
    actual = _actual(x, slope=0.0)
    actual[6 * 64:6 * 64 + 20] = ref.forward(x[6 * 64:6 * 64 + 20], 0.01)
    errors = _errors(x, actual)
    state = _regional(x, actual)
    assert state.remaining.size == 0
    row, span = state.claims
    assert (row.category, row.summary) == ("alpha-mismatch", "negative side computed with slope 0.0 instead of 0.2 "
                                           f"(plain ReLU, or the CANN default 0.0), in {IN_ROW} only")
    np.testing.assert_array_equal(row.index, errors[(errors >= LO) & (errors < HI)])
    assert row.count == row.index.size == row.detail["explained"]
    assert {k: row.detail[k] for k in ("region", "region_kind", "axis", "index", "shape", "effective_alpha")} == {
        "region": IN_ROW, "region_kind": "axis", "axis": 0, "index": ROW, "shape": [8, 64], "effective_alpha": 0.0}
    np.testing.assert_array_equal(span.index, errors[errors >= 6 * 64])
    assert span.summary.endswith(f", in [{span.index[0]}, {span.index[-1] + 1}) only")
    assert (span.detail["region_kind"], span.detail["effective_alpha"]) == ("span", 0.01)
    assert span.index.size < row.index.size


def test_a_rule_reproducing_three_quarters_of_a_regions_errors_is_claimed_there() -> None:
    """48 negatives at slope 0.01 and 16 positives holding garbage: exactly 3/4 reproduced."""
    x = _x(negatives=48)
    actual = _actual(x, slope=0.01)
    actual[LO + 48:HI] = np.float32(1e6) * np.arange(1, 17, dtype=np.float32)
    state = _regional(x, actual)
    (claim,) = state.claims
    assert (claim.category, claim.count, claim.detail["region"]) == ("alpha-mismatch", 48, IN_ROW)
    np.testing.assert_array_equal(state.remaining, np.arange(LO + 48, HI))


def test_a_rule_reproducing_less_than_three_quarters_of_a_regions_errors_is_not_claimed() -> None:
    x = _x(negatives=48)
    actual = _actual(x, slope=0.01)
    actual[LO + 47:HI] = np.float32(1e6) * np.arange(1, 18, dtype=np.float32)
    state = _regional(x, actual)
    assert state.claims == [] and state.remaining.size == 64


@pytest.mark.parametrize("negatives", [64, 48])
def test_one_value_written_over_a_region_stays_a_location(negatives: int) -> None:
    """Zeros of either sign over a row of negatives (slope 0 says it, one value says it shorter);
    with 16 positives holding 0 as well, slope 0 leaves them wrong and the zeros still say it."""
    x = _x(negatives=negatives)
    actual = _actual(x, slope=0.0)
    actual[LO + negatives:HI] = np.float32(0.0)
    state = _regional(x, actual)
    assert state.claims == [] and state.remaining.size == 64


def test_a_whole_batch_claim_the_regions_rule_explains_too_is_withdrawn() -> None:
    """Two subnormal x in the row, flushed at first by a whole-batch rule, are the slope's too."""
    x = _x()
    x[LO + 5], x[LO + 9] = -1e-39, -2e-39
    actual = _actual(x, slope=0.0)
    errors = _errors(x, actual)
    state = _regional(x, actual, claimed=(_whole_batch_claim("subnormal-flush", [LO + 5, LO + 9]),))
    (claim,) = state.claims
    assert claim.category == "alpha-mismatch" and claim.detail["region"] == IN_ROW
    np.testing.assert_array_equal(claim.index, errors)
    assert state.by_rules == [claim] and state.remaining.size == 0


def test_a_whole_batch_claim_inside_the_region_that_explains_more_keeps_its_elements() -> None:
    first = int(np.flatnonzero(_x()[LO:HI] < 0)[0]) + LO
    x = _x()
    assert x[LO + 3] > 0
    actual = _actual(x, slope=0.0)
    actual[LO + 3] = np.float32(12345.0)  # no slope says it: the whole-batch claim explains more
    kept = _whole_batch_claim("formulation", [first, LO + 3])
    state = _regional(x, actual, claimed=(kept,))
    assert state.claims[0] is kept and len(state.claims) == 2
    region = state.claims[1]
    assert region.category == "alpha-mismatch" and first not in region.index and LO + 3 not in region.index
    assert region.count == region.index.size == np.count_nonzero(x[LO:HI] < 0) - 1
    assert state.remaining.size == 0


def test_the_elements_of_a_claim_reaching_outside_the_region_stay_its_own() -> None:
    """The region's trial leaves them out: they are neither tried nor claimed in the region."""
    first = int(np.flatnonzero(_x()[LO:HI] < 0)[0]) + LO
    x = _x()
    actual = _actual(x, slope=0.0)
    outside = 6 * 64 + int(np.flatnonzero(x[6 * 64:] < 0)[0])
    actual[outside] = ref.forward(x[outside:outside + 1], 0.0)[0]
    wide = _whole_batch_claim("formulation", [first, outside])
    state = _regional(x, actual, claimed=(wide,))
    assert state.claims[0] is wide and len(state.claims) == 2
    region = state.claims[1]
    assert first not in region.index and region.count == np.count_nonzero(x[LO:HI] < 0) - 1
    assert region.detail["explained"] == region.count  # the claimed element was not even tried


def test_a_region_claimed_in_one_round_is_not_taken_again_by_the_next() -> None:
    x = _x()
    state = _regional(x, _actual(x, slope=0.0))
    (claim,) = state.claims
    assert claim.count == np.count_nonzero(x[LO:HI] < 0)


@pytest.mark.parametrize(("values", "wanted", "expected"), [
    ([0.0, -0.0, 0.0, 5.0, 7.0], [0, 1, 2], 2),  # zeros of either sign alike
    ([1.0, 1.0, 2.0, 2.0, 2.0], [0, 1, 2], 3),  # the commonest of the wanted values, not of all
    ([np.nan, np.nan, 4.0, 4.0, np.nan], [0, 1, 4], 5),  # NaN is never the one value
    ([4.0, 5.0], [], 2),
])
def test_one_value_over_a_region_costs_the_elements_holding_another(values: list, wanted: list,
                                                                     expected: int) -> None:
    v = np.array(values, dtype=np.float32)
    sub = Batch(v, None, 0.2, "forward", "float32", v, v)
    assert attribution._filled(sub, np.array(wanted, dtype=np.int64)) == expected


def test_one_bfloat16_value_over_a_region() -> None:
    from conformance.dtypes import info

    v = np.array([0.5, 0.5, -0.0, 0.5], dtype=np.float32).astype(info("bfloat16").dtype)
    sub = Batch(v, None, 0.2, "forward", "bfloat16", v, v)
    assert attribution._filled(sub, np.array([0, 1, 2, 3])) == 1


def test_a_regions_own_cause_may_be_two_rules() -> None:
    """Slope 0.01 on the row's negatives, five of which are subnormal and flushed."""
    x = _x()
    tiny = LO + np.flatnonzero(x[LO:HI] < 0)[:5]
    x[tiny] = -np.float32(1e-39) * np.arange(1, 6, dtype=np.float32)
    actual = _actual(x, slope=0.01)
    actual[tiny] = np.float32(-0.0)
    state = _regional(x, actual)
    assert {(c.category, c.count, c.detail["region"]) for c in state.claims} == {
        ("subnormal-flush", 5, IN_ROW), ("alpha-mismatch", np.count_nonzero(x[LO:HI] < 0) - 5, IN_ROW)}
    assert state.remaining.size == 0


def _last_of_every_row(x: np.ndarray) -> np.ndarray:
    """Slope 0.01 on the last 16 elements of every row."""
    actual = ref.forward(x, 0.2).copy()
    for row in range(SHAPE[0]):
        at = slice(row * 64 + 48, row * 64 + 64)
        actual[at] = ref.forward(x[at], 0.01)
    return actual


def test_a_rule_on_the_last_elements_of_every_row_names_them() -> None:
    x = _x()
    state = _regional(x, _last_of_every_row(x))
    (claim,) = state.claims
    assert claim.detail["region"] == "the last 16 elements of each of 8 rows of 8x64"
    assert claim.count == _errors(x, _last_of_every_row(x)).size and state.remaining.size == 0


def test_inputs_rising_with_the_position_are_not_given_the_last_elements_of_every_row() -> None:
    """There the place of an error is its value: a window at the end of every row is not tried."""
    x = np.linspace(-4, -1, 512).astype(np.float32)
    state = _regional(x, _last_of_every_row(x))
    assert state.claims == [] and state.remaining.size == 128


def test_a_region_holding_the_first_element_claims_it() -> None:
    x = _x()
    x[0] = -abs(x[0])
    actual = ref.forward(x, 0.2).copy()
    actual[:64] = ref.forward(x[:64], 0.0)
    state = _regional(x, actual)
    (claim,) = state.claims
    assert claim.detail["region"] == "row 0 on axis 0 of 8x64" and claim.index[0] == 0
    np.testing.assert_array_equal(claim.index, _errors(x, actual))


@pytest.mark.parametrize(("errors", "stop", "claimed"), [(17, 133, False), (18, 134, True)])
def test_a_span_rule_must_pay_for_itself_and_twice_a_rule_for_the_span(errors: int, stop: int, claimed: bool) -> None:
    """Negative x, slope 0.01 at ``errors`` scattered places of [100, stop), the others in it exact
    (contradictions): 17 errors against 16 contradictions save 1 - 0.45 for the rule, less than
    the span's 2 x 0.45; 18 against 16 save 1.55, more."""
    x = -np.random.default_rng(1).uniform(0.5, 2, 512).astype(np.float32)
    inner = np.random.default_rng(2).choice(np.arange(101, stop - 1), errors - 2, replace=False)
    at = np.sort(np.concatenate([[100, stop - 1], inner]))
    actual = ref.forward(x, 0.2).copy()
    actual[at] = ref.forward(x[at], 0.01)
    batch = Batch(x, None, 0.2, "forward", "float32", ref.forward(x, 0.2), actual)
    state = State(np.flatnonzero(~match_mask(actual, batch.golden)))
    attribution.claim_regional_semantics(batch, state, None)
    assert [(c.count, c.detail["region"]) for c in state.claims] == ([(errors, f"[100, {stop})")] if claimed else [])


def test_a_region_whose_errors_need_three_rules_is_not_claimed() -> None:
    """Slope 0.01 on the row's negatives, five of them subnormal and flushed, four NaN made 0: a
    region's own cause is at most two rules."""
    x = _x()
    negative = LO + np.flatnonzero(x[LO:HI] < 0)
    x[negative[:5]] = -np.float32(1e-39) * np.arange(1, 6, dtype=np.float32)
    x[negative[5:9]] = np.nan
    actual = _actual(x, slope=0.01)
    actual[negative[:5]] = np.float32(-0.0)
    actual[negative[5:9]] = np.float32(0.0)
    state = _regional(x, actual)
    assert state.claims == [] and state.remaining.size == negative.size


def test_a_trial_that_claims_nothing_withdraws_nothing() -> None:
    """Only claims whose every element the region's rule explains are withdrawn: with no claim of
    the region's, the first element's whole-batch claim stays."""
    first = _whole_batch_claim("subnormal-flush", [0])
    state = State(np.arange(1, 9))
    state.claim(first, by_rule=True)
    attribution._settle(state, attribution._Trial(1.0, [], [first]))
    assert state.claims == [first] and state.by_rules == [first]
    np.testing.assert_array_equal(state.remaining, np.arange(1, 9))


def _double_rounded(count: int) -> np.ndarray:
    """``count`` float32 dy whose product by 0.1, rounded to float32 and then to float16, is not
    the product rounded once: what a float32 opmath changes in a float16 gradient."""
    dy = np.random.default_rng(3).standard_normal(1 << 20).astype(np.float32)
    neg = np.full(dy.size, -1.0, dtype=np.float32)
    once = ref.compute("backward", neg, 0.1, dy=dy, out_dtype="float16")
    twice = ref.compute("backward", neg, 0.1, dy=dy, out_dtype="float16", semantics=Semantics(opmath="float32"))
    return dy[~match_mask(twice, once)][:count]


def test_a_round_whose_best_region_claims_nothing_ends_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight gradients a float32 opmath rounds twice, 500 elements apart: every region's shortest
    stack is that neutral context, which claims nothing, so the state stays as it was and a
    second round would rank the same regions again.  One round is ranked; the eight stay for
    ``rounding``."""
    x = (np.random.default_rng(4).standard_normal(4096) * 4).astype(np.float32)
    dy = np.random.default_rng(5).standard_normal(4096).astype(np.float32)
    at = np.arange(100, 4000, 500)
    x[at], dy[at] = -1.0, _double_rounded(at.size)
    golden = ref.compute("backward", x, 0.1, dy=dy, out_dtype="float16")
    actual = ref.compute("backward", x, 0.1, dy=dy, out_dtype="float16", semantics=Semantics(opmath="float32"))
    np.testing.assert_array_equal(np.flatnonzero(~match_mask(actual, golden)), at)
    rounds = []
    monkeypatch.setattr(attribution, "ranked", lambda *a, **k: rounds.append(1) or ranked(*a, **k))
    state = State(at)
    attribution.claim_regional_semantics(Batch(x, dy, 0.1, "backward", "float16", golden, actual), state, None)
    assert (len(rounds), state.claims) == (1, [])
    np.testing.assert_array_equal(state.remaining, at)


def test_a_rule_on_one_core_of_the_tiling_plan_names_the_core() -> None:
    """Four cores of two 64-element tiles each; core 2 computed with slope 0."""
    spans = tuple(TileSpan(core, tile, core * 128 + tile * 64, 64) for core in range(4) for tile in range(2))
    plan = TilePlan(64, spans, 8)
    x = np.random.default_rng(5).standard_normal(512).astype(np.float32)
    actual = _actual(x, slope=0.0, at=slice(256, 384))
    batch = Batch(x, None, 0.2, "forward", "float32", ref.forward(x, 0.2), actual)
    state = State(_errors(x, actual))
    attribution.claim_regional_semantics(batch, state, plan)
    (claim,) = state.claims
    assert (claim.detail["region"], claim.detail["region_kind"]) == ("core 2 [256, 384)", "core")
    np.testing.assert_array_equal(claim.index, _errors(x, actual))


def test_a_later_round_does_not_take_back_a_regions_claim() -> None:
    """Tile 1 of core 1 computed with slope 0; in the core's other tile four of nine negatives
    too, which the slope does not pay for.  The core holds the tile's claim, but only
    whole-batch claims are taken back into a region: the tile keeps its claim, the four stay."""
    spans = tuple(TileSpan(core, tile, core * 128 + tile * 64, 64) for core in range(4) for tile in range(2))
    x = np.abs(np.random.default_rng(5).standard_normal(512)).astype(np.float32) + np.float32(0.5)
    x[192:256:2] = -x[192:256:2]
    x[[130, 140, 150, 160, 170, 175, 180, 185, 190]] *= -1
    actual = _actual(x, slope=0.0, at=slice(192, 256))
    four = [130, 150, 170, 185]
    actual[four] = ref.forward(x[four], 0.0)
    batch = Batch(x, None, 0.2, "forward", "float32", ref.forward(x, 0.2), actual)
    state = State(_errors(x, actual))
    attribution.claim_regional_semantics(batch, state, TilePlan(64, spans, 8))
    (claim,) = state.claims
    assert (claim.count, claim.detail["region"]) == (32, "tile 1 of core 1 [192, 256)")
    assert state.remaining.tolist() == four


def test_of_the_regions_tried_in_a_round_the_one_saving_most_is_claimed_first() -> None:
    """Row 3 holds more errors (40 at slope 0, ranked first) but ten of its negatives were left
    exact, so its rule saves 40 - 10 - 0.9; row 5's 32 errors at slope 0.01 save 32 - 0.9."""
    x = np.abs(np.random.default_rng(5).standard_normal(512)).astype(np.float32) + np.float32(0.5)
    x[LO:LO + 50] *= -1
    x[5 * 64:5 * 64 + 32] *= -1
    actual = _actual(x, slope=0.0, at=slice(LO, LO + 40))
    actual[5 * 64:5 * 64 + 32] = ref.forward(x[5 * 64:5 * 64 + 32], 0.01)
    state = _regional(x, actual)
    first = state.claims[0]
    assert (first.count, first.detail["region"], first.detail["effective_alpha"]) == (32, "row 5 on axis 0 of 8x64",
                                                                                       0.01)
    assert sum(c.count for c in state.claims) == 72 and state.remaining.size == 0


def test_one_value_over_a_region_is_the_commonest_error_not_the_commonest_element() -> None:
    """Row 5 of 16x6: slope 0.01 at x = -500, -600, -700, x = 7 holding -1, and two x = -5 left
    exact (-1, contradicting the slope).  The slope's description (one wrong, two contradicted,
    a rule: 3.45) is shorter than one value over the row: -700's result, the first commonest
    error, is held by one element of six.  -1 is held by three, but by one error only."""
    x = np.abs(np.random.default_rng(3).standard_normal(96)).astype(np.float32) + np.float32(0.5)
    x[30:36] = [-500.0, -600.0, -700.0, 7.0, -5.0, -5.0]
    actual = ref.forward(x, 0.2).copy()
    actual[30:33] = ref.forward(x[30:33], 0.01)
    actual[33] = np.float32(-1.0)
    batch = Batch(x, None, 0.2, "forward", "float32", ref.forward(x, 0.2), actual, shape=(16, 6))
    state = State(_errors(x, actual))
    (row,) = [r for r in ranked(state.remaining, numel=96, shape=(16, 6), tile_plan=None)
              if r.text == "row 5 on axis 0 of 16x6"]
    trial = attribution._regional_trial(batch, state, row)
    assert trial is not None and [c.index.tolist() for c in trial.claims] == [[30, 31, 32]]
