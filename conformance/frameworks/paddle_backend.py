"""``paddle``: ``paddle.nn.functional.leaky_relu`` on CPU, forward, and backward by ``paddle.grad``;
``F.prelu`` and ``F.rrelu`` in eval mode the same way (the PReLU weight's gradient too).

Opt-in (``--backend paddle``), in a worker running in ``.venv-paddle`` (created by
``make conformance-all``).  Paddle's CPU LeakyReLU kernels are registered for
float32 and float64 only; the other pairs are skipped with that reason.  Its CPU
PReLU kernels (``paddle/phi/kernels/cpu/prelu_kernel.cc``, ``prelu_grad_kernel.cc``)
are float32 and float64 in 3.3.1 (float16 and bfloat16 are "not registered", measured),
so of the suite's PReLU dtypes only float32 runs.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Optional

import numpy as np

from conformance.extras import require
from conformance.frameworks.environments import Environment, OwnEnvironmentBackend
from conformance.records import BackendResult, Direction
from conformance.reference.prelu import expanded_weight

ENVIRONMENT = Environment("paddle", ".venv-paddle")


class PaddleBackend(OwnEnvironmentBackend):
    """``F.leaky_relu(x, negative_slope=alpha)``; ``paddle.grad`` with ``grad_outputs=dy`` gives dx."""

    name = "paddle"
    environment = ENVIRONMENT
    packages = ("paddlepaddle",)
    allowed = frozenset({"alpha-precision", "formulation", "grad-at-zero", "nan-gradient"})
    dtypes = ("float32", "float64")

    def __init__(self) -> None:
        self.paddle = _paddle_on_cpu()

    def skip_reason(self, dtype: str, out_dtype: str, direction: Direction) -> str:
        if dtype != out_dtype:
            return "paddle's leaky_relu returns the input's dtype"
        return "paddle's CPU leaky_relu kernels are float32/float64 only"

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        y = self.paddle.nn.functional.leaky_relu(self.paddle.to_tensor(x), negative_slope=alpha)
        return BackendResult(np.asarray(y.numpy()))

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        paddle = self.paddle
        xt = paddle.to_tensor(x, stop_gradient=False)
        y = paddle.nn.functional.leaky_relu(xt, negative_slope=alpha)
        (dx,) = paddle.grad(outputs=[y], inputs=[xt], grad_outputs=[paddle.to_tensor(dy)])
        return BackendResult(np.asarray(dx.numpy()))

    ops = ("leaky_relu", "prelu", "rrelu")
    #: PReLU is the golden's select (``prelu_kernel.cc``, ``prelu_grad_kernel.cc``).  RReLU in eval mode
    #: (``paddle/phi/kernels/cpu/rrelu_kernel.cc``) multiplies by ``(lower + upper) / 2`` held in the input's
    #: dtype only where x < 0 and keeps a noise of 1 elsewhere, so its gradient is dy at x = ±0 and NaN.
    prelu_allowed = frozenset({"alpha-precision", "grad-at-zero", "nan-gradient"})

    def prelu_supports(self, dtype: str, direction: Direction) -> bool:
        """float32 only of the suite's PReLU dtypes: the CPU ``prelu`` and ``prelu_grad`` kernels are float/double."""
        return dtype == "float32"

    def prelu(self, direction: Direction, x: np.ndarray, weight: np.ndarray, *,
              dy: Optional[np.ndarray] = None) -> BackendResult:
        """``F.prelu(x, w, data_format="NCHW")``: mode ``all`` (one element) or ``channel`` (C on axis 1), or
        ``element`` (the input's shape without its batch axis) through ``_C_ops.prelu``, which ``F.prelu``
        does not offer; dx and dweight from ``paddle.grad``."""
        w = np.asarray(weight)
        if w.size == 1 or (w.ndim == 1 and x.ndim > 1 and w.size == x.shape[1]):
            result = self._autograd(lambda t, s: self.paddle.nn.functional.prelu(t, s, data_format="NCHW"),
                                    direction, x, dy=dy, weight=w.reshape(-1))
        else:
            result = self._autograd(lambda t, s: self.paddle._C_ops.prelu(t, s, "NCHW", "element"),
                                    direction, x, dy=dy, weight=expanded_weight(w, x.shape))
        return result if result.dweight is None else replace(result, dweight=result.dweight.reshape(w.shape))

    def rrelu(self, direction: Direction, x: np.ndarray, *, dy: Optional[np.ndarray] = None) -> BackendResult:
        """``F.rrelu(x, training=False)`` with its bounds 1/8 and 1/3 (torch's): LeakyReLU at their mean."""
        return self._autograd(lambda t: self.paddle.nn.functional.rrelu(t, training=False), direction, x, dy=dy)

    def _autograd(self, fn: Callable[..., Any], direction: Direction, x: np.ndarray, *, dy: Optional[np.ndarray],
                  weight: Optional[np.ndarray] = None) -> BackendResult:
        """``fn(x)`` (``fn(x, weight)`` when given a weight), or dx and the weight's gradient by ``paddle.grad``
        with ``grad_outputs=dy``."""
        paddle = self.paddle
        inputs = [paddle.to_tensor(a, stop_gradient=direction != "backward") for a in (x, weight) if a is not None]
        y = fn(*inputs)
        if direction == "forward":
            return BackendResult(np.asarray(y.numpy()))
        grads = paddle.grad(outputs=[y], inputs=inputs, grad_outputs=[paddle.to_tensor(dy)])
        dweight = None if weight is None else np.asarray(grads[1].numpy())
        return BackendResult(np.asarray(grads[0].numpy()), dweight=dweight)


def _paddle_on_cpu() -> Any:
    paddle = require("paddle", backend="paddle")
    paddle.set_device("cpu")
    return paddle
