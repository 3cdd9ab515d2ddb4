"""`conformance compare`: exit codes 0/1/2, one-line errors, reports (in-process; one real-process smoke test)."""
from __future__ import annotations

import json
import pickle
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conformance.dtypes import all_patterns
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from tests.helpers import CliResult, assert_usage_error, children_on_the_numpy_path, cli_subprocess, run_cli

X16 = all_patterns("float16")


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]):
    """``run(*args, cwd=d)``: ``conformance compare ARGS`` in-process, in ``d``."""
    def compare(*args: str, cwd: Path) -> CliResult:
        return run_cli(["compare", *args], capsys, cwd=cwd)

    return compare


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("dumps")
    np.save(d / "x.npy", X16)
    np.save(d / "y.npy", ref.forward(X16, 0.2))
    np.save(d / "y_torch_default.npy", ref.forward(X16, 0.01))
    dy = np.random.default_rng(2).permutation(X16)
    np.save(d / "dy.npy", dy)
    np.save(d / "dx.npy", ref.backward(dy, X16, 0.2))
    bf = all_patterns("bfloat16")
    np.save(d / "xb_bits.npy", bf.view(np.uint16))
    np.save(d / "yb_bits.npy", ref.forward(bf, 0.2).view(np.uint16))
    np.save(d / "xb.npy", bf)  # ml_dtypes bfloat16: numpy stores it as '<V2'
    np.save(d / "yb_tf.npy", ref.forward(bf, 0.2, semantics=Semantics(slope_dtype="bfloat16")))
    x32 = np.linspace(-1e5, 1e5, 4001, dtype=np.float32)
    np.save(d / "x32.npy", x32)
    np.savez(d / "y16.npz", y=ref.forward(x32, 0.2, out_dtype="float16"))
    return d


def test_passing_compare_writes_json_and_junit(dumps: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Smoke test in a real process: `python -m conformance compare`, exit 0, both reports (on the
    numpy path: the property is the process's)."""
    children_on_the_numpy_path(monkeypatch)
    out = cli_subprocess("compare", "--x", "x.npy", "--y", "y.npy", "--dy", "dy.npy", "--dx", "dx.npy",
                         "--alpha", "0.2", "--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"),
                         cwd=dumps)
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "r.json").read_text(), parse_constant=lambda c: 1 / 0)
    assert [r["direction"] for r in doc["rows"]] == ["forward", "backward"]
    assert doc["verdict"] == "pass" and doc["rows"][0]["backend"] == "dump"
    assert len(ET.parse(tmp_path / "r.xml").getroot().find("testsuite").findall("testcase")) == 2


def test_ml_dtypes_bfloat16_npy_is_read_as_bfloat16(run, dumps: Path) -> None:
    out = run("--x", "xb.npy", "--y", "yb_tf.npy", "--alpha", "0.2", cwd=dumps)
    assert out.code == 0, out.err  # within bf16 tolerance: a warning, not a failure
    assert "bf16→bf16" in out.out and "alpha-precision" in out.out and "warn" in out.out


def test_float64_dumps_with_an_error_are_triaged(run, dumps: Path) -> None:
    x = np.linspace(-10, 10, 1001)
    y = ref.forward(x, 1 / 3)
    y[17] = np.nextafter(np.nextafter(np.nextafter(y[17], 0), 0), 0)  # 3 ULP off
    np.save(dumps / "x64.npy", x)
    np.save(dumps / "y64.npy", y)
    out = run("--x", "x64.npy", "--y", "y64.npy", "--alpha", "1/3", cwd=dumps)
    assert out.code == 1 and "Traceback" not in out.err, out.err
    assert "unexplained ×1" in out.out and "fp64→fp64" in out.out


def test_negative_fraction_alpha_is_a_value_not_an_option(run, dumps: Path) -> None:
    bf = all_patterns("float16")
    np.save(dumps / "y_neg.npy", ref.forward(bf, -1 / 3))
    out = run("--x", "x.npy", "--y", "y_neg.npy", "--alpha", "-1/3", cwd=dumps)
    assert out.code == 0, out.err


def test_cores_beyond_the_chip_are_refused(run, dumps: Path) -> None:
    out = run("--x", "x.npy", "--y", "y.npy", "--alpha", "0.2", "--profile", "ascend910b1",
              "--cores", "49", cwd=dumps)
    assert_usage_error(out, mentions="48 vector cores")


def test_failing_compare_names_the_default_alpha_trap(run, dumps: Path) -> None:
    out = run("--x", "x.npy", "--y", "y_torch_default.npy", "--alpha", "0.2", cwd=dumps)
    assert out.code == 1, out.err
    assert "alpha-mismatch" in out.out and "torch" in out.out


