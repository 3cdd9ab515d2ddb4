"""Reports that CI tools read: the JSON summary and plain numbers, JUnit with skipped rows and times,
the shipped schema files, the GitHub Actions summary and annotations, progress lines on a pipe.

One real ``conformance run`` (a subprocess, its stdout a pipe, as in CI) makes the reports most
tests read: golden (passes), the ``fp16-slope`` CANN variant (warns at 0.2, has no float64), the
example ``max_backend`` (``max(x, a*x)``: fails at alpha 1.5), on the suite's small batches
(what the reports show is their structure, counts and verdicts, not the inputs' size).
The processes these tests start take the numpy paths (:data:`tests.helpers.NUMPY_PATH`): what
they show is a report or a pipe, and the compiled loops give the numpy paths' bits.
"""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from conformance.config import default_config
from conformance.render import github
from conformance.render.console import LineProgress
from conformance.render.export import encode_value
from conformance.render.schema import SCHEMA, schema_file_text, schema_text, validate
from conformance.render.summary import RunInfo
from tests.helpers import NUMPY_PATH, children_on_the_numpy_path, cli_subprocess, run_cli, small_batches_entry

ROOT = Path(__file__).resolve().parents[2]
MIXED = ("run", "--backend", "golden,cann,examples/my_kernel.py:max_backend", "--variant", "fp16-slope",
         "--dtype", "fp16,fp64", "--alpha", "0.2,1.5", "--direction", "forward", "--max-examples", "5")
XS = "{http://www.w3.org/2001/XMLSchema}"


def _run(out: Path) -> subprocess.CompletedProcess:
    """The mixed run, in a process that does not see GitHub Actions' variables (the module-scoped
    fixture is made before the autouse fixture that removes them)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY")}
    argv = [*MIXED, "--json", str(out / "r.json"), "--junit", str(out / "r.xml"), "--results-dir", str(out / "results")]
    return subprocess.run([sys.executable, *small_batches_entry(), *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**env, **NUMPY_PATH, "TF_CPP_MIN_LOG_LEVEL": "3"})


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict, ET.Element, Path]:
    """The run's process, its JSON, its JUnit root, and the directory they are in."""
    out = tmp_path_factory.mktemp("mixed")
    proc = _run(out)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return proc, json.loads((out / "r.json").read_text()), ET.parse(out / "r.xml").getroot(), out


# ----------------------------------------------------------------------------- schema files

def test_the_shipped_json_schema_is_the_schema_the_harness_checks() -> None:
    assert schema_text("json") == schema_file_text()
    assert json.loads(schema_text("json")) == SCHEMA
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_a_real_report_validates_against_the_shipped_schema_file(mixed) -> None:
    _, doc, *_ = mixed
    jsonschema.validate(doc, json.loads(schema_text("json")), cls=jsonschema.Draft202012Validator)
    assert "summary" in doc and all("seconds" in r and "value" in r["max_abs"] for r in doc["rows"])


def test_a_report_without_summary_timings_or_plain_values_is_still_valid(mixed) -> None:
    """A leakyrelu-conformance/1 report of an older harness (kept as a --baseline) still validates."""
    doc = json.loads(json.dumps(mixed[1]))
    del doc["summary"]
    for row in doc["rows"]:
        del row["seconds"]
        for key in ("alpha", "max_abs", "max_rel"):
            del row[key]["value"]
    jsonschema.validate(doc, json.loads(schema_text("json")), cls=jsonschema.Draft202012Validator)
    assert validate(doc, SCHEMA) == []


@pytest.mark.parametrize("breakage", ["summary-extra-field", "verdict-count-negative", "value-a-string"])
def test_the_schema_file_rejects_broken_reports(mixed, breakage: str) -> None:
    doc = json.loads(json.dumps(mixed[1]))
    if breakage == "summary-extra-field":
        doc["summary"]["verdicts"]["ok"] = 1
    elif breakage == "verdict-count-negative":
        doc["summary"]["verdicts"]["fail"] = -1
    else:
        doc["rows"][0]["max_abs"]["value"] = "0.0"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, json.loads(schema_text("json")), cls=jsonschema.Draft202012Validator)


# ----------------------------------------------------------------------------- JSON summary, numbers, versions

