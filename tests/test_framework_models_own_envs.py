"""Paddle and MindSpore against their golden models, bit for bit, through the real worker.

Every 16-bit pattern a framework's CPU kernel runs (MindSpore float16; Paddle has no
16-bit CPU kernel) and 2**20 random float32/float64 patterns (NaN and inf included, dy
random too), at the suite's alphas, forward and backward.  Skipped when the framework's
environment is not set up (``make conformance-all``).

MindSpore float32 is compared everywhere, subnormals included: the backend runs every
call with FZ/DAZ set, as MindSpore's own threads do, and the model computes each op of
its graph under DAZ/FTZ (tests/test_mindspore_model.py has the measured points).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from conformance.backends import default_worker, load
from conformance.cases.exhaustive import random_bits, sweep16
from conformance.dtypes import info, is_nan
from conformance.reference.golden import leaky_relu, leaky_relu_backward
from conformance.suite import SUITE_ALPHAS
from tests.helpers import assert_same_bits

ALPHAS = SUITE_ALPHAS  # 0, 0.01, 0.1, 0.2, 0.3, 1/3, 1, 1.5
RANDOM = 1 << 20


def paddle_forward(x: np.ndarray, alpha: float) -> np.ndarray:
    """Eigen ``x.cwiseMax(T(alpha)*x)`` (cwiseMin for alpha >= 1): the slope in T, a NaN product returns x."""
    return leaky_relu(x, alpha, slope_dtype=x.dtype.name, formulation="max_or_min", nan_operand="x")


def paddle_backward(dy: np.ndarray, x: np.ndarray, alpha: float) -> np.ndarray:
    """``dout * (T(alpha)*(x < 0) + (x >= 0))``: dy at x == 0, dy*0 at NaN."""
    return leaky_relu_backward(dy, x, alpha, slope_dtype=x.dtype.name, grad_rule="ge", nan_grad="dy*0")


def _mindspore_flush(dtype: np.dtype) -> dict:
    """float32 ops run under FZ/DAZ; float16 kernels compute in float32, where fp16 subnormals are normal."""
    flush = dtype == np.float32
    return dict(daz=flush, ftz=flush)


def mindspore_forward(x: np.ndarray, alpha: float) -> np.ndarray:
    """``maximum(T(alpha)*x, x)`` (minimum for alpha > 1) on the CPU Maximum kernel."""
    return leaky_relu(x, alpha, slope_dtype=x.dtype.name, formulation="max_or_min", nan_operand="x",
                      **_mindspore_flush(x.dtype))


def mindspore_backward(dy: np.ndarray, x: np.ndarray, alpha: float) -> np.ndarray:
    """MaximumGrad (ties split dy/2, NaN gives dy to both), then ``alpha*d1 + d2``."""
    return leaky_relu_backward(dy, x, alpha, slope_dtype=x.dtype.name, grad_rule="max", grad_form="sum",
                               **_mindspore_flush(x.dtype))


Model = tuple[Callable, Callable]
MODELS: dict[str, Model] = {"paddle": (paddle_forward, paddle_backward),
                            "mindspore": (mindspore_forward, mindspore_backward)}
CASES = [("paddle", "float32"), ("paddle", "float64"), ("mindspore", "float16"), ("mindspore", "float32")]


@pytest.fixture(scope="module")
def workers():
    from conformance.worker.client import close_all, connect

    made: dict = {}

    def get(name: str):
        if load(name).environment.missing() is not None:
            pytest.skip(f"{name} environment not set up (make conformance-all)")
        if name not in made:
            made[name] = connect(default_worker(name))
        return made[name]

    yield get
    close_all()


def _inputs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    x = sweep16(dtype) if info(dtype).bits == 16 else random_bits(dtype, RANDOM, seed=1)
    return x, random_bits(dtype, x.size, seed=2)


def _same(actual: np.ndarray, model: np.ndarray, *, what: str) -> None:
    keep = ~(is_nan(actual) & is_nan(model))  # NaN payloads are not part of the contract
    assert keep.sum() > actual.size // 2, what  # the comparison covers most of the tensor
    assert_same_bits(actual[keep], model[keep], what=what)


@pytest.mark.parametrize("name,dtype", CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_framework_equals_its_golden_model_bit_for_bit(name: str, dtype: str, workers) -> None:
    backend = workers(name)
    forward_model, backward_model = MODELS[name]
    x, dy = _inputs(dtype)
    for alpha in ALPHAS:
        forward = backend.forward(x, alpha)
        assert forward.rejected is None, forward.rejected
        _same(forward.value, forward_model(x, alpha), what=f"{name} {dtype} forward a={alpha}")
        backward = backend.backward(dy, x, alpha)
        assert backward.rejected is None, backward.rejected
        _same(backward.value, backward_model(dy, x, alpha), what=f"{name} {dtype} backward a={alpha}")


def test_the_models_differ_from_golden_where_the_frameworks_do() -> None:
    """The models are not golden in disguise: each differs at the points its framework does."""
    x = np.array([0.0, -np.inf, np.nan, -1.0], dtype=np.float32)
    dy = np.full(x.shape, 3.0, dtype=np.float32)
    assert paddle_forward(x, 0.0)[1] == -np.inf and np.isnan(leaky_relu(x, 0.0)[1])
    assert paddle_backward(dy, x, 0.2)[0] == 3.0 and paddle_backward(dy, x, 0.2)[2] == 0.0
    ms = mindspore_backward(dy, x, 0.2)
    assert ms[0] == np.float32(np.float32(0.2) * np.float32(1.5)) + np.float32(1.5)  # tie split
    assert ms[2] == np.float32(np.float32(0.2) * np.float32(3.0)) + np.float32(3.0)  # NaN: both
