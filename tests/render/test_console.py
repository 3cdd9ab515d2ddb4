"""The console reads at a glance: folded lines, panels for failing rows, bounded numbers,
shaped indices, non-zero percentages, and nothing left behind in the user's directory."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from conformance.config import default_config
from conformance.judge.evaluate import evaluate
from conformance.records import BackendResult, Row
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.render import console as show
from conformance.render.export import SCHEMA, report_dict, validate
from conformance.render.messages import failure_message, mismatch_line
from conformance.render.text import index_text, percent, position, short_int
from tests.helpers import assert_usage_error, run_cli

CONFIG = default_config()
X16 = np.linspace(-4, 4, 4096, dtype=np.float16)
BACKENDS, DTYPES, DIRECTIONS, ALPHAS = ("golden", "torch"), ("fp16",), ("forward", "backward"), ("0", "0.2", "0.3")
SELECTION = ["--backend", ",".join(BACKENDS), "--dtype", ",".join(DTYPES), "--direction",
             ",".join(DIRECTIONS), "--alpha", ",".join(ALPHAS), "--max-examples", "5"]
#: title, header, rule, skipped note, the legend of a mark, the environment (two lines at 120
#: columns), verdict line, and one line to spare
OVERHEAD = 9


def _row(actual: np.ndarray, *, alpha: float = 0.2, backend: str = "cann", x: np.ndarray = X16,
         label: str = "y.npy", shape: tuple[int, ...] | None = None) -> Row:
    return evaluate(x, alpha, BackendResult(actual), direction="forward", backend=backend,
                    config=CONFIG, label=label, shape=shape)


def _verdicts() -> tuple[Row, Row, Row]:
    """A passing, a warning (fp16 slope: allowed) and a failing (a spurious NaN) row."""
    clean = _row(ref.forward(X16, 0.2))
    warn = _row(ref.forward(X16, 0.2, semantics=Semantics(slope_dtype="float16")), backend="tensorflow")
    bad = ref.forward(X16, 0.2)
    bad[7] = np.nan
    return clean, warn, _row(bad)


def _text(rows: list[Row], view: show.View) -> str:
    console = Console(record=True, width=120)
    show.render_rows(rows, console=console, view=view)
    return console.export_text()


# ----------------------------------------------------------------------------- hypothesis storage

def test_a_run_leaves_no_hypothesis_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """First in this file: hypothesis caches what it wrote once per process, so only a
    process's first draw shows the leak (the next test checks the redirect directly)."""
    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY", raising=False)
    result = run_cli(["run", "--backend", "golden", "--dtype", "bf16", "--alpha", "0.1", "--direction",
                      "forward", "--max-examples", "3", "--seed", "7"], capsys, cwd=tmp_path)
    assert result.code == 0, result.text
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_private_storage_redirects_hypothesis_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from hypothesis import configuration

    from conformance.cases.strategies import private_storage

    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY", raising=False)
    before = configuration.storage_directory("constants").path
    with private_storage():
        inside = configuration.storage_directory("constants").path
        assert inside != before and not inside.is_relative_to(Path.cwd())
    assert configuration.storage_directory("constants").path == before


# ----------------------------------------------------------------------------- line budget

def test_a_passing_multi_row_run_prints_one_line_per_group(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    result = run_cli(["run", *SELECTION], capsys, cwd=tmp_path)
    assert result.code == 0, result.text
    lines = result.out.splitlines()
    groups = len(DTYPES) * len(DIRECTIONS)  # per backend
    rows = len(BACKENDS) * groups * len(ALPHAS)
    folded = [line.split(" ", 1)[0] for line in lines if line.split(" ", 1)[0] in BACKENDS]
    assert folded == ["golden"] + ["torch"] * groups, result.out  # golden passes everywhere: one line
    assert len(lines) <= groups + OVERHEAD, result.out
    assert lines[-1].startswith(f"{rows} rows: ") and lines[-1].endswith("PASS")
    assert not any(line.startswith(("╭", "│")) for line in lines), "no panels on a passing run"
    assert max(map(len, lines)) <= 120


def test_quiet_prints_only_the_verdict_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(["run", *SELECTION, "-q"], capsys, cwd=tmp_path)
    assert result.code == 0 and result.out.splitlines() == [result.out.strip()], result.text
    assert result.out.strip().endswith(": PASS")


def test_unknown_details_level_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_usage_error(run_cli(["run", *SELECTION, "--details", "some"], capsys, cwd=tmp_path),
                       mentions="--details")


def test_compare_takes_the_same_view_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "x.npy", X16)
    np.save(tmp_path / "y.npy", ref.forward(X16, 0.2, semantics=Semantics(slope_dtype="float16")))
    args = ["compare", "--x", "x.npy", "--y", "y.npy", "--alpha", "0.2"]
    default = run_cli(args, capsys, cwd=tmp_path)
    warn = run_cli([*args, "--details", "warn"], capsys, cwd=tmp_path)
    quiet = run_cli([*args, "-q"], capsys, cwd=tmp_path)
    assert (default.code, warn.code, quiet.code) == (0, 0, 0), default.text + warn.text + quiet.text
    assert "Mismatched elements" not in default.out and "Mismatched elements" in warn.out
    assert quiet.out.strip() == "1 row: 0 passed, 1 warned, 0 failed: PASS"


