"""Each real framework equals its golden model bit for bit.

The model of a framework is the set of golden keywords that describe what it does
(``conformance/reference/golden.py``); these tests run the framework on every 16-bit
pattern and a fixed random float32/float64 sample, forward and backward, at the suite's
alphas, and compare bits (zero signs included; any NaN equals any NaN).  A framework
that is not installed is skipped.  Keras profiles other than the one this process could
load run in a worker each, as the suite runs them.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable

import numpy as np
import pytest

from conformance.backends import BackendUnavailable, default_worker, get_backend
from conformance.dtypes import all_patterns
from conformance.reference import golden
from tests.helpers import differing

ALPHAS = (0.0, 0.01, 0.2, 0.3, 1.5)
RANDOM = 200_000
Model = Callable[[str, str], dict]  # (dtype, direction) -> golden keywords


def _jax(dtype: str, direction: str) -> dict:
    """``where(x >= 0, x, a_T*x)``; XLA:CPU runs DAZ/FTZ (float16 computes in float32, where
    its subnormals are normal); the gradient is autodiff's ``where(c, dy, 0) + a*where(c, 0, dy)``,
    fused into one multiply-add for float32/float64 (16-bit operations are widened one by one,
    so the product is rounded to T before the add)."""
    flush = dtype != "float16"
    if direction == "forward":
        return dict(slope_dtype=dtype, predicate="ge", daz=flush, ftz=flush)
    form = "sum" if dtype in ("float16", "bfloat16") else "fma"
    return dict(slope_dtype=dtype, grad_rule="ge", grad_form=form, daz=flush, ftz=flush)


def _tensorflow(dtype: str, direction: str) -> dict:
    """``tf.nn.leaky_relu``: a float32 attribute converted to T; DAZ/FTZ where T computes in float32."""
    return dict(slope_dtype=("float32", dtype), flush_subnormals=dtype in ("bfloat16", "float32"))


def _numpy_max(dtype: str, direction: str) -> dict:
    """Keras's numpy backend: ``np.maximum(x, np.array(a, x.dtype) * x)`` (min for a > 1 is not
    taken: the bug the policy fails)."""
    return dict(slope_dtype=dtype, formulation="max")


def _onnxruntime(dtype: str, direction: str) -> dict:
    """``LeakyRelu``: a float32 attribute; float16 computed in float32 and rounded once."""
    return dict(opmath="float32") if dtype == "float16" else dict(slope_dtype="float32")


# backend, profile, model, dtypes, directions
CASES = [
    ("jax", None, _jax, ("float16", "bfloat16", "float32", "float64"), ("forward", "backward")),
    ("onnxruntime", None, _onnxruntime, ("float16", "float32"), ("forward",)),
    ("keras", "jax", _jax, ("float16", "bfloat16", "float32"), ("forward",)),
    ("keras", "numpy", _numpy_max, ("float16", "bfloat16", "float32"), ("forward",)),
    ("keras", "tensorflow", _tensorflow, ("float16", "bfloat16", "float32", "float64"), ("forward",)),
]
_MODULES = {"jax": "jax", "onnxruntime": "onnxruntime", "keras": "keras", "numpy": "keras",
            "tensorflow": "tensorflow"}


def _inputs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pattern of a 16-bit dtype, else random float32 bit patterns (widened for float64);
    dy is the same set, shuffled."""
    if dtype in ("float16", "bfloat16"):
        x = all_patterns(dtype)
    else:
        bits = np.random.default_rng(11).integers(0, 1 << 32, RANDOM, dtype=np.uint64).astype(np.uint32)
        x = bits.view(np.float32).astype(dtype)
    return x, x[np.random.default_rng(12).permutation(x.size)]


def _backend(name: str, profile: str | None):
    for module in {_MODULES[name], _MODULES.get(profile or name, name)}:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    try:
        worker = default_worker(name, profile=profile) if profile else None
        return get_backend(name, profile=profile, worker=worker)
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize(("name", "profile", "model", "dtypes", "directions"), CASES,
                         ids=[f"{c[0]}[{c[1]}]" if c[1] else c[0] for c in CASES])
def test_framework_equals_its_golden_model(name: str, profile: str | None, model: Model,
                                           dtypes: tuple[str, ...], directions: tuple[str, ...]) -> None:
    backend = _backend(name, profile)
    bad = []
    for dtype in dtypes:
        x, dy = _inputs(dtype)
        for alpha in ALPHAS:
            for direction in directions:
                kw = model(dtype, direction)
                if direction == "forward":
                    actual = backend.forward(x, alpha).value
                    expected = golden.leaky_relu(x, alpha, **kw)
                else:
                    actual = backend.backward(dy, x, alpha).value
                    expected = golden.leaky_relu_backward(dy, x, alpha, **kw)
                wrong = differing(np.asarray(actual), expected)
                if wrong.size:
                    i = wrong[0]
                    bad.append(f"{dtype} {direction} a={alpha}: {wrong.size} differ, e.g. x={x[i]!r} "
                               f"dy={dy[i]!r} actual={np.asarray(actual)[i]!r} model={expected[i]!r}")
    assert not bad, f"{name}[{profile}] differs from its model {model.__name__}:\n" + "\n".join(bad)


def test_the_fused_gradient_differs_from_the_plain_branch_sum() -> None:
    """``grad_form="fma"`` keeps the sign of a flushed nonzero product; the plain sum adds +0 to it."""
    x = np.array([-1.0, -1.0, 1.0], np.float32)
    dy = np.array([-1.5e-38, -0.0, -1e-39], np.float32)  # a*dy subnormal; an exact zero; a subnormal dy
    kw = dict(slope_dtype="float32", grad_rule="ge", daz=True, ftz=True)
    fused = golden.leaky_relu_backward(dy, x, 0.3, grad_form="fma", **kw)
    summed = golden.leaky_relu_backward(dy, x, 0.3, grad_form="sum", **kw)
    assert np.signbit(fused).tolist() == [True, False, False]
    assert np.signbit(summed).tolist() == [False, False, False]
