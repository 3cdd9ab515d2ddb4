"""Your own kernel: the numpy and torch adapters, ``--backend module:factory``, the example kernels."""
from __future__ import annotations

import numpy as np
import pytest

from conformance import adapters, backends, suite
from conformance.api import check
from conformance.errors import UsageError
from examples import my_kernel
from tests.helpers import assert_usage_error, run_cli

FP16 = np.array([1.0, -1.0, -0.0, -2.5], np.float16)


def _categories(report) -> set[str]:
    return {f.category for row in report.rows for f in row.findings}


def test_a_declared_pair_that_raises_is_a_row_finding_not_a_crash() -> None:
    def broken(x, alpha):
        raise ValueError("kernel exploded")

    report = check(broken, dtypes=["float16"], alphas=[0.2], directions=["forward"])
    (row,) = report.rows
    assert row.verdict == "fail" and [f.category for f in row.findings] == ["rejected-input"]
    assert "broken raised ValueError: kernel exploded" in row.findings[0].summary


def test_a_wrong_dtype_result_is_refused_with_what_was_expected() -> None:
    kernel = adapters.from_numpy(lambda x, a: x.astype(np.float32), dtypes=["float16"], name="widening")
    result = kernel.forward(FP16, 0.2)
    assert result.value is None and "widening returned float32[4]; expected float16[4]" in result.rejected


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


def test_the_naive_example_kernel_is_triaged_as_alpha_precision() -> None:
    report = check(my_kernel.naive_leaky_relu, dtypes=["float16"], alphas=[0.1], directions=["forward"])
    assert _categories(report) == {"alpha-precision"}


def test_a_torch_callable_matches_the_builtin_torch_backend_row_for_row() -> None:
    import torch.nn.functional as F

    def mine(x, alpha):
        return F.leaky_relu(x, negative_slope=alpha)

    args = dict(dtypes=["float16", "bfloat16"], alphas=[0.01, 0.3])
    ours, builtin = check(mine, kind="torch", **args), check("torch", **args)
    assert [r.direction for r in ours.rows] == [r.direction for r in builtin.rows]
    assert [(r.metrics.mismatches, [f.category for f in r.findings], r.verdict) for r in ours.rows] == \
        [(r.metrics.mismatches, [f.category for f in r.findings], r.verdict) for r in builtin.rows]
    assert any(r.direction == "backward" for r in ours.rows)  # autograd backward ran


def test_module_factory_backend_runs_in_the_cli_and_replays(tmp_path, capsys) -> None:
    out = tmp_path / "r.json"
    result = run_cli(["run", "--backend", "examples.my_kernel:max_backend", "--dtype", "fp16", "--alpha", "1.5",
                      "--json", str(out), "--results-dir", str(tmp_path / "res"), "-q"], capsys)
    assert result.code == 1, result.text
    assert '"backend": "examples.my_kernel:max_backend"' in out.read_text()
    (repro, *_) = sorted((tmp_path / "res").glob("*formulation*.npz"))
    replayed = run_cli(["replay", str(repro), "--backend", "examples.my_kernel:max_backend", "-q"], capsys)
    assert replayed.code == 1 and "still fails (same finding: formulation)" in replayed.text


def test_a_file_path_factory_loads_too(capsys) -> None:
    path = my_kernel.__file__
    result = run_cli(["run", "--backend", f"{path}:backend", "--dtype", "fp16", "--alpha", "0.3", "-q"], capsys)
    assert result.code == 0, result.text


@pytest.mark.parametrize(("name", "mentions"), [
    ("examples.no_such_module:backend", "No module named 'examples.no_such_module'"),
    ("examples.my_kernel:no_such_factory", "has no attribute 'no_such_factory'"),
    ("examples.my_kernel:EXACT_DTYPES", "names a tuple, not a factory or a backend"),
    ("examples.my_kernel:exact_leaky_relu", "factory raised TypeError"),
])
def test_a_bad_import_path_is_exit_2_in_one_line(name, mentions, capsys) -> None:
    backends.load.cache_clear()
    suite.backend_for.cache_clear()
    assert_usage_error(run_cli(["run", "--backend", name, "--dtype", "fp16", "-q"], capsys), mentions=mentions)


def test_an_entry_point_may_name_a_factory_of_an_adapter(monkeypatch, capsys, tmp_path) -> None:
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
