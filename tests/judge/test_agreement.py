"""Agreement with a reference backend: every cell against a direct pairwise bit comparison.

The suite's rows run on their small batches (``small_batches``), and the direct comparisons
on the same batches: what is checked is that the two counts agree, not the inputs' size."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conformance.adapters import from_numpy
from conformance.backends import call
from conformance.dtypes import all_patterns, from_bits
from conformance.judge.agreement import NOT_COMPARABLE, Agreement, Output, agree, differing
from conformance.reference import golden
from conformance.render.export import SCHEMA, validate
from conformance.suite import Inputs, Options, Selection, plan, pooled_sizes, run_suite
from tests.helpers import CONFIG, bits_differ, judge, run_cli

pytestmark = pytest.mark.usefixtures("small_batches")
ALPHAS = (0.1, 0.2)


def _golden_like(x: np.ndarray, alpha: float) -> np.ndarray:
    """The exact result, as a user kernel of its own."""
    return golden.forward(x, alpha)


def _slope_off(x: np.ndarray, alpha: float) -> np.ndarray:
    """The slope rounded to fp16 first, then applied in fp16."""
    with np.errstate(invalid="ignore"):
        return np.where(x > 0, x, x * np.float16(alpha)).astype(x.dtype)


def _suite(selection: Selection) -> list[Agreement]:
    result = run_suite(selection, Options(config=CONFIG, max_examples=10, results_dir=None))
    assert not result.interrupted
    return result.agreement


def _direct_count(spec_of: dict, a: Agreement, *, selection: Selection) -> tuple[int, int]:
    """Differing elements and elements, by calling both backends directly on the batches whose
    inputs are the same for both rows (shared labels, equal bits)."""
    inputs = Inputs(seed=0, max_examples=10, alphas=selection.alphas, pooled=pooled_sizes(plan(selection)[0]))
    key = (a.dtype, a.out_dtype, a.direction, a.alpha)
    ref, other = spec_of[(a.reference, *key)], spec_of[(a.backend, *key)]
    ref_batches = {b.label: b for b in inputs.batches(ref)}
    diff = total = 0
    for batch in inputs.batches(other):
        twin = ref_batches.get(batch.label)
        if twin is None or not np.array_equal(twin.x.view(np.uint16), batch.x.view(np.uint16)):
            continue
        mine = call(selection.backend(a.backend), a.direction, batch.x.copy(), a.alpha).value
        theirs = call(selection.backend(a.reference), a.direction, batch.x.copy(), a.alpha).value
        diff += int(bits_differ(np.asarray(mine).reshape(-1), np.asarray(theirs).reshape(-1)).sum())
        total += batch.x.size
    return diff, total


def _specs(selection: Selection) -> dict:
    return {(s.backend, s.dtype, s.out_dtype, s.direction, s.alpha): s for s in plan(selection)[0]}


def test_differing_bits_nan_equal_zero_signs_apart() -> None:
    x = all_patterns("float16")
    y = x.copy()
    y[0x0000] = from_bits(0x8000, "float16")  # +0 -> -0: differs
    y[0x7E01] = from_bits(0x7C01, "float16")  # another NaN payload: agrees
    y[0x3C00] = from_bits(0x3C01, "float16")  # 1.0 -> next float: differs
    mask = differing(x, y)
    assert np.array_equal(mask, bits_differ(x, y))
    assert sorted(np.flatnonzero(mask)) == [0x0000, 0x3C00]


def test_fake_backends_against_golden_reference() -> None:
    same = from_numpy(_golden_like, dtypes=["float16"], name="same")
    off = from_numpy(_slope_off, dtypes=["float16"], name="off")
    selection = Selection(backends=("same", "off", "golden"), objects=(("same", same), ("off", off)),
                          dtypes=("float16",), alphas=ALPHAS, directions=("forward",), references=("golden",))
    found = _suite(selection)
    specs = _specs(selection)
    assert {(a.backend, a.alpha) for a in found} == {(b, al) for b in ("same", "off") for al in ALPHAS}
    for a in found:
        assert a.reference == "golden"
        assert (a.differing, a.elements) == _direct_count(specs, a, selection=selection)
        assert a.identical == (a.differing == 0)
    assert all(a.identical and a.why == "identical" for a in found if a.backend == "same")
    off_rows = [a for a in found if a.backend == "off"]
    assert all(not a.identical and a.differing > 0 for a in off_rows)
    assert all("off: " in a.why and "golden: exact there" in a.why for a in off_rows)


def test_real_backends_against_torch_reference() -> None:
    pytest.importorskip("torch")
    selection = Selection(backends=("golden", "torch", "cann"), dtypes=("float16",), alphas=ALPHAS,
                          directions=("forward",), references=("torch",))
    found = _suite(selection)
    specs = _specs(selection)
    assert {a.backend for a in found} == {"golden", "cann"}
    for a in found:
        assert (a.differing, a.elements) == _direct_count(specs, a, selection=selection)
        assert a.elements > 0


def test_identical_backends_are_identical() -> None:
    copy = from_numpy(_golden_like, dtypes=["float16"], name="copy")
    selection = Selection(backends=("golden", "copy"), objects=(("copy", copy),), dtypes=("float16",),
                          alphas=ALPHAS, directions=("forward",), references=("copy",))
    found = _suite(selection)
    assert len(found) == len(ALPHAS)
    assert all(a.identical and a.differing == 0 and a.elements > 0 for a in found)


def _output(label: str, x: np.ndarray, actual: np.ndarray, *, backend: str) -> Output:
    return Output(label, x, None, actual, judge(x, actual, 0.1, backend=backend))


def test_different_inputs_are_not_compared() -> None:
    x = all_patterns("float16")[:64]
    other = x[::-1].copy()
    ref = [_output("shape (64,)", x, _golden_like(x, 0.1), backend="golden")]
    mine = [_output("shape (64,)", other, _golden_like(other, 0.1), backend="mine")]
    a = agree(ref, mine)
    assert (a.identical, a.differing, a.elements, a.why) == (False, 0, 0, NOT_COMPARABLE)


def test_same_wrong_bits_agree_and_name_both() -> None:
    x = all_patterns("float16")
    wrong = _slope_off(x, 0.1)
    a = agree([_output("sweep", x, wrong, backend="one")], [_output("sweep", x, wrong.copy(), backend="two")])
    assert a.identical and a.differing == 0
    half = wrong.copy()
    negatives = slice(0x8000, 0xC000)  # half of the negative patterns get the exact result
    half[negatives] = _golden_like(x[negatives], 0.1)
    b = agree([_output("sweep", x, wrong, backend="one")], [_output("sweep", x, half, backend="two")])
    assert b.differing == int(bits_differ(wrong, half).sum()) > 0
    assert b.why.startswith("both: ")  # both rows differ from golden by the same kind of behaviour


def test_cli_reference_json_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    res = run_cli(["run", "--reference", "golden", "--backend", "cann", "--dtype", "float16",
                   "--direction", "forward", "--alpha", "0.2", "--max-examples", "5",
                   "--results-dir", str(tmp_path / "res"), "--json", str(report)], capsys)
    assert res.code in (0, 1), res.text
    doc = json.loads(report.read_text())
    assert validate(doc, SCHEMA) == []
    [entry] = doc["agreement"]
    assert (entry["reference"], entry["backend"], entry["dtype"]) == ("golden", "cann", "float16")
    assert "agreement with golden" in res.out


def test_cli_unknown_reference_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers import assert_usage_error

    assert_usage_error(run_cli(["run", "--reference", "nope"], capsys), mentions="--reference")


def test_no_reference_no_agreement_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    res = run_cli(["run", "--backend", "golden", "--dtype", "float16", "--direction", "forward",
                   "--alpha", "0.2", "--max-examples", "5", "--json", str(report)], capsys)
    assert res.code == 0, res.text
    assert "agreement" not in json.loads(report.read_text())


def test_cli_comma_references_each_judged_pairwise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    copy = "tests.judge.test_agreement:_golden_like"
    res = run_cli(["run", "--reference", f"golden,{copy}", "--backend", "cann", "--dtype", "float16",
                   "--direction", "forward", "--alpha", "0.1", "--max-examples", "5",
                   "--results-dir", str(tmp_path / "res"), "--json", str(report)], capsys)
    assert res.code in (0, 1), res.text
    entries = {(e["reference"], e["backend"]): e for e in json.loads(report.read_text())["agreement"]}
    assert set(entries) == {("golden", copy), ("golden", "cann"), (copy, "cann")}
    assert entries[("golden", copy)]["identical"]
    assert entries[("golden", "cann")]["differing"] == entries[(copy, "cann")]["differing"] > 0
    assert "agreement with golden" in res.out and f"agreement with {copy}" in res.out


def test_rows_come_back_in_the_planned_order() -> None:
    copy = from_numpy(_golden_like, dtypes=["float16"], name="copy")
    selection = Selection(backends=("golden", "copy"), objects=(("copy", copy),), dtypes=("float16",),
                          alphas=ALPHAS, directions=("forward", "backward"), references=("copy",))
    result = run_suite(selection, Options(config=CONFIG, max_examples=5, results_dir=None))
    planned = [(s.backend, s.direction, s.alpha) for s in plan(selection)[0]]
    assert [(r.backend, r.direction, r.alpha) for r in result.rows] == planned
    assert {r.direction for r in result.rows} == {"forward", "backward"}  # golden's backward rows too
    assert len(result.agreement) == len(ALPHAS)  # copy has no backward: golden's forward rows only
