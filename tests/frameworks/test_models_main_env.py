"""Each real framework equals its golden model bit for bit.

The model of a framework is the Semantics that describes what it computes
(``conformance/frameworks/models.py``); these tests run the framework on every 16-bit
pattern and a fixed random float32/float64 sample, forward and backward, at the suite's
alphas, and compare bits (zero signs included; any NaN equals any NaN).  A framework
that is not installed is skipped.  Keras profiles other than the one this process runs
Keras on run in a worker each (tests/framework_support.py).
"""
from __future__ import annotations

import importlib.util
from dataclasses import replace

import numpy as np
import pytest

from conformance.backends import get_backend
from conformance.dtypes import all_patterns
from conformance.errors import BackendUnavailable
from conformance.frameworks import models
from conformance.frameworks.models import Model
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.framework_support import keras_backend
from tests.helpers import differing

ALPHAS = (0.0, 0.01, 0.2, 0.3, 1.5)
RANDOM = 200_000
# backend, profile, model, dtypes, directions
CASES = [
    ("jax", None, models.jax, ("float16", "bfloat16", "float32", "float64"), ("forward", "backward")),
    ("onnxruntime", None, models.onnxruntime, ("float16", "float32"), ("forward",)),
    ("keras", "jax", models.jax, ("float16", "bfloat16", "float32"), ("forward",)),
    ("keras", "numpy", models.keras_numpy, ("float16", "bfloat16", "float32"), ("forward",)),
    ("keras", "tensorflow", models.tensorflow, ("float16", "bfloat16", "float32", "float64"), ("forward",)),
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
        return keras_backend(profile) if name == "keras" and profile else get_backend(name, profile=profile)
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


def _misses(actual: dict[float, np.ndarray], semantics: Semantics, x: np.ndarray, dy: np.ndarray, *,
            direction: str) -> list[str]:
    """One line per alpha where ``semantics`` does not reproduce the actual bits."""
    misses = []
    for alpha, value in actual.items():
        expected = golden.compute(direction, x, alpha, dy=dy, semantics=semantics)
        wrong = differing(value, expected)
        if wrong.size:
            i = wrong[0]
            misses.append(f"a={alpha}: {wrong.size} differ, e.g. x={x[i]!r} dy={dy[i]!r} "
                          f"actual={value[i]!r} model={expected[i]!r}")
    return misses


@pytest.mark.parametrize(("name", "profile", "model", "dtypes", "directions"), CASES,
                         ids=[f"{c[0]}[{c[1]}]" if c[1] else c[0] for c in CASES])
def test_framework_equals_its_golden_model(name: str, profile: str | None, model: Model,
                                           dtypes: tuple[str, ...], directions: tuple[str, ...]) -> None:
    backend = _backend(name, profile)
    alternative = models.HOST_DEPENDENT.get(f"{name}[{profile}]" if profile else name)
    bad = []
    for dtype in dtypes:
        x, dy = _inputs(dtype)
        for direction in directions:
            actual = {alpha: np.asarray(backend.forward(x, alpha).value if direction == "forward"
                                        else backend.backward(dy, x, alpha).value) for alpha in ALPHAS}
            misses = _misses(actual, model(dtype, direction), x, dy, direction=direction)
            if misses and alternative is not None:
                misses = _misses(actual, alternative(dtype, direction), x, dy, direction=direction) and misses
            bad += [f"{dtype} {direction} {miss}" for miss in misses]
    assert not bad, f"{name}[{profile}] differs from its model {model.__name__}:\n" + "\n".join(bad)


def test_the_fused_gradient_differs_from_the_plain_branch_sum() -> None:
    """``grad_form="fma"`` keeps the sign of a flushed nonzero product; the plain sum adds +0 to it."""
    x = np.array([-1.0, -1.0, 1.0], np.float32)
    dy = np.array([-1.5e-38, -0.0, -1e-39], np.float32)  # a*dy subnormal; an exact zero; a subnormal dy
    model = models.jax("float32", "backward")
    assert model.grad_form == "fma"
    fused = golden.backward(dy, x, 0.3, semantics=model)
    summed = golden.backward(dy, x, 0.3, semantics=replace(model, grad_form="sum"))
    assert np.signbit(fused).tolist() == [True, False, False]
    assert np.signbit(summed).tolist() == [False, False, False]


def test_every_model_is_looked_up_by_backend_and_profile() -> None:
    assert models.known_semantics("keras", profile="numpy", dtype="float16", direction="forward") == \
        Semantics(slope_dtype="float16", formulation="max")
    assert str(models.known_semantics("jax", dtype="float16", direction="forward")) == \
        "slope_dtype=float16, predicate=ge"
    with pytest.raises(KeyError, match="no model of torch"):
        models.known_semantics("torch", dtype="float32", direction="forward")
