"""The description-length search in parts: which mismatches are of a kind a rule can change,
what a stack predicts and where it is right, a description's length, ties between equal
predictions and the beam kept per depth; each against a value computed here on its own."""
from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np
import pytest

from conformance.metrics.exact import match_mask
from conformance.reference import golden as ref
from conformance.reference.semantics import EXACT, Semantics
from conformance.triage import sampling
from conformance.triage.claims import Batch
from conformance.triage.rules import rule
from conformance.triage.sampling import Scope, scope_of
from conformance.triage.search import (
    BEAM,
    RULE_COST,
    Selector,
    _ByPrediction,
    _children,
    _next_beam,
    _Stack,
    _tie_bits,
    beam_search,
    stack_semantics,
)

TINY16 = np.float16(2.0 ** -24)  # the smallest float16 subnormal
NORMAL16 = np.float16(2.0 ** -14)  # the smallest float16 normal


def _f16(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float16)


def _backward_batch(alpha: float) -> Batch:
    """Every element a mismatch (actual = golden with its last bit flipped), one of each kind:
    a NaN, zero and subnormal x, a subnormal, zero and infinite dy, a product that underflows
    to zero (alpha < 1) or overflows (alpha > 1), a dy just under the normal range that the
    slope scales back into it, and a subnormal actual where golden is normal."""
    below = float(NORMAL16) * 0.9
    with np.errstate(all="ignore"):
        x = _f16(1.0, np.nan, 0.0, -0.0, TINY16, 2.0, 3.0, np.inf, 4.0, -5.0, -6.0, -1.0, -1.0, 7.0, 0.0, np.nan)
        dy = _f16(1.0, 1.0, 1.0, 1.0, 1.0, TINY16, 0.0, 1.0, np.inf, 1.0, TINY16, below, 60000.0, 1.0, 0.0, 1.0)
        golden = ref.backward(dy, x, alpha, out_dtype="float16")
        actual = (golden.view(np.uint16) ^ np.uint16(1)).view(np.float16)
        actual[9] = NORMAL16 * np.float16(0.5)
        actual[-2:] = golden[-2:]  # the last two match: of every kind, but not mismatches
    return Batch(x, dy, alpha, "backward", "float16", golden, actual)


def _masks(batch: Batch) -> dict[str, np.ndarray]:
    sel = Selector(batch, scope_of(batch, np.arange(batch.x.size - 2)))
    return {kind: sel.kind_masks[kind] for kind in ("nan", "zero", "special", "tiny")}


def _expected_kinds(batch: Batch) -> dict[str, np.ndarray]:
    """The kinds of the mismatches from their definitions, in float64 (exact for float16)."""
    x, dy, g, a = (v[:-2].astype(np.float64) for v in (batch.x, batch.dy, batch.golden, batch.actual))
    below = 2.0 ** -14

    def sub(v: np.ndarray) -> np.ndarray:
        return (np.abs(v) < below) & (v != 0)

    zero = (x == 0) | (dy == 0) | (g == 0) | (a == 0) | sub(x)
    special = zero | ~np.isfinite(x) | ~np.isfinite(dy) | ~np.isfinite(g)
    tiny = sub(x) | sub(dy) | (np.abs(g) < below) | (np.abs(a) < below)
    return {"nan": np.isnan(x), "zero": zero, "special": special, "tiny": tiny}


@pytest.mark.parametrize("alpha", [0.2, 1.5])
def test_the_kinds_of_a_backward_mismatch_are_its_operands_and_results_classes(alpha: float) -> None:
    batch = _backward_batch(alpha)
    got, want = _masks(batch), _expected_kinds(batch)
    for kind in want:
        np.testing.assert_array_equal(got[kind], want[kind], err_msg=kind)
    assert all(want[k].any() and not want[k].all() for k in want)  # each kind tells elements apart


