"""``torch_npu``: torch's leaky_relu on an Ascend ``npu`` device, forward and autograd backward.

It only makes sense on an Ascend host with ``torch_npu`` installed, so by default
it runs behind a worker (``conformance worker --backend torch_npu``), and a user
reaches a remote host with ``--worker "ssh HOST /opt/venv/bin/conformance worker
--backend torch_npu"``.  Not run on Ascend hardware by the project's tests; the worker protocol around it
is tested with other backends.
dtypes: FLOAT, FLOAT16, BFLOAT16 and DOUBLE, as hicann/ops-nn's
``activation/leaky_relu/README.md`` lists them for aclnnLeakyRelu.
"""
from __future__ import annotations

import importlib.util
import os
from typing import Any, Optional

import numpy as np

from conformance.backends import SameDtypeBackend
from conformance.errors import BackendUnavailable
from conformance.frameworks.torch_backend import numpy_from_tensor, tensor_from_numpy
from conformance.records import BackendResult

REMOTE_HINT = "--worker \"ssh HOST /opt/venv/bin/conformance worker --backend torch_npu\""


def npu_device() -> Any:
    """The torch device to run on (``CONFORMANCE_NPU_DEVICE``, default ``npu:0``), checked live."""
    if importlib.util.find_spec("torch_npu") is None:  # say so before spending seconds importing torch
        raise BackendUnavailable(f"torch_npu is not installed; run it on an Ascend host, e.g. {REMOTE_HINT}")
    try:
        import torch
        import torch_npu  # noqa: F401  (registers the npu device with torch)
    except ImportError as exc:
        raise BackendUnavailable(f"torch_npu is not installed ({exc}); run it on an Ascend host, "
                                 f"e.g. {REMOTE_HINT}") from None
    if not torch.npu.is_available():
        raise BackendUnavailable("torch_npu is installed but sees no NPU device "
                                 "(check the driver, ASCEND_RT_VISIBLE_DEVICES and npu-smi)")
    return torch.device(os.environ.get("CONFORMANCE_NPU_DEVICE", "npu:0"))


class TorchNpuBackend(SameDtypeBackend):
    """``torch.nn.functional.leaky_relu`` on the npu device; results come back to the host."""

    name = "torch_npu"
    packages = ("torch", "torch-npu")
    worker_command: Optional[tuple[str, ...]] = ("{python}", "-m", "conformance", "worker", "--backend", "torch_npu")

    def __init__(self) -> None:
        self.device = npu_device()

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        import torch.nn.functional as F

        y = F.leaky_relu(tensor_from_numpy(x).to(self.device), negative_slope=alpha)
        return BackendResult(numpy_from_tensor(y.cpu()))

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        import torch.nn.functional as F

        xt = tensor_from_numpy(x).to(self.device).requires_grad_(True)
        F.leaky_relu(xt, negative_slope=alpha).backward(tensor_from_numpy(dy).to(self.device))
        return BackendResult(numpy_from_tensor(xt.grad.cpu()))
