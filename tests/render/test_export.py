"""Export: strict JSON that validates against the schema, JUnit XML, merging, console text."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from conformance.config import default_config
from conformance.dtypes import all_patterns, is_nan
from conformance.judge.evaluate import evaluate, merge_rows
from conformance.records import BackendResult, Row
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.render import console as render
from conformance.render.export import SCHEMA, report_dict, validate, write_json, write_junit
from conformance.render.messages import failure_message

CONFIG = default_config()
F16 = all_patterns("float16")


def _row(actual: np.ndarray, *, backend: str = "cann", label: str = "", x: np.ndarray = F16) -> Row:
    return evaluate(x, 0.2, BackendResult(actual), direction="forward", backend=backend,
                    config=CONFIG, label=label)


def _rows() -> list[Row]:
    clean = _row(ref.forward(F16, 0.2))
    warn = _row(ref.forward(F16, 0.2, semantics=Semantics(slope_dtype="float16")), backend="tensorflow")
    spurious = ref.forward(F16, 0.2)
    spurious[::1000] = np.nan
    return [clean, warn, _row(spurious)]


def _strict(text: str) -> dict:
    def reject(name: str) -> None:
        raise ValueError(f"non-strict JSON constant {name}")
    return json.loads(text, parse_constant=reject)


def test_json_is_strict_and_validates(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    write_json(_rows(), path, seed=7, versions={"numpy": np.__version__})
    doc = _strict(path.read_text())
    assert validate(doc, SCHEMA) == []
    assert doc["verdict"] == "fail" and [r["verdict"] for r in doc["rows"]] == ["pass", "warn", "fail"]
    spurious = doc["rows"][2]["findings"][0]
    assert spurious["category"] == "spurious-nan"
    assert spurious["examples"][0]["actual"]["hex"] == "nan"


def test_values_carry_hex_and_bits() -> None:
    doc = report_dict(_rows()[1:2], seed=None, versions={})
    example = doc["rows"][0]["findings"][0]["examples"][0]
    x = np.float16(float.fromhex(example["x"]["hex"]))
    assert f"0x{int(x.view(np.uint16)):04x}" == example["x"]["bits"]
    assert doc["rows"][0]["max_rel"]["dtype"] == "float64"


@pytest.mark.parametrize("breakage", ["drop-field", "bad-verdict", "extra-field", "bad-value"])
def test_validator_rejects_broken_reports(breakage: str) -> None:
    doc = report_dict(_rows(), seed=1, versions={})
    row = doc["rows"][0]
    if breakage == "drop-field":
        del row["max_ulp"]
    elif breakage == "bad-verdict":
        row["verdict"] = "ok"
    elif breakage == "extra-field":
        row["colour"] = "red"
    else:
        row["max_abs"] = 0.5
    assert validate(doc, SCHEMA) != []


def test_junit_has_one_testcase_per_row_and_failures(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    rows = _rows()
    write_junit(rows, path)
    suite = ET.parse(path).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(rows) and suite.get("failures") == "1"
    failure = cases[2].find("failure")
    assert failure is not None and "Mismatched elements:" in failure.text
    assert cases[1].find("system-out") is not None and cases[0].find("failure") is None


def test_message_follows_torch_testing_grammar() -> None:
    text = failure_message(_rows()[2])
    n = int((~is_nan(ref.forward(F16, 0.2)[::1000])).sum())  # NaN over NaN is no mismatch
    assert text.startswith(f"Mismatched elements: {n} / {F16.size} (")
    assert text.splitlines()[1] == f"NaN on one side only: {n} elements (no distance measures them)"
    assert "Greatest" not in text  # a NaN has no distance: no "Greatest ULP difference: 0"
    assert "Greatest ULP difference: 1 at index [" in failure_message(_rows()[1])


def test_merge_rows_sums_counts_and_keeps_first_examples() -> None:
    actual = ref.forward(F16, 0.2, semantics=Semantics(slope_dtype="float16"))
    parts = [_row(actual[:30000], x=F16[:30000], label="a", backend="tensorflow"),
             _row(actual[30000:], x=F16[30000:], label="b", backend="tensorflow")]
    merged = merge_rows(parts, config=CONFIG)
    whole = _row(actual, backend="tensorflow")
    assert merged.metrics.mismatches == whole.metrics.mismatches
    assert [(f.category, f.count) for f in merged.findings] == [(f.category, f.count) for f in whole.findings]
    assert len(merged.findings[0].examples) == 5 and merged.verdict == whole.verdict
    assert merged.parts == ("a", "b")


def test_merge_rows_refuses_mixed_keys() -> None:
    rows = _rows()
    other = evaluate(F16, 0.3, BackendResult(ref.forward(F16, 0.3)), direction="forward",
                     backend="cann", config=CONFIG)
    with pytest.raises(ValueError, match="merge_rows needs rows of one key"):
        merge_rows([rows[0], other], config=CONFIG)


def test_console_renders_table_details_and_summary() -> None:
    console = Console(record=True, width=200)
    rows = _rows()
    render.render_table(rows, console=console)
    render.render_details(rows, console=console)
    text = console.export_text()
    assert "spurious-nan ×" in text and "alpha-precision ×" in text
    assert "slope rounded to float16 (0.199951171875) before multiplying" in text
    assert render.summary_line(rows) == "3 rows: 1 passed, 1 warned, 1 failed: FAIL"


def test_junit_writes_skipped_rows_times_and_counts_that_agree() -> None:
    from dataclasses import replace

    from conformance.records import Skip
    from conformance.render.junit import junit_bytes
    from conformance.render.summary import RunInfo

    clean, warn, spurious = _rows()
    rows = [clean, warn, replace(spurious, alpha=0.25)]  # a key of its own (the rows' keys are unique in a run)
    skip = Skip("cann", "ascend910b1", "reference", "float64", "float64", "forward", 0.2, "no float64 kernel")
    info = RunInfo(skipped=(skip,), seconds={rows[0].key: 0.25, rows[2].key: 1.5}, total_seconds=2.0)
    root = ET.fromstring(junit_bytes(rows, info=info))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert [suite.get(k) for k in ("tests", "failures", "errors", "skipped", "time")] == ["4", "1", "0", "1", "2.000"]
    assert [c.get("time") for c in cases] == ["0.250", None, "1.500", "0.000"]
    assert cases[3].get("name") == "cann[ascend910b1/reference] fp64 forward alpha=0.2"
    assert cases[3].find("skipped").get("message") == "no float64 kernel"
    message = cases[2].find("failure").get("message")
    assert message.startswith("cann fp16 forward alpha=0.25: spurious-nan ×")


def test_the_json_summary_counts_rows_categories_and_skipped_rows() -> None:
    from conformance.records import Skip
    from conformance.render.summary import RunInfo

    skip = Skip("tensorflow", None, None, "float64", "float64", "backward", 0.2, "no")
    doc = report_dict(_rows(), seed=1, versions={}, info=RunInfo(skipped=(skip, skip)))
    summary = doc["summary"]
    assert summary["verdicts"] == {"pass": 1, "warn": 1, "fail": 1, "skipped": 2}
    assert summary["backends"] == {"cann": {"pass": 1, "warn": 0, "fail": 1, "skipped": 0},
                                   "tensorflow": {"pass": 0, "warn": 1, "fail": 0, "skipped": 2}}
    assert list(summary["categories"]) == ["alpha-precision", "spurious-nan"]  # registry order
    assert summary["skipped"] == [{"backend": "tensorflow", "reason": "no", "rows": 2}]
    assert summary["durations"] == {"total_seconds": None, "rows_seconds": None, "backends": []}
    assert validate(doc, SCHEMA) == []
