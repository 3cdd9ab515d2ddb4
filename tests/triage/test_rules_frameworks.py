"""Triage of real framework code paths that no backend runs: each is named with
the category of what the framework really does, and nothing is ``unexplained``.

Each test runs the framework when it is installed (skipped cleanly otherwise) on a
representative set of bit patterns and judges its output with ``evaluate``, as a user's
dump would be.  The expected counts are independent of triage: the elements whose bits
show the behaviour (a zero of the other sign, a product flushed to zero).  How each
behaviour was found and where the framework's source says so: docs/framework_models/README.md.
"""
from __future__ import annotations

import importlib.util
from typing import Optional

import numpy as np
import pytest

from conformance.config import default_config
from conformance.dtypes import all_patterns, info, is_subnormal
from conformance.judge.evaluate import evaluate
from conformance.records import BackendResult, Row
from conformance.reference import golden as ref
from conformance.render.messages import failure_message
from tests.helpers import bits_differ, from_torch, to_torch

HAVE = {m: importlib.util.find_spec(m) is not None
        for m in ("torch", "onnxruntime", "onnx", "tensorflow", "keras", "jax")}
F16 = all_patterns("float16")
BF16 = all_patterns("bfloat16")


def judged(x: np.ndarray, actual: np.ndarray, alpha: float, *, dy: Optional[np.ndarray] = None) -> Row:
    out = info(actual.dtype).name
    return evaluate(x, alpha, BackendResult(actual), direction="forward" if dy is None else "backward",
                    dy=dy, out_dtype=None if out == info(x.dtype).name else out, backend="dump",
                    config=default_config())


def found(row: Row) -> dict[str, int]:
    named = {f.category: f.count for f in row.findings}
    assert "unexplained" not in named, failure_message(row)
    assert sum(named.values()) == row.metrics.mismatches
    return named


def summary(row: Row, category: str) -> str:
    return next(f.summary for f in row.findings if f.category == category)


def zero_sign_only(actual: np.ndarray, golden: np.ndarray) -> int:
    """Elements where both are zero and only the sign differs (independent of triage)."""
    both = (actual.astype(np.float64) == 0) & (golden.astype(np.float64) == 0)
    return int((both & bits_differ(actual, golden)).sum())


# ----------------------------------------------------------------------------- torch

@pytest.mark.skipif(not HAVE["torch"], reason="torch is not installed")
@pytest.mark.parametrize("alpha", [0.0, 0.3])
def test_torch_where_backward_is_the_branch_sum_formulation(alpha: float) -> None:
    """autograd through torch.where(x > 0, x, x*a) sums where(c, g, 0) + a*where(c, 0, g): a zero
    gradient is +0 (dy = -0 at x > 0, a*dy = -0 at x <= 0).  That is a formulation of the
    gradient, not grad-at-zero (x == 0 takes a*dy as golden does)."""
    import torch

    dy = np.random.default_rng(3).permutation(F16)
    xt = to_torch(F16).requires_grad_(True)
    torch.where(xt > 0, xt, xt * alpha).backward(to_torch(dy))
    actual = from_torch(xt.grad, "float16")
    row = judged(F16, actual, alpha, dy=dy)
    named = found(row)
    assert "grad-at-zero" not in named
    assert named["formulation"] == zero_sign_only(actual, ref.backward(dy, F16, alpha)) > 0
    assert "where(x > 0, dy, 0) + a*where(x > 0, 0, dy)" in summary(row, "formulation")


# ----------------------------------------------------------------------------- ONNX Runtime

