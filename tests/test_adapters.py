"""Your own kernel: the numpy and torch adapters, ``--backend module:factory``, the example kernels."""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from conformance import adapters, backends, suite
from conformance.api import check
from conformance.errors import UsageError
from examples import my_kernel
from tests.helpers import assert_usage_error, children_on_the_numpy_path, cli_subprocess, keep_small_batches, run_cli

FP16 = np.array([1.0, -1.0, -0.0, -2.5], np.float16)


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """For a test of how a kernel is run and reported, not of its numbers at size: the suite's
    small batches (every edge value, drawn examples, a short last block)."""
    keep_small_batches(monkeypatch)


def _categories(report) -> set[str]:
    return {f.category for row in report.rows for f in row.findings}


def test_a_declared_pair_that_raises_is_a_row_finding_not_a_crash(small) -> None:
    def broken(x, alpha):
        raise ValueError("kernel exploded")

    report = check(broken, dtypes=["float16"], alphas=[0.2], directions=["forward"])
    (row,) = report.rows
    assert row.verdict == "fail" and [f.category for f in row.findings] == ["rejected-input"]
    assert "broken raised ValueError: kernel exploded" in row.findings[0].summary


def test_a_wrong_dtype_result_is_refused_with_what_was_expected() -> None:
    kernel = adapters.from_numpy(lambda x, a: x.astype(np.float32), dtypes=["float16"], name="widening")
    result = kernel.forward(FP16, 0.2)
    assert result.value is None and result.malformed and result.rejected == "widening returned float32 for fp16 input"


def test_undeclared_same_dtype_pairs_run_and_only_declared_gaps_skip() -> None:
    def fp32_only(x, alpha):
        if x.dtype != np.float32:
            raise TypeError(f"no {x.dtype} kernel")
        return np.where(x > 0, x, x * np.float32(alpha))

    kernel = adapters.from_numpy(fp32_only)
    assert kernel.supports("float32", "float32", "forward")
    assert kernel.supports("float16", "float16", "forward")  # asked for: it runs, and fails
    assert "has no backward" in kernel.skip_reason("float32", "float32", "backward")
    assert "same-dtype pairs only" in kernel.skip_reason("float32", "float16", "forward")


def test_unknown_declared_dtype_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="dtype 'float8' is unknown"):
        adapters.from_numpy(my_kernel.exact_leaky_relu, dtypes=["float8"])


def test_the_exact_example_kernel_passes_forward_and_backward() -> None:
    report = check(my_kernel.exact_leaky_relu, backward=my_kernel.exact_leaky_relu_backward,
                   dtypes=["float16", "float32"], alphas=[0.01, 0.3, -1.5])
    assert report.verdict == "pass"
    assert all(r.metrics.mismatches == 0 for r in report.rows)
    assert {r.direction for r in report.rows} == {"forward", "backward"}


def test_the_naive_example_kernel_is_triaged_as_alpha_precision(small) -> None:
    report = check(my_kernel.naive_leaky_relu, dtypes=["float16"], alphas=[0.1], directions=["forward"])
    assert _categories(report) == {"alpha-precision"}


def test_a_torch_callable_matches_the_builtin_torch_backend_row_for_row(small) -> None:
    import torch.nn.functional as F

    def mine(x, alpha):
        return F.leaky_relu(x, negative_slope=alpha)

    args = dict(dtypes=["float16", "bfloat16"], alphas=[0.01, 0.3], max_examples=5)  # equal rows, not their size
    ours, builtin = check(mine, kind="torch", **args), check("torch", **args)
    assert [r.direction for r in ours.rows] == [r.direction for r in builtin.rows]
    assert [(r.metrics.mismatches, [f.category for f in r.findings], r.verdict) for r in ours.rows] == \
        [(r.metrics.mismatches, [f.category for f in r.findings], r.verdict) for r in builtin.rows]
    assert any(r.direction == "backward" for r in ours.rows)  # autograd backward ran


def test_module_factory_backend_runs_in_the_cli_and_replays(tmp_path, capsys, small) -> None:
    out = tmp_path / "r.json"
    result = run_cli(["run", "--backend", "examples.my_kernel:max_backend", "--dtype", "fp16", "--alpha", "1.5",
                      "--json", str(out), "--results-dir", str(tmp_path / "res"), "-q"], capsys)
    assert result.code == 1, result.text
    assert '"backend": "examples.my_kernel:max_backend"' in out.read_text()
    (repro, *_) = sorted((tmp_path / "res").glob("*formulation*.npz"))
    replayed = run_cli(["replay", str(repro), "--backend", "examples.my_kernel:max_backend", "-q"], capsys)
    assert replayed.code == 1 and "still fails (same finding: formulation)" in replayed.text