def test_the_summary_counts_agree_with_the_rows(mixed) -> None:
    _, doc, *_ = mixed
    rows, summary = doc["rows"], doc["summary"]
    verdicts = [r["verdict"] for r in rows]
    assert summary["rows"] == len(rows) == 10
    assert summary["verdicts"] == {"pass": verdicts.count("pass"), "warn": verdicts.count("warn"),
                                   "fail": verdicts.count("fail"), "skipped": 2}
    assert summary["verdicts"]["fail"] == 2 and summary["verdicts"]["warn"] == 1
    max_backend = summary["backends"]["examples/my_kernel.py:max_backend"]
    assert max_backend == {"pass": 2, "warn": 0, "fail": 2, "skipped": 0}
    assert summary["backends"]["cann[ascend910b1/fp16-slope]"]["skipped"] == 2
    formulation = summary["categories"]["formulation"]
    assert formulation["elements"] == sum(f["count"] for r in rows for f in r["findings"]
                                          if f["category"] == "formulation")
    assert formulation["not_allowed_rows"] == 2
    (skip,) = summary["skipped"]
    assert skip["rows"] == 2 and "float64" in skip["reason"]


def test_the_summary_holds_the_command_line_and_the_config(mixed) -> None:
    _, doc, *_ = mixed
    assert doc["summary"]["command"][:3] == ["conformance", "run", "--backend"]
    assert "examples/my_kernel.py:max_backend" in " ".join(doc["summary"]["command"])
    assert doc["summary"]["config"].startswith(("config: ", "no [tool.conformance] found"))


def test_durations_are_timed_and_add_up(mixed) -> None:
    _, doc, *_ = mixed
    durations, seconds = doc["summary"]["durations"], [r["seconds"] for r in doc["rows"]]
    assert all(isinstance(s, float) and s > 0 for s in seconds)
    assert durations["rows_seconds"] == pytest.approx(sum(seconds), abs=1e-5)
    assert durations["total_seconds"] >= durations["rows_seconds"]
    assert sum(b["seconds"] for b in durations["backends"]) == pytest.approx(sum(seconds), abs=1e-5)


def test_every_value_object_carries_its_plain_number(mixed) -> None:
    _, doc, *_ = mixed
    values = [r[k] for r in doc["rows"] for k in ("alpha", "max_abs", "max_rel")]
    values += [e[k] for r in doc["rows"] for f in r["findings"] for e in f["examples"] for k in ("x", "actual")]
    assert len(values) > 30
    for v in values:
        exact = float.fromhex(v["hex"]) if v["hex"] not in ("inf", "-inf", "nan") else float(v["hex"])
        assert v["value"] == (exact if np.isfinite(exact) else None), v


@pytest.mark.parametrize("special, hex_text", [(float("nan"), "nan"), (float("inf"), "inf"), (-np.inf, "-inf")])
def test_a_non_finite_value_is_null_beside_its_hex(special: float, hex_text: str) -> None:
    found = encode_value(np.float16(special))
    assert found["value"] is None and found["hex"] == hex_text
    json.dumps(found, allow_nan=False)


def test_versions_name_every_framework_that_ran(tmp_path: Path, capsys) -> None:
    pytest.importorskip("jax")
    pytest.importorskip("onnxruntime")
    out = tmp_path / "r.json"
    result = run_cli(["run", "--backend", "jax,onnxruntime", "--dtype", "fp16", "--alpha", "0.2", "--direction",
                      "forward", "--max-examples", "5", "--json", str(out)], capsys)
    assert result.code == 0, result.text
    found = json.loads(out.read_text())["versions"]
    assert {"python", "numpy", "conformance", "jax", "jaxlib", "onnxruntime"} <= set(found)
    assert "torch" not in found and "tensorflow-cpu" not in found  # they did not run