def test_without_dy_every_forward_mismatch_is_a_zero_and_a_special_one() -> None:
    x = _f16(1.0, -2.0, np.nan, TINY16, 3.0)
    golden = ref.forward(x, 0.2, out_dtype="float16")
    actual = (golden.view(np.uint16) ^ np.uint16(1)).view(np.float16)
    batch = Batch(x, None, 0.2, "forward", "float16", golden, actual)
    sel = Selector(batch, scope_of(batch, np.arange(5)))
    assert sel.kind_masks["zero"].all() and sel.kind_masks["special"].all()
    np.testing.assert_array_equal(sel.kind_masks["nan"], np.isnan(x.astype(np.float64)))
    tiny = np.abs(np.stack([x, golden, actual]).astype(np.float64)) < 2.0 ** -14
    np.testing.assert_array_equal(sel.kind_masks["tiny"], tiny.any(axis=0))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_a_value_is_below_normal_exactly_when_its_magnitude_is_under_the_smallest_normal(dtype: str) -> None:
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    smallest = float(ml_dtypes.finfo(np_dtype).smallest_normal)
    values = np.array([0.0, -0.0, smallest, -smallest, smallest / 2, -smallest / 4, 1.0, -np.inf, np.nan],
                      dtype=np_dtype)
    golden = values.copy()
    x = np.ones(values.size, dtype=np_dtype)
    batch = Batch(x, x.copy(), 0.2, "backward", dtype, golden, golden.copy())
    sel = Selector(batch, Scope(None, values.size, np.ones(0)))
    wide = np.abs(values.astype(np.float64))
    np.testing.assert_array_equal(sel.kind_masks["tiny"], wide < smallest)


def _rules() -> tuple:
    return (rule("subnormal-flush", "flush", daz=True, ftz=True), rule("alpha-precision", "fp16 slope",
                                                                      slope_dtype="float16"),
            rule("alpha-mismatch", "slope 0.01", slope=0.01), rule("alpha-mismatch", "slope 0.3", slope=0.3))


def test_a_stack_is_its_rules_settings_each_on_those_below_it() -> None:
    flush, half, slope, other = _rules()
    assert stack_semantics([]) is EXACT
    assert stack_semantics([flush]) is flush.semantics
    assert stack_semantics([rule(None, "nothing")]) is EXACT
    assert stack_semantics([slope, other]) == Semantics(slope=0.3)
    assert stack_semantics([other, slope, flush]) == Semantics(slope=0.01, daz=True, ftz=True)
    assert stack_semantics([half, slope]) == Semantics(slope=0.01, slope_dtype="float16")


def _forward_batch(n: int, *, seed: int = 4, negative: float = 0.5) -> tuple[Batch, np.ndarray]:
    """Golden at slope 0.2 against an output computed with slope 0.01: every negative differs."""
    rng = np.random.default_rng(seed)
    x = (np.abs(rng.standard_normal(n)) * np.where(rng.random(n) < negative, -1, 1)).astype(np.float32)
    x[::7] = 0.0
    golden = ref.forward(x, 0.2)
    actual = ref.forward(x, 0.01)
    return Batch(x, None, 0.2, "forward", "float32", golden, actual), np.flatnonzero(~match_mask(actual, golden))


@pytest.mark.parametrize("n", [500, 40_000])
def test_a_prediction_on_the_whole_batch_is_the_variant_recomputed_in_batch_order(n: int) -> None:
    batch, mismatches = _forward_batch(n)
    flush, half, slope, _ = _rules()
    sel = Selector(batch, scope_of(batch, mismatches))
    for stack in ([], [slope], [half, slope]):
        want = ref.forward(batch.x, 0.2, semantics=stack_semantics(stack))
        got = sel.predict_batch(stack)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        on = sel.scope.take(want)
        np.testing.assert_array_equal(sel.predict(stack).view(np.uint32), on.view(np.uint32))
        np.testing.assert_array_equal(sel.on_mismatches(stack).view(np.uint32), on[:mismatches.size].view(np.uint32))
        np.testing.assert_array_equal(sel.where_right(sel.predict(stack)), match_mask(on, sel.scope.take(batch.actual)))


def test_a_batch_in_order_is_its_own_scope() -> None:
    batch, _ = _forward_batch(300)
    mis = np.flatnonzero(~match_mask(batch.actual, batch.golden))
    order = np.concatenate([mis, np.setdiff1d(np.arange(300), mis)])
    ordered = Batch(batch.x[order], None, 0.2, "forward", "float32", batch.golden[order], batch.actual[order])
    sel = Selector(ordered, Scope(None, mis.size, np.ones(300 - mis.size)))
    slope = _rules()[2]
    np.testing.assert_array_equal(sel.predict_batch([slope]), ref.forward(ordered.x, 0.01))


