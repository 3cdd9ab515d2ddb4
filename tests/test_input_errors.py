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
from tests.helpers import assert_usage_error, run_cli


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
