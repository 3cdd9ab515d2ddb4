"""The golden reference as a backend: the suite's self-check row.

It lives beside the framework adapters, not in ``reference/``: the reference
defines what "right" means and imports no backend; this is one more adapter of
a computation to the Backend protocol.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from conformance.backends import BackendBase
from conformance.records import BackendResult, Direction
from conformance.reference import golden


class GoldenBackend(BackendBase):
    """Runs ``conformance.reference.golden``; every row must match itself exactly."""

    name = "golden"
    default_suite = True

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool:
        return (dtype, out_dtype) in golden.SUPPORTED_PAIRS

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        return BackendResult(golden.forward(x, alpha, out_dtype=out_dtype))

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        return BackendResult(golden.backward(dy, x, alpha, out_dtype=out_dtype))
