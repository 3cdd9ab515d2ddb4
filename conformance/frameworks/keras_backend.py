"""``keras``: Keras 3's ``keras.ops.leaky_relu`` (variant ``ops``) or ``keras.layers.LeakyReLU``
(variant ``layer``), forward, on one Keras backend (the profile: tensorflow, jax, torch or numpy).

In the default suite on its tensorflow profile, ops variant (``--backend keras
[--profile jax] [--variant layer]`` picks another).  Keras picks its
backend once per process (``KERAS_BACKEND``), so each profile runs in a worker of
its own.  The layer under Keras's default float32 policy returns float32 for a
16-bit input: its rows are the pairs fp16->fp32 and bf16->fp32.  Keras has no
backend-neutral gradient, so backward rows are skipped with the reason.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Optional

import numpy as np

from conformance.backends import BackendBase
from conformance.errors import BackendUnavailable, Unsupported, UsageError
from conformance.extras import require
from conformance.records import BackendResult, Direction, Pair

PROFILES = ("tensorflow", "jax", "torch", "numpy")
VARIANTS = ("ops", "layer")
_DTYPES = {"tensorflow": ("float16", "bfloat16", "float32", "float64"),
           "jax": ("float16", "bfloat16", "float32"),  # float64 needs jax_enable_x64
           "torch": ("float16", "bfloat16", "float32", "float64"),
           "numpy": ("float16", "bfloat16", "float32")}  # float64 comes back float32 (below)
_ALLOWED_BY_PROFILE = {"numpy": frozenset({"alpha-precision"}), "torch": frozenset()}
_LAYER_PAIRS: tuple[Pair, ...] = (("float16", "float32"), ("bfloat16", "float32"), ("float32", "float32"))


def keras_on(profile: str) -> Any:
    """The keras module running on ``profile``; it must not be imported with another backend already."""
    loaded = sys.modules.get("keras")
    if loaded is not None and loaded.backend.backend() != profile:
        raise BackendUnavailable(f"keras already runs on {loaded.backend.backend()} in this process; "
                                 f"profile {profile} needs a worker of its own")
    os.environ["KERAS_BACKEND"] = profile
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    keras = require("keras", backend="keras")
    if keras.backend.backend() != profile:
        raise BackendUnavailable(f"keras started on {keras.backend.backend()}, not {profile}")
    return keras


class KerasBackend(BackendBase):
    """One Keras API on one Keras backend."""

    name = "keras"
    default_suite = True
    profiles = PROFILES
    variants = VARIANTS
    packages = ("keras", "tensorflow", "tensorflow-cpu", "jax", "torch")
    requires = ("keras",)  # and its backend's framework, which starting it checks
    worker_command: Optional[tuple[str, ...]] = ("{python}", "-m", "conformance", "worker", "--backend", "keras")
    #: its tensorflow and jax profiles: their framework's slope attribute and DAZ/FTZ
    allowed = frozenset({"alpha-precision", "subnormal-flush"})

    @classmethod
    def allowed_on(cls, profile: Optional[str] = None) -> frozenset[str]:
        """numpy's ``max(x, a*x)`` is not allowed ``formulation`` (it is wrong for alpha > 1); torch
        computes as torch does."""
        return _ALLOWED_BY_PROFILE.get(profile or "", cls.allowed)

    def __init__(self, *, profile: Optional[str] = None, variant: Optional[str] = None):
        self.profile = profile or os.environ.get("KERAS_BACKEND", "tensorflow")
        self.variant = variant or "ops"
        if self.profile not in PROFILES or self.variant not in VARIANTS:
            raise UsageError(f"keras takes --profile {'/'.join(PROFILES)} and --variant {'/'.join(VARIANTS)}")
        self.keras = keras_on(self.profile)

    def suite_pairs(self) -> tuple[Pair, ...]:
        return _LAYER_PAIRS if self.variant == "layer" else tuple((d, d) for d in _DTYPES[self.profile])

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool:
        return direction == "forward" and (dtype, out_dtype) in self.suite_pairs()

    def skip_reason(self, dtype: str, out_dtype: str, direction: Direction) -> str:
        if direction == "backward":
            return "Keras has no gradient API; use the framework's backend"
        if self.variant == "layer":
            return "the layer under the default float32 policy returns float32 (fp16/bf16/fp32 -> fp32 only)"
        if self.profile == "numpy" and dtype == "float64":
            return "keras's numpy backend converts a float64 input to float32 (convert_to_tensor's result_type)"
        return f"keras on {self.profile} runs (T, T) for T in {', '.join(_DTYPES[self.profile])}"

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        keras = self.keras
        if self.variant == "layer":
            y = keras.layers.LeakyReLU(negative_slope=alpha)(x)
        else:
            y = keras.ops.leaky_relu(keras.ops.convert_to_tensor(x), negative_slope=alpha)
        return BackendResult(np.asarray(keras.ops.convert_to_numpy(y)))

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        raise Unsupported(self.skip_reason(x.dtype.name, x.dtype.name, "backward"))
