"""Bad input as a new user types it: every case exits 2 with one line, never a traceback.

Numbers in ASCII digits only, config shapes TOML allows but the gate does not, reproducers
that fail their digest or name what their backend cannot run, and odd paths.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance.cases import corpus
from conformance.commands.args import parse_alpha, parse_int
from conformance.errors import UsageError
from tests.helpers import NUMPY_PATH, assert_usage_error, run_cli


@pytest.fixture
def dumps(tmp_path: Path) -> Path:
    """A clean fp32 forward dump (x, y) at alpha 0.2, and nothing else, in ``tmp_path``."""
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.where(x > 0, x, np.float32(0.2) * x).astype(np.float32))
    return tmp_path


def _compare(*extra: str) -> list[str]:
    return ["compare", "--x", "x.npy", "--y", "y.npy", *extra]


def _run(*extra: str) -> list[str]:
    """A one-row selection, so that a regression runs one quick row, not the whole suite."""
    return ["run", "--backend", "golden", "--dtype", "fp16", "--alpha", "0.2", "--direction", "forward",
            "--results-dir", "res", *extra]


# ----------------------------------------------------------------------------- integers

@pytest.mark.parametrize("argv, flag", [
    (_compare("--alpha", "0.2", "--cores", "²"), "--cores"),  # superscript two: str.isdigit() is True
    (_compare("--alpha", "0.2", "--cores", "５"), "--cores"),  # full-width five: int() takes it
    (_compare("--alpha", "0.2", "--cores", "1_0"), "--cores"),
    (_run("--seed", "５"), "--seed"),
    (_run("--max-examples", "²"), "--max-examples"),
    (_run("--max-examples", "1_0"), "--max-examples"),
    (["selftest", "--seed", "٣"], "--seed"),
    (["tiling", "--numel", "５", "--dtype", "fp32"], "--numel"),
    (["tiling", "--numel", "100", "--dtype", "fp32", "--cores", "²"], "--cores"),
], ids=["cores-superscript", "cores-fullwidth", "cores-underscore", "seed-fullwidth",
        "max-examples-superscript", "max-examples-underscore", "selftest-seed-arabic", "tiling-numel",
        "tiling-cores"])
def test_integers_take_ascii_digits_only(dumps: Path, capsys: pytest.CaptureFixture[str],
                                         argv: list[str], flag: str) -> None:
    result = run_cli(argv, capsys, cwd=dumps)
    assert_usage_error(result, mentions=flag)
    assert "ascii digits" in result.err.lower()


def test_cores_below_one_is_refused(dumps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_usage_error(run_cli(_compare("--alpha", "0.2", "--cores", "0"), capsys, cwd=dumps),
                       mentions="--cores must be >= 1")


@pytest.mark.parametrize("text, value", [("0", 0), ("7", 7), ("+7", 7), (" 12 ", 12), ("0010", 10)])
def test_parse_int_keeps_plain_forms(text: str, value: int) -> None:
    assert parse_int(text, flag="--seed") == value


def test_parse_int_elides_a_huge_number_in_its_message() -> None:
    with pytest.raises(UsageError, match=r"--max-examples must be >= 0 and <= 10, got 9+\.\.\.9+$") as err:
        parse_int("9" * 400, flag="--max-examples", maximum=10)
    assert len(str(err.value)) < 120


# ----------------------------------------------------------------------------- slopes

@pytest.mark.parametrize("text", ["٣", "1_000", "０.２", "١/٣", "0x1p-3", "1/-3", "1 / 3", "(1/3)", "²"],
                         ids=["arabic-indic", "underscore", "fullwidth", "arabic-fraction", "hex",
                              "negative-denominator", "spaced-fraction", "parenthesised", "superscript"])
def test_alpha_takes_ascii_numbers_only(dumps: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    assert_usage_error(run_cli(_compare(f"--alpha={text}"), capsys, cwd=dumps), mentions="is not a number")


@pytest.mark.parametrize("text, message", [
    ("nan", "must be finite"), ("-Infinity", "must be finite"), ("1e400", "must be finite"),
    ("1" + "0" * 400 + "/1", "must be finite"), ("9" * 5000 + "/1", "too many digits"),
    ("1/0", "divides by zero"), ("1e-400", "underflows to 0"),
])
def test_alpha_out_of_range_says_why(dumps: Path, capsys: pytest.CaptureFixture[str], text: str,
                                     message: str) -> None:
    result = run_cli(_compare(f"--alpha={text}"), capsys, cwd=dumps)
    assert_usage_error(result, mentions=message)
    assert len(result.err) < 200  # a 5,000-digit argument is elided, not echoed


@pytest.mark.parametrize("text, value", [
    ("0.2", 0.2), ("-1.5e-3", -1.5e-3), ("1/3", 1 / 3), ("-1/3", -1 / 3), (".5", 0.5), ("1e-3", 1e-3),
    ("5.", 5.0), ("+2", 2.0), ("-0", -0.0), ("0e-999", 0.0), ("5e-324", 5e-324), (" 0.3 ", 0.3),
])
def test_alpha_plain_forms_still_parse(text: str, value: float) -> None:
    assert parse_alpha(text) == value


def test_negative_fraction_alpha_runs_through_the_cli(dumps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(_compare("--alpha", "-1/3"), capsys, cwd=dumps)
    assert result.code in (0, 1) and "Traceback" not in result.text and "error" not in result.err


# ----------------------------------------------------------------------------- config shapes

@pytest.mark.parametrize("text, message", [
    ("[policy.torch]\nrounding = true\n", "policy.torch must be a list of category names"),
    ("[[policy.torch]]\na = 1\n", "policy.torch must be a list of category names"),
    ("[policy]\ntorch = [1, 'rounding']\n", "policy.torch must be a list of category names"),
    ("[policy]\ntorch = [['rounding']]\n", "policy.torch must be a list of category names"),
    ("[policy]\ntorch = [{ a = 1 }]\n", "policy.torch must be a list of category names"),
    ("[[policy]]\ntorch = ['rounding']\n", "policy must be a table"),
    ("tool = { conformance = { policy = { torch = [{}] } } }\n", "policy.torch must be a list"),
    ("[tool]\nconformance = 1\n", "tool.conformance must be a table"),
    ("[tool.black]\nline-length = 100\n", "no [tool.conformance] table"),
    ("[[tolerances]]\n", "tolerances must be a table"),
    ("[tolerances]\nfloat16 = [1e-3, 1e-5]\n", "tolerances.float16"),
    ("[tolerances.float16]\nrtol = [1e-3]\n", "tolerances.float16.rtol"),
    ("[tolerances.float16]\nrtol = nan\n", "tolerances.float16.rtol"),
    ("max_ulp = 1.5\n", "max_ulp must be an integer"),
    ("strict_zeros = 'yes'\n", "strict_zeros must be true or false"),
], ids=["policy-table", "policy-array-of-tables", "policy-non-string", "policy-nested-array",
        "policy-inline-tables", "policy-array", "tool-inline-policy-table", "tool-conformance-int",
        "tool-without-conformance", "tolerances-array", "tolerance-array", "rtol-array", "rtol-nan",
        "max-ulp-float", "strict-zeros-text"])
def test_config_shapes_are_usage_errors(dumps: Path, capsys: pytest.CaptureFixture[str], text: str,
                                        message: str) -> None:
    (dumps / "gate.toml").write_text(text)
    assert_usage_error(run_cli(_compare("--alpha", "0.2", "--config", "gate.toml"), capsys, cwd=dumps),
                       mentions=message)


@pytest.mark.parametrize("make, message", [
    (lambda d: (d / "conf").mkdir(), "is not a regular file"),
    (lambda d: (d / "conf").write_bytes(b"\xff\xfe\x00"), "is not valid toml"),
    (lambda d: (d / "conf").write_bytes(b""), ""),  # empty TOML: the defaults
], ids=["directory", "binary", "empty"])
def test_config_paths(dumps: Path, capsys: pytest.CaptureFixture[str], make, message: str) -> None:
    make(dumps)
    result = run_cli(_compare("--alpha", "0.2", "--config", "conf"), capsys, cwd=dumps)
    if message:
        assert_usage_error(result, mentions=message)
    else:
        assert result.code == 0 and "Traceback" not in result.text


def test_a_pyproject_in_the_working_directory_with_a_bad_table_is_named(
        dumps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (dumps / "pyproject.toml").write_text("[tool.conformance.policy]\ntorch = { a = 1 }\n")
    assert_usage_error(run_cli(_compare("--alpha", "0.2"), capsys, cwd=dumps), mentions="policy.torch")


# ----------------------------------------------------------------------------- reproducers

def _saved(tmp_path: Path, *, backend: str = "torch", direction: str = "forward", out_dtype=None,
           x=None, dy=None, alpha: float = 0.2) -> Path:
    """A reproducer as ``conformance run`` saves it (torch's fp16 slope defect is not one: it passes)."""
    x = np.array([-1.5, -0.0, 2.0], np.float16) if x is None else x
    case = corpus.Case(x, alpha, direction, dy=dy, out_dtype=out_dtype)  # type: ignore[arg-type]
    return corpus.save(corpus.Reproducer(case, backend, category="alpha-mismatch", label="r"),
                       tmp_path / "r.npz")


def _rewrite(path: Path, *, redigest: bool = False, drop: tuple[str, ...] = (), **fields: np.ndarray) -> Path:
    """The reproducer with ``fields`` replaced and ``drop`` removed; its digest kept or recomputed."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files if k not in drop}
    arrays.update(fields)
    if redigest:
        arrays["digest"] = np.array(corpus.digest(arrays))
    np.savez(path, **arrays)
    return path


def _flip_first_x_bit(path: Path) -> np.ndarray:
    with np.load(path, allow_pickle=False) as data:
        return data["x_bits"] ^ np.array([1, 0, 0], data["x_bits"].dtype)


def test_an_untouched_reproducer_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(["replay", str(_saved(tmp_path))], capsys)
    assert result.code == 0 and "now passes" in result.out, result.text


def test_reproducer_text_is_printed_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A label or category is data from the file, never console markup ("[/]" would not parse)."""
    case = corpus.Case(np.array([-1.0], np.float16), 0.2)
    path = corpus.save(corpus.Reproducer(case, "golden", category="[/]", label="[/bold]"), tmp_path / "m.npz")
    result = run_cli(["replay", str(path)], capsys)
    assert result.code == 0 and "[/bold]" in result.out and "[/]" in result.out, result.text


@pytest.mark.parametrize("tamper", [
    lambda p: _rewrite(p, alpha=np.array(0.01)),
    lambda p: _rewrite(p, x_bits=_flip_first_x_bit(p)),
    lambda p: _rewrite(p, category=np.array("rounding")),
    lambda p: _rewrite(p, backend=np.array("golden")),
    lambda p: _rewrite(p, dy_bits=np.ones(3, np.uint16)),
    lambda p: _rewrite(p, digest=np.array("sha256:" + "0" * 64)),
    lambda p: _rewrite(p, digest=np.array(["sha256:" + "0" * 64])),
], ids=["alpha", "x-bit", "category", "backend", "added-dy", "forged-digest", "digest-array"])
def test_a_tampered_reproducer_fails_its_integrity_check(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         tamper) -> None:
    path = tamper(_saved(tmp_path))
    assert_usage_error(run_cli(["replay", str(path)], capsys),
                       mentions="fails its integrity check (edited or corrupted")


@pytest.mark.parametrize("tamper", [
    lambda p: _rewrite(p, drop=("digest",)),
    lambda p: _rewrite(p, drop=("digest",), format=np.array("leakyrelu-reproducer/1")),
], ids=["no-digest", "format-1"])
def test_a_reproducer_without_a_digest_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  tamper) -> None:
    result = run_cli(["replay", str(tamper(_saved(tmp_path)))], capsys)
    assert_usage_error(result, mentions="fails its integrity check (it has no digest)")
    assert "re-create it with 'conformance run'" in result.err


