"""End-to-end CLI: `conformance run`, `replay` and `selftest` in-process (narrow selections), one real process."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from conformance.cases import corpus
from conformance.render import export
from tests.helpers import (
    CliResult,
    assert_usage_error,
    children_on_the_numpy_path,
    cli_subprocess,
    keep_small_batches,
    run_cli,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NARROW = ["--dtype", "fp16", "--alpha", "0.2", "--direction", "forward", "--max-examples", "5"]


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """``cli(*args)``: ``conformance ARGS`` in-process, in ``tmp_path``."""
    def run(*args: str) -> CliResult:
        return run_cli(args, capsys, cwd=tmp_path)

    return run


def _strict_json(path: Path) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"non-strict JSON constant {name}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_run_passes_on_a_correct_backend_and_writes_valid_reports(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Smoke test in a real process: `python -m conformance run`, exit 0, both reports (golden and the
    example exact kernel: backends that import no framework, on the numpy path; the property is the process's)."""
    children_on_the_numpy_path(monkeypatch)
    exact = f"{EXAMPLES / 'my_kernel.py'}:backend"
    proc = cli_subprocess("run", "--backend", f"golden,{exact}", *NARROW, "--json", "r.json", "--junit", "j.xml",
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = _strict_json(tmp_path / "r.json")
    assert export.validate(doc, export.SCHEMA) == []
    assert doc["verdict"] == "pass" and {r["backend"] for r in doc["rows"]} == {"golden", exact}
    assert all(r["elements"] > 1 << 16 for r in doc["rows"])  # the 16-bit sweep is in every row
    assert len(list(ET.parse(tmp_path / "j.xml").getroot().iter("testcase"))) == len(doc["rows"])
    assert "2 rows: 2 passed" in proc.stdout and "Traceback" not in proc.stderr


def test_run_fails_on_a_seeded_tail_defect_and_saves_a_reproducer(cli, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch)  # the verdict, the categories and the saved reproducer
    proc = cli("run", "--backend", "cann", "--variant", "tail-overrun", *NARROW, "--json", "r.json",
               "--results-dir", "res")
    assert proc.code == 1, proc.out + proc.err
    (row,) = _strict_json(tmp_path / "r.json")["rows"]
    cats = {f["category"] for f in row["findings"]}
    assert row["verdict"] == "fail" and cats & {"out-of-bounds-write", "tail-block"}
    reproducers = [f["reproducer"] for f in row["findings"] if f["reproducer"]]
    assert reproducers and all((tmp_path / p).is_file() for p in reproducers)
    assert "reproducer:" in proc.out and "1 failed" in proc.out


def test_replay_reproduces_the_finding_then_reports_a_fixed_case(cli, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch)
    cli("run", "--backend", "cann", "--variant", "default-slope", *NARROW, "--results-dir", "res")
    (path,) = sorted((tmp_path / "res").glob("*.npz"))
    proc = cli("replay", str(path))
    assert proc.code == 1 and "alpha-mismatch" in proc.out and "still fails" in proc.out
    rep = corpus.load(path)  # the same case on the reference kernel passes: exit 0
    fixed = corpus.save(corpus.Reproducer(rep.case, "cann", rep.profile, "reference", rep.category), tmp_path / "f.npz")
    proc = cli("replay", str(fixed))
    assert proc.code == 0 and "now passes" in proc.out, proc.out + proc.err


def test_profile_ascend910a_reports_saturation(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch)  # the edge values near the fp16 limits are in them
    proc = cli("run", "--backend", "cann", "--profile", "ascend910a", *NARROW, "--json", "r.json",
               "--results-dir", "res")
    (row,) = _strict_json(tmp_path / "r.json")["rows"]
    (found,) = [f for f in row["findings"] if f["category"] == "saturation"]
    assert found["allowed"] and row["verdict"] == "warn" and proc.code == 0  # 910A runs only saturation mode


def test_same_seed_same_json_rows(cli, tmp_path: Path) -> None:
    args = ["run", "--backend", "torch", "--dtype", "fp32", "--alpha", "0.01", "--direction", "forward",
            "--max-examples", "10", "--seed", "5"]
    for name in ("a", "b"):
        assert cli(*args, "--json", f"{name}.json").code == 0
    a, b = ([{k: v for k, v in r.items() if k != "seconds"} for r in _strict_json(tmp_path / f"{n}.json")["rows"]]
            for n in ("a", "b"))  # the rows' timings are the one part that differs
    assert a == b and a[0]["mismatches"] > 0  # fp32(0.01) double rounding: the rows carry real counts


@pytest.mark.parametrize("args, message", [
    (["run", "--backend", "mxnet"], "--backend 'mxnet' is unknown"),
    (["run", "--dtype", "int8"], "--dtype 'int8' is unknown"),
    (["run", "--profile", "ascend999"], "--profile 'ascend999' is unknown"),
    (["run", "--variant", "nope"], "--variant 'nope' is unknown"),
    (["run", "--alpha", "nan"], "must be finite"),
    (["run", "--alpha", "inf"], "must be finite"),
    (["run", "--alpha", "abc"], "is not a number"),
    (["run", "--seed", "-1"], "--seed must be >= 0"),
    (["run", "--backend", "torch", "--variant", "tail-overrun"], "apply to the cann backend"),
    (["run", "--config", "missing.toml"], "does not exist"),
    (["run", "--backend", "cann", "--dtype", "fp64"], "the selection runs no rows"),
    (["run", "--backend", "torch", "--json", "r.json/x.json"], "--json r.json/x.json: cannot write there"),
    (["run", "--backend", "torch", "--junit", "."], "is not a file path"),
    (["run", "--backend", "torch", "--results-dir", "r.json"], "--results-dir r.json is not a directory"),
    (["run", "--backend", "torch", "--alpha", ""], "--alpha needs a value"),
    (["run", "--backend", "torch", "--max-examples", "100000"], "--max-examples must be >= 0 and <= 10,000"),
    (["tiling", "--numel", "99999999999", "--dtype", "fp32"], "--numel must be in 0..2,147,483,647"),
    (["tiling", "--numel", "1000", "--dtype", "fp32", "--usable-fraction", "1e-6"], "larger --usable-fraction"),
    (["replay", "missing.npz"], "does not exist"),
    (["selftest", "--variant", "nope"], "unknown variant"),
])
def test_usage_errors_exit_2_with_one_line(cli, tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "r.json").write_text("a file, so nothing can be created below it")
    assert_usage_error(cli(*args), mentions=message)


def test_replay_refuses_a_pickled_npy_posing_as_npz(cli, tmp_path: Path) -> None:
    np.save(tmp_path / "p.npy", np.array([object()], dtype=object), allow_pickle=True)
    (tmp_path / "p.npz").write_bytes((tmp_path / "p.npy").read_bytes())
    proc = cli("replay", "p.npz")
    assert_usage_error(proc, mentions="not an .npz (zip) file")


def test_selftest_catches_a_defect_and_passes_the_reference(cli, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch)  # the command's verdict and table; `make selftest` runs it at full size
    # fp16-slope is a defect on ascend950 (its Ascend C kernel computes fp16 in fp32); on 910B it is the kernel
    proc = cli("selftest", "--profile", "ascend950", "--variant", "grad-at-zero-one", "--variant", "fp16-slope")
    assert proc.code == 0, proc.out + proc.err
    assert "grad-at-zero" in proc.out and "3/3 variants caught and named" in proc.out
    # fp16-slope stays within tolerance and the reference's fp32 rows also show alpha-precision:
    # only a per-row baseline keeps the defect visible
    assert "alpha-precision" in proc.out


@pytest.mark.parametrize("jobs", ["0", "two", "-1"])
def test_jobs_must_be_a_whole_number_of_processes(cli, jobs: str) -> None:
    assert_usage_error(cli("run", "--backend", "golden", *NARROW, "--jobs", jobs), mentions="--jobs")


def _without(monkeypatch, *modules: str) -> None:
    """The frameworks ``modules`` look uninstalled to the backends' checks."""
    import importlib.util

    from conformance import extras as loading

    real = importlib.util.find_spec
    monkeypatch.setattr(loading.importlib.util, "find_spec",
                        lambda name, *a: None if name.partition(".")[0] in modules else real(name, *a))


def test_the_default_run_runs_what_is_installed_and_names_the_rest(monkeypatch, capsys, tmp_path) -> None:
    keep_small_batches(monkeypatch)
    _without(monkeypatch, "torch", "tensorflow", "jax", "keras", "onnxruntime")
    out = tmp_path / "r.json"
    result = run_cli(["run", "--dtype", "fp16", "--alpha", "0.2", "--direction", "forward", "--jobs", "1",
                      "--json", str(out)], capsys, cwd=tmp_path)
    assert result.code == 0, result.err
    assert "not run: backend torch: torch is not installed; pip install 'conformance[torch]'" in result.err
    assert "not run: backend tensorflow: tensorflow is not installed" in result.err
    assert {r["backend"] for r in json.loads(out.read_text())["rows"]} == {"golden", "cann"}


def test_a_default_run_with_nothing_installed_says_what_to_install(monkeypatch, capsys, tmp_path) -> None:
    from conformance.commands import selection

    monkeypatch.setattr(selection, "installed_defaults", lambda: ((), ("backend torch: not installed",)))
    result = run_cli(["run", "--dtype", "fp16"], capsys, cwd=tmp_path)
    assert result.code == 2 and "no default backend can run here" in result.err
    assert len(result.err.strip().splitlines()) == 2  # the backend's line and the one-line error


@pytest.mark.parametrize("html", [False, True], ids=["no-html", "html"])
def test_run_measures_the_plots_only_for_an_html_report(cli, monkeypatch, html: bool) -> None:
    from conformance.commands import run as run_command

    seen = []
    real = run_command.execute_suite
    monkeypatch.setattr(run_command, "execute_suite", lambda sel, options, *a, **k: seen.append(options.plots)
                        or real(sel, options, *a, **k))
    result = cli("run", "--backend", "golden", *NARROW, "--json", "r.json", *(["--html", "r.html"] if html else []))
    assert result.code == 0, result.text
    assert seen == [html]