def test_bfloat16_as_raw_bits_and_fp32_to_fp16_npz(run, dumps: Path) -> None:
    bits = run("--x", "xb_bits.npy", "--y", "yb_bits.npy", "--alpha", "0.2", "--dtype", "bfloat16", cwd=dumps)
    cast = run("--x", "x32.npy", "--y", "y16.npz", "--alpha", "0.2", cwd=dumps)
    assert (bits.code, cast.code) == (0, 0), bits.err + cast.err
    assert "bf16→bf16" in bits.out and "fp32→fp16" in cast.out


@dataclass(frozen=True)
class BadInput:
    """One bad invocation and a word its one-line message must contain."""

    name: str
    make: Callable[[Path], list[str]]
    says: str

    def __str__(self) -> str:
        return self.name


def _write(d: Path, name: str, data: bytes) -> str:
    (d / name).write_bytes(data)
    return name


def _truncated(d: Path) -> list[str]:
    raw = (d / "y.npy").read_bytes()
    return ["--x", "x.npy", "--y", _write(d, "cut.npy", raw[: len(raw) // 2]), "--alpha", "0.2"]


def _pickled(d: Path) -> list[str]:
    return ["--x", "x.npy", "--y", _write(d, "p.npy", pickle.dumps([1.0, 2.0])), "--alpha", "0.2"]


def _object(d: Path) -> list[str]:
    np.save(d / "obj.npy", np.array([1.0, "a"], dtype=object), allow_pickle=True)
    return ["--x", "x.npy", "--y", "obj.npy", "--alpha", "0.2"]


def _shape(d: Path) -> list[str]:
    np.save(d / "short.npy", ref.forward(X16[:100], 0.2))
    return ["--x", "x.npy", "--y", "short.npy", "--alpha", "0.2"]


def _dtype(d: Path) -> list[str]:
    np.save(d / "ints.npy", np.arange(X16.size, dtype=np.int32))
    return ["--x", "x.npy", "--y", "ints.npy", "--alpha", "0.2"]


def _pair(d: Path) -> list[str]:
    np.save(d / "y64.npy", X16.astype(np.float64))
    return ["--x", "x.npy", "--y", "y64.npy", "--alpha", "0.2"]


def _codes(d: Path) -> list[str]:
    np.save(d / "codes.npy", np.arange(-128, 128, dtype=np.int8))
    return ["--x", "x.npy", "--y", "codes.npy", "--alpha", "0.2"]


def _strings(d: Path) -> list[str]:
    np.save(d / "text.npy", np.array(["a", "b"]))
    return ["--x", "text.npy", "--y", "y.npy", "--alpha", "0.2"]


BAD_INPUTS = [
    BadInput("missing-file", lambda d: ["--x", "nope.npy", "--y", "y.npy", "--alpha", "0.2"], "does not exist"),
    BadInput("truncated-file", _truncated, "truncated"),
    BadInput("pickled-file", _pickled, "pickled"),
    BadInput("object-array", _object, "object"),
    BadInput("text-file", lambda d: ["--x", _write(d, "t.npy", b"x,y\n1,2\n"), "--y", "y.npy", "--alpha", "0.2"],
             "no numpy header"),
    BadInput("directory", lambda d: ["--x", ".", "--y", "y.npy", "--alpha", "0.2"], "not a regular file"),
    BadInput("shape-mismatch", _shape, "shape"),
    BadInput("unsupported-dtype", _dtype, "unsupported dtype"),
    BadInput("unsupported-pair", _pair, "unsupported dtype pair"),
    BadInput("alpha-nan", lambda d: ["--x", "x.npy", "--y", "y.npy", "--alpha", "nan"], "finite"),
    BadInput("alpha-inf", lambda d: ["--x", "x.npy", "--y", "y.npy", "--alpha=-inf"], "finite"),
    BadInput("alpha-text", lambda d: ["--x", "x.npy", "--y", "y.npy", "--alpha", "abc"], "not a number"),
    BadInput("dx-without-dy", lambda d: ["--x", "x.npy", "--dx", "dx.npy", "--alpha", "0.2"], "--dx needs --dy"),
    BadInput("raw-bits-without-dtype", lambda d: ["--x", "xb_bits.npy", "--y", "yb_bits.npy", "--alpha", "0.2"],
             "--dtype bfloat16"),
    BadInput("bad-cores", lambda d: ["--x", "x.npy", "--y", "y.npy", "--alpha", "0.2", "--cores", "0"], "--cores"),
    BadInput("dtype-that-would-be-ignored", lambda d: ["--x", "x.npy", "--y", "y.npy", "--alpha", "0.2", "--dtype",
                                                       "bf16"], "--dtype bf16 reads raw uint16 bits, but --x x.npy"),
    BadInput("int8-codes-without-quant", _codes, "--y codes.npy: int8 codes; a quantized LeakyReLU's dump is "
             "compared with --quant"),
    BadInput("strings-name-the-file", _strings, "--x text.npy: unsupported dtype <U1"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=str)
def test_bad_input_exits_2_with_one_line(run, dumps: Path, case: BadInput) -> None:
    assert_usage_error(run(*case.make(dumps), cwd=dumps), mentions=case.says)


def test_profile_gives_triage_the_tiling_plan(run, dumps: Path) -> None:
    import conformance.npu_impl as npu

    np.save(dumps / "y_dropped.npy", npu.leaky_relu(X16, 0.2, variant="tail-dropped").y)
    blind = run("--x", "x.npy", "--y", "y_dropped.npy", "--alpha", "0.2", cwd=dumps)
    planned = run("--x", "x.npy", "--y", "y_dropped.npy", "--alpha", "0.2", "--profile", "ascend910b1",
                  cwd=dumps)
    assert (blind.code, planned.code) == (1, 1)
    # without a plan, errors confined to the end are still tail-block, by position
    assert "confined to the last" in blind.out and "unexplained" not in blind.out
    assert "tail-block ×" in planned.out and "tail tiles" in planned.out


# ----------------------------------------------------------------------------- progress and -q

LARGE = ("--x", "x.npy", "--y", "y.npy", "--reference-y", "y.npy", "--dy", "dy.npy", "--dx", "dx.npy",
         "--alpha", "0.2")  # forward with a reference, and backward: every judged dump of a compare


@pytest.fixture
def large(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test dumps count as large (they get a progress display)."""
    from conformance.ingest import dumps as ingest_dumps

    monkeypatch.setattr(ingest_dumps, "PROGRESS_ELEMENTS", 1000)


def test_a_large_compare_on_a_pipe_shows_progress_and_quiet_silences_it(run, dumps: Path, large) -> None:
    loud = run(*LARGE, cwd=dumps)
    assert loud.code == 0 and loud.err.count("progress: finished") == 3, loud.err
    quiet = run(*LARGE, "-q", cwd=dumps)
    assert quiet.code == 0 and quiet.err == "", quiet.err
    assert quiet.out.strip().splitlines()[-1] == "2 rows: 2 passed, 0 warned, 0 failed: PASS"


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_quiet_compare_makes_no_progress_display(run, dumps: Path, large, monkeypatch, terminal: bool) -> None:
    """-q makes no progress display at all, whether stderr is a terminal (a redrawn bar) or a pipe."""
    from conformance.render import console as render

    made: list[bool] = []
    real = render.make_progress

    def recording(*, console, disable: bool = False):
        made.append(console.is_terminal)
        return real(console=console, disable=disable)

    monkeypatch.setattr(render, "make_progress", recording)
    monkeypatch.setenv("FORCE_COLOR" if terminal else "NO_COLOR", "1")
    monkeypatch.delenv("NO_COLOR" if terminal else "FORCE_COLOR", raising=False)
    assert run(*LARGE, cwd=dumps).code == 0 and made == [terminal] * 3
    made.clear()
    quiet = run(*LARGE, "-q", cwd=dumps)
    assert quiet.code == 0 and made == [] and quiet.err == "", quiet.err


def test_quiet_compare_still_prints_its_error(run, dumps: Path, large) -> None:
    result = run("--x", "x.npy", "--y", "missing.npy", "--alpha", "0.2", "-q", cwd=dumps)
    assert_usage_error(result, mentions="missing.npy")


def _two_ulp_dump(d: Path) -> list[str]:
    """x, and its exact LeakyReLU with one positive output two ULP up."""
    x = np.linspace(-4, 4, 1001).astype(np.float32)
    y = ref.forward(x, 0.2)
    at = int(np.flatnonzero(x > 1)[0])
    y.view(np.uint32)[at] += 2
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", y)
    return ["compare", "--x", str(d / "x.npy"), "--y", str(d / "y.npy"), "--alpha", "0.2", "-q"]


@pytest.mark.parametrize(("flags", "code"), [
    ((), 1),  # 2 ULP: over the default max ULP 1
    (("--max-ulp", "2"), 0),
    (("--max-ulp", "1", "--rtol", "1e-3", "--atol", "0"), 1),  # within rtol, still over max ULP
    (("--strict",), 1),
])
def test_compare_takes_tolerances_on_the_command_line(tmp_path: Path, capsys, flags: tuple, code: int) -> None:
    result = run_cli([*_two_ulp_dump(tmp_path), *flags], capsys, cwd=tmp_path)
    assert result.code == code, result.err


@pytest.mark.parametrize(("flags", "says"), [
    (("--rtol", "1e-3"), "pass --rtol and --atol together"),
    (("--rtol", "x", "--atol", "0"), "--rtol 'x' is not a number"),
    (("--rtol", "-1", "--atol", "0"), "--rtol must be a finite number >= 0"),
    (("--max-ulp", "1.5"), "--max-ulp '1.5' is not an integer"),
])
def test_bad_tolerances_are_one_line_errors(tmp_path: Path, capsys, flags: tuple, says: str) -> None:
    assert_usage_error(run_cli([*_two_ulp_dump(tmp_path), *flags], capsys, cwd=tmp_path), mentions=says)
