"""Backends computing PReLU and RReLU by the golden, for the worker tests: a reusable test helper, not
product code.

``GoldenPrelu`` answers every PReLU/RReLU call with the exact golden (y, dx, dweight), so a row it
serves through a worker must pass; ``WrongDweight`` returns a weight gradient of the wrong shape,
which the client must turn into a refusal.  :func:`command` is the worker command line serving one.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import numpy as np

from conformance.frameworks.golden_backend import GoldenBackend
from conformance.ops import RRELU_EVAL_SLOPE
from conformance.records import BackendResult, Direction
from conformance.reference import prelu as golden_prelu

HERE = Path(__file__).resolve()


class GoldenPrelu(GoldenBackend):
    """The golden LeakyReLU, PReLU and RReLU (eval), on float32 and float16 PReLU rows."""

    name = "golden_prelu"
    ops = ("leaky_relu", "prelu", "rrelu")
    prelu_allowed = frozenset({"signed-zero"})  # a fact the hello carries, not one the golden needs

    def prelu_supports(self, dtype: str, direction: Direction) -> bool:
        return dtype in ("float32", "float16")

    def prelu(self, direction: Direction, x: np.ndarray, weight: np.ndarray, *,
              dy: Optional[np.ndarray] = None) -> BackendResult:
        if direction == "forward":
            return BackendResult(golden_prelu.forward(x, weight))
        return BackendResult(golden_prelu.backward(dy, x, weight), dweight=golden_prelu.dweight(dy, x, weight))

    def rrelu(self, direction: Direction, x: np.ndarray, *, dy: Optional[np.ndarray] = None) -> BackendResult:
        slope = np.array([RRELU_EVAL_SLOPE])
        value = golden_prelu.forward(x, slope) if direction == "forward" else golden_prelu.backward(dy, x, slope)
        return BackendResult(value)


class WrongDweight(GoldenPrelu):
    """The golden, but a weight gradient one element short."""

    name = "wrong_dweight"

    def prelu(self, direction: Direction, x: np.ndarray, weight: np.ndarray, *,
              dy: Optional[np.ndarray] = None) -> BackendResult:
        result = super().prelu(direction, x, weight, dy=dy)
        return result if result.dweight is None else BackendResult(result.value, dweight=result.dweight[:-1])


def command(backend: str) -> str:
    """The worker command serving ``backend`` (a class of this module), on golden's numpy path: the
    reference implementation, and milliseconds rather than the second loading the compiled loops takes."""
    return shlex.join(["env", "CONFORMANCE_COMPILED=0", sys.executable, "-m", "conformance", "worker",
                       "--backend", f"{HERE}:{backend}"])
