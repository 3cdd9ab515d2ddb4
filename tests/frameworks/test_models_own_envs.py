"""Paddle and MindSpore against their golden models, bit for bit, through the real worker.

Every 16-bit pattern a framework's CPU kernel runs (MindSpore float16; Paddle has no
16-bit CPU kernel) and 2**20 random float32/float64 patterns (NaN and inf included, dy
random too; by default their first 2**16, which hold normals, subnormals and NaNs of both
signs as the full set does, the full set under ``exhaustive``), at the suite's alphas,
forward and backward.  Skipped when the framework's environment is not set up
(``make conformance-all``).

MindSpore float32 is compared everywhere, subnormals included: the backend runs every
call with FZ/DAZ set, as MindSpore's own threads do, and the model computes each op of
its graph under DAZ/FTZ (tests/frameworks/test_mindspore_model.py has the measured points).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from conformance.backends import default_worker, load
from conformance.cases.exhaustive import exhaustive16, random_bits
from conformance.dtypes import info, is_nan
from conformance.frameworks import models
from conformance.reference import golden
from conformance.suite import SUITE_ALPHAS
from tests.helpers import assert_same_bits

ALPHAS = SUITE_ALPHAS  # 0, 0.01, 0.1, 0.2, 0.3, 1/3, 1, 1.5
RANDOM = 1 << 20  # random patterns of a float32/float64 dtype in the full proof (`exhaustive`)
SAMPLE = 1 << 16  # their first ones, which the default run compares


def _model(name: str) -> tuple[Callable, Callable]:
    """Golden under the framework's model: (forward(x, alpha), backward(dy, x, alpha))."""
    model = models.MODELS[name]

    def forward(x: np.ndarray, alpha: float) -> np.ndarray:
        return golden.forward(x, alpha, semantics=model(x.dtype.name, "forward"))

    def backward(dy: np.ndarray, x: np.ndarray, alpha: float) -> np.ndarray:
        return golden.backward(dy, x, alpha, semantics=model(x.dtype.name, "backward"))

    return forward, backward


MODELS = {name: _model(name) for name in ("paddle", "mindspore")}
paddle_forward, paddle_backward = MODELS["paddle"]
mindspore_forward, mindspore_backward = MODELS["mindspore"]
CASES = [("paddle", "float32"), ("paddle", "float64"), ("mindspore", "float16"), ("mindspore", "float32")]
#: (name, dtype, random patterns): every 16-bit pattern; a 32/64-bit dtype's sample, and its full set
SIZED = [pytest.param(name, dtype, size, id=f"{name}-{dtype}" + ("" if size == SAMPLE else "-full"),
                      marks=() if size == SAMPLE else pytest.mark.exhaustive)
         for name, dtype in CASES for size in ((SAMPLE, RANDOM) if info(dtype).bits > 16 else (SAMPLE,))]


@pytest.fixture(scope="module")
def workers():
    """Each framework's default worker, the one process-wide client of its spec: the workers
    tests/frameworks/test_envs.py's round trips and probes started serve here too (a start
    imports the framework), and they end with the process."""
    from conformance.worker.client import connect

    made: dict = {}

    def get(name: str):
        if load(name).environment.missing() is not None:
            pytest.skip(f"{name} environment not set up (make conformance-all)")
        if name not in made:
            made[name] = connect(default_worker(name))
        return made[name]

    return get


def _inputs(dtype: str, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Every 16-bit pattern, else the first ``size`` random patterns; dy random too."""
    x = exhaustive16(dtype) if info(dtype).bits == 16 else random_bits(dtype, RANDOM, seed=1)[:size]
    return x, random_bits(dtype, x.size, seed=2)


def _same(actual: np.ndarray, model: np.ndarray, *, what: str) -> None:
    keep = ~(is_nan(actual) & is_nan(model))  # NaN payloads are not part of the contract
    assert keep.sum() > actual.size // 2, what  # the comparison covers most of the tensor
    assert_same_bits(actual[keep], model[keep], what=what)


@pytest.mark.parametrize("name,dtype,size", SIZED)
def test_framework_equals_its_golden_model_bit_for_bit(name: str, dtype: str, size: int, workers) -> None:
    backend = workers(name)
    forward_model, backward_model = MODELS[name]
    x, dy = _inputs(dtype, size)
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
    assert paddle_forward(x, 0.0)[1] == -np.inf and np.isnan(golden.forward(x, 0.0)[1])
    assert paddle_backward(dy, x, 0.2)[0] == 3.0 and paddle_backward(dy, x, 0.2)[2] == 0.0
    ms = mindspore_backward(dy, x, 0.2)
    assert ms[0] == np.float32(np.float32(0.2) * np.float32(1.5)) + np.float32(1.5)  # tie split
    assert ms[2] == np.float32(np.float32(0.2) * np.float32(3.0)) + np.float32(3.0)  # NaN: both