def test_a_description_is_its_wrong_mismatches_its_weighted_contradictions_and_its_rules() -> None:
    batch, mismatches = _forward_batch(200)
    sel = Selector(batch, Scope(np.arange(10), 4, np.array([0.5, 2.0, 3.0, 8.0, 1.0, 1.0])))
    right = np.array([True, False, True, False, True, False, False, True, True, False])
    flush, half, slope, _ = _rules()
    heavy = rule("subnormal-flush", "two rules' worth", complexity=2.1, daz=True)
    assert sel.length(right, [half, heavy]) == pytest.approx(2 + (2.0 + 3.0 + 1.0) + RULE_COST * 3.1)
    assert sel.length(np.ones(10, dtype=bool), []) == 0


def _mismatch_selector(n: int, *, special_every: Optional[int]) -> Selector:
    """``n`` mismatches, every ``special_every``-th at a zero x (a special value; None: none)."""
    x = np.linspace(-3, -1, n).astype(np.float32)
    if special_every is not None:
        x[::special_every] = 0.0
    golden = ref.forward(x, 0.2)
    actual = (golden.view(np.uint32) ^ np.uint32(1)).view(np.float32)
    batch = Batch(x, None, 0.2, "forward", "float32", golden, actual)
    return Selector(batch, Scope(None, n, np.ones(0)))


def test_few_wrong_mismatches_are_tried_in_full_and_many_on_every_special_one_and_a_sample() -> None:
    size = sampling.SAMPLING.screening
    sel = _mismatch_selector(3 * size, special_every=5)
    assert sel.screening_sample(np.arange(size)) is None
    special = np.flatnonzero(sel.special_mismatches)
    np.testing.assert_array_equal(special, np.arange(0, 3 * size, 5))
    for wrong in (np.arange(3 * size), np.arange(1, 3 * size, 2)):
        screen = sel.screening_sample(wrong)
        assert np.all(screen[1:] > screen[:-1]) and np.isin(screen, wrong).all()
        specials = np.intersect1d(wrong, special)
        assert np.isin(specials, screen).all() and screen.size == specials.size + size


def test_with_no_special_mismatch_the_sample_is_that_many_positions() -> None:
    size = sampling.SAMPLING.screening
    sel = _mismatch_selector(2 * size + 1, special_every=None)
    assert not sel.special_mismatches.any()
    screen = sel.screening_sample(np.arange(2 * size + 1))
    assert screen.size == size and np.unique(screen).size == size and np.all(screen[1:] > screen[:-1])


