"""Attribution: every mismatch gets exactly one category, each finding carries what it explains
and contradicts; a refused input is one finding."""
from __future__ import annotations

import numpy as np

from conformance.dtypes import from_bits, to_bits
from conformance.records import BackendResult
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.report.evaluate import evaluate
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
    from conformance.report.console import make_console, render_details
    from conformance.report.export import row_dict

    row = judge_named(F16, ref.forward(F16, 0.01), 0.2)
    (finding,) = row.findings
    (data,) = row_dict(row)["findings"]
    assert data["detail"]["explained"] == finding.count and data["detail"]["contradicted"] == 0
    console = make_console(width=200)
    with console.capture() as cap:
        render_details([row], console=console)
    assert f"explained {finding.count}, contradicted 0" in cap.get()