@pytest.mark.parametrize("make, message", [
    (lambda d: _saved(d, direction="sideways"), "direction 'sideways' is unknown"),
    (lambda d: _saved(d, direction="backward"), "backward reproducer needs dy_bits"),
    (lambda d: _saved(d, direction="backward", dy=np.ones(2, np.float16)), "backward reproducer needs dy_bits"),
    (lambda d: _rewrite(_saved(d), redigest=True, alpha=np.array(np.nan)), "alpha must be one finite"),
    (lambda d: _rewrite(_saved(d), redigest=True, alpha=np.array([0.2, 0.3])), "alpha must be one finite"),
    (lambda d: _rewrite(_saved(d), redigest=True, x_bits=np.ones(3, np.uint32)), "x_bits must hold"),
    (lambda d: _rewrite(_saved(d), redigest=True, x_bits=np.ones(3, np.float16)), "x_bits must hold"),
    (lambda d: _rewrite(_saved(d), redigest=True, x_bits=np.ones(0, np.uint16)), "x_bits must hold"),
    (lambda d: _rewrite(_saved(d), redigest=True, dtype=np.array("int8")), "dtype 'int8' is unknown"),
    (lambda d: _rewrite(_saved(d), redigest=True, label=np.array([1, 2])), "label is not a text field"),
    (lambda d: _rewrite(_saved(d), redigest=True, drop=("x_bits",)), "missing x_bits"),
], ids=["sideways", "backward-without-dy", "dy-of-another-shape", "nan-alpha", "alpha-array",
        "x-bits-too-wide", "x-bits-not-bits", "no-elements", "unknown-dtype", "label-not-text", "no-x"])
