"""`export-cases DIR` + the runner template + `compare --manifest DIR` reproduce `run`'s rows.

The exports and the runs compared with them use the suite's small batches (``small_batches``):
what is checked is that the round trip gives `run`'s rows, whatever the batches' size."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from conformance.ingest.manifest import RUNNER
from tests.helpers import assert_usage_error, run_cli

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("small_batches")

SELECTION = ["--backend", "torch", "--dtype", "fp16,fp32", "--alpha", "0.2,1/3", "--seed", "7",
             "--max-examples", "10"]


def _runner(root: Path):
    """The runner template exactly as export-cases wrote it, loaded as a module."""
    spec = importlib.util.spec_from_file_location("run_cases", root / RUNNER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def exported(tmp_path: Path, capsys) -> Path:
    root = tmp_path / "cases"
    result = run_cli(["export-cases", str(root), *SELECTION], capsys)
    assert result.code == 0, result.text
    return root


def _play_device(root: Path) -> None:
    """This host plays the device: the template itself, on the cpu."""
    _runner(root).run(root, device=torch.device("cpu"))


def _manifest(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())


def _compare(root: Path, tmp_path: Path, capsys) -> tuple[int, list[dict]]:
    out = tmp_path / "manifest.json.report"
    result = run_cli(["compare", "--manifest", str(root), "--json", str(out)], capsys)
    return result.code, json.loads(out.read_text())["rows"]


def test_the_round_trip_gives_runs_rows(exported, tmp_path, capsys):
    _play_device(exported)
    code, rows = _compare(exported, tmp_path, capsys)
    ran = tmp_path / "run.json"
    expected = run_cli(["run", *SELECTION, "--json", str(ran), "--results-dir", str(tmp_path / "r")], capsys)
    assert code == expected.code
    untimed = lambda found: [{k: v for k, v in r.items() if k != "seconds"} for r in found]
    assert untimed(rows) == untimed(json.loads(ran.read_text())["rows"])  # timings are the one difference
    assert any(r["findings"] for r in rows), "the selection should give triage something to say"


def test_the_manifest_holds_every_planned_row_and_the_inputs_once(exported):
    manifest = _manifest(exported)
    keys = {(r["dtype"], r["direction"], float.fromhex(r["alpha"])) for r in manifest["rows"]}
    assert keys == {(d, dr, a) for d in ("float16", "float32") for dr in ("forward", "backward")
                    for a in (0.2, 1 / 3)}
    inputs = {c["x"] for c in manifest["cases"]} | {c["dy"] for c in manifest["cases"] if c["dy"]}
    assert inputs == {f"inputs/{p.name}" for p in (exported / "inputs").iterdir()}
    assert all(np.load(exported / name, allow_pickle=False).dtype.kind == "f" for name in inputs)


def test_a_defect_in_one_output_fails_its_row_by_category(exported, tmp_path, capsys):
    _play_device(exported)
    manifest = _manifest(exported)
    (row,) = [r for r in manifest["rows"] if (r["dtype"], r["direction"], float.fromhex(r["alpha"]))
              == ("float32", "forward", 0.2)]
    for case in (c for c in manifest["cases"] if c["id"] in row["cases"]):
        x = np.load(exported / case["x"])
        with np.errstate(invalid="ignore", over="ignore"):  # inf * 0.3 and NaN inputs are fine
            y = np.where(x > 0, x, x * np.float32(0.3)).astype(np.float32)
        np.save(exported / case["out"], y)
    code, rows = _compare(exported, tmp_path, capsys)
    (bad,) = [r for r in rows if r["verdict"] == "fail"]
    assert code == 1
    assert (bad["dtype"], bad["direction"]) == ("float32", "forward")
    assert "alpha-mismatch" in [f["category"] for f in bad["findings"] if not f["allowed"]]


def test_a_refused_call_is_rejected_input(exported, tmp_path, capsys):
    _play_device(exported)
    case = _manifest(exported)["cases"][0]
    (exported / case["out"]).unlink()
    (exported / case["rejected"]).write_text("torch refused negative_slope=0.2: the device said no\n")
    _, rows = _compare(exported, tmp_path, capsys)
    findings = [f for r in rows for f in r["findings"] if f["category"] == "rejected-input"]
    assert len(findings) == 1
    assert "the device said no" in findings[0]["summary"] + json.dumps(findings[0]["detail"])


def test_missing_outputs_say_to_run_the_runner(exported, capsys):
    result = run_cli(["compare", "--manifest", str(exported)], capsys)
    assert_usage_error(result, mentions=RUNNER)


def test_an_output_of_the_wrong_dtype_is_named(exported, capsys):
    _play_device(exported)
    case = _manifest(exported)["cases"][0]
    np.save(exported / case["out"], np.zeros(3, np.float64))
    result = run_cli(["compare", "--manifest", str(exported)], capsys)
    assert_usage_error(result, mentions=case["out"])


def test_a_manifest_path_may_not_leave_the_directory(exported, capsys):
    _play_device(exported)
    manifest = _manifest(exported)
    manifest["cases"][0]["x"] = "../../outside.npy"
    (exported / "manifest.json").write_text(json.dumps(manifest))
    result = run_cli(["compare", "--manifest", str(exported)], capsys)
    assert_usage_error(result, mentions="leaves the directory")


def test_export_refuses_a_directory_that_is_not_empty(exported, capsys):
    result = run_cli(["export-cases", str(exported), *SELECTION], capsys)
    assert_usage_error(result, mentions="not empty")


def test_export_refuses_mixed_pairs_the_runner_cannot_compute(tmp_path, capsys):
    result = run_cli(["export-cases", str(tmp_path / "d"), "--backend", "golden", "--dtype", "fp32->fp16",
                      "--alpha", "0.2"], capsys)
    assert_usage_error(result, mentions="same-dtype pairs only")


def test_manifest_and_arrays_are_not_mixed(exported, capsys):
    result = run_cli(["compare", "--manifest", str(exported), "--x", "x.npy"], capsys)
    assert_usage_error(result, mentions="--x cannot be combined")


def test_a_directory_without_a_manifest_says_what_to_pass(tmp_path, capsys):
    result = run_cli(["compare", "--manifest", str(tmp_path)], capsys)
    assert_usage_error(result, mentions="export-cases")
