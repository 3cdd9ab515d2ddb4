"""The two ways attribution reads a reduced batch's leading mismatches agree: a selector on views
of them (the compiled configuration) and one that gathers them; the explained elements found a
piece at a time and the elements a stack gets wrong found from the mismatches' known answer are
those of the whole prediction."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from conformance.metrics.exact import match_mask
from conformance.reference import golden as ref
from conformance.triage import attribution
from conformance.triage.claims import Batch
from conformance.triage.rules import Rule
from conformance.triage.search import stack_semantics
from tests.triage.test_attribution_findings import FLUSH, RELU, compiled_configuration

MISMATCHES = 6  # the batch's first elements


@pytest.fixture(autouse=True)
def _small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of four: the piecewise prediction of these small batches takes several."""
    monkeypatch.setattr(attribution, "PIECE", 4)


def _reduced(stack: list[Rule]) -> Batch:
    """A reduced backward float32 batch: six mismatches first (the stack's prediction, but the
    last one holds 9), then four sampled matching elements, two of which the stack would change."""
    x = np.array([-1.0, -2.0, -1e-39, -4.0, 3e-39, -6.0, -7.0, 8.0, -9.0, 10.0], dtype=np.float32)
    dy = np.array([1.5, -2.5, 3.0, 1e-39, 1e-39, 0.75, 1.25, 2.0, -3.0, 4.0], dtype=np.float32)
    golden = ref.backward(dy, x, 0.2)
    actual = ref.compute("backward", x, 0.2, dy=dy, out_dtype="float32", semantics=stack_semantics(stack))
    actual[MISMATCHES - 1] = np.float32(9.0)
    actual[MISMATCHES:] = golden[MISMATCHES:]
    where = np.array([0, 3, 4, 9, 12, 13, 20, 31, 40, 57])
    batch = Batch(x, dy, 0.2, "backward", "float32", golden, actual, where=where, numel=64,
                  weight=np.array([3.0, 7.0, 11.0, 5.0]), shape=(4, 16))
    assert np.flatnonzero(~match_mask(actual, golden)).tolist() == list(range(MISMATCHES))
    return batch


def _reduced_forward_half(stack: list[Rule]) -> Batch:
    """:func:`_reduced` forward, float16 inputs with float32 results."""
    x = np.array([-1.0, -2.0, -3e-6, -4.0, 3e-6, -6.0, -7.0, 8.0, -9.0, 10.0], dtype=np.float16)
    golden = ref.compute("forward", x, 0.2, out_dtype="float32")
    actual = ref.compute("forward", x, 0.2, out_dtype="float32", semantics=stack_semantics(stack))
    actual[MISMATCHES - 1] = np.float32(9.0)
    actual[MISMATCHES:] = golden[MISMATCHES:]
    batch = Batch(x, None, 0.2, "forward", "float32", golden, actual, where=np.arange(10) * 3, numel=30,
                  weight=np.array([5.0, 5.0, 5.0, 5.0]))
    assert np.flatnonzero(~match_mask(actual, golden)).tolist() == list(range(MISMATCHES))
    return batch


