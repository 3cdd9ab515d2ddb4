"""Each framework's declared default LeakyReLU slope (docs/domain.md): the one table of defaults.

A script that relies on one framework's default silently changes behaviour
when it moves to another: this table is the "default-alpha trap".  It is data
only; the live probes that check it against the installed frameworks are
:mod:`conformance.frameworks.default_probes`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from conformance.errors import UsageError


@dataclass(frozen=True)
class DefaultSlope:
    """One API's default slope, where it is declared, and what its live probe needs."""

    api: str
    framework: str
    argument: str
    declared: float
    module: Optional[str] = None  # the import that must exist for the probe (None: no probe)
    source: str = ""
    #: Distributions whose version the probe reports (the first installed one).
    packages: tuple[str, ...] = ()
    #: The backend whose worker runs the probe in its framework's own environment (None: in-process).
    environment: Optional[str] = None


_TORCH, _TF, _KERAS = ("torch",), ("tensorflow-cpu", "tensorflow"), ("keras",)
_ORT, _PADDLE, _MS = ("onnxruntime", "onnx"), ("paddlepaddle",), ("mindspore",)

DEFAULTS: tuple[DefaultSlope, ...] = (
    DefaultSlope("CANN LeakyRelu (graph op)", "CANN", "negative_slope", 0.0,
                 source="hicann/ops-nn activation/leaky_relu/op_host/leaky_relu_def.cpp"),
    DefaultSlope("torch.nn.functional.leaky_relu", "torch", "negative_slope", 0.01, "torch",
                 "aten/src/ATen/native/Activation.cpp", _TORCH),
    DefaultSlope("torch.nn.LeakyReLU", "torch", "negative_slope", 0.01, "torch",
                 "torch/nn/modules/activation.py", _TORCH),
    DefaultSlope("tf.nn.leaky_relu", "tf.nn", "alpha", 0.2, "tensorflow", "tensorflow/python/ops/nn_ops.py", _TF),
    DefaultSlope("keras.layers.LeakyReLU", "Keras layer", "negative_slope", 0.3, "keras",
                 "keras/src/layers/activations/leaky_relu.py", _KERAS),
    DefaultSlope("keras.ops.leaky_relu", "Keras ops", "negative_slope", 0.2, "keras", "keras/src/ops/nn.py", _KERAS),
    DefaultSlope("mindspore.ops.leaky_relu", "MindSpore", "alpha", 0.2, "mindspore",
                 "mindspore/python/mindspore/ops/function/nn_func.py", _MS, "mindspore"),
    DefaultSlope("mindspore.nn.LeakyReLU", "MindSpore", "alpha", 0.2, "mindspore",
                 "mindspore/python/mindspore/nn/layer/activation.py", _MS, "mindspore"),
    DefaultSlope("ONNX LeakyRelu", "ONNX", "alpha", 0.01, "onnxruntime",
                 "onnx/defs/math/defs.cc (float32 attribute)", _ORT),
    DefaultSlope("jax.nn.leaky_relu", "JAX", "negative_slope", 0.01, "jax",
                 "jax/_src/nn/functions.py", ("jax", "jaxlib")),
    DefaultSlope("paddle.nn.functional.leaky_relu", "Paddle", "negative_slope", 0.01, "paddle",
                 "python/paddle/nn/functional/activation.py", _PADDLE, "paddle"),
    DefaultSlope("paddle.nn.LeakyReLU", "Paddle", "negative_slope", 0.01, "paddle",
                 "python/paddle/nn/layer/activation.py", _PADDLE, "paddle"),
)


def entry_for(api: str) -> DefaultSlope:
    """The table's entry for ``api``; a UsageError naming the choices otherwise."""
    found = [d for d in DEFAULTS if d.api == api]
    if not found:
        raise UsageError(f"no default-slope entry for {api!r}; choose from {', '.join(d.api for d in DEFAULTS)}")
    return found[0]


def frameworks_with_default(alpha: float) -> tuple[str, ...]:
    """Frameworks whose declared default equals ``alpha`` (compared as float32, as they store it)."""
    names = (d.framework for d in DEFAULTS if np.float32(d.declared) == np.float32(alpha))
    return tuple(dict.fromkeys(names))


def default_slopes() -> tuple[float, ...]:
    """Every distinct declared default slope."""
    return tuple(sorted({d.declared for d in DEFAULTS}))
