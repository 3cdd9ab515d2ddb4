"""The search's branch and bound: once a stack reproduces every mismatch, no stack is grown that
could not be shorter than it, since each rule added costs at least the cheapest rule's length."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.triage import search
from conformance.triage.claims import Batch
from conformance.triage.rules import catalogue
from conformance.triage.sampling import scope_of

SUBNORMALS = np.arange(1, 1 << 12, 16, dtype=np.uint32).view(np.float32)


def _batch(semantics: Semantics) -> tuple[Batch, np.ndarray]:
    x = np.concatenate([SUBNORMALS, -SUBNORMALS, np.linspace(-10, 10, 2000, dtype=np.float32)])
    golden = ref.forward(x, 0.2)
    actual = ref.forward(x, 0.2, semantics=semantics)
    mismatches = np.flatnonzero(golden.view(np.uint32) != actual.view(np.uint32))
    return Batch(x, None, 0.2, "forward", "float32", golden, actual), mismatches


@pytest.mark.parametrize(("semantics", "depth"), [
    pytest.param(Semantics(slope=0.01), 1, id="one-rule"),
    pytest.param(Semantics(slope=0.01, daz=True, ftz=True), 2, id="two-rules"),
])
def test_no_stack_is_grown_past_the_depth_of_one_that_reproduces_every_mismatch(
        semantics: Semantics, depth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    batch, mismatches = _batch(semantics)
    grown: list[int] = []
    children = search._children

    def counted(sel, node, cands):  # noqa: ANN001, ANN202 - the search's own types
        grown.append(len(node.rules))
        return children(sel, node, cands)

    monkeypatch.setattr(search, "_children", counted)
    rules, _ = search.select(batch, mismatches, catalogue(alpha=0.2, direction="forward",
                                                          dtypes=("float32", "float32"), estimates=[0.01]))
    assert len(rules) == depth
    assert np.all(ref.forward(batch.x, 0.2, semantics=search.stack_semantics(rules)).view(np.uint32)
                  == batch.actual.view(np.uint32))
    assert max(grown) == depth - 1, grown


def test_every_choice_is_a_rule_the_stack_lacks_that_fixes_enough_of_its_wrong_elements() -> None:
    """``_choices`` offers a rule only when it sets nothing the stack sets and, stacked on it,
    reproduces more of the elements the stack still gets wrong than the rule costs: here a stack
    holding the wrong slope (0.02 for the kernel's 0.01), whose right slope is not offered, since
    it would set the slope a second time."""
    batch, mismatches = _batch(Semantics(slope=0.01))
    sel = search.Selector(batch, scope_of(batch, mismatches))
    cands = catalogue(alpha=0.2, direction="forward", dtypes=("float32", "float32"), estimates=[0.02, 0.01])
    [wrong_slope] = [r for r in cands if r.semantics.slope == 0.02 and r.semantics.slope_dtype is None]
    stack = [wrong_slope]
    current = sel.predict(stack)
    right_now = sel.where_right(current)[:sel.scope.n_mis]
    assert right_now.any() and not right_now.all()
    wrong = np.flatnonzero(~right_now)
    choices = search._choices(sel, stack, cands, current)
    assert choices
    for c in choices:
        assert c.rule not in stack and not c.rule.keys & wrong_slope.keys, c.rule.summary
        fixed = sel.where_right(sel.predict([*stack, c.rule]))[wrong]
        assert np.count_nonzero(fixed) > search.RULE_COST * c.rule.complexity, c.rule.summary