def test_a_well_digested_but_malformed_reproducer_says_what_is_wrong(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], make, message: str) -> None:
    assert_usage_error(run_cli(["replay", str(make(tmp_path))], capsys), mentions=message)


@pytest.mark.parametrize("backend, x, out_dtype, message", [
    ("torch", np.array([-1.0, 2.0], np.float32), "float16", "torch has no forward for float32->float16"),
    ("cann", np.array([-1.0, 2.0], np.float64), None, "cann/ascend910b1 has no forward for float64->float64"),
    ("mxnet", np.array([-1.0, 2.0], np.float32), None, "unknown backend 'mxnet'"),
], ids=["torch-mixed-pair", "cann-fp64", "unknown-backend"])
def test_replay_of_a_case_its_backend_does_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   backend: str, x: np.ndarray, out_dtype, message: str) -> None:
    path = _saved(tmp_path, backend=backend, x=x, out_dtype=out_dtype)
    result = run_cli(["replay", str(path)], capsys)
    assert_usage_error(result, mentions=message)
    assert result.out == ""  # the one line is all: no header printed before the refusal


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.npz", "does not exist"),
    (lambda d: d, "is a directory"),
    (lambda d: _write(d / "e.npz", b""), "not an .npz"),
    (lambda d: _write(d / "t.npz", _saved(d).read_bytes()[:300]), "not an .npz"),
    (lambda d: np.save(d / "a.npy", np.ones(3)) or d / "a.npy", "not an .npz"),
    (lambda d: _zip_with(d / "z.npz", "notes.txt", b"hello"), "is not a .npy array"),
    (lambda d: _zip_with(d / "z.npz", "x_bits.npy", b"\x93NUMPY\x01\x00garbage"), "cannot read reproducer"),
], ids=["missing", "directory", "empty", "truncated", "npy", "zip-with-text", "zip-with-bad-npy"])
def test_replay_of_a_file_that_is_no_reproducer(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                make, message: str) -> None:
    assert_usage_error(run_cli(["replay", str(make(tmp_path))], capsys), mentions=message)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _zip_with(path: Path, name: str, data: bytes) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(name, data)
    return path


