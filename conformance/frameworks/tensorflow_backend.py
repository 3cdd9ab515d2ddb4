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
from conformance.records import BackendResult


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