def _ort_leaky_relu(x: np.ndarray, alpha: float, *, opset: int) -> np.ndarray:
    import onnxruntime as ort
    from onnx import TensorProto, helper

    elem = {"float16": TensorProto.FLOAT16, "float32": TensorProto.FLOAT}[x.dtype.name]
    graph = helper.make_graph([helper.make_node("LeakyRelu", ["x"], ["y"], alpha=alpha)], "g",
                              [helper.make_tensor_value_info("x", elem, [None])],
                              [helper.make_tensor_value_info("y", elem, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.skipif(not (HAVE["onnxruntime"] and HAVE["onnx"]), reason="onnxruntime is not installed")
def test_onnxruntime_fp16_function_body_names_its_where_merge() -> None:
    """At opset 16-19 ORT's CPU provider runs an fp16 LeakyRelu as its ONNX function body,
    Where(x < 0, a*x, x) in float32; ORT's Where merges two selections with
    ``x_sel != 0 ? x_sel : y_sel``, so a zero product comes out +0 (x < 0 with a = 0)."""
    actual = _ort_leaky_relu(F16, 0.0, opset=17)
    row = judged(F16, actual, 0.0)
    named = found(row)
    assert named == {"formulation": zero_sign_only(actual, ref.forward(F16, 0.0))}
    assert "ONNX Runtime's Where" in summary(row, "formulation")
    assert next(f for f in row.findings).detail["contradicted"] == 0


@pytest.mark.skipif(not (HAVE["onnxruntime"] and HAVE["onnx"]), reason="onnxruntime is not installed")
def test_onnxruntime_select_x_ge_0_shows_at_a_negative_slope() -> None:
    """ORT's float32 kernel is ``(xm >= 0).select(xm, alpha*xm)``: x = ±0 passes through, which
    differs from golden's alpha*(±0) only when alpha < 0.  Named as that select, with the
    formulations that predict the same bits (max(x, a*x), ORT's Where merge) as alternatives."""
    x = np.concatenate([np.array([0.0, -0.0], np.float32),
                        np.random.default_rng(2).standard_normal(4096).astype(np.float32)])
    actual = _ort_leaky_relu(x, -0.5, opset=22)
    row = judged(x, actual, -0.5)
    zeros = zero_sign_only(actual, ref.forward(x, -0.5))
    assert zeros == 2 and found(row) == {"formulation": zeros}
    assert "select x >= 0" in summary(row, "formulation")


@pytest.mark.skipif(not HAVE["jax"], reason="jax is not installed")
def test_jax_fp16_negative_slope_reports_every_formula_with_its_bits() -> None:
    """JAX's where(x >= 0, x, a*x) at alpha -0.5 on fp16 (computed in fp32: no DAZ) differs from
    golden only at x = ±0, and max(x, a*x) predicts the same bits (NaN payloads aside): both
    are reported, neither picked silently."""
    import jax

    actual = np.asarray(jax.nn.leaky_relu(F16, -0.5))
    row = judged(F16, actual, -0.5)
    assert found(row) == {"formulation": zero_sign_only(actual, ref.forward(F16, -0.5))}
    text = summary(row, "formulation")
    assert "max(x, a*x)" in text and "select x >= 0" in text, text


# ----------------------------------------------------------------------------- Keras mixed precision

def _keras_layer_grad(x: np.ndarray, dy: np.ndarray, alpha: float, *, policy: str) -> np.ndarray:
    """d/dx of keras.layers.LeakyReLU under ``policy`` (TensorFlow backend): the layer casts x
    to its compute dtype, dy arrives in that dtype, the gradient comes back in x's dtype."""
    import keras
    import tensorflow as tf

    layer = keras.layers.LeakyReLU(negative_slope=alpha, dtype=policy)
    xt = _to_tf(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = layer(xt)
    grad = tape.gradient(y, xt, output_gradients=tf.cast(_to_tf(dy), y.dtype))
    return _from_tf(grad, info(x.dtype).name)


def _to_tf(a: np.ndarray):
    import tensorflow as tf

    if info(a.dtype).name == "bfloat16":
        return tf.bitcast(tf.constant(a.view(np.uint16)), tf.bfloat16)
    return tf.constant(a)


def _from_tf(t, dtype: str) -> np.ndarray:
    import tensorflow as tf

    if dtype == "bfloat16":
        return tf.bitcast(t, tf.uint16).numpy().view(info("bfloat16").dtype)
    return t.numpy()


def _products_below_normal(alpha: float, n: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """x < 0 and float32 dy whose bf16-narrowed product with bf16(alpha) falls just below
    float32's smallest normal (FTZ flushes it in float32), plus random bit patterns."""
    rng = np.random.default_rng(seed)
    top = 2.0 ** -126 / ref.effective_slope(alpha, slope_dtype="bfloat16")
    dy = (top * rng.uniform(0.985, 1.0, n) * rng.choice([-1.0, 1.0], n)).astype(np.float32)
    x = -rng.uniform(1e-3, 1e3, n).astype(np.float32)
    bits = rng.integers(0, 2 ** 32, (2, 4096), dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([x, bits[0]]), np.concatenate([dy, bits[1]])


@pytest.mark.skipif(not (HAVE["tensorflow"] and HAVE["keras"]), reason="tensorflow/keras is not installed")
@pytest.mark.parametrize("alpha", [0.3])  # bf16(0.3) has bf16 dy whose product rounds up to a normal
def test_keras_mixed_bfloat16_fp32_gradient_flushes_in_float32(alpha: float) -> None:
    """TensorFlow computes a bf16 product in float32 with FTZ on, then rounds: a product
    subnormal in float32 is flushed even where bf16 rounding would carry it to a normal."""
    x, dy = _products_below_normal(alpha, 2048, seed=int(alpha * 100))
    actual = _keras_layer_grad(x, dy, alpha, policy="mixed_bfloat16")
    row = judged(x, actual, alpha, dy=dy)
    named = found(row)
    golden = ref.backward(dy, x, alpha)
    flushed = (actual == 0) & (golden != 0) & is_subnormal(golden)
    assert flushed.sum() > 0 and named["subnormal-flush"] >= int(flushed.sum())
    assert "input-precision" in named


@pytest.mark.skipif(not (HAVE["tensorflow"] and HAVE["keras"]), reason="tensorflow/keras is not installed")
@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.5])
def test_keras_mixed_policy_with_the_other_16bit_input_is_input_precision(alpha: float) -> None:
    """An fp16 tensor fed to a mixed_bfloat16 layer is computed in bf16 and its gradient cast
    back to fp16: operands narrowed to the other 16-bit type (65504 becomes 65536 there)."""
    dy = np.random.default_rng(5).permutation(F16)
    actual = _keras_layer_grad(F16, dy, alpha, policy="mixed_bfloat16")
    named = found(judged(F16, actual, alpha, dy=dy))
    assert named["input-precision"] > 0
    assert set(named) <= {"input-precision", "overflow", "rounding"}, named


@pytest.mark.skipif(not (HAVE["torch"] and HAVE["keras"]), reason="torch/keras is not installed")
@pytest.mark.parametrize("alpha", [0.01, 0.3])
def test_fp16_result_handed_back_as_fp32_is_input_precision(alpha: float) -> None:
    """Keras 3 on its torch backend under mixed_float16: x and dy narrowed to fp16, torch's fp16
    kernel computes in float32 opmath with a float32 slope, rounds dx to fp16, and the cast
    hands it back as fp32.  (torch itself, so no Keras backend switch is needed here.)"""
    import torch.nn.functional as F

    rng = np.random.default_rng(11)
    x = rng.integers(0, 2 ** 32, 1 << 14, dtype=np.uint64).astype(np.uint32).view(np.float32)
    dy = rng.standard_normal(x.size).astype(np.float32) * np.float32(100.0)
    xt = to_torch(x).half().requires_grad_(True)
    F.leaky_relu(xt, alpha).backward(to_torch(dy).half())
    actual = from_torch(xt.grad.float(), "float32")
    row = judged(x, actual, alpha, dy=dy)
    named = found(row)
    assert named["input-precision"] > 0
    assert "float32 opmath" in summary(row, "input-precision")