# ----------------------------------------------------------------------------- odd values a backend refuses

@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_torch_refusing_a_huge_slope_is_a_rejected_input_finding(direction: str) -> None:
    """torch cannot hold 1e308 in float (the fp16 opmath type): a finding on the row, not a traceback."""
    from conformance.backends import call, get_backend

    x = np.array([-1.0, 2.0], np.float16)
    result = call(get_backend("torch"), direction, x, 1e308, dy=np.ones_like(x))  # type: ignore[arg-type]
    assert result.value is None and "negative_slope=1e+308" in (result.rejected or "")
    wide = call(get_backend("torch"), direction, x.astype(np.float64), 1e308, dy=np.ones(2))  # type: ignore[arg-type]
    assert wide.rejected is None and wide.value is not None


@pytest.mark.parametrize("path, message", [("", "--config needs a file path"), (" ", "--config needs a file path"),
                                           ("/dev/zero", "is not a regular file")])
def test_config_path_oddities(dumps: Path, capsys: pytest.CaptureFixture[str], path: str, message: str) -> None:
    assert_usage_error(run_cli(_compare("--alpha", "0.2", "--config", path), capsys, cwd=dumps), mentions=message)


def test_dev_null_is_an_empty_config(dumps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(_compare("--alpha", "0.2", "--config", "/dev/null"), capsys, cwd=dumps)
    assert result.code == 0, result.text


# ----------------------------------------------------------------------------- output whose reader left

def _reader_gone(*argv: str, cwd: Path, stderr_too: bool = False) -> tuple[int, str]:
    """``conformance ARGV`` whose stdout (and stderr) pipe is closed before its first line, as
    ``| head -0`` leaves it: the exit code and what stderr said."""
    import os
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "conformance", *argv], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **NUMPY_PATH})
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    if stderr_too:
        proc.stderr.close()
        return proc.wait(timeout=300), ""
    return proc.wait(timeout=300), proc.stderr.read().decode()


