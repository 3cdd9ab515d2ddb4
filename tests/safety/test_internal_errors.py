"""No traceback reaches the user: internal errors exit 3 with one line, a saved traceback and a
partial report; deep TOML and JSON, and export-cases to a non-directory, are exit 2 in one line."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from conformance import guard, interrupts, suite
from conformance.config import default_config
from tests.helpers import assert_usage_error, error_lines, run_cli

GOLDEN = ["run", "--backend", "golden", "--dtype", "fp16", "--direction", "forward", "--max-examples", "5",
          "--alpha", "0.3", "--alpha", "0.1", "--alpha", "0.2"]
STALE = "an older report that said PASS\n"


def _fail_on_second_row(monkeypatch, error: BaseException) -> None:
    calls = {"n": 0}
    real = suite.run_row

    def failing(spec, inputs, *, options):
        calls["n"] += 1
        if calls["n"] == 2:
            raise error
        return real(spec, inputs, options=options)

    monkeypatch.setattr(suite, "run_row", failing)


def test_an_internal_error_mid_run_exits_3_and_keeps_the_finished_rows(tmp_path: Path, capsys,
                                                                       monkeypatch) -> None:
    (tmp_path / "r.json").write_text(STALE)
    _fail_on_second_row(monkeypatch, RuntimeError("a bug\nwith a second line"))
    result = run_cli([*GOLDEN, "--json", "r.json"], capsys, cwd=tmp_path)
    assert result.code == 3, result.text
    lines = error_lines(result.err)
    assert len(lines) == 1 and "internal error: RuntimeError: a bug" in lines[0]
    assert "Traceback" not in result.text
    saved = Path(re.search(r"traceback saved to (\S+);", lines[0]).group(1))
    assert "Traceback" in saved.read_text() and "a bug" in saved.read_text()
    saved.unlink()
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["partial"] is True and doc["verdict"] == "fail" and len(doc["rows"]) == 1


def test_the_users_ctrl_c_inside_a_backend_call_still_stops_the_run(tmp_path: Path, capsys,
                                                                    monkeypatch) -> None:
    """Only a KeyboardInterrupt the backend raises itself is a finding; the signal's stops the run."""
    calls = {"n": 0}
    real = guard.call

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 4:
            raise interrupts.Interrupted()
        return real(*args, **kwargs)

    monkeypatch.setattr(guard, "call", interrupted)
    result = run_cli([*GOLDEN, "--json", "r.json"], capsys, cwd=tmp_path)
    assert result.code == 130, result.text
    assert json.loads((tmp_path / "r.json").read_text())["partial"] is True


def test_a_keyboard_interrupt_raised_by_code_is_not_a_signal() -> None:
    with interrupts.sigterm_as_interrupt():
        assert not interrupts.from_signal(KeyboardInterrupt())
        assert interrupts.from_signal(interrupts.Interrupted()) and interrupts.from_signal(interrupts.Terminated())
    assert interrupts.from_signal(KeyboardInterrupt())  # without the CLI's handlers nothing tells them apart


def _deep_toml(depth: int) -> str:
    return "max_ulp = " + "[" * depth + "]" * depth + "\n"


@pytest.mark.parametrize("where", ["--config", "pyproject.toml"])
def test_a_5000_deep_toml_is_exit_2(tmp_path: Path, capsys, where: str) -> None:
    if where == "--config":
        (tmp_path / "deep.toml").write_text(_deep_toml(5000))
        argv = [*GOLDEN, "--config", "deep.toml"]
    else:
        (tmp_path / "pyproject.toml").write_text("[tool.conformance]\n" + _deep_toml(5000))
        argv = GOLDEN
    assert_usage_error(run_cli(argv, capsys, cwd=tmp_path), mentions="nests too deeply")


def test_deep_json_for_diff_and_baseline_is_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    assert_usage_error(run_cli(["diff", "deep.json", "deep.json"], capsys, cwd=tmp_path),
                       mentions="nests too deeply")
    assert_usage_error(run_cli([*GOLDEN, "--baseline", "deep.json"], capsys, cwd=tmp_path),
                       mentions="--baseline deep.json nests too deeply")


@pytest.mark.parametrize("target, mentions", [("/dev/null", "is not a directory"),
                                              ("/proc/nope", "cannot write there")])
def test_export_cases_to_a_path_it_cannot_use_is_exit_2(capsys, target: str, mentions: str) -> None:
    if not Path("/proc").is_dir():
        pytest.skip("needs /proc")
    result = run_cli(["export-cases", target, "--dtype", "fp16", "--alpha", "0.2", "--max-examples", "2"], capsys)
    assert_usage_error(result, mentions=mentions)


def test_a_backend_returning_the_wrong_size_is_a_finding_not_a_crash() -> None:
    class Short:
        name, profile, variant = "short", None, None

        def supports(self, *_: object) -> bool:
            return True

        def forward(self, x, alpha, *, out_dtype=None):
            return suite.BackendResult(x[:-1].copy())

    spec = suite.RowSpec("short", None, None, "float16", "float16", "forward", 0.2, given=Short())
    row = suite.run_batch(spec, suite.InputBatch("t", np.ones(3, np.float16)), config=default_config())
    assert row.verdict == "fail" and row.findings[0].category == "rejected-input"
    assert "expected 3 elements of float16" in row.findings[0].summary
