"""The gradient of a user's kernel by its framework's own autodiff: torch autograd,
``jax.vjp`` and ``tf.GradientTape``; dx = the vector-Jacobian product of ``fn(x, alpha)`` with dy."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from conformance.frameworks.arrays import Framework, to_framework, to_numpy

Forward = Callable[[Any, float], Any]


def gradient(fn: Forward, framework: Framework, x: np.ndarray, dy: np.ndarray, alpha: float) -> Any:
    """dx of ``fn`` at ``x`` for ``dy`` (in ``framework``'s arrays); NotImplementedError for numpy."""
    if framework == "torch":
        return _torch(fn, x, dy, alpha)
    if framework == "jax":
        import jax

        _, pullback = jax.vjp(lambda t: fn(t, alpha), to_framework(x, "jax"))
        return pullback(to_framework(dy, "jax"))[0]
    if framework == "tensorflow":
        return _tensorflow(fn, x, dy, alpha)
    raise NotImplementedError("no backward given")


def _torch(fn: Forward, x: np.ndarray, dy: np.ndarray, alpha: float) -> Any:
    xt = to_framework(x, "torch").requires_grad_(True)
    fn(xt, alpha).backward(to_framework(dy, "torch"))
    if xt.grad is None:
        raise RuntimeError("autograd gave no gradient for x")
    return xt.grad


def _tensorflow(fn: Forward, x: np.ndarray, dy: np.ndarray, alpha: float) -> Any:
    from conformance.frameworks.tensorflow_backend import tensorflow

    tf = tensorflow()
    xt = to_framework(x, "tensorflow")
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = fn(xt, alpha)
    dx = tape.gradient(y, xt, output_gradients=to_framework(dy, "tensorflow"))
    if dx is None:
        raise RuntimeError("GradientTape gave no gradient for x")
    return to_numpy(dx)
