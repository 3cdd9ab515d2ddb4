"""A plain kernel function as a user writes it: on numpy arrays, torch tensors, JAX arrays or
TensorFlow tensors, bfloat16 through each framework's own type; on the command line
(``run --backend file.py:f``) and through ``check``."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from conformance import adapters
from conformance.api import check
from conformance.render.messages import failure_message
from tests.helpers import keep_small_batches, run_cli

needs = {name: pytest.mark.skipif(importlib.util.find_spec(name) is None, reason=f"{name} is not installed")
         for name in ("torch", "jax", "tensorflow")}

KERNELS = {
    "torch_in": "import torch.nn.functional as F\n\ndef f(x, a):\n    return F.leaky_relu(x, a)\n",
    "numpy_via_torch": ("import torch\nimport torch.nn.functional as F\n\n"
                        "def f(x, a):\n    return F.leaky_relu(torch.from_numpy(x), a).numpy()\n"),
    "numpy_to_torch": ("import torch\nimport torch.nn.functional as F\n\n"
                       "def f(x, a):\n    return F.leaky_relu(torch.from_numpy(x), a)\n"),
    "widening": "import numpy as np\n\ndef f(x, a):\n    return np.maximum(x, x * a).astype(np.float64)\n",
}


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch)


def _kernel_file(tmp_path: Path, key: str) -> str:
    path = tmp_path / f"{key}.py"
    path.write_text(KERNELS[key])
    return f"{path}:f"


def _run(tmp_path: Path, capsys, key: str, *extra: str):
    return run_cli(["run", "--backend", _kernel_file(tmp_path, key), "--alpha", "0.2", "--results-dir",
                    str(tmp_path / "res"), "--json", str(tmp_path / "r.json"), *extra], capsys)


@needs["torch"]
def test_a_function_taking_torch_tensors_runs_every_dtype_both_ways(tmp_path, capsys, small) -> None:
    import json

    result = _run(tmp_path, capsys, "torch_in")
    assert result.code == 0, result.text
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert {(r["dtype"], r["direction"]) for r in rows} == {
        (d, w) for d in ("float16", "bfloat16", "float32", "float64") for w in ("forward", "backward")}
    assert not [f for r in rows for f in r["findings"] if f["category"] == "rejected-input"]


@needs["torch"]
def test_a_numpy_function_that_torch_refuses_bfloat16_skips_those_rows_saying_why(tmp_path, capsys,
                                                                                small) -> None:
    result = _run(tmp_path, capsys, "numpy_via_torch", "--direction", "forward")
    assert result.code == 0, result.text
    assert "bf16→bf16" not in result.out and "fp16→fp16" in result.out
    said = " ".join(result.out.split())
    assert "on a bfloat16 numpy array" in said and "a function taking and returning torch tensors" in said


@needs["torch"]
def test_a_numpy_function_returning_a_torch_tensor_is_converted(tmp_path, capsys, small) -> None:
    result = _run(tmp_path, capsys, "numpy_to_torch", "--direction", "forward", "--dtype", "fp16,fp64")
    assert result.code == 0, result.text


def test_dtype_selects_a_plain_functions_rows_and_a_wrong_dtype_says_so(tmp_path, capsys, small) -> None:
    result = _run(tmp_path, capsys, "widening", "--dtype", "fp32")
    assert result.code == 1
    said = " ".join(result.out.split())
    assert "f returned float64 for fp32 input" in said
    assert "refused" not in said and "Mismatched elements: 0" not in said
    assert "fp16→fp16" not in result.out  # --dtype selects the function's rows


def test_the_command_line_says_how_to_give_a_backward_in_its_own_words(tmp_path, capsys, small) -> None:
    result = _run(tmp_path, capsys, "widening", "--dtype", "fp64")
    said = " ".join(result.text.split())
    assert "define f_backward(dy, x, alpha) beside it in its module" in said
    assert "backward=" not in said


def test_a_wrong_dtype_row_has_no_mismatch_count_only_what_was_returned() -> None:
    report = check(lambda x, a: x.astype(np.float64), dtypes=["float32"], alphas=[0.2], directions=["forward"],
                   name="widening")
    (row,) = report.rows
    assert failure_message(row).splitlines()[0] == \
        f"rejected-input x{row.metrics.elements}: widening returned float64 for fp32 input"


def test_an_annotation_names_what_the_function_takes_without_calling_it() -> None:
    calls = []

    def f(x: torch.Tensor, a: float):  # noqa: F821 - an annotation (a string here), never resolved
        calls.append(x)
        raise AssertionError("not called while planning")

    assert adapters.taken_framework(f) == "torch" and calls == []


@pytest.mark.parametrize("framework", [pytest.param("jax", marks=needs["jax"]),
                                       pytest.param("tensorflow", marks=needs["tensorflow"])])
def test_a_function_of_jax_or_tensorflow_runs_bfloat16_and_its_autodiff_backward(framework, small) -> None:
    if framework == "jax":
        import jax

        def f(x, a):
            return jax.nn.leaky_relu(x, negative_slope=a)
    else:
        from conformance.frameworks.tensorflow_backend import tensorflow

        def f(x, a):
            return tensorflow().nn.leaky_relu(x, alpha=a)

    assert adapters.taken_framework(f) == framework
    report = check(f, dtypes=["bfloat16", "float32"], alphas=[0.25], max_examples=5)
    assert {(r.dtype, r.direction) for r in report.rows} == {
        (d, w) for d in ("bfloat16", "float32") for w in ("forward", "backward")}
    assert not [f for r in report.rows for f in r.findings if f.category == "rejected-input"], report.message
