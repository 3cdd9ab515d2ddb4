"""CI baselines: ``conformance diff`` and ``run --baseline``, across reports made by real runs.

The reports: the emulated CANN kernel's ``reference`` variant and its ``default-slope``
defect (which computes with slope 0), and the same defect with fewer hypothesis
examples (so its findings are smaller), on fp16 forward at two slopes, on the suite's small
batches (every edge value, the drawn examples and a short last block).
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance import cli
from conformance.judge import baseline
from conformance.judge.baseline import Size
from tests.helpers import assert_usage_error, run_cli

SELECT = ["--backend", "cann", "--dtype", "fp16", "--alpha", "0.2,0.01", "--direction", "forward", "--max-examples",
          "20", "-q"]
RUNS = {"reference": ["--variant", "reference"], "slope": ["--variant", "default-slope"],
        "slope-small": ["--variant", "default-slope", "--max-examples", "5"]}  # the last --max-examples counts


#: The reports and the runs compared with them: the same small batches (a diff is about counts).
pytestmark = pytest.mark.usefixtures("small_batches")


@pytest.fixture(scope="module")
def reports(small_batches, tmp_path_factory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("reports")
    made = {}
    for name, extra in RUNS.items():
        made[name] = where / f"{name}.json"
        cli.main(["run", *SELECT, *extra, "--json", str(made[name]), "--results-dir", str(where / "res")])
    return made


def _diff(old: Path, new: Path, capsys, *extra: str):
    return run_cli(["diff", str(old), str(new), *extra], capsys)


def _statuses(doc: dict) -> list[tuple[str, str, bool]]:
    return sorted((c["category"], c["status"], c["gates"]) for c in doc["changes"])


def test_a_new_failing_finding_fails_the_diff_and_is_listed_per_row(reports, capsys, tmp_path) -> None:
    out = tmp_path / "d.json"
    result = _diff(reports["reference"], reports["slope"], capsys, "--json", str(out))
    assert result.code == 1, result.text
    doc = json.loads(out.read_text())
    assert doc["verdict"] == "fail"
    new = [c for c in doc["changes"] if c["status"] == "new"]
    assert {c["category"] for c in new} == {"alpha-mismatch"} and all(c["gates"] for c in new)
    assert {c["row"].split(" alpha=")[1] for c in new} == {"0.2", "0.01"}
    assert "reference -> ascend910b1/default-slope" in new[0]["row"]
    assert {(c["key"]["variant"], c["key"]["dtype"], c["key"]["alpha"]["decimal"]) for c in new} == \
        {("default-slope", "float16", "0.2"), ("default-slope", "float16", "0.01")}
    assert "alpha-mismatch" in result.out and "new" in result.out and "FAIL" in result.out


def test_the_reverse_diff_only_fixes_and_passes(reports, capsys, tmp_path) -> None:
    out = tmp_path / "d.json"
    result = _diff(reports["slope"], reports["reference"], capsys, "--json", str(out))
    doc = json.loads(out.read_text())
    assert result.code == 0 and doc["verdict"] == "pass", result.text
    assert ("alpha-mismatch", "fixed", False) in _statuses(doc)
    assert not any(c["gates"] for c in doc["changes"])


def test_a_grown_finding_gates_and_a_shrunk_one_does_not(reports, capsys, tmp_path) -> None:
    grown, shrunk = tmp_path / "g.json", tmp_path / "s.json"
    assert _diff(reports["slope-small"], reports["slope"], capsys, "--json", str(grown)).code == 1
    assert _diff(reports["slope"], reports["slope-small"], capsys, "--json", str(shrunk)).code == 0
    assert _statuses(json.loads(grown.read_text())) == [("alpha-mismatch", "grown", True)] * 2
    assert _statuses(json.loads(shrunk.read_text())) == [("alpha-mismatch", "shrunk", False)] * 2


def test_identical_reports_have_no_changes(reports, capsys) -> None:
    result = _diff(reports["slope"], reports["slope"], capsys)
    assert result.code == 0 and "0 new, 0 grown, 0 now-fails, 0 shrunk, 0 fixed" in result.out


def test_run_with_a_baseline_gates_only_on_what_is_new_or_larger(reports, capsys, tmp_path) -> None:
    run = ["run", *SELECT, "--variant", "default-slope", "--results-dir", str(tmp_path)]
    same = run_cli([*run, "--baseline", str(reports["slope"])], capsys)
    assert same.code == 0 and "nothing new or grown fails: PASS" in same.out, same.text
    assert "2 warned, 0 failed: PASS" in same.out  # the baseline already had those failures
    worse = run_cli([*run, "--baseline", str(reports["reference"])], capsys)
    assert worse.code == 1 and "2 new or grown failing: FAIL" in worse.out, worse.text
    smaller = run_cli([*run, "--baseline", str(reports["slope-small"])], capsys)
    assert smaller.code == 1 and "2 grown" in smaller.out


def test_a_baseline_run_gives_one_verdict_on_console_exit_json_and_junit(reports, capsys, tmp_path) -> None:
    """Known failures warn everywhere; a new failure fails everywhere."""
    run = ["run", *SELECT, "--variant", "default-slope", "--results-dir", str(tmp_path)]
    for old, code, verdict in (("slope", 0, "pass"), ("reference", 1, "fail")):
        out, xml = tmp_path / f"{old}.json", tmp_path / f"{old}.xml"
        result = run_cli([*run, "--baseline", str(reports[old]), "--json", str(out), "--junit", str(xml)],
                         capsys)
        doc, suite = json.loads(out.read_text()), ET.parse(xml).getroot().find("testsuite")
        failed = sum(r["verdict"] == "fail" for r in doc["rows"])
        assert result.code == code and doc["verdict"] == verdict, result.text
        assert int(suite.get("failures")) == failed == (2 if code else 0)
        assert result.out.splitlines()[-1].endswith(verdict.upper())
        known = [n for r in doc["rows"] for n in r.get("notes", ()) if "fails as in the baseline" in n]
        assert len(known) == (0 if code else 2)


@pytest.mark.parametrize(("content", "mentions"), [
    ("{not json", "is not JSON"),
    ('{"schema": "leakyrelu-conformance/1", "verdict": "pass"}', "missing 'seed'"),
    ('{"schema": "other/2", "verdict": "pass", "seed": 0, "versions": {}, "rows": []}', "expected 'leakyrelu"),
])
def test_an_invalid_report_is_exit_2_in_one_line(content, mentions, reports, capsys, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert_usage_error(_diff(bad, reports["slope"], capsys), mentions=mentions)
    assert_usage_error(_diff(reports["slope"], bad, capsys), mentions=mentions)
    assert_usage_error(run_cli(["run", *SELECT, "--baseline", str(bad)], capsys), mentions=mentions)


def test_a_missing_report_is_exit_2(reports, capsys, tmp_path) -> None:
    assert_usage_error(_diff(tmp_path / "none.json", reports["slope"], capsys), mentions="does not exist")


def test_the_json_report_may_not_overwrite_the_baseline(reports, capsys) -> None:
    result = run_cli(["run", *SELECT, "--baseline", str(reports["slope"]), "--json", str(reports["slope"])], capsys)
    assert_usage_error(result, mentions="is the --baseline input")


@pytest.mark.parametrize(("old", "new", "expected"), [
    (None, Size(3, 3, False), "new"),
    (Size(3, 3, False), None, "fixed"),
    (Size(3, 3, False), Size(4, 3, False), "grown"),
    (Size(3, 3, False), Size(2, 5, False), "grown"),  # fewer elements, more of them outside tolerance
    (Size(3, 3, False), Size(3, 1, False), "shrunk"),
    (Size(3, 0, True), Size(3, 0, False), "now-fails"),  # a policy no longer allows it
    (Size(3, 3, False), Size(3, 3, False), None),
])
def test_status_definitions(old, new, expected) -> None:
    assert baseline.status(old, new) == expected


def test_rows_missing_from_the_new_report_are_listed_but_do_not_gate(reports) -> None:
    rows = json.loads(reports["slope"].read_text())["rows"]
    diff = baseline.compare(rows, rows[:1])
    assert diff.verdict == "pass" and diff.changes == ()
    assert len(diff.only_old) == 1 and diff.only_old[0].endswith("alpha=0.01")
