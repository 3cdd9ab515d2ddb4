"""TensorFlow (CPU) LeakyReLU with an explicit alpha; backward via GradientTape.

TensorFlow is imported lazily (it takes seconds) and with its C++ start-up
logs silenced: ``TF_CPP_MIN_LOG_LEVEL=3`` plus a muted stderr during import,
because a few lines (oneDNN, absl) are printed before the level is read.
"""
from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Optional

import numpy as np

from conformance.backends import SameDtypeBackend
from conformance.extras import require_installed
from conformance.records import BackendResult, Direction


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null for the duration (C++ logs bypass sys.stderr)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@functools.lru_cache(maxsize=1)
def tensorflow():
    """The tensorflow module, imported once, quietly."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with _quiet_stderr():
        import tensorflow as tf

        tf.constant(0.0)  # first op initialises the runtime (more start-up logs)
    return tf


class TensorFlowBackend(SameDtypeBackend):
    """``tf.nn.leaky_relu(x, alpha=alpha)``; the gradient comes from ``tf.GradientTape``."""

    name = "tensorflow"
    default_suite = True
    packages = ("tensorflow", "tensorflow-cpu")
    requires = ("tensorflow",)
    allowed = frozenset({"alpha-precision", "subnormal-flush"})  # a float32 attribute; DAZ/FTZ

    def __init__(self) -> None:
        require_installed(*self.requires, backend=self.name)

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        tf = tensorflow()
        return BackendResult(tf.nn.leaky_relu(tf.constant(x), alpha=alpha).numpy())

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        tf = tensorflow()
        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = tf.nn.leaky_relu(xt, alpha=alpha)
        return BackendResult(tape.gradient(y, xt, output_gradients=tf.constant(dy)).numpy())

    ops = ("leaky_relu", "prelu")
    #: What Keras's PReLU shows by design on this backend (docs/reference/prelu.md): its formula
    #: ``relu(x) - alpha * relu(-x)`` and that formula's gradient, with TensorFlow's DAZ/FTZ.
    prelu_allowed = frozenset({"formulation", "subnormal-flush"})

    def prelu_supports(self, dtype: str, direction: Direction) -> bool:
        """Every PReLU row: float32, float16 and bfloat16, both directions (the float16 dweight is summed in
        Eigen's order, :mod:`conformance.reference.eigen_reduction`)."""
        return dtype in ("float32", "float16", "bfloat16")

    def prelu(self, direction: Direction, x: np.ndarray, weight: np.ndarray, *,
              dy: Optional[np.ndarray] = None) -> BackendResult:
        """Keras 3's ``layers.PReLU`` on its TensorFlow backend (``keras/src/layers/activations/prelu.py``:
        ``relu(x) - alpha * relu(-x)``; alpha shaped as the input without its batch axis, here shared
        along every axis after the channel's, ``shared_axes=[2, ...]``); dweight from ``tf.GradientTape``."""
        tf = tensorflow()
        import keras

        shared = list(range(1 if np.size(weight) == 1 else 2, x.ndim)) or None
        layer = keras.layers.PReLU(shared_axes=shared, dtype=x.dtype.name)
        layer.build(x.shape)
        layer.alpha.assign(np.broadcast_to(np.asarray(weight).reshape((-1,) + (1,) * max(x.ndim - 2, 0)),
                                           layer.alpha.shape).astype(x.dtype))
        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = layer(xt)
        if direction == "forward":
            return BackendResult(y.numpy())
        dx, dalpha = tape.gradient(y, [xt, layer.alpha], output_gradients=tf.constant(dy))
        return BackendResult(dx.numpy(), dweight=np.asarray(dalpha).reshape(np.shape(weight)))