# ----------------------------------------------------------------------------- panels

def test_panels_only_for_failing_rows_by_default() -> None:
    text = _text(list(_verdicts()), show.View())
    assert "FAIL  cann" in text and "WARN  tensorflow" not in text
    assert "spurious-nan ×1" in text and "alpha-precision ×" in text  # the folded line still names it


def test_details_warn_adds_warning_panels_and_all_adds_the_per_alpha_table() -> None:
    rows = list(_verdicts())
    warn, every = _text(rows, show.View(details="warn")), _text(rows, show.View(details="all"))
    assert "WARN  tensorflow" in warn and "FAIL  cann" in warn and "every row" not in warn
    assert "every row" in every and "WARN  tensorflow" in every
    assert _text(rows, show.View(quiet=True)) == ""


def test_folded_line_names_the_alphas_that_did_not_pass() -> None:
    rows = [_row(ref.forward(X16, a, semantics=Semantics(slope_dtype="float16")), alpha=a, backend="tensorflow")
            for a in (0.0, 0.1, 0.2, 1.0)]
    bad = ref.forward(X16, 0.3)
    bad[0] = np.nan
    rows.append(_row(bad, alpha=0.3, backend="tensorflow"))
    (group,) = show.fold(rows)
    assert group.verdict == "fail"
    assert group.not_passing() == "0.3; warn 0.1 0.2"  # 0 and 1 are exact in fp16: they pass
    assert show.Folded(tuple(rows[:4])).not_passing() == "warn 0.1 0.2"  # warnings alone stay marked


# ----------------------------------------------------------------------------- numbers

def test_huge_ulp_is_printed_in_bounded_width() -> None:
    assert short_int(9214382429786079232) == "9.2e18"
    assert short_int(1234567) == "1234567"
    _, warn, _ = _verdicts()
    huge = replace(warn, metrics=replace(warn.metrics, max_ulp=9214382429786079232))
    console = Console(record=True, width=120)
    show.render_table([huge], console=console)
    show.render_folded([huge], console=console)
    text = console.export_text()
    assert text.count("9.2e18") == 2 and "9214382429786079232" not in text


def test_percentages_are_non_zero_for_a_non_zero_count() -> None:
    assert percent(3, 100_000) == "0.003%"
    assert (percent(0, 100_000), percent(100_000, 100_000)) == ("0%", "100%")
    assert percent(99_996, 100_000) != "100%" and percent(1, 3) == "33.3%"
    assert mismatch_line(3, 100_000) == "Mismatched elements: 3 / 100000 (0.003%)"


# ----------------------------------------------------------------------------- shaped indices

def test_index_of_a_2d_dump_keeps_its_shape() -> None:
    assert position(11256, (100, 1000)) == (11, 256) and position(10 ** 5, (100, 1000)) is None
    assert index_text(11256, (100, 1000)) == "[11, 256]" and index_text(7, (4096,)) == "[7]"
    assert index_text(7, None) == "[7]" and index_text(10 ** 5, (100, 1000)) == "[100000]"  # outside: flat
    x = np.linspace(-5, 5, 100_000, dtype=np.float32).reshape(100, 1000)
    y = ref.forward(x, 0.2)
    y.flat[11256] = np.float32(1e30)
    for row in (_row(y, x=x), _row(y.reshape(-1), x=x.reshape(-1), shape=x.shape)):  # whole, or flat + shape
        message = failure_message(row)
        assert "index [11, 256] of y.npy:" in message
        assert "Greatest ULP difference:" in message and "at index [11, 256] of y.npy" in message
        assert "11256" not in message
        doc = report_dict([row], seed=None, versions={})
        assert validate(doc, SCHEMA) == []
        (example,) = doc["rows"][0]["findings"][0]["examples"]
        assert (example["index"], example["position"]) == (11256, [11, 256])


def test_a_backend_whose_every_line_passes_is_one_line() -> None:
    x32 = X16.astype(np.float32)
    rows = [_row(ref.forward(x, 0.2), x=x, backend="golden") for x in (X16, x32)]
    bad = ref.forward(X16, 0.2)
    bad[0] = np.nan
    rows += [_row(ref.forward(X16, 0.2), backend="torch"), _row(bad, x=X16, backend="torch"),
             _row(ref.forward(x32, 0.2), x=x32, backend="torch")]
    console = Console(record=True, width=120)
    show.render_folded(rows, console=console)
    lines = [line for line in console.export_text().splitlines() if line.startswith(("golden", "torch"))]
    assert [line.split()[0] for line in lines] == ["golden", "torch", "torch"]  # torch has a failing line
    assert "2 lines pass: fp16 fp32 fwd" in lines[0] and lines[0].rstrip().endswith("pass")
