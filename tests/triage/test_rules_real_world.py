"""Triage of real frameworks' behaviours: every element named, none unexplained.

The framework outputs are computed with the golden variants verified bit for bit
against the real frameworks (docs/framework_models/README.md), or with the
framework's own code where it is numpy (Keras's numpy backend, a plain ReLU) or
installed (TensorFlow).  Expected counts are independent: the elements where the
framework's output differs from golden.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pytest

from conformance.dtypes import all_patterns
from conformance.frameworks.tensorflow_backend import tensorflow
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.render.messages import failure_message
from tests.helpers import F16, counts, judge_named, slopes_in_turn

BF16 = all_patterns("bfloat16")
DY16 = np.random.default_rng(7).permutation(F16)
DYBF = np.random.default_rng(7).permutation(BF16)
ALPHAS = (0.0, 0.01, 0.2, 0.3, 1.5)


def f32_bits(n: int, *, seed: int) -> np.ndarray:
    bits = np.random.default_rng(seed).integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    return bits.view(np.float32)


X32 = f32_bits(100_000, seed=5)
DY32 = f32_bits(100_000, seed=6)


def jax_model(x: np.ndarray, alpha: float, *, dy: Optional[np.ndarray] = None) -> np.ndarray:
    """JAX/XLA:CPU, verified bit for bit (fp16 widens to normal fp32: no DAZ there)."""
    flush = x.dtype != np.float16
    held = Semantics(slope_dtype=x.dtype.name, daz=flush, ftz=flush)
    if dy is None:
        return ref.forward(x, alpha, semantics=held.combined(Semantics(predicate="ge")))
    return ref.backward(dy, x, alpha, semantics=held.combined(Semantics(grad_rule="ge", grad_form="sum")))


#: Slope 0 and a slope above 1 on every direction and dtype; the slopes below 1 name the same
#: rules, so the default run keeps one of them each, in turn, and ``make test-exhaustive`` the others.
JAX_CASES = slopes_in_turn([(d, t) for d in ("forward", "backward") for t in ("float16", "bfloat16", "float32")],
                           ALPHAS, always=(0.0, 1.5))


@pytest.mark.parametrize(("direction", "dtype", "alpha"), JAX_CASES)
def test_jax_triages_with_nothing_unexplained(dtype: str, direction: str, alpha: float) -> None:
    x = {"float16": F16, "bfloat16": BF16, "float32": X32}[dtype]
    dy = None if direction == "forward" else {"float16": DY16, "bfloat16": DYBF, "float32": DY32}[dtype]
    row = judge_named(x, jax_model(x, alpha, dy=dy), alpha, dy=dy)
    assert all(f.detail["contradicted"] == 0 for f in row.findings), failure_message(row)


def test_jax_flush_keeps_its_category_when_alpha_changes() -> None:
    found = [set(counts(judge_named(BF16, jax_model(BF16, a), a))) for a in (0.2, 0.3)]
    assert found[0] == found[1] and "subnormal-flush" in found[0]


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("x", [F16, X32], ids=["float16", "float32"])
def test_keras_numpy_backend(x: np.ndarray, alpha: float) -> None:
    with np.errstate(all="ignore"):
        actual = np.maximum(x, alpha * x)  # keras/src/backend/numpy/nn.py
    row = judge_named(x, actual, alpha)
    if alpha > 1:
        assert row.verdict == "fail" and "formulation" in counts(row)
        assert "max(x, a*x)" in next(f.summary for f in row.findings if f.category == "formulation")


@pytest.mark.parametrize("alpha", ALPHAS)
def test_paddle_backward(alpha: float) -> None:
    actual = ref.backward(DY32, X32, alpha, semantics=Semantics(slope_dtype="float32", grad_rule="ge", nan_grad="dy*0"))
    found = counts(judge_named(X32, actual, alpha, dy=DY32))
    assert ("nan-gradient" in found) == (alpha != 0)  # at alpha 0, dy*0 is alpha*dy


@pytest.mark.parametrize("alpha", ALPHAS)
def test_mindspore_backward(alpha: float) -> None:
    actual = ref.backward(DY16, F16, alpha, semantics=Semantics(slope_dtype="float16", grad_rule="max"))
    assert "formulation" in counts(judge_named(F16, actual, alpha, dy=DY16))


@pytest.mark.parametrize("x", [F16, X32], ids=["float16", "float32"])
def test_plain_relu_is_alpha_mismatch_with_effective_alpha_zero(x: np.ndarray) -> None:
    row = judge_named(x, np.maximum(x, np.zeros((), x.dtype)), 0.2)
    (finding,) = [f for f in row.findings if f.category == "alpha-mismatch"]
    assert finding.detail["effective_alpha"] == 0.0
    assert "plain ReLU" in finding.summary and "CANN default 0.0" in finding.summary


def test_tensorflow_fp16_default_slope_is_named_rounded_with_its_framework() -> None:
    tf = tensorflow()
    actual = tf.nn.leaky_relu(tf.constant(F16)).numpy()  # default alpha 0.2
    row = judge_named(F16, actual, 0.01)
    assert set(counts(row)) == {"alpha-mismatch"}
    (finding,) = row.findings
    assert "0.2 rounded to float16" in finding.summary and "tf.nn" in finding.summary
    assert finding.detail["effective_alpha"] == 0.2 and finding.detail["slope_dtype"] == "float16"


def test_grad_at_zero_on_zero_heavy_tensors_is_not_a_slope() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(50_000).astype(np.float32)
    x[rng.random(x.size) < 0.6] = 0
    dy = rng.standard_normal(x.size).astype(np.float32)
    row = judge_named(x, ref.backward(dy, x, 0.2, semantics=Semantics(grad_rule="ge")), 0.2, dy=dy)
    assert set(counts(row)) == {"grad-at-zero"}


def test_equally_good_explanations_are_reported_both() -> None:
    x = np.abs(F16[np.isfinite(F16.astype(np.float64))])  # no negative x: the two gradients tie
    dy = np.random.default_rng(1).permutation(x)
    row = judge_named(x, ref.backward(dy, x, 0.2, semantics=Semantics(grad_rule="ge")), 0.2, dy=dy)
    (finding,) = row.findings
    assert "or equally" in finding.summary and finding.detail["alternatives"]


def test_forgotten_select_is_a_formulation() -> None:
    with np.errstate(all="ignore"):
        actual = (np.float16(0.2) * F16).astype(np.float16)  # alpha*x on both sides
    row = judge_named(F16, actual, 0.2)
    assert "formulation" in counts(row)
    assert "no select" in next(f.summary for f in row.findings if f.category == "formulation")


def test_fp32_computed_in_fp16_is_input_precision() -> None:
    x = np.random.default_rng(2).standard_normal(20_000).astype(np.float32) * 100
    actual = ref.forward(x.astype(np.float16), 0.2, semantics=Semantics(slope_dtype="float16")).astype(np.float32)
    row = judge_named(x, actual, 0.2)
    assert set(counts(row)) == {"input-precision"}
    assert "computed in float16" in row.findings[0].summary


def test_plain_relu_gradient_is_alpha_mismatch_zero() -> None:
    x = np.random.default_rng(2).standard_normal(20_000).astype(np.float32)
    dy = np.random.default_rng(3).standard_normal(20_000).astype(np.float32)
    row = judge_named(x, np.where(x > 0, dy, np.float32(0)), 0.2, dy=dy)
    assert set(counts(row)) == {"alpha-mismatch"} and row.findings[0].detail["effective_alpha"] == 0.0