@pytest.mark.parametrize("stderr_too", [False, True], ids=["stdout", "stdout and stderr"])
def test_a_closed_pipe_loses_no_report_and_keeps_the_verdict(tmp_path: Path, stderr_too: bool) -> None:
    code, err = _reader_gone(*_run("--json", "r.json", "--junit", "r.xml", "--max-examples", "5"), cwd=tmp_path,
                             stderr_too=stderr_too)  # a few drawn examples: the pipe's property, not theirs
    assert code == 0 and "Traceback" not in err, err
    import json

    doc = json.loads((tmp_path / "r.json").read_text())
    assert "partial" not in doc and doc["verdict"] == "pass" and len(doc["rows"]) == 1
    assert "<testcase" in (tmp_path / "r.xml").read_text()


def test_a_closed_pipe_keeps_a_failing_verdict(dumps: Path) -> None:
    np.save(dumps / "y_default.npy", np.where(np.load(dumps / "x.npy") > 0, 1, 0.01).astype(np.float32)
            * np.load(dumps / "x.npy"))
    code, err = _reader_gone("compare", "--x", "x.npy", "--y", "y_default.npy", "--alpha", "0.2", "--json",
                             "c.json", cwd=dumps)
    assert code == 1 and "Traceback" not in err, err
    assert "partial" not in (dumps / "c.json").read_text()


def test_a_closed_pipe_still_ends_a_usage_error_with_exit_2(dumps: Path) -> None:
    code, err = _reader_gone("compare", "--x", "missing.npy", "--y", "y.npy", "--alpha", "0.2", cwd=dumps)
    assert code == 2 and err.strip().splitlines() == [
        "conformance: error: --x missing.npy: file does not exist; pass the path of a .npy, .npz or .pt file"]


@pytest.mark.parametrize("flag, example", [("--json", "reports/out.json"), ("--junit", "reports/junit.xml"),
                                           ("--html", "reports/report.html")])
def test_a_directory_as_a_report_path_suggests_a_file_of_that_kind(tmp_path: Path, capsys, flag: str,
                                                                   example: str) -> None:
    (tmp_path / "adir").mkdir()
    result = run_cli(_run(flag, "adir"), capsys, cwd=tmp_path)
    assert_usage_error(result, mentions=f"{flag} 'adir' is not a file path; pass one such as {example}")


# ----------------------------------------------------------------------------- unreadable files

