"""Each framework's default LeakyReLU slope: declared (docs/domain.md) and probed live.

A script that relies on one framework's default silently changes behaviour
when it moves to another: this table is the "default-alpha trap".
A probe calls the API without a slope on x = -1 and reads the slope off the output.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import numpy as np

_X = -1.0


def _probe_torch_functional() -> float:
    import torch

    return -float(torch.nn.functional.leaky_relu(torch.tensor([_X], dtype=torch.float64))[0])


def _probe_torch_module() -> float:
    import torch

    return -float(torch.nn.LeakyReLU()(torch.tensor([_X], dtype=torch.float64))[0])


def _probe_tf_nn() -> float:
    from conformance.reference.tensorflow_backend import tensorflow

    tf = tensorflow()
    return -float(tf.nn.leaky_relu(tf.constant([_X], dtype=tf.float64)).numpy()[0])


def _probe_keras_layer() -> float:
    from conformance.reference.tensorflow_backend import tensorflow

    tf = tensorflow()
    return -float(tf.keras.layers.LeakyReLU()(tf.constant([_X], dtype=tf.float32)).numpy()[0])


def _probe_keras_ops() -> float:
    from conformance.reference.tensorflow_backend import tensorflow

    tf = tensorflow()
    return -float(np.asarray(tf.keras.ops.leaky_relu(tf.constant([_X], dtype=tf.float32)))[0])


def _probe_jax() -> float:
    import jax
    import jax.numpy as jnp

    return -float(jax.nn.leaky_relu(jnp.asarray([_X], dtype=jnp.float32))[0])


@dataclass(frozen=True)
class DefaultSlope:
    """One API's default slope, where it is declared, and how to probe it."""

    api: str
    framework: str
    argument: str
    declared: float
    module: Optional[str] = None  # the import that must exist for the probe
    probe: Optional[Callable[[], float]] = None
    source: str = ""


DEFAULTS: tuple[DefaultSlope, ...] = (
    DefaultSlope("CANN LeakyRelu (graph op)", "CANN", "negative_slope", 0.0,
                 source="hicann/ops-nn activation/leaky_relu/op_host/leaky_relu_def.cpp"),
    DefaultSlope("torch.nn.functional.leaky_relu", "torch", "negative_slope", 0.01, "torch",
                 _probe_torch_functional, "aten/src/ATen/native/Activation.cpp"),
    DefaultSlope("torch.nn.LeakyReLU", "torch", "negative_slope", 0.01, "torch",
                 _probe_torch_module, "torch/nn/modules/activation.py"),
    DefaultSlope("tf.nn.leaky_relu", "tf.nn", "alpha", 0.2, "tensorflow",
                 _probe_tf_nn, "tensorflow/python/ops/nn_ops.py"),
    DefaultSlope("keras.layers.LeakyReLU", "Keras layer", "negative_slope", 0.3, "tensorflow",
                 _probe_keras_layer, "keras/src/layers/activations/leaky_relu.py"),
    DefaultSlope("keras.ops.leaky_relu", "Keras ops", "negative_slope", 0.2, "tensorflow",
                 _probe_keras_ops, "keras/src/ops/nn.py"),
    DefaultSlope("mindspore.nn.LeakyReLU", "MindSpore", "alpha", 0.2,
                 source="mindspore/python/mindspore/nn/layer/activation.py"),
    DefaultSlope("ONNX LeakyRelu", "ONNX", "alpha", 0.01,
                 source="onnx/defs/math/defs.cc (float32 attribute)"),
    DefaultSlope("jax.nn.leaky_relu", "JAX", "negative_slope", 0.01, "jax",
                 _probe_jax, "jax/_src/nn/functions.py"),
    DefaultSlope("paddle.nn.LeakyReLU", "Paddle", "negative_slope", 0.01,
                 source="python/paddle/nn/layer/activation.py"),
)


def frameworks_with_default(alpha: float) -> tuple[str, ...]:
    """Frameworks whose declared default equals ``alpha`` (compared as float32, as they store it)."""
    names = (d.framework for d in DEFAULTS if np.float32(d.declared) == np.float32(alpha))
    return tuple(dict.fromkeys(names))


def default_slopes() -> tuple[float, ...]:
    """Every distinct declared default slope."""
    return tuple(sorted({d.declared for d in DEFAULTS}))


@dataclass(frozen=True)
class ProbeResult:
    """A declared default beside the live probe (None when the framework is not installed)."""

    entry: DefaultSlope
    probed: Optional[float]

    @property
    def status(self) -> str:
        if self.entry.probe is None:
            return "declared only"
        if self.probed is None:
            return "not installed"
        agree = np.float32(self.probed) == np.float32(self.entry.declared)
        return "agrees" if agree else "DISAGREES"


def probe(entry: DefaultSlope) -> ProbeResult:
    """Run ``entry``'s probe when its framework is importable."""
    if entry.probe is None or entry.module is None or importlib.util.find_spec(entry.module) is None:
        return ProbeResult(entry, None)
    return ProbeResult(entry, entry.probe())


def probe_all() -> tuple[ProbeResult, ...]:
    return tuple(probe(entry) for entry in DEFAULTS)
