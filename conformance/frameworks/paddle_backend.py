"""``paddle``: ``paddle.nn.functional.leaky_relu`` on CPU, forward, and backward by ``paddle.grad``.

Opt-in (``--backend paddle``), in a worker running in ``.venv-paddle`` (created by
``make conformance-all``).  Paddle's CPU LeakyReLU kernels are registered for
float32 and float64 only; the other pairs are skipped with that reason.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from conformance.extras import require
from conformance.frameworks.environments import Environment, OwnEnvironmentBackend
from conformance.records import BackendResult, Direction

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


def _paddle_on_cpu() -> Any:
    paddle = require("paddle", backend="paddle")
    paddle.set_device("cpu")
    return paddle