def test_a_file_path_factory_loads_too(capsys, small) -> None:
    path = my_kernel.__file__
    result = run_cli(["run", "--backend", f"{path}:backend", "--dtype", "fp16", "--alpha", "0.3", "-q"], capsys)
    assert result.code == 0, result.text


@pytest.mark.parametrize(("name", "mentions"), [
    ("examples.no_such_module:backend", "No module named 'examples.no_such_module'"),
    ("examples.my_kernel:no_such_factory", "has no attribute 'no_such_factory'"),
    ("examples.my_kernel:EXACT_DTYPES", "names a tuple; expected a factory"),
])
def test_a_bad_import_path_is_exit_2_in_one_line(name, mentions, capsys) -> None:
    backends.load.cache_clear()
    suite.backend_for.cache_clear()
    assert_usage_error(run_cli(["run", "--backend", name, "--dtype", "fp16", "-q"], capsys), mentions=mentions)


def test_an_entry_point_may_name_a_factory_of_an_adapter(monkeypatch, capsys, tmp_path, small) -> None:
    from importlib import metadata

    point = metadata.EntryPoint("mykernel", "examples.my_kernel:max_backend", backends.GROUP)
    monkeypatch.setattr(backends.metadata, "entry_points", lambda group: [point] if group == backends.GROUP else [])
    backends.registry.cache_clear()
    backends.load.cache_clear()
    suite.backend_for.cache_clear()
    try:
        result = run_cli(["run", "--backend", "mykernel", "--dtype", "fp16", "--alpha", "1.5", "-q",
                          "--results-dir", str(tmp_path)], capsys)
    finally:
        monkeypatch.undo()
        backends.registry.cache_clear()
        backends.load.cache_clear()
        suite.backend_for.cache_clear()
    assert result.code == 1 and "1 failed" in result.out, result.text


def test_a_users_kernel_can_run_behind_a_worker(capsys, tmp_path) -> None:
    """A kernel that might crash the process runs in a worker; its rows carry the kernel's name."""
    import shlex
    import sys
    from pathlib import Path

    worker = shlex.join([sys.executable, "-m", "conformance", "worker", "--backend", "examples.my_kernel:max_backend"])
    out = tmp_path / "w.json"
    result = run_cli(["run", "--worker", worker, "--dtype", "fp16", "--alpha", "1.5", "-q", "--json", str(out),
                      "--results-dir", str(tmp_path)], capsys, cwd=Path(my_kernel.__file__).parent.parent)
    assert result.code == 1, result.text
    assert '"backend": "max_leaky_relu"' in out.read_text()


# ----------------------------------------------------------------------------- plain functions on --backend

KERNELS = """
import numpy as np

def leaky(x, alpha):
    return np.where(x > 0, x, x * x.dtype.type(alpha))

def leaky_backward(dy, x, alpha):
    return np.where(x > 0, dy, dy * dy.dtype.type(alpha))

def forward_only(x, alpha, *, scale=1.0):
    return np.where(x > 0, x, x * x.dtype.type(alpha))

def one_argument(x):
    return x

def three_arguments(x, alpha, beta):
    return x

def needs_a_keyword(x, alpha, *, mode):
    return x
"""


@pytest.fixture
def kernel_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's ``mykernels.py`` in ``tmp_path`` (not on ``sys.path``); the import leaves no trace."""
    (tmp_path / "mykernels.py").write_text(KERNELS)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "mykernels", raising=False)
    backends.load.cache_clear()
    suite.backend_for.cache_clear()
    yield tmp_path / "mykernels.py"
    sys.modules.pop("mykernels", None)
    backends.load.cache_clear()
    suite.backend_for.cache_clear()


@pytest.mark.parametrize(("fn", "shape"), [
    (lambda x, alpha: x, "kernel"),
    (lambda x, alpha, out=None: x, "kernel"),
    (lambda: None, "factory"),
    (lambda profile=None, variant=None: None, "factory"),
    (adapters.KernelBackend, "factory"),
    (lambda x: x, ""),
    (lambda x, alpha, beta: x, ""),
    (lambda *, x, alpha: x, ""),
])
def test_a_callable_is_told_apart_by_its_signature(fn, shape: str) -> None:
    assert backends.kernel_or_factory(fn) == shape


def test_a_plain_kernel_function_runs_with_its_companion_backward(kernel_file: Path, capsys, tmp_path,
                                                                   small) -> None:
    out = tmp_path / "r.json"
    result = run_cli(["run", "--backend", "mykernels:leaky", "--dtype", "fp32", "--alpha", "0.3", "-q",
                      "--json", str(out)], capsys, cwd=kernel_file.parent)
    assert result.code == 0, result.text
    rows = json.loads(out.read_text())["rows"]
    assert {(r["backend"], r["direction"]) for r in rows} == {("mykernels:leaky", "forward"),
                                                              ("mykernels:leaky", "backward")}