@pytest.mark.parametrize("stack", [[RELU], [FLUSH], [RELU, FLUSH]], ids=["relu", "flush", "relu+flush"])
@pytest.mark.parametrize("reduced", [_reduced, _reduced_forward_half], ids=["backward", "forward-half"])
def test_leading_and_gathered_selectors_claim_alike(reduced: Callable[[list[Rule]], Batch], stack: list[Rule],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    batch, mis = reduced([RELU, FLUSH]), np.arange(MISMATCHES)
    expected = match_mask(batch.recomputed(mis, semantics=stack_semantics(stack)), batch.actual[mis])
    assert expected.any() and not expected.all()
    claims = {}
    for leading in (False, True):
        compiled_configuration(monkeypatch, enabled=leading)
        selector = attribution._mismatch_selector(batch, mis, leading=leading)
        claims[leading] = [(c.category, c.index.tolist(), c.detail["explained"], c.detail["contradicted"])
                           for c in attribution.attribute(selector, mis, stack, {}, whole=batch)]
    assert claims[True] == claims[False]
    assert sorted(i for _, index, _, _ in claims[True] for i in index) == np.flatnonzero(expected).tolist()


def test_a_selector_on_the_leading_mismatches_reads_views_standing_for_the_same_tensor() -> None:
    batch, mis = _reduced([RELU, FLUSH]), np.arange(MISMATCHES)
    lead = attribution._mismatch_selector(batch, mis, leading=True)
    for name in ("x", "dy", "golden", "actual"):
        part = getattr(lead.batch, name)
        assert part.size == MISMATCHES and np.shares_memory(part, getattr(batch, name))
    assert (lead.batch.alpha, lead.batch.direction, lead.batch.out_dtype) == (0.2, "backward", "float32")
    assert lead.batch.tensor_size == 64 and lead.batch.tensor_shape == (4, 16)
    np.testing.assert_array_equal(lead.batch.flat(mis), batch.where[:MISMATCHES])
    assert (lead.scope.index, lead.scope.n_mis, lead.scope.weight.size) == (None, MISMATCHES, 0)


@pytest.mark.parametrize("stack", [[RELU], [FLUSH], [RELU, FLUSH]], ids=["relu", "flush", "relu+flush"])
def test_leading_and_gathered_selectors_predict_the_same_mismatches(stack: list[Rule]) -> None:
    batch, mis = _reduced([RELU, FLUSH]), np.arange(MISMATCHES)
    gathered = attribution._mismatch_selector(batch, mis, leading=False)
    lead = attribution._mismatch_selector(batch, mis, leading=True)
    expected = batch.recomputed(mis, semantics=stack_semantics(stack))
    np.testing.assert_array_equal(gathered.on_mismatches(stack).view(np.uint32), expected.view(np.uint32))
    np.testing.assert_array_equal(lead.on_mismatches(stack).view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("piece", [1, 4, 6])
@pytest.mark.parametrize("stack", [[RELU], [FLUSH], [RELU, FLUSH]], ids=["relu", "flush", "relu+flush"])
def test_the_mismatches_a_stack_reproduces_are_found_alike_in_pieces(stack: list[Rule], piece: int,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    batch, mis = _reduced([RELU, FLUSH]), np.arange(MISMATCHES)
    monkeypatch.setattr(attribution, "PIECE", piece)
    expected = match_mask(batch.recomputed(mis, semantics=stack_semantics(stack)), batch.actual[mis])
    for leading in (False, True):
        selector = attribution._mismatch_selector(batch, mis, leading=leading)
        np.testing.assert_array_equal(attribution._explained(selector, mis, stack), expected)


def test_the_reduced_batch_mismatches_the_stack_reproduces() -> None:
    batch, mis = _reduced([RELU, FLUSH]), np.arange(MISMATCHES)
    lead = attribution._mismatch_selector(batch, mis, leading=True)
    np.testing.assert_array_equal(attribution._explained(lead, mis, [RELU, FLUSH]), [1, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(attribution._explained(lead, mis, [RELU]), [1, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(attribution._explained(lead, mis, [FLUSH]), [0, 0, 0, 1, 1, 0])


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "compiled"])
@pytest.mark.parametrize("stack", [[RELU], [FLUSH], [RELU, FLUSH]], ids=["relu", "flush", "relu+flush"])
def test_where_a_stack_is_wrong_on_the_whole_batch(stack: list[Rule], compiled: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrong: the mismatches the stack does not reproduce and the sampled elements it changes."""
    compiled_configuration(monkeypatch, enabled=compiled)
    batch, mis = _reduced([RELU, FLUSH]), np.arange(MISMATCHES)
    full = batch.recomputed(semantics=stack_semantics(stack))
    expected = np.flatnonzero(~match_mask(full, batch.actual))
    for leading in (False, True) if compiled else (False,):
        selector = attribution._mismatch_selector(batch, mis, leading=leading)
        judged = attribution._Judged(batch, mis, attribution._explained(selector, mis, stack))
        wrong, predicted = attribution._wrong(selector, judged, stack)
        np.testing.assert_array_equal(wrong, expected)
        np.testing.assert_array_equal(predicted.view(np.uint32), full[expected].view(np.uint32))


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "compiled"])
def test_a_stack_right_on_every_mismatch_is_wrong_only_where_it_contradicts(compiled: bool,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    compiled_configuration(monkeypatch, enabled=compiled)
    batch, mis = _reduced([RELU, FLUSH]), np.arange(MISMATCHES)
    batch.actual[MISMATCHES - 1] = batch.recomputed(semantics=stack_semantics([RELU]))[MISMATCHES - 1]
    selector = attribution._mismatch_selector(batch, mis, leading=compiled)
    judged = attribution._Judged(batch, mis, attribution._explained(selector, mis, [RELU, FLUSH]))
    assert judged.explained.all()
    wrong, predicted = attribution._wrong(selector, judged, [RELU, FLUSH])
    assert wrong.tolist() == [6, 8] and (predicted == 0).all()


def test_a_whole_batchs_leading_mismatches_are_its_first_positions() -> None:
    """A batch that is the whole tensor (no ``where``) whose mismatches happen to come first."""
    reduced = _reduced([RELU, FLUSH])
    batch = Batch(reduced.x, reduced.dy, 0.2, "backward", "float32", reduced.golden, reduced.actual)
    lead = attribution._mismatch_selector(batch, np.arange(MISMATCHES), leading=True)
    assert lead.batch.where is None and lead.batch.tensor_size == batch.x.size == 10
    np.testing.assert_array_equal(lead.on_mismatches([RELU]).view(np.uint32),
                                  batch.recomputed(np.arange(MISMATCHES), semantics=RELU.semantics).view(np.uint32))


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "compiled"])
def test_where_a_stack_is_wrong_when_the_mismatches_come_last(compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled_configuration(monkeypatch, enabled=compiled)
    reduced = _reduced([RELU, FLUSH])
    last = slice(None, None, -1)
    batch = Batch(reduced.x[last].copy(), reduced.dy[last].copy(), 0.2, "backward", "float32",
                  reduced.golden[last].copy(), reduced.actual[last].copy())
    mis = np.flatnonzero(~match_mask(batch.actual, batch.golden))
    assert mis.tolist() == [4, 5, 6, 7, 8, 9]
    selector = attribution._mismatch_selector(batch, mis, leading=False)
    judged = attribution._Judged(batch, mis, attribution._explained(selector, mis, [RELU]))
    wrong, predicted = attribution._wrong(selector, judged, [RELU])
    assert wrong.tolist() == [1, 3, 4, 5]  # x = -9 and -7 left exact; 9 held; dy flushed at x = 3e-39
    full = batch.recomputed(semantics=stack_semantics([RELU]))
    np.testing.assert_array_equal(predicted.view(np.uint32), full[wrong].view(np.uint32))


@pytest.mark.parametrize("stack", [[RELU], [FLUSH], [RELU, FLUSH]], ids=["relu", "flush", "relu+flush"])
@pytest.mark.parametrize("k, whole", [(4, True), (5, False)], ids=["fewer-than-half", "half"])
def test_a_batch_mostly_matching_is_predicted_whole_and_one_mostly_mismatching_on_its_others(
        stack: list[Rule], k: int, whole: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer mismatches than half the batch: the stack is predicted on the whole batch in place,
    else on the other elements alone; where it is wrong, and what it predicts there, alike."""
    from conformance.triage import claims

    monkeypatch.setattr(claims, "MEMO_WHOLE", 2)  # a prediction on some elements is computed on them
    reduced = _reduced([RELU, FLUSH])
    actual = reduced.golden.copy()
    actual[:k] = reduced.actual[:k]  # the first k of the mismatches the stacks explain
    batch = Batch(reduced.x, reduced.dy, 0.2, "backward", "float32", reduced.golden, actual)
    mis = np.arange(k)
    full = batch.recomputed(semantics=stack_semantics(stack))
    expected = np.flatnonzero(~match_mask(full, actual))
    sized, computed = [], Batch._computed
    monkeypatch.setattr(Batch, "_computed", lambda self, index, s: sized.append(
        self.x.size if index is None else index.size) or computed(self, index, s))
    for compiled in (False, True):
        compiled_configuration(monkeypatch, enabled=compiled)
        selector = attribution._mismatch_selector(batch, mis, leading=False)
        judged = attribution._Judged(batch, mis, attribution._explained(selector, mis, stack))
        sized.clear()
        batch._predictions.clear()
        wrong, predicted = attribution._wrong(selector, judged, stack)
        np.testing.assert_array_equal(wrong, expected)
        np.testing.assert_array_equal(predicted.view(np.uint32), full[expected].view(np.uint32))
        assert sized[0] == (10 if whole or not compiled else 10 - k)
