"""``selftest`` on a pipe (CI) prints progress lines on stderr, for seeded and generated defects."""
from __future__ import annotations

import functools

import pytest

from conformance import selftest, selftest_generated
from conformance.render import console as show
from tests.helpers import keep_small_batches, run_cli


def test_selftest_generated_on_a_pipe_prints_progress_lines(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(["selftest", "--generated", "12", "--seed", "3"], capsys)
    assert result.code == 0, result.text
    lines = [line for line in result.err.splitlines() if line.startswith("selftest --generated progress: ")]
    assert lines and lines[-1].startswith("selftest --generated progress: finished; 12/12 cases"), result.err


def test_selftest_generated_prints_a_line_while_it_runs(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(show, "LineProgress", functools.partial(show.LineProgress, every=0.0))
    result = run_cli(["selftest", "--generated", "3", "--seed", "1"], capsys)
    running = [line for line in result.err.splitlines() if line.startswith("selftest --generated progress: running")]
    assert [line.split(";")[1].split(",")[0].strip() for line in running] == ["1/3 cases", "2/3 cases", "3/3 cases"]


def test_selftest_generated_quiet_prints_no_progress(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(["selftest", "--generated", "4", "-q"], capsys)
    assert "progress:" not in result.err


def test_run_generated_reports_each_case_scored() -> None:
    seen: list[int] = []
    scored, _, _ = selftest_generated.run_generated(5, seed=2, on_case=lambda: seen.append(1))
    assert len(seen) == len(scored) == 5


def test_a_variant_not_applicable_on_the_chip_is_printed_not_run_and_not_counted(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch, elements=1000)  # the edges and drawn examples: the reference's rows run
    ran: list[str] = []
    every_row = selftest.run_suite

    def suite(selection, options):
        ran.append(selection.variant)
        return every_row(selection, options)

    monkeypatch.setattr(selftest, "run_suite", suite)
    result = run_cli(["selftest", "--profile", "ascend910a", "--variant", "grad-at-zero-one",
                      "--variant", "mask-multiply"], capsys)
    assert result.code == 0, result.text
    assert ran == ["reference"]
    assert "grad-at-zero-one: not applicable on ascend910a: the pre-v200 step-function backward" in result.out
    assert result.out.strip().splitlines()[-1] == ("selftest: 1/1 variants caught and named; 2 not applicable "
                                                   "on ascend910a (grad-at-zero-one, mask-multiply)")
    progress = [line.split(";")[0] for line in result.err.splitlines() if line.startswith("selftest progress: ")]
    assert progress == ["selftest progress: reference done"]