def test_a_plain_kernel_from_a_file_path_without_a_backward_skips_backward(kernel_file: Path, capsys,
                                                                           small) -> None:
    result = run_cli(["run", "--backend", f"{kernel_file}:forward_only", "--dtype", "fp32", "--alpha", "0.3"],
                     capsys)
    assert result.code == 0, result.text
    assert "1 row:" in result.out and "forward_only has no backward" in result.out


@pytest.mark.parametrize("fn", ["one_argument", "three_arguments", "needs_a_keyword"])
def test_a_callable_that_is_neither_says_what_is_accepted(kernel_file: Path, fn: str, capsys) -> None:
    result = run_cli(["run", "--backend", f"mykernels:{fn}", "--dtype", "fp16", "-q"], capsys, cwd=kernel_file.parent)
    assert_usage_error(result, mentions=f"names {fn}(")
    assert "a kernel function fn(x, alpha)" in result.err and "a factory taking no required argument" in result.err


def test_a_dotted_module_is_found_in_the_current_directory_after_sys_path(kernel_file: Path, capsys,
                                                                           small) -> None:
    result = run_cli(["run", "--backend", "mykernels:leaky", "--dtype", "fp32", "--alpha", "0.3",
                      "--direction", "forward", "-q"], capsys, cwd=kernel_file.parent)
    assert result.code == 0, result.text
    assert sys.path[-1] == str(kernel_file.parent)  # appended: an installed module of that name wins


def test_a_missing_dotted_module_still_names_the_module(kernel_file: Path, capsys) -> None:
    result = run_cli(["run", "--backend", "nomodule_here:leaky", "--dtype", "fp32", "-q"], capsys,
                     cwd=kernel_file.parent)
    assert_usage_error(result, mentions="No module named 'nomodule_here'")


# ----------------------------------------------------------------------------- the kernel's warnings

def _overflowing(x, alpha):
    return np.where(x > 0, x, x * x.dtype.type(alpha))  # fp16 times 1e4: overflow; inf times 0: invalid


def test_a_kernels_warnings_are_counted_per_row_not_raised(capsys, small) -> None:
    kernel = adapters.from_numpy(_overflowing, dtypes=["float16"], name="overflowing")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning that escaped the adapter would reject the row
        report = check(kernel, alphas=[1e4, 0.2], directions=["forward"])
    assert all(f.category != "rejected-input" for r in report.rows for f in r.findings)
    key = ("float16", "float16", "forward", 1e4)
    assert kernel.warned[key].count >= 1 and "RuntimeWarning: overflow" in kernel.warned[key].first
    (row,) = [r for r in report.rows if float(r.alpha) == 1e4]
    (note,) = [n for n in row.notes if n.startswith(adapters.WARNINGS_NOTE)]
    assert f"{kernel.warned[key].count:,} (the first: {kernel.warned[key].first})" in note
    assert "RuntimeWarning" not in capsys.readouterr().err


def test_a_kernels_warnings_reach_the_report_not_stderr_in_a_real_process(kernel_file: Path, monkeypatch) -> None:
    children_on_the_numpy_path(monkeypatch)
    proc = cli_subprocess("run", "--backend", f"{kernel_file}:leaky", "--dtype", "fp16,fp32", "--alpha", "0.2,1e30",
                          "--max-examples", "5", "--json", "r.json", cwd=kernel_file.parent, small_batches=True)
    assert proc.returncode == 1, proc.stderr
    assert "RuntimeWarning" not in proc.stderr, proc.stderr
    assert "note: " in proc.stdout and "raised Python warnings on" in proc.stdout, proc.stdout
    rows = json.loads((kernel_file.parent / "r.json").read_text())["rows"]
    noted = [n for r in rows for n in r.get("notes", ()) if n.startswith(adapters.WARNINGS_NOTE)]
    assert noted and all("RuntimeWarning: " in n for n in noted)


def test_a_plain_kernel_function_fails_and_replays_under_its_import_path(tmp_path: Path, capsys, small) -> None:
    name = f"{my_kernel.__file__}:max_leaky_relu"
    result = run_cli(["run", "--backend", name, "--dtype", "fp16", "--alpha", "1.5", "--direction", "forward",
                      "-q", "--results-dir", str(tmp_path / "res")], capsys)
    assert result.code == 1 and "1 failed" in result.out, result.text
    (repro,) = sorted((tmp_path / "res").glob("*formulation*.npz"))
    replayed = run_cli(["replay", str(repro), "--backend", name, "-q"], capsys)
    assert replayed.code == 1 and "still fails (same finding: formulation)" in replayed.text
