"""``mindspore``: ``mindspore.ops.leaky_relu`` on CPU, forward, and backward by MindSpore's autodiff.

Opt-in (``--backend mindspore``), in a worker running in ``.venv-mindspore``
(created by ``make conformance-all``; MindSpore 2.10 needs numpy 1.26).  Its CPU
kernels run float16 and float32 (bfloat16 Maximum is not supported, float64 is
refused); the other pairs are skipped with that reason.  Backward is
``mindspore.vjp`` with the cotangent dy; it gives the same bits as
``mindspore.grad`` of ``sum(leaky_relu(x) * dy)`` (checked on all 65,536 fp16
patterns and 200,000 random fp32 ones, alpha 0.2).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from conformance.frameworks.environments import Environment, OwnEnvironmentBackend
from conformance.frameworks.loading import require
from conformance.records import BackendResult, Direction

ENVIRONMENT = Environment("mindspore", ".venv-mindspore")


class MindSporeBackend(OwnEnvironmentBackend):
    """``ops.leaky_relu(x, alpha)`` in PyNative mode on the CPU device."""

    name = "mindspore"
    environment = ENVIRONMENT
    packages = ("mindspore",)
    dtypes = ("float16", "float32")

    def __init__(self) -> None:
        self.ms = _mindspore_on_cpu()

    def skip_reason(self, dtype: str, out_dtype: str, direction: Direction) -> str:
        if dtype != out_dtype:
            return "mindspore's leaky_relu returns the input's dtype"
        return "mindspore's CPU kernels run leaky_relu on float16/float32 only (no bfloat16 Maximum)"

    def _fn(self, alpha: float):
        return lambda t: self.ms.ops.leaky_relu(t, alpha)

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        return BackendResult(np.asarray(self._fn(alpha)(self.ms.Tensor(x)).asnumpy()))

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        ms = self.ms
        _, pullback = ms.vjp(self._fn(alpha), ms.Tensor(x))
        dx = pullback(ms.Tensor(dy))
        dx = dx[0] if isinstance(dx, tuple) else dx
        return BackendResult(np.asarray(dx.asnumpy()))


_WARM_UP_CALLS = 64  # at most; measured: the first 5 calls of a process do not flush


def _mindspore_on_cpu() -> Any:
    ms = require("mindspore", backend="mindspore")
    ms.set_context(mode=ms.PYNATIVE_MODE, runtime_num_threads=1, pynative_synchronize=True)
    ms.set_device("CPU")
    _warm_up(ms)
    return ms


def _warm_up(ms: Any) -> None:
    """Run until the CPU runtime reaches its steady state, which flushes subnormals.

    Measured with mindspore 2.10: a process's first calls compute float32 subnormals
    exactly, later ones flush them (FTZ/DAZ), and with the default thread pool and
    asynchronous execution a call flips between the two.  One runtime thread,
    synchronous execution and this warm-up make every measured call the steady state.
    """
    probe = ms.Tensor(np.full(8, -1e-40, dtype=np.float32))
    for _ in range(_WARM_UP_CALLS):
        if ms.ops.leaky_relu(probe, 0.5).asnumpy()[0] == 0:
            return