def _without_timings(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc["summary"].pop("durations")
    for row in doc["rows"]:
        row.pop("seconds")
    return doc


def test_everything_but_the_timings_is_the_same_on_a_second_run(mixed, tmp_path: Path) -> None:
    _, doc, _, out = mixed
    assert _run(tmp_path).returncode == 1
    again = json.loads((tmp_path / "r.json").read_text())
    first = json.dumps(_without_timings(doc), indent=2).replace(str(out), "<out>")
    assert json.dumps(_without_timings(again), indent=2).replace(str(tmp_path), "<out>") == first
    assert doc["summary"]["durations"] != again["summary"]["durations"]  # the timings do differ


# ----------------------------------------------------------------------------- JUnit

def test_junit_counts_agree_with_the_testcases_and_the_rows(mixed) -> None:
    _, doc, root, _ = mixed
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(doc["rows"]) + 2
    for element in (root, suite):
        assert element.get("tests") == str(len(cases))
        assert element.get("failures") == "2" and element.get("skipped") == "2" and element.get("errors") == "0"
        assert float(element.get("time")) == pytest.approx(doc["summary"]["durations"]["total_seconds"], abs=1e-3)


def test_junit_skipped_rows_carry_their_reason(mixed) -> None:
    _, _, root, _ = mixed
    skipped = [c for c in root.iter("testcase") if c.find("skipped") is not None]
    assert [c.get("name") for c in skipped] == ["cann[ascend910b1/fp16-slope] fp64 forward alpha=0.2",
                                                 "cann[ascend910b1/fp16-slope] fp64 forward alpha=1.5"]
    assert all("no float64->float64" in c.find("skipped").get("message") for c in skipped)


def test_junit_times_every_row(mixed) -> None:
    _, doc, root, _ = mixed
    times = {c.get("name"): float(c.get("time")) for c in root.iter("testcase") if c.find("skipped") is None}
    assert len(times) == len(doc["rows"]) and all(t >= 0 for t in times.values())
    assert sum(times.values()) == pytest.approx(doc["summary"]["durations"]["rows_seconds"], abs=0.01)


def test_junit_failure_and_warning_messages_name_the_findings(mixed) -> None:
    _, _, root, _ = mixed
    cases = {c.get("name"): c for c in root.iter("testcase")}
    failure = cases["examples/my_kernel.py:max_backend fp16 forward alpha=1.5"].find("failure")
    assert failure.get("message").startswith("examples/my_kernel.py:max_backend fp16 forward alpha=1.5: "
                                             "formulation ×")
    assert "not allowed: computed as max(x, a*x)" in failure.get("message")
    assert failure.text.startswith("Mismatched elements:")
    warned = cases["cann[ascend910b1/fp16-slope] fp16 forward alpha=0.2"]
    assert "warning: alpha-precision ×" in warned.find("system-out").text
    (prop,) = [p for p in warned.iter("property") if p.get("name") == "warning"]
    assert "alpha-precision ×" in prop.get("value") and "allowed:" in prop.get("value")


def _xsd_rules(xsd: ET.Element) -> dict[str, dict]:
    """Element name -> required and allowed attributes (with their types) and allowed children,
    from the subset of XML Schema ``junit.xsd`` uses (named types, attribute groups, sequences, choices)."""
    types = {t.get("name"): t for t in xsd.iter(f"{XS}complexType") if t.get("name")}
    groups = {g.get("name"): g for g in xsd.findall(f"{XS}attributeGroup")}
    rules: dict[str, dict] = {}

    def own(node: ET.Element, tag: str) -> list[ET.Element]:
        """``tag`` descendants of ``node`` that do not belong to a nested element declaration."""
        found = []
        for child in node:
            if child.tag == tag:
                found.append(child)
            if child.tag != f"{XS}element":
                found += own(child, tag)
        return found

    def attributes(body: ET.Element) -> list[ET.Element]:
        refs = [groups[r.get("ref")] for r in own(body, f"{XS}attributeGroup") if r.get("ref")]
        return own(body, f"{XS}attribute") + [a for g in refs for a in own(g, f"{XS}attribute")]

    def visit(element: ET.Element) -> None:
        name = element.get("name")
        if name in rules:
            return
        body = types.get(element.get("type")) or element.find(f"{XS}complexType")
        if body is None:
            rules[name] = {"required": set(), "types": {}, "children": set()}
            return
        children = own(body, f"{XS}element")
        attrs = attributes(body)
        rules[name] = {"required": {a.get("name") for a in attrs if a.get("use") == "required"},
                       "types": {a.get("name"): a.get("type") for a in attrs},
                       "children": {c.get("name") for c in children}}
        for child in children:
            visit(child)

    for top in xsd.findall(f"{XS}element"):
        visit(top)
    return rules


_SIMPLE = {"count": re.compile(r"^\d+$"), "seconds": re.compile(r"^\d+(\.\d+)?$"), "xs:string": re.compile(r"")}


def _xsd_errors(element: ET.Element, rules: dict[str, dict], *, path: str = "") -> list[str]:
    here = f"{path}/{element.tag}"
    rule = rules.get(element.tag)
    if rule is None:
        return [f"{here}: not declared"]
    errors = [f"{here}: missing @{a}" for a in rule["required"] - set(element.attrib)]
    errors += [f"{here}: undeclared @{a}" for a in set(element.attrib) - set(rule["types"])]
    errors += [f"{here}: @{a}={v!r} is not a {rule['types'][a]}" for a, v in element.attrib.items()
               if a in rule["types"] and not _SIMPLE[rule["types"][a]].match(v)]
    for child in element:
        if child.tag not in rule["children"]:
            errors.append(f"{here}: <{child.tag}> not allowed here")
        else:
            errors += _xsd_errors(child, rules, path=here)
    return errors


def test_junit_validates_against_the_shipped_xsd(mixed) -> None:
    rules = _xsd_rules(ET.fromstring(schema_text("junit")))
    assert {"testsuites", "testsuite", "testcase", "failure", "skipped", "error", "system-out"} <= set(rules)
    assert _xsd_errors(mixed[2], rules) == []


def test_the_xsd_check_rejects_what_the_xsd_does_not_declare(mixed) -> None:
    rules = _xsd_rules(ET.fromstring(schema_text("junit")))
    root = ET.fromstring(ET.tostring(mixed[2]))
    case = root.find("testsuite/testcase")
    case.set("colour", "red")
    del case.attrib["name"]
    ET.SubElement(case, "flaky")
    root.set("time", "soon")
    assert sorted(e.split(": ", 1)[1] for e in _xsd_errors(root, rules)) == [
        "<flaky> not allowed here", "@time='soon' is not a seconds", "missing @name", "undeclared @colour"]


def test_junit_validates_with_lxml_when_it_is_installed(mixed) -> None:
    etree = pytest.importorskip("lxml.etree", reason="lxml is not installed: the XSD subset check above stands in")
    schema = etree.XMLSchema(etree.fromstring(schema_text("junit").encode()))
    schema.assertValid(etree.fromstring(ET.tostring(mixed[2])))


# ----------------------------------------------------------------------------- progress on a pipe

def test_run_on_a_pipe_prints_a_line_per_finished_backend_on_stderr(mixed) -> None:
    proc, *_ = mixed
    lines = [line for line in proc.stderr.splitlines() if line.startswith("conformance progress: ")]
    assert [line.split(";")[0] for line in lines] == [
        "conformance progress: golden done (4 rows)", "conformance progress: cann done (2 rows)",
        "conformance progress: examples/my_kernel.py:max_backend done (4 rows)", "conformance progress: finished"]
    assert "10/10 rows" in lines[-1]


def test_selftest_on_a_pipe_prints_a_line_per_variant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    children_on_the_numpy_path(monkeypatch)
    proc = cli_subprocess("selftest", "--variant", "grad-at-zero-one", cwd=tmp_path, small_batches=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("selftest progress: ")]
    assert [line.split(";")[0] for line in lines] == ["selftest progress: reference done",
                                                      "selftest progress: grad-at-zero-one done"]
    assert lines[-1].split("; ")[1].startswith("2/2 variants")


def test_sweep_on_a_pipe_prints_its_progress_on_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    children_on_the_numpy_path(monkeypatch)
    proc = cli_subprocess("sweep", "--backend", "golden", "--dtype", "fp32", "--range", "0xbf000000:0xbf010000",
                          "--store", str(tmp_path / "s.sqlite"), "--workers", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("sweep progress: finished")]
    assert re.search(r"; [\d,]+/[\d,]+ patterns, \d+ s$", line)


def test_line_progress_prints_every_n_seconds_while_a_backend_runs() -> None:
    now, out = [0.0], io.StringIO()
    progress = LineProgress(stream=out, every=10, clock=lambda: now[0])
    with progress:
        task = progress.add_task("run", total=4)
        for step in (3.0, 8.0, 12.0, 25.0):  # seconds at which each row finishes
            now[0] = step
            progress.update(task, advance=1, group="slow")
    assert out.getvalue().splitlines() == ["run progress: running slow; 3/4 rows, 12 s",
                                           "run progress: running slow; 4/4 rows, 25 s",
                                           "run progress: slow done (4 rows); 4/4 rows, 25 s",
                                           "run progress: finished; 4/4 rows, 25 s"]


def test_line_progress_is_silent_when_quiet() -> None:
    out = io.StringIO()
    with LineProgress(stream=out, disable=True) as progress:
        progress.update(progress.add_task("run", total=1), advance=1, group="a")
    assert out.getvalue() == ""


# ----------------------------------------------------------------------------- GitHub Actions

def test_github_summary_and_annotations_from_a_run(tmp_path: Path, capsys, monkeypatch) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = run_cli(["run", "--backend", "golden,examples/my_kernel.py:max_backend", "--dtype", "fp16",
                      "--alpha", "0.2,1.5", "--direction", "forward", "--max-examples", "5", "--results-dir",
                      str(tmp_path / "results")], capsys, cwd=ROOT)
    assert result.code == 1
    text = summary.read_text()
    assert text.startswith("# earlier step\n## LeakyReLU conformance: FAIL\n")
    assert "4 rows: 3 passed, 0 warned, 1 failed: FAIL" in text
    assert "| examples/my_kernel.py:max_backend | fp16→fp16 | forward | 683 | formulation ×" in text
    assert "### Failing rows" in text and "alpha=1.5: formulation ×" in text
    errors = [line for line in result.out.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1
    assert errors[0].startswith("::error title=examples/my_kernel.py%3Amax_backend fp16 forward "
                                "alpha=1.5::examples/my_kernel.py:max_backend")


def test_outside_github_actions_nothing_is_written(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    result = run_cli(["run", "--backend", "golden", "--dtype", "fp16", "--alpha", "0.2", "--direction", "forward",
                      "--max-examples", "5"], capsys, cwd=tmp_path)
    assert result.code == 0 and "::" not in result.out
    assert list(tmp_path.iterdir()) == []


def test_warned_rows_are_warning_annotations_and_newlines_are_escaped(mixed) -> None:
    from conformance.records import Finding, Row

    base = _one_row()
    warned = Row(**{**base.__dict__, "verdict": "warn",
                    "findings": (Finding("alpha-precision", 3, False, "slope rounded\nto fp16", {}, ()),)})
    out = io.StringIO()
    github.publish([warned], info=RunInfo(), environ={"GITHUB_ACTIONS": "true"}, out=out)
    (line,) = out.getvalue().splitlines()
    assert line.startswith("::warning title=") and "slope rounded%0Ato fp16" in line


def _one_row():
    from conformance.judge.evaluate import evaluate
    from conformance.records import BackendResult
    from conformance.reference import golden as ref

    x = np.linspace(-2, 2, 64, dtype=np.float16)
    return evaluate(x, 0.2, BackendResult(ref.forward(x, 0.2)), direction="forward", backend="golden",
                    config=default_config())


def test_an_unwritable_step_summary_is_one_warning_line(tmp_path: Path, capsys) -> None:
    github.publish([_one_row()], info=RunInfo(), environ={"GITHUB_STEP_SUMMARY": str(tmp_path / "no" / "x.md")})
    assert "GITHUB_STEP_SUMMARY" in capsys.readouterr().err



def test_the_schema_files_are_package_data() -> None:
    import fnmatch
    import tomllib

    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = [p.name for p in (ROOT / "conformance" / "schemas").iterdir() if p.suffix in (".json", ".xsd")]
    assert sorted(shipped) == ["junit.xsd", "report.schema.json"]
    assert all(any(fnmatch.fnmatch(name, pattern) for pattern in table["conformance.schemas"]) for name in shipped)


def test_the_no_change_script_masks_every_timing_of_a_report(mixed) -> None:
    """benchmarks/unchanged.py compares whole reports: the timing keys are the ones it masks."""
    from benchmarks import unchanged

    _, doc, _, out = mixed
    masked = unchanged.normalise(doc, paths={str(out): "<out>"})
    durations = masked["summary"]["durations"]
    assert durations["total_seconds"] == durations["rows_seconds"] == "<time>"
    assert {b["seconds"] for b in durations["backends"]} == {"<time>"}
    assert {r["seconds"] for r in masked["rows"]} == {"<time>"}
    assert masked["rows"][0]["elements"] == doc["rows"][0]["elements"]  # the rest is kept