#: Each command line of ``argv`` (JSON) in turn in this one process, the stderr (file descriptor 2)
#: of each in a file of its own; the exit codes, as JSON, on stdout.
_IN_TURN = """
import json, os, sys
from conformance import cli
codes = []
for i, argv in enumerate(json.loads(sys.argv[1])):
    sys.stderr.flush()
    with open(f"err{i}.txt", "w") as err:
        os.dup2(err.fileno(), 2)
    codes.append(cli.main(argv))
    sys.stderr.flush()
print(json.dumps(codes))
"""


def _without_privilege(argvs: list[tuple[str, ...]], *, cwd: Path) -> list[tuple[int, str]]:
    """``conformance ARGV`` for each of ``argvs``, in one process where file permissions apply:
    as root, without the capabilities that bypass them (root reads any file otherwise)."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    prefix: list[str] = []
    if os.geteuid() == 0:
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
        if shutil.which("setpriv") is None or subprocess.run([*prefix, "true"], capture_output=True).returncode:
            pytest.skip("running as root and cannot drop the capabilities: file permissions do not apply")
    proc = subprocess.run([*prefix, sys.executable, "-c", _IN_TURN, json.dumps(argvs)], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env={**os.environ, **NUMPY_PATH})
    assert proc.returncode == 0, proc.stderr
    codes = json.loads(proc.stdout.splitlines()[-1])
    return [(code, (cwd / f"err{i}.txt").read_text()) for i, code in enumerate(codes)]


UNREADABLE = {
    "compare": (("compare", "--x", "x.npy", "--y", "locked.npy", "--alpha", "0.2"),
                "--y locked.npy: cannot read it (Permission denied)"),
    "replay": (("replay", "locked.npy"), "cannot read reproducer locked.npy: [Errno 13] Permission denied"),
    "audit a file in a closed directory": (("audit", "closed/model.py"),
                                           "closed/model.py: cannot read it (permission denied)"),
    "audit a closed directory": (("audit", "closed"), "closed: cannot read it (permission denied)"),
}


@pytest.fixture(scope="module")
def unreadable(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    """The exit code and stderr of each command of ``UNREADABLE``, run in one unprivileged process."""
    where = tmp_path_factory.mktemp("unreadable")
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    np.save(where / "x.npy", x)
    np.save(where / "locked.npy", np.where(x > 0, x, np.float32(0.2) * x).astype(np.float32))
    (where / "locked.npy").chmod(0)
    (where / "closed").mkdir()
    (where / "closed" / "model.py").write_text("import torch\nact = torch.nn.LeakyReLU(0.1)\n")
    (where / "closed").chmod(0)
    try:
        done = _without_privilege([argv for argv, _ in UNREADABLE.values()], cwd=where)
    finally:
        (where / "closed").chmod(0o755)
    return dict(zip(UNREADABLE, done))


@pytest.mark.parametrize("name", UNREADABLE)
def test_an_unreadable_input_is_exit_2_in_one_line(unreadable: dict[str, tuple[int, str]], name: str) -> None:
    code, err = unreadable[name]
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and UNREADABLE[name][1] in lines[0], err


@pytest.mark.parametrize("argv, command", [(("defaults", "--framework", "x"), "defaults"),
                                           (("run", "--bogus"), "run"),
                                           (("tiling", "--numel", "8", "--dtype", "fp16", "extra"), "tiling")])
def test_an_unknown_argument_points_at_its_commands_help(capsys, argv: tuple[str, ...], command: str) -> None:
    result = run_cli(argv, capsys)
    assert_usage_error(result, mentions=f"(see conformance {command} --help)")
    assert "unrecognized arguments" in result.err


@pytest.mark.parametrize("value", ["0", "two"])
def test_a_bad_thread_count_is_exit_2_before_any_work(value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CONFORMANCE_THREADS", value)
    result = run_cli(["run", "--backend", "golden", "--json", "r.json", "-q"], capsys, cwd=tmp_path)
    assert_usage_error(result, mentions="CONFORMANCE_THREADS")
    assert not (tmp_path / "r.json").exists()