@pytest.mark.parametrize("n,negative", [(600, 0.5), (20_000, 0.5), (600, 0.95)])
def test_a_trial_fixes_exactly_the_wrong_mismatches_its_variant_reproduces(n: int, negative: float) -> None:
    batch, mismatches = _forward_batch(n, negative=negative)
    sel = Selector(batch, scope_of(batch, mismatches))
    slope = _rules()[2]
    m = mismatches.size
    truth = match_mask(ref.forward(batch.x, 0.2, semantics=Semantics(slope=0.01)), batch.actual)
    on_scope = sel.scope.take(truth)[:m]
    for wrong in (np.arange(m), np.arange(1, m), np.arange(0, m, 3), np.arange(1, m, 2)[: max(1, m // 20)]):
        fixed = sel.fixes([slope], wrong)
        assert fixed.dtype == bool
        want = np.zeros(m, dtype=bool)
        want[wrong] = on_scope[wrong]
        np.testing.assert_array_equal(fixed, want)
        np.testing.assert_array_equal(sel.reproduced([slope], wrong), on_scope[wrong])


def test_a_rule_that_fixes_only_zero_signs_must_fix_most_of_the_wrong_ones() -> None:
    x = _f16(-0.0, -0.0, -0.0, -0.0, 1.0, 2.0)
    golden = ref.forward(x, 0.2, out_dtype="float16")
    actual = golden.copy()
    actual[:4] = np.float16(0.0)  # +0 where golden is -0
    actual[4:] = _f16(1.5, 2.5)
    batch = Batch(x, None, 0.2, "forward", "float16", golden, actual)
    sel = Selector(batch, Scope(None, 6, np.ones(0)))
    np.testing.assert_array_equal(sel.zero_pairs, [True] * 4 + [False] * 2)
    wrong = np.ones(6, dtype=bool)
    some = np.zeros(6, dtype=bool)
    for k, want in ((1, False), (2, False), (3, True)):
        some[:k] = True
        assert sel.beyond_zero_signs(some, ~wrong) is want, k
    assert sel.beyond_zero_signs(np.array([True] + [False] * 4 + [True]), ~wrong)
    right_now = np.array([True, True, False, False, False, False])  # two zero signs left wrong
    assert sel.beyond_zero_signs(np.array([False, False, True, False, False, False]), right_now) is False
    assert sel.beyond_zero_signs(np.array([False, False, True, True, False, False]), right_now) is True


def test_a_saturation_rule_must_gain_in_every_value_group_it_changes() -> None:
    x = _f16(np.nan, np.nan, np.inf, np.inf, 1.0)
    golden = ref.forward(x, 0.2, out_dtype="float16")
    actual = _f16(0.0, 0.0, np.inf, np.inf, 1.0)  # NaN became 0, the infinities kept
    batch = Batch(x, None, 0.2, "forward", "float16", golden, actual)
    sel = Selector(batch, Scope(None, 2, np.ones(3)))
    both = rule("saturation", "both", groups=lambda g: [np.isnan(g.astype(np.float64)),
                                                       np.isinf(g.astype(np.float64))], saturate=True)
    nan_only = rule("saturation", "nan", groups=both.groups, saturate=True)
    before = sel.predict([])
    saturated = _f16(0.0, 0.0, 65504.0, 65504.0, 1.0)
    assert not sel.groups_gain(both, saturated, before)  # the infinities lose
    assert sel.groups_gain(nan_only, _f16(0.0, 0.0, np.inf, np.inf, 1.0), before)
    assert sel.groups_gain(rule("saturation", "no groups", saturate=True), saturated, before)


def test_predictions_that_differ_only_in_nan_payloads_tie() -> None:
    quiet, payload = np.float32(np.nan), np.array([0x7FC00123], dtype=np.uint32).view(np.float32)[0]
    a, b = np.array([1.0, quiet, -2.0], dtype=np.float32), np.array([1.0, payload, -2.0], dtype=np.float32)
    np.testing.assert_array_equal(_tie_bits(a), _tie_bits(b))
    np.testing.assert_array_equal(_tie_bits(a[[0, 2]]), a[[0, 2]].view(np.uint32))
    assert not np.array_equal(_tie_bits(a), _tie_bits(np.array([1.0, quiet, -2.5], dtype=np.float32)))
    sel = _mismatch_selector(4, special_every=2)
    assert sel.tie_bits(a) is sel.tie_bits(a)
    np.testing.assert_array_equal(sel.tie_bits(b), _tie_bits(a))


def _stack(length: float, rules: list, pred: np.ndarray, right: int = 0) -> _Stack:
    return _Stack(length, rules, pred, {}, right)


@pytest.mark.parametrize("n", [16, 1 << 15])
def test_stacks_are_found_by_their_whole_prediction(n: int) -> None:
    by = _ByPrediction()
    base = np.arange(n, dtype=np.float32)
    first = _stack(1.0, [], base)
    by.add(base, first)
    assert by.get(base.copy()) is first
    other = base.copy()
    other[n - 3] = -1.0  # off the fingerprint's stride for the large one
    assert by.get(other) is None
    second = _stack(2.0, [], other)
    by.add(other, second)
    assert by.get(other.copy()) is second and by.get(base) is first
    assert by.get(base.astype(np.float64)) is None
    assert by.items() == [first, second]


def test_the_beam_keeps_the_shortest_per_set_of_categories_and_those_right_most_often() -> None:
    flush, half, slope, other = _rules()
    pred = np.zeros(1, dtype=np.float32)
    grown = [_stack(5.0, [slope], pred, 1), _stack(4.0, [other], pred, 2), _stack(3.0, [flush], pred, 1),
             _stack(6.0, [half], pred, 9), _stack(7.0, [flush, half], pred, 8), _stack(8.0, [half, flush], pred, 7),
             _stack(9.0, [half, slope], pred, 9)]
    beam = _next_beam(grown)
    short = beam[:BEAM]
    assert [s.length for s in short] == [3.0, 4.0, 6.0]  # one per set of categories, shortest first
    assert [s.length for s in beam[BEAM:]] == [9.0, 7.0][:BEAM - 1]  # then the most right, not already kept


def test_the_search_adds_a_rule_only_while_the_description_gets_shorter() -> None:
    batch, mismatches = _forward_batch(3000)
    flush, half, slope, other = _rules()
    sel = Selector(batch, scope_of(batch, mismatches))
    stack, alternatives = beam_search(sel, [flush, half, other, slope])
    assert stack == [slope] and alternatives == {slope: []}
    same = rule("alpha-mismatch", "slope 0.01 again", slope=0.01)
    stack, alternatives = beam_search(Selector(batch, scope_of(batch, mismatches)), [slope, same])
    assert stack == [slope] and alternatives == {slope: [same]}
    assert beam_search(Selector(batch, scope_of(batch, mismatches)), [flush, other]) == ([], {})
    base, _ = beam_search(Selector(batch, scope_of(batch, mismatches)), [slope], base=[flush])
    assert base == [flush, slope]
    assert beam_search(Selector(batch, scope_of(batch, mismatches)), []) == ([], {})


def _flushed_slope_batch(n: int) -> tuple[Batch, np.ndarray]:
    """Slope 0.01 where 0.2 was asked for, on a kernel that also flushes subnormals."""
    x = -np.exp2(np.linspace(-130, 10, n)).astype(np.float32)
    golden = ref.forward(x, 0.2)
    actual = ref.forward(x, 0.2, semantics=Semantics(slope=0.01, daz=True, ftz=True))
    return Batch(x, None, 0.2, "forward", "float32", golden, actual), np.flatnonzero(~match_mask(actual, golden))


def test_each_candidate_is_tried_past_those_skipped_before_it() -> None:
    """A rule that is already in the stack, shares its field, reaches no wrong element or
    reproduces none of the screening sample is skipped; the candidates after it are still tried."""
    flush, _, slope, other = _rules()
    nan_only = rule("nan-gradient", "NaN only", reach="nan", nan_grad="dy")
    batch, mismatches = _flushed_slope_batch(3000)
    stack, _ = beam_search(Selector(batch, scope_of(batch, mismatches)), [slope, other, nan_only, flush])
    assert set(stack) == {slope, flush}
    many, wrong = _forward_batch(40_000, negative=0.9)
    assert wrong.size > 2 * sampling.SAMPLING.screening
    stack, _ = beam_search(Selector(many, scope_of(many, wrong)), [other, slope])
    assert stack == [slope]


def test_a_single_mismatch_is_explained_by_the_rule_that_reproduces_it() -> None:
    x = np.array([-3.0, 1.0, 2.0], dtype=np.float32)
    golden, actual = ref.forward(x, 0.2), ref.forward(x, 0.01)
    batch = Batch(x, None, 0.2, "forward", "float32", golden, actual)
    slope = _rules()[2]
    assert beam_search(Selector(batch, scope_of(batch, np.array([0]))), [_rules()[0], slope]) == ([slope], {slope: []})


def test_a_rule_stacked_on_narrowed_inputs_is_tried_where_only_the_narrowing_makes_its_kind() -> None:
    """A float16 kernel handed float32 x selects the gradient with x >= 0: an x of 2^-30 is 0 once
    narrowed, so there it takes dy.  No x is zero as given; the pair still explains the batch,
    not a slope of 1 that happens to give dy on those elements."""
    rng = np.random.default_rng(1)
    tiny = rng.choice([-1, 1], 1000) * np.exp2(rng.uniform(-40, -26, 1000))
    x = np.concatenate([tiny, rng.uniform(-3, 3, 1000)]).astype(np.float32)
    dy = rng.uniform(0.5, 2, x.size).astype(np.float32)
    golden = ref.backward(dy, x, 0.2)
    actual = ref.backward(dy, x, 0.2, semantics=Semantics(input_dtype="float16", opmath="float16", grad_rule="ge"))
    batch = Batch(x, dy, 0.2, "backward", "float32", golden, actual)
    narrow = rule("input-precision", "computed in float16", input_dtype="float16", opmath="float16")
    at_zero = rule("grad-at-zero", "dx = dy at x == 0", reach="zero", grad_rule="ge")
    one = rule("alpha-mismatch", "slope 1", slope=1.0)
    mismatches = np.flatnonzero(~match_mask(actual, golden))
    stack, _ = beam_search(Selector(batch, scope_of(batch, mismatches)), [narrow, at_zero, one])
    assert set(stack) == {narrow, at_zero}


def _saturated(actual_inf: list[float]) -> tuple[Batch, np.ndarray]:
    """Three NaN results that became 0, and infinities whose results are ``actual_inf``."""
    x = _f16(np.nan, np.nan, np.nan, *([np.inf] * len(actual_inf)), 1.0, -2.0)
    golden = ref.forward(x, 0.2, out_dtype="float16")
    actual = golden.copy()
    actual[:3] = 0.0
    actual[3:3 + len(actual_inf)] = actual_inf
    batch = Batch(x, None, 0.2, "forward", "float16", golden, actual)
    return batch, np.flatnonzero(~match_mask(actual, golden))


def test_saturation_is_chosen_only_where_each_group_it_changes_gains() -> None:
    """Saturation turns NaN into 0 and ±inf into ±max: one infinity saturated is a gain of one in
    its group; of two, one saturated and one kept is no gain there, and the rule is not chosen."""
    groups = [rule("saturation", "NaN and inf", groups=lambda g: [np.isnan(g.astype(np.float64)),
                                                                np.isinf(g.astype(np.float64))],
                   reach="special", saturate=True)]
    batch, mis = _saturated([65504.0])
    assert beam_search(Selector(batch, scope_of(batch, mis)), groups)[0] == groups
    batch, mis = _saturated([65504.0, np.inf])
    assert beam_search(Selector(batch, scope_of(batch, mis)), groups)[0] == []


def test_a_rule_that_reaches_the_wrong_elements_is_tried() -> None:
    x = _f16(np.nan, np.nan, 1.0, -2.0)
    dy = _f16(3.0, -5.0, 1.0, 1.0)
    golden = ref.backward(dy, x, 0.2, out_dtype="float16")
    actual = ref.backward(dy, x, 0.2, out_dtype="float16", semantics=Semantics(nan_grad="dy"))
    batch = Batch(x, dy, 0.2, "backward", "float16", golden, actual)
    at_nan = rule("nan-gradient", "dy at NaN", reach="nan", nan_grad="dy")
    mis = np.flatnonzero(~match_mask(actual, golden))
    assert beam_search(Selector(batch, scope_of(batch, mis)), [at_nan])[0] == [at_nan]


def test_a_child_longer_than_its_parent_is_kept_when_right_more_often_once_per_prediction() -> None:
    """Three mismatches with slope 0.01 and two with slope 0.3 among matching negatives: either
    slope alone contradicts the matching ones (longer than the empty stack), yet is right more
    often, so it is kept for a second rule to complete; a costlier rule with slope 0.01's
    prediction is no child of its own, and the candidates after it still are."""
    x = -np.arange(1.0, 13.0, dtype=np.float32)
    golden = ref.forward(x, 0.2)
    actual = golden.copy()
    actual[:2] = ref.forward(x[:2], 0.3)
    actual[2:5] = ref.forward(x[2:5], 0.01)
    batch = Batch(x, None, 0.2, "forward", "float32", golden, actual)
    sel = Selector(batch, scope_of(batch, np.arange(5)))
    slope, other = _rules()[2], _rules()[3]
    costly = rule("alpha-mismatch", "slope 0.01, spelled long", complexity=1.005, slope=0.01)
    pred = sel.predict([])
    node = _Stack(sel.length(sel.where_right(pred), []), [], pred, {}, 0)
    children = _children(sel, node, [slope, costly, other])
    assert [c.rules for c in children] == [[slope], [other]]
    assert [c.right for c in children] == [3, 2] and min(c.length for c in children) > node.length


def test_a_rule_that_fixes_every_wrong_zero_sign_is_chosen() -> None:
    """With a negative slope the golden of x = -0 is +0 and of x = +0 is -0; a select x >= 0
    passes both zeros through: only zero signs differ, and the rule fixes all of them."""
    x = _f16(-0.0, -0.0, 0.0, 0.0, -1.0, 2.0)
    golden = ref.forward(x, -0.5, out_dtype="float16")
    passes = rule("formulation", "x >= 0", predicate="ge")
    actual = ref.forward(x, -0.5, out_dtype="float16", semantics=passes.semantics)
    assert (np.signbit(golden[:4]) != np.signbit(actual[:4])).all() and (golden[4:] == actual[4:]).all()
    batch = Batch(x, None, -0.5, "forward", "float16", golden, actual)
    stack, _ = beam_search(Selector(batch, scope_of(batch, np.arange(4))), [passes])
    assert stack == [passes]
