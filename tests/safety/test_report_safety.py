"""Reports are safe: no report on an input or on another report, nothing created before the
work, atomic writes, no stale or empty report after a failed run, and SIGTERM handled as
Ctrl-C (a partial report, exit 143)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from conformance import runs, suite
from conformance.commands import compare
from conformance.errors import UsageError
from conformance.interrupts import Terminated, exit_code
from conformance.reference import golden as ref
from conformance.render import export, files
from tests.helpers import NUMPY_PATH, assert_usage_error, cli_command, run_cli

GOLDEN = ["run", "--backend", "golden", "--dtype", "fp16", "--alpha", "0.2", "--direction", "forward",
          "--max-examples", "5"]
STALE = "an older report that said PASS\n"


@pytest.fixture()
def dumps(tmp_path: Path) -> Path:
    x = np.linspace(-4, 4, 257, dtype=np.float16)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", ref.forward(x, 0.2))
    np.save(tmp_path / "dy.npy", x[::-1].copy())
    np.save(tmp_path / "dx.npy", ref.backward(x[::-1].copy(), x, 0.2))
    (tmp_path / "gate.toml").write_text("")
    return tmp_path


def _compare(*extra: str) -> list[str]:
    return ["compare", "--x", "x.npy", "--y", "y.npy", "--alpha", "0.2", *extra]


def _listing(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _strict(path: Path) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"non-strict JSON constant {name}")

    return json.loads(path.read_text(), parse_constant=refuse)


# ----------------------------------------------------------------------------- collisions

def _hardlink_to_y(d: Path) -> str:
    os.link(d / "y.npy", d / "y_link.npy")
    return "y_link.npy"


def _symlink_to_y(d: Path) -> str:
    (d / "y_sym.npy").symlink_to(d / "y.npy")
    return "y_sym.npy"


@pytest.mark.parametrize("report, mentions", [
    (lambda d: ["--json", "y.npy"], "is the --y input"),
    (lambda d: ["--json", str(d / "sub" / ".." / "y.npy")], "is the --y input"),
    (lambda d: ["--junit", "x.npy"], "is the --x input"),
    (lambda d: ["--json", _hardlink_to_y(d)], "is the --y input"),
    (lambda d: ["--junit", _symlink_to_y(d)], "is the --y input"),
    (lambda d: ["--json", "gate.toml", "--config", "gate.toml"], "is the --config input"),
    (lambda d: ["--json", "r.out", "--junit", "./r.out"], "are the same file"),
], ids=["json-on-y", "json-on-y-spelled-otherwise", "junit-on-x", "json-hardlink-to-y",
        "junit-symlink-to-y", "json-on-config", "json-and-junit"])
def test_compare_refuses_a_report_on_an_input_or_another_report(
        dumps: Path, capsys, report: Callable[[Path], list[str]], mentions: str) -> None:
    (dumps / "sub").mkdir()
    flags = report(dumps)
    before = _listing(dumps)
    result = run_cli(_compare(*flags), capsys, cwd=dumps)
    assert_usage_error(result, mentions=mentions)
    assert _listing(dumps) == before  # the dumps, and every other file, untouched


def test_compare_refuses_a_report_on_the_backward_inputs(dumps: Path, capsys) -> None:
    before = _listing(dumps)
    for flag in ("dy", "dx"):
        argv = ["compare", "--x", "x.npy", "--dy", "dy.npy", "--dx", "dx.npy", "--alpha", "0.2",
                "--junit", f"{flag}.npy"]
        assert_usage_error(run_cli(argv, capsys, cwd=dumps), mentions=f"is the --{flag} input")
    assert _listing(dumps) == before


@pytest.mark.parametrize("flags, mentions", [
    (["--json", "P", "--junit", "P"], "are the same file"),
    (["--json", "out/P", "--junit", "out/../out/P"], "are the same file"),
    (["--json", "gate.toml", "--config", "gate.toml"], "is the --config input"),
    (["--results-dir", "res", "--json", "res/report.npz"], "writes reproducers"),
    (["--results-dir", "res", "--junit", "res"], "writes reproducers"),
], ids=["same-path", "same-path-spelled-otherwise", "on-config", "among-reproducers", "is-results-dir"])
def test_run_refuses_colliding_report_paths(tmp_path: Path, capsys, flags: list[str], mentions: str) -> None:
    (tmp_path / "gate.toml").write_text("")
    result = run_cli([*GOLDEN, *flags], capsys, cwd=tmp_path)
    assert_usage_error(result, mentions=mentions)
    assert _listing(tmp_path) == {"gate.toml": b""}


def test_a_report_may_sit_beside_reproducers_when_it_is_not_an_npz(tmp_path: Path, capsys) -> None:
    result = run_cli([*GOLDEN, "--results-dir", "res", "--json", "res/report.json"], capsys, cwd=tmp_path)
    assert result.code == 0, result.text
    assert _strict(tmp_path / "res" / "report.json")["verdict"] == "pass"


# ----------------------------------------------------------------------------- nothing created, nothing stale

def test_the_upfront_check_creates_nothing(tmp_path: Path) -> None:
    paths = files.ReportPaths(str(tmp_path / "a" / "b" / "r.json"), str(tmp_path / "r.xml"))
    files.prepare(paths, inputs={}, results_dir=str(tmp_path / "res"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad", [["--alpha", "abc"], ["--backend", "nope"], ["--config", "missing.toml"]],
                         ids=["alpha", "backend", "config"])
def test_a_later_usage_error_leaves_no_report_files(tmp_path: Path, capsys, bad: list[str]) -> None:
    argv = ["run", "--json", "reports/r.json", "--junit", "reports/r.xml", "--max-examples", "5", *bad]
    assert run_cli(argv, capsys, cwd=tmp_path).code == 2
    assert list(tmp_path.iterdir()) == []  # not even the reports/ directory


def test_a_failed_run_leaves_no_stale_report(tmp_path: Path, capsys) -> None:
    for name in ("r.json", "r.xml"):
        (tmp_path / name).write_text(STALE)
    result = run_cli([*GOLDEN, "--json", "r.json", "--junit", "r.xml", "--config", "missing.toml"],
                     capsys, cwd=tmp_path)
    assert_usage_error(result, mentions="missing.toml")
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r.xml").exists()


def test_a_compare_with_a_bad_dump_leaves_no_stale_report(dumps: Path, capsys) -> None:
    (dumps / "r.json").write_text(STALE)
    (dumps / "cut.npy").write_bytes((dumps / "y.npy").read_bytes()[:100])
    argv = ["compare", "--x", "x.npy", "--y", "cut.npy", "--alpha", "0.2", "--json", "r.json"]
    assert_usage_error(run_cli(argv, capsys, cwd=dumps), mentions="cut.npy")
    assert not (dumps / "r.json").exists()


def test_a_successful_run_replaces_the_older_report_and_leaves_no_temporary(tmp_path: Path, capsys) -> None:
    (tmp_path / "r.json").write_text(STALE)
    result = run_cli([*GOLDEN, "--json", "r.json", "--junit", "r.xml"], capsys, cwd=tmp_path)
    assert result.code == 0, result.text
    assert {p.name for p in tmp_path.iterdir()} - {".hypothesis"} == {"r.json", "r.xml"}
    doc = _strict(tmp_path / "r.json")
    assert doc["verdict"] == "pass" and export.validate(doc, export.SCHEMA) == []
    assert ET.parse(tmp_path / "r.xml").getroot().find("testsuite") is not None


# ----------------------------------------------------------------------------- atomic writes

def test_write_atomic_leaves_the_old_file_and_no_temporary_when_the_write_fails(tmp_path: Path,
                                                                                monkeypatch) -> None:
    target = tmp_path / "r.json"
    target.write_text(STALE)

    def no_space(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", no_space)
    with pytest.raises(UsageError, match=r"--json .*r\.json: cannot write the report \(No space left"):
        files.write_atomic(target, b"{}", flag="--json")
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"] and target.read_text() == STALE


def test_write_atomic_interrupted_leaves_no_temporary(tmp_path: Path, monkeypatch) -> None:
    def terminated(src: object, dst: object) -> None:
        raise Terminated()

    monkeypatch.setattr(files.os, "replace", terminated)
    with pytest.raises(Terminated):
        files.write_atomic(tmp_path / "r.json", b"{}", flag="--json")
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_through_a_symlink_replaces_the_file_it_points_to(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text(STALE)
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    files.write_atomic(tmp_path / "link.json", b"new", flag="--json")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_bytes() == b"new"


def test_a_descriptor_path_is_appended_to_not_replaced(tmp_path: Path) -> None:
    """``--json /dev/stdout > out.txt`` keeps the table printed before the report."""
    out = tmp_path / "out.txt"
    with open(out, "w") as handle:
        handle.write("the table\n")
        handle.flush()
        files.write_atomic(f"/dev/fd/{handle.fileno()}", b"{report}\n", flag="--json")
    assert out.read_text() == "the table\n{report}\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_run_with_a_report_on_a_full_device_exits_2_after_the_table(tmp_path: Path, capsys) -> None:
    result = run_cli([*GOLDEN, "--json", "/dev/full"], capsys, cwd=tmp_path)
    assert_usage_error(result, mentions="--json /dev/full: cannot write the report")
    assert ": PASS" in result.out  # the table and verdict were printed before the late failure


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_compare_with_a_report_on_a_full_device_exits_2(dumps: Path, capsys) -> None:
    result = run_cli(_compare("--junit", "/dev/full"), capsys, cwd=dumps)
    assert_usage_error(result, mentions="--junit /dev/full: cannot write the report")


# ----------------------------------------------------------------------------- interruption

def test_exit_codes_of_interruptions() -> None:
    assert exit_code(KeyboardInterrupt()) == 130 and exit_code(Terminated()) == 143


def test_sigterm_in_process_writes_a_partial_report_and_exits_143(tmp_path: Path, capsys,
                                                                   monkeypatch) -> None:
    calls = {"n": 0}
    real = suite.run_row

    def terminate_on_second(spec, inputs, *, options):
        calls["n"] += 1
        if calls["n"] == 2:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
        return real(spec, inputs, options=options)

    monkeypatch.setattr(suite, "run_row", terminate_on_second)
    before = signal.getsignal(signal.SIGTERM)
    result = run_cli([*GOLDEN, "--alpha", "0.3", "--alpha", "0.1", "--json", "r.json", "--junit", "r.xml"],
                     capsys, cwd=tmp_path)
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is restored
    assert result.code == 143, result.text
    doc = _strict(tmp_path / "r.json")
    assert doc["partial"] is True and doc["verdict"] == "fail" and len(doc["rows"]) == 1
    assert export.validate(doc, export.SCHEMA) == []
    suite_xml = ET.parse(tmp_path / "r.xml").getroot().find("testsuite")
    assert suite_xml.find("testcase[@name='interrupted']/error") is not None


def test_an_interruption_while_rendering_still_writes_a_partial_report(tmp_path: Path, capsys,
                                                                      monkeypatch) -> None:
    def terminated(result, **_: object) -> None:
        raise Terminated()

    monkeypatch.setattr(runs, "render", terminated)
    result = run_cli([*GOLDEN, "--json", "r.json"], capsys, cwd=tmp_path)
    assert result.code == 143 and "terminated" in result.err
    doc = _strict(tmp_path / "r.json")
    assert doc["partial"] is True and doc["verdict"] == "fail" and len(doc["rows"]) == 1


@pytest.mark.parametrize("interruption, code", [(KeyboardInterrupt, 130), (Terminated, 143)])
def test_an_interrupted_compare_writes_a_partial_report(dumps: Path, capsys, monkeypatch,
                                                       interruption: type, code: int) -> None:
    (dumps / "r.json").write_text(STALE)

    def interrupted(args, *, alpha, config):
        raise interruption()

    monkeypatch.setattr(compare, "_rows", interrupted)
    result = run_cli(_compare("--json", "r.json", "--junit", "r.xml"), capsys, cwd=dumps)
    assert result.code == code, result.text
    doc = _strict(dumps / "r.json")
    assert doc["partial"] is True and doc["verdict"] == "fail" and doc["rows"] == []
    assert export.validate(doc, export.SCHEMA) == []
    assert ET.parse(dumps / "r.xml").getroot().find("testsuite").get("errors") == "1"


def test_sigterm_stops_selftest_with_143(capsys, monkeypatch) -> None:
    from conformance import selftest

    monkeypatch.setattr(selftest, "run_suite", lambda selection, options: suite.SuiteResult(
        interruption=Terminated()))
    result = run_cli(["selftest", "--variant", "fp16-slope"], capsys)
    assert result.code == 143 and "terminated (SIGTERM)" in result.err and "Traceback" not in result.text


def _rows_with_reproducers(results: Path) -> set[str]:
    """The rows (``..._alpha_A``) that have saved a reproducer (``..._alpha_A-CATEGORY.npz``)."""
    return {m.group(1) for p in results.glob("*.npz") if (m := re.match(r"(.*_alpha_[^-]*)-", p.name))}


def test_sigterm_to_a_real_run_writes_a_partial_report_and_exits_143(tmp_path: Path) -> None:
    """A real ``python -m conformance run`` of 32 rows, terminated once reproducers of two rows
    have appeared: the rows run one after another and a row is recorded before the next starts,
    so at least one row is finished (a row's first reproducer alone is not enough: it may still
    be shrinking another category's), and most are still to come."""
    (tmp_path / "r.json").write_text(STALE)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **NUMPY_PATH}  # the signal's property, not the loops'
    argv = cli_command("run", "--backend", "cann", "--variant", "default-slope", "--dtype", "fp16,bf16",
                       "--alpha", "0.01,0,0.1,0.2,0.3,1/3,1,1.5", "--max-examples", "5", "--json", "r.json",
                       "--junit", "r.xml", "--results-dir", "res", "--jobs", "1", small_batches=True)
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 240
        while len(_rows_with_reproducers(tmp_path / "res")) < 2 and proc.poll() is None:
            assert time.monotonic() < deadline, "no row finished in time"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, out + err
    assert "Traceback" not in out + err
    doc = _strict(tmp_path / "r.json")
    assert doc["partial"] is True and doc["verdict"] == "fail"
    assert 1 <= len(doc["rows"]) < 32
    assert export.validate(doc, export.SCHEMA) == []
    assert ET.parse(tmp_path / "r.xml").getroot().find("testsuite/testcase[@name='interrupted']") is not None
    assert not list(tmp_path.glob(".*.tmp")) and "INCOMPLETE" in out
