"""Attribution: every mismatch gets exactly one category, each finding carries what it explains
and contradicts; a refused input is one finding."""
from __future__ import annotations

import numpy as np

from conformance.dtypes import from_bits, to_bits
from conformance.judge.evaluate import evaluate
from conformance.records import BackendResult
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.triage.attribution import sampled_round
from conformance.triage.claims import Batch, State, special_values
from conformance.triage.sampling import SAMPLING, scope_of
from tests.helpers import CONFIG, F16, counts, edit_at, finite_normal_indices, judge, judge_named


def test_rejected_input_is_one_finding_over_every_element() -> None:
    result = BackendResult(None, rejected="alpha must be >= 0 when the result is reused")
    row = evaluate(F16, -0.5, result, direction="forward", backend="cann", config=CONFIG)
    assert counts(row) == {"rejected-input": F16.size}
    assert row.verdict == "fail"


def test_each_mismatch_gets_exactly_one_category_when_defects_mix() -> None:
    exact = ref.forward(F16, 0.2, semantics=Semantics(slope_dtype="float16"))
    normal = finite_normal_indices(exact)
    actual = edit_at(exact, normal[::53], lambda v: from_bits(to_bits(v) ^ 0x0100, v.dtype))
    actual = edit_at(actual, normal[7::211], lambda v: np.full_like(v, np.nan))
    row = judge(F16, actual, 0.2)
    assert sum(counts(row).values()) == row.metrics.mismatches
    assert set(counts(row)) == {"alpha-precision", "spurious-nan", "unexplained"}


def test_findings_carry_explained_and_contradicted_in_json_and_panel() -> None:
    from conformance.render.console import make_console, render_details
    from conformance.render.export import row_dict

    row = judge_named(F16, ref.forward(F16, 0.01), 0.2)
    (finding,) = row.findings
    (data,) = row_dict(row)["findings"]
    assert data["detail"]["explained"] == finding.count and data["detail"]["contradicted"] == 0
    console = make_console(width=200)
    with console.capture() as cap:
        render_details([row], console=console)
    assert f"explained {finding.count}, contradicted 0" in cap.get()


def _backward_batch(x_value: float, n: int) -> tuple[Batch, np.ndarray]:
    """dy = every 2^32/n-th fp32 pattern against one x; actual with the slope in fp32, golden exact."""
    dy = from_bits(np.arange(n, dtype=np.uint64) * ((1 << 32) // n), "float32")
    x = np.full(n, x_value, dtype=np.float32)
    golden = ref.compute("backward", x, 0.2, dy=dy, out_dtype="float32")
    actual = ref.compute("backward", x, 0.2, dy=dy, out_dtype="float32", semantics=Semantics(slope_dtype="float32"))
    batch = Batch(x, dy, 0.2, "backward", "float32", golden, actual)
    return batch, np.flatnonzero(to_bits(golden) != to_bits(actual))


def test_scope_of_a_special_x_is_every_element_mismatches_first() -> None:
    batch, mis = _backward_batch(float("nan"), 1 << 15)
    scope = scope_of(batch, mis)
    others = np.setdiff1d(np.arange(batch.x.size), mis)
    assert mis.size and scope.n_mis == mis.size
    assert np.array_equal(scope.index, np.concatenate([mis, others]))
    assert np.array_equal(scope.weight, np.ones(others.size))


def test_scope_of_a_plain_x_keeps_special_others_and_weighs_a_sample() -> None:
    batch, mis = _backward_batch(-1.0, 1 << 15)
    scope = scope_of(batch, mis)
    others = np.setdiff1d(np.arange(batch.x.size), mis)
    special = others[special_values(batch.x[others], batch.golden[others], batch.dy[others])]
    assert np.array_equal(scope.index[mis.size:mis.size + special.size], special)
    assert scope.weight.sum() == others.size


def test_a_sampled_round_claims_every_mismatch_at_a_special_x() -> None:
    batch, mis = _backward_batch(float("nan"), 1 << 19)
    state = State(mis)
    assert mis.size > SAMPLING.select_sample  # a sampled round, attributed on the mismatches alone
    stack = sampled_round(batch, state)
    assert [r.category for r in stack] == ["alpha-precision"]
    assert state.remaining.size == 0
    assert [(c.category, c.count) for c in state.claims] == [("alpha-precision", mis.size)]


def test_an_element_two_rules_move_equally_goes_to_the_later_category(monkeypatch) -> None:
    """The stated tie rule of ``attribute``: with every move equal, the later category in
    registry order owns the element (subnormal-flush comes after alpha-mismatch)."""
    from conformance import categories
    from conformance.metrics.exact import match_mask
    from conformance.triage import attribution
    from conformance.triage.rules import rule
    from conformance.triage.search import stack_semantics

    x = np.linspace(-4, -0.25, 64).astype(np.float32)
    stack = [rule("alpha-mismatch", "slope 0.01", slope=0.01), rule("subnormal-flush", "DAZ+FTZ", daz=True, ftz=True)]
    actual = ref.compute("forward", x, 0.2, semantics=stack_semantics(stack))
    batch = Batch(x, None, 0.2, "forward", "float32", ref.forward(x, 0.2), actual)
    mis = np.flatnonzero(~match_mask(actual, batch.golden))
    assert mis.size == x.size
    monkeypatch.setattr(attribution, "_moved", lambda full, without: np.ones(full.shape))
    selector = attribution._mismatch_selector(batch, mis, leading=False)
    claims = attribution.attribute(selector, mis, stack, {})
    assert categories.order("subnormal-flush") > categories.order("alpha-mismatch")
    assert [(c.category, c.count) for c in claims] == [("subnormal-flush", x.size)]
