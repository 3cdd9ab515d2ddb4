"""The light framework backends (jax, onnxruntime, keras): what they run, what they skip and why.

Their golden models are tested in tests/frameworks/test_models_main_env.py; these tests check
that each backend calls its framework as documented and declares its pairs honestly, and
that a framework that is missing makes its backend refuse in one line naming the pip extra.
"""
from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from conformance import backends, suite
from conformance.errors import BackendUnavailable, Unsupported
from conformance.sweep.run import dask_executor
from conformance.worker import client
from tests.framework_support import keras_backend
from tests.helpers import assert_same_bits

HAVE = {name: importlib.util.find_spec(name) is not None for name in ("jax", "onnxruntime", "keras", "tensorflow")}


@pytest.fixture(autouse=True)
def fresh_workers():
    yield
    client.close_all()
    suite.backend_for.cache_clear()


def test_light_framework_backends_are_in_the_default_suite() -> None:
    assert {"jax", "onnxruntime", "keras"} <= set(backends.default_backends())
    assert "torch_npu" not in backends.default_backends()


@pytest.mark.parametrize("name, module, extra", [("jax", "jax", "jax"), ("onnxruntime", "onnx", "onnx"),
                                                 ("keras", "keras", "keras")])
def test_a_framework_that_cannot_be_imported_names_its_extra(name: str, module: str, extra: str,
                                                             monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails as if it were missing
    hint = f"backend {name}: cannot import {module} .*pip install 'conformance\\[{extra}\\]'"
    with pytest.raises(BackendUnavailable, match=hint):
        backends.get_backend(name)


@pytest.mark.parametrize("name, module", [("torch", "torch"), ("tensorflow", "tensorflow")])
def test_a_framework_that_is_not_installed_names_its_extra(name: str, module: str, monkeypatch) -> None:
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m == module else found(m, *a))
    with pytest.raises(BackendUnavailable, match=f"{module} is not installed; pip install 'conformance\\[{name}\\]'"):
        backends.get_backend(name)


def test_a_sweep_without_dask_names_its_extra(monkeypatch) -> None:
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m == "dask" else found(m, *a))
    with pytest.raises(BackendUnavailable, match="conformance sweep: dask .*conformance\\[sweep\\]"):
        with dask_executor(workers=1):
            pass


@pytest.mark.skipif(not HAVE["jax"], reason="jax is not installed")
def test_jax_forward_and_vjp_use_its_documented_select() -> None:
    jax = backends.get_backend("jax")
    x = np.array([-2.0, -0.0, 0.0, 3.0, np.nan], np.float64)
    assert_same_bits(jax.forward(x, 0.25).value, np.array([-0.5, -0.0, 0.0, 3.0, np.nan]))
    # where(x >= 0, ...): the gradient at x == 0 is dy, not alpha*dy
    assert_same_bits(jax.backward(np.full(5, 2.0), x, 0.25).value, np.array([0.5, 2.0, 2.0, 2.0, 0.5]))


@pytest.mark.skipif(not HAVE["onnxruntime"], reason="onnxruntime is not installed")
def test_onnxruntime_runs_fp16_and_fp32_forward_and_says_why_not_the_rest() -> None:
    ort = backends.get_backend("onnxruntime")
    x = np.array([-1.0, 2.0, -0.0], np.float16)
    assert_same_bits(ort.forward(x, 0.5).value, np.array([-0.5, 2.0, -0.0], np.float16))
    assert not ort.supports("bfloat16", "bfloat16", "forward")
    assert "no bfloat16 LeakyRelu" in backends.skip_reason(ort, "bfloat16", "bfloat16", "forward")
    assert "no float64 LeakyRelu" in backends.skip_reason(ort, "float64", "float64", "forward")
    assert "gradient" in backends.skip_reason(ort, "float16", "float16", "backward")


@pytest.mark.skipif(not (HAVE["keras"] and HAVE["tensorflow"]), reason="keras on tensorflow is not installed")
def test_keras_layer_returns_float32_for_16_bit_inputs_like_tensorflow_in_float32() -> None:
    from conformance.dtypes import all_patterns

    layer = keras_backend("tensorflow", variant="layer")
    assert (layer.profile, layer.variant) == ("tensorflow", "layer")
    assert layer.supports("float16", "float32", "forward") and not layer.supports("float16", "float16", "forward")
    assert "float32 policy" in layer.skip_reason("float16", "float16", "forward")
    x = all_patterns("float16")
    y = layer.forward(x, 0.3, out_dtype="float32").value
    expected = backends.get_backend("tensorflow").forward(x.astype(np.float32), 0.3).value
    assert_same_bits(y, expected, what="keras layer fp16 -> fp32")


def test_a_backend_without_a_backward_raises_unsupported_when_asked_for_one() -> None:
    """Keras and ONNX Runtime have no gradient: both say so the same way, which the suite and the worker skip."""
    from conformance.frameworks.keras_backend import KerasBackend
    from conformance.frameworks.onnxruntime_backend import OnnxRuntimeBackend

    keras = object.__new__(KerasBackend)  # the facts only: no keras import
    keras.profile, keras.variant = "tensorflow", "ops"
    x = np.ones(2, np.float32)
    for backend in (keras, object.__new__(OnnxRuntimeBackend)):
        with pytest.raises(Unsupported, match="gradient"):
            backend.backward(x, x, 0.2)
