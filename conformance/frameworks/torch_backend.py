"""PyTorch (CPU) LeakyReLU with an explicit slope, forward and autograd backward."""
from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import numpy as np

from conformance.backends import SameDtypeBackend
from conformance.dtypes import info
from conformance.extras import require_installed
from conformance.records import BackendResult, Direction


def tensor_from_numpy(a: np.ndarray):
    """numpy (ml_dtypes bfloat16 included) -> torch, through bit views for bfloat16."""
    import torch

    a = np.ascontiguousarray(a)
    if info(a.dtype).name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def numpy_from_tensor(t) -> np.ndarray:
    """torch -> numpy, bfloat16 coming back as an ml_dtypes array with the same bits."""
    import torch

    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(info("bfloat16").dtype)
    return t.numpy()


class TorchBackend(SameDtypeBackend):
    """``torch.nn.functional.leaky_relu(x, negative_slope=alpha)``; backward via autograd."""

    name = "torch"
    default_suite = True
    packages = ("torch",)
    requires = ("torch",)

    def __init__(self) -> None:
        require_installed(*self.requires, backend=self.name)

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        import torch.nn.functional as F

        return _refusing(alpha, lambda: numpy_from_tensor(F.leaky_relu(tensor_from_numpy(x), negative_slope=alpha)))

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        import torch.nn.functional as F

        def grad() -> np.ndarray:
            xt = tensor_from_numpy(x).requires_grad_(True)
            F.leaky_relu(xt, negative_slope=alpha).backward(tensor_from_numpy(dy))
            return numpy_from_tensor(xt.grad)

        return _refusing(alpha, grad)

    ops = ("leaky_relu", "prelu", "rrelu")

    def prelu(self, direction: Direction, x: np.ndarray, weight: np.ndarray, *,
              dy: Optional[np.ndarray] = None) -> BackendResult:
        """``nn.PReLU(num_parameters=weight.size)`` holding ``weight`` (torch's channel axis: 1, or 0
        for an input of rank <= 1); its weight gradient is autograd's."""
        import torch

        module = torch.nn.PReLU(num_parameters=int(np.size(weight)), dtype=tensor_from_numpy(x).dtype)
        with torch.no_grad():
            module.weight.copy_(tensor_from_numpy(np.asarray(weight).reshape(-1)))
        return prelu_gradients(direction, x, module, dy=dy)

    def rrelu(self, direction: Direction, x: np.ndarray, *, dy: Optional[np.ndarray] = None) -> BackendResult:
        """``nn.RReLU()`` (torch's bounds 1/8 and 1/3) in eval mode: LeakyReLU at their mean, 11/48."""
        import torch

        return prelu_gradients(direction, x, torch.nn.RReLU().eval(), dy=dy)


def prelu_gradients(direction: Direction, x: np.ndarray, module, *, dy: Optional[np.ndarray]) -> BackendResult:
    """``module`` (an ``nn.PReLU`` or ``nn.RReLU`` in eval mode) on ``x``: y, or dx and the weight's
    gradient (autograd) when it has a weight."""
    xt = tensor_from_numpy(x).requires_grad_(direction == "backward")
    y = module(xt)
    if direction == "forward":
        return BackendResult(numpy_from_tensor(y))
    y.backward(tensor_from_numpy(dy))
    weight = getattr(module, "weight", None)
    return BackendResult(numpy_from_tensor(xt.grad),
                         dweight=None if weight is None else numpy_from_tensor(weight.grad))


def _refusing(alpha: float, compute: Callable[[], np.ndarray]) -> BackendResult:
    """torch refuses a slope its opmath type cannot hold (1e308 on an fp16/fp32 tensor): rejected-input."""
    try:
        return BackendResult(compute())
    except RuntimeError as exc:
        if "cannot be converted to type" not in str(exc):
            raise
        return BackendResult(value=None, rejected=f"torch refused negative_slope={alpha!r}: {exc}")
