"""The backend protocol and registry: who computes LeakyReLU.

Stable names: ``golden``, ``torch``, ``tensorflow``, ``cann`` (with a profile
and a variant) and ``dump`` (arrays given to ``conformance compare``).
Framework modules are imported only when their backend is asked for.
"""
from __future__ import annotations

import importlib
from typing import Optional, Protocol

import numpy as np

from conformance.records import BackendResult, Direction

BACKENDS = ("golden", "torch", "tensorflow", "cann")
_FACTORIES = {
    "golden": "conformance.reference.golden_backend:GoldenBackend",
    "torch": "conformance.reference.torch_backend:TorchBackend",
    "tensorflow": "conformance.reference.tensorflow_backend:TensorFlowBackend",
    "cann": "conformance.npu_impl.backend:CannBackend",
}


class Backend(Protocol):
    """What every backend offers.  Unsupported pairs are skipped, never faked."""

    name: str
    profile: Optional[str]
    variant: Optional[str]

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool: ...

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult: ...

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult: ...


class SameDtypeBackend:
    """Base for framework ops whose output dtype is the input's: (T, T) for T in ``dtypes``."""

    name = ""
    profile: Optional[str] = None
    variant: Optional[str] = None
    dtypes: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool:
        return dtype == out_dtype and dtype in self.dtypes


def get_backend(name: str, *, profile: Optional[str] = None, variant: Optional[str] = None) -> Backend:
    """Instantiate a backend by its stable name (``profile``/``variant`` are for ``cann``)."""
    if name not in _FACTORIES:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}")
    module, cls = _FACTORIES[name].split(":")
    factory = getattr(importlib.import_module(module), cls)
    if name == "cann":
        return factory(profile=profile, variant=variant)
    return factory()


def call(backend: Backend, direction: Direction, x: np.ndarray, alpha: float, *,
         dy: Optional[np.ndarray] = None, out_dtype: Optional[str] = None) -> BackendResult:
    """Run one direction on a backend (``dy`` is required for backward)."""
    if direction == "forward":
        return backend.forward(x, alpha, out_dtype=out_dtype)
    if dy is None:
        raise ValueError("backward needs dy")
    return backend.backward(dy, x, alpha, out_dtype=out_dtype)
