"""suite.py: planning, inputs, determinism, reproducers (shrink + replay), interruption."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from conformance import suite
from conformance.cases import corpus
from conformance.dtypes import to_bits
from conformance.render import export
from conformance.render.files import ReportPaths
from conformance.replay import replay
from conformance.runs import execute_suite
from conformance.selftest import Outcome
from tests.framework_support import keras_backend
from tests.helpers import keep_small_batches

FAST = dict(max_examples=5)


def _options(tmp_path: Path | None = None, **kw) -> suite.Options:
    return suite.Options(results_dir=tmp_path, **{**FAST, **kw})


def test_default_plan_covers_the_issue_matrix() -> None:
    # keras's default profile is the one Keras runs on in this process: the class its default
    # worker serves answers here (tests/framework_support.py), without a worker's TensorFlow import
    rows, skipped = suite.plan(suite.Selection(objects=(("keras", keras_backend("tensorflow")),)))
    assert "keras" in suite.Selection().backends and {r.backend for r in rows} == set(suite.Selection().backends)
    keys = {(r.backend, r.dtype, r.out_dtype) for r in rows}
    assert {("cann", "float32", "float16"), ("cann", "float32", "bfloat16")} <= keys
    assert not any(b != "cann" and d != o for b, d, o in keys)  # mixed pairs only on cann
    assert {r.alpha for r in rows} == set(suite.SUITE_ALPHAS) and {r.direction for r in rows} == {"forward", "backward"}
    assert ("cann", "float64", "float64") not in keys and any(s.dtype == "float64" for s, _ in skipped)
    assert {("golden", "float64", "float64"), ("torch", "bfloat16", "bfloat16")} <= keys


def test_dtype_selection_plain_and_pairs() -> None:
    sel = suite.Selection(backends=("cann",), dtypes=("float32",))
    assert set(sel.pairs_for("cann")) == {("float32", "float32"), ("float32", "float16"), ("float32", "bfloat16")}
    sel = suite.Selection(backends=("golden",), dtypes=("float16->float32",))
    assert sel.pairs_for("golden") == (("float16", "float32"),)


def test_sixteen_bit_rows_see_every_pattern() -> None:
    inputs = suite.Inputs(seed=0, max_examples=3, alphas=(0.2,))
    spec = suite.RowSpec("golden", None, None, "bfloat16", "bfloat16", "backward", 0.2)
    sweep = inputs.batches(spec)[0]
    assert sweep.label == "sweep" and np.unique(to_bits(sweep.x)).size == 1 << 16
    assert np.unique(to_bits(sweep.dy)).size == 1 << 16


def test_cann_rows_add_tile_boundary_shapes() -> None:
    inputs = suite.Inputs(seed=0, max_examples=3, alphas=(0.2,))
    cann = [b.x.size for b in inputs.batches(suite.RowSpec("cann", None, None, "float16", "float16", "forward", 0.2))]
    torch = [b.x.size for b in inputs.batches(suite.RowSpec("torch", None, None, "float16", "float16", "forward", 0.2))]
    assert max(cann) > 100_000 > max(torch[3:])
    assert set(torch[3:]) < set(cann[3:])


def _rows_json(rows) -> str:
    return json.dumps([export.row_dict(r) for r in rows], sort_keys=True)


def test_same_seed_same_rows_other_seed_other_inputs() -> None:
    sel = suite.Selection(backends=("torch",), dtypes=("float32",), alphas=(0.01,), directions=("forward",))
    a, b = (suite.run_suite(sel, _options(seed=3)).rows for _ in range(2))
    c = suite.run_suite(sel, _options(seed=4)).rows
    assert _rows_json(a) == _rows_json(b)
    assert _rows_json(a) != _rows_json(c)  # the random fp32 block differs, so the rounding counts do


@pytest.mark.parametrize("variant, category, max_size", [
    ("default-slope", "alpha-mismatch", 1),
    ("mask-multiply", "formulation", 1),  # the formula is named; offenders from the failing batch
    ("saturation-mode", "saturation", 1),
    ("tail-overrun", "out-of-bounds-write", 16),
])
def test_failing_rows_get_small_replayable_reproducers(tmp_path: Path, variant: str, category: str,
                                                       max_size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch)  # a reproducer is shrunk from the failing batch, whatever its size
    sel = suite.Selection(backends=("cann",), dtypes=("float16",), alphas=(0.2,), directions=("forward",),
                          variant=variant)
    (row,) = suite.run_suite(sel, _options(tmp_path)).rows
    finding = next(f for f in row.findings if f.category == category)
    assert row.verdict == "fail" and finding.reproducer is not None
    rep = corpus.load(finding.reproducer)
    assert rep.category == category and rep.variant == variant and rep.case.x.size <= max_size
    replayed = replay(rep, config=suite.Options().config)
    assert replayed.verdict == "fail" and category in {f.category for f in replayed.findings}


def test_passing_rows_write_no_reproducers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch)
    sel = suite.Selection(backends=("cann",), dtypes=("float16",), alphas=(0.2,), directions=("forward",),
                          profile="ascend950")
    (row,) = suite.run_suite(sel, _options(tmp_path)).rows
    assert row.verdict == "pass" and not list(tmp_path.iterdir())


def test_ctrl_c_keeps_completed_rows_and_writes_a_partial_report(tmp_path: Path, monkeypatch) -> None:
    calls = {"n": 0}
    real = suite.run_row

    def interrupt_on_third(spec, inputs, *, options):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(spec, inputs, options=options)

    monkeypatch.setattr(suite, "run_row", interrupt_on_third)
    sel = suite.Selection(backends=("golden",), dtypes=("float16",), alphas=(0.2, 0.3), directions=("forward",
                                                                                                      "backward"))
    paths = ReportPaths(str(tmp_path / "r.json"), str(tmp_path / "r.xml"))
    code = execute_suite(sel, _options(tmp_path), paths, console=Console(file=open(tmp_path / "out", "w")))
    doc = json.loads((tmp_path / "r.json").read_text())
    assert code == 130 and doc["partial"] is True and len(doc["rows"]) == 2
    assert doc["verdict"] == "fail"  # two passing rows of four are not a passing gate
    junit = ET.parse(tmp_path / "r.xml").getroot().find("testsuite")
    assert junit.get("errors") == "1" and junit.find("testcase[@name='interrupted']/error") is not None
    assert export.validate(doc, export.SCHEMA) == []
    out = (tmp_path / "out").read_text()
    assert "interrupted after 2 of 4 rows" in out and "INCOMPLETE" in out and ": PASS" not in out


@pytest.mark.parametrize("expected, reported, strict, status", [
    (("tail-block",), ("tail-block",), False, "yes"),
    (("out-of-bounds-write", "tail-block"), ("out-of-bounds-write",), False, "yes"),
    (("overflow",), (), False, "MISSED"),
    (("overflow",), ("unexplained",), False, "mis-named"),
    (("overflow",), ("overflow", "unexplained"), False, "yes"),
    (("overflow",), ("overflow", "unexplained"), True, "extra categories"),
    ((), (), False, "yes"),                      # reference passes
    ((), ("rounding",), False, "mis-named"),     # reference fails a row
])
def test_selftest_outcome_rules(expected, reported, strict, status) -> None:
    outcome = Outcome("v", expected, reported, 1, strict)
    assert outcome.status == status and outcome.ok is (status == "yes")


def test_selftest_judge_uses_the_reference_baseline_for_allowed_findings() -> None:
    from conformance.selftest import judge, variant_rows

    rows = variant_rows("fp16-slope", profile=None, seed=0)  # within fp16 tolerance: a named warning
    assert all(r.verdict == "warn" for r in rows)
    fp16_row = ("float16", "float16", "forward")
    named = judge("fp16-slope", rows, expected=("alpha-precision",), baseline={fp16_row: frozenset({"rounding"})},
                  strict=True)
    hidden = judge("fp16-slope", rows, expected=("alpha-precision",),
                   baseline={fp16_row: frozenset({"alpha-precision"})}, strict=False)
    elsewhere = judge("fp16-slope", rows, expected=("alpha-precision",),
                      baseline={("float32", "float32", "forward"): frozenset({"alpha-precision"})}, strict=True)
    assert named.ok and not hidden.ok and hidden.status == "MISSED"
    assert elsewhere.ok  # a category the reference shows only on other rows does not hide the defect
