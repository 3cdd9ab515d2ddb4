"""A user's kernel cannot pass by being skipped: a pair it is asked for and cannot run fails its
row with the kernel's own error, through the CLI, ``check()`` and the pytest fixture; a selection
that runs no rows names the kernel's reason."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.api import check
from conformance.errors import UsageError
from tests.helpers import assert_usage_error, run_cli

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]
KERNELS = '''
import numpy as np
from conformance.adapters import from_numpy

def widening(x, alpha):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(x > 0, x, x * alpha).astype(np.float64)

def raising(x, alpha):
    raise RuntimeError("no kernel for " + x.dtype.name)

def half_only(x, alpha):
    return np.where(x > 0, x, x * x.dtype.type(alpha))

def widening_backend():
    return from_numpy(widening)

def raising_backend():
    return from_numpy(raising)

def half_only_backend():
    return from_numpy(half_only, dtypes=["float16"])
'''
REASONS = {"widening": "widening returned float64", "raising": "raising raised RuntimeError: no kernel for"}
SMALL = ["--direction", "forward", "--alpha", "0.2", "--max-examples", "5"]


@pytest.fixture
def kernels(tmp_path: Path) -> Path:
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def _namespace(path: Path) -> dict:
    found: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), found)
    return found


@pytest.mark.parametrize("name", sorted(REASONS))
def test_the_cli_fails_every_asked_dtype_with_the_kernels_error(name: str, kernels: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    result = run_cli(["run", "--backend", f"{kernels}:{name}_backend", *SMALL, "--json", str(out),
                      "--results-dir", str(tmp_path / "results")], capsys, cwd=tmp_path)
    rows = json.loads(out.read_text())["rows"]
    assert result.code == 1 and result.out.splitlines()[-1].endswith("FAIL"), result.text
    wrong = [r for r in rows if r["dtype"] != "float64" or name == "raising"]
    assert {r["dtype"] for r in wrong} >= {"float16", "bfloat16", "float32"}
    for row in wrong:
        assert row["verdict"] == "fail"
        assert any(REASONS[name] in f["summary"] for f in row["findings"]), row["findings"]


@pytest.mark.parametrize("name", sorted(REASONS))
def test_check_fails_with_the_kernels_error(name: str, kernels: Path) -> None:
    kernel = _namespace(kernels)[name]
    report = check(kernel, alphas=[0.2], directions=["forward"], max_examples=5)
    assert report.verdict == "fail" and not report.skipped
    assert REASONS[name] in report.message


def test_the_fixture_fails_with_the_kernels_error(kernels: Path, pytester: pytest.Pytester) -> None:
    pytester.syspathinsert(ROOT)
    pytester.syspathinsert(kernels.parent)
    pytester.makepyfile(test_user='''
from kernels import raising, widening

def test_widening(leakyrelu_conformance):
    leakyrelu_conformance(widening, alphas=[0.2], directions=["forward"], max_examples=5)

def test_raising(leakyrelu_conformance):
    leakyrelu_conformance(raising, alphas=[0.2], directions=["forward"], max_examples=5)
''')
    result = pytester.runpytest("-p", "conformance.pytest_plugin")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([f"*{REASONS['widening']}*"], consecutive=False)
    result.stdout.fnmatch_lines([f"*{REASONS['raising']}*"], consecutive=False)


def test_a_selection_without_rows_names_the_kernels_own_reason(kernels: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(["run", "--backend", f"{kernels}:half_only_backend", "--dtype", "fp32", *SMALL],
                     capsys, cwd=tmp_path)
    assert_usage_error(result, mentions="half_only declares float16->float16 only")
    assert "cann" not in result.err and "torch" not in result.err
    with pytest.raises(UsageError, match=r"half_only has no backward \(pass backward=...\)"):
        check(_namespace(kernels)["half_only"], alphas=[0.2], directions=["backward"])
