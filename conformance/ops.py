"""The operators as data: ``leaky_relu`` (a fixed slope), ``prelu`` (a weight tensor) and ``rrelu``
in eval mode (a fixed slope, the mean of its bounds), and the defaults each framework gives them.

A row's identity names its op (``RowKey.op``); a backend declares the ops it computes
(:func:`ops_of`).  The defaults name a slope by whose it is, so that triage can say "channel 2
used 0.25 (torch's PReLU initial value)" rather than only that a slope differs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from conformance.dtypes import info
from conformance.records import DEFAULT_OP
from conformance.reference.defaults import frameworks_with_default

#: torch.nn.RReLU's bounds (torch/nn/modules/activation.py: lower=1/8, upper=1/3); in eval mode the
#: slope is their mean (aten/src/ATen/native/Activation.cpp, rrelu: ``(lower + upper) / 2``).
RRELU_LOWER, RRELU_UPPER = 1 / 8, 1 / 3
RRELU_EVAL_SLOPE = (RRELU_LOWER + RRELU_UPPER) / 2  # 11/48 in float64


@dataclass(frozen=True)
class Op:
    """One operator: its name, what it computes, and whether it has a weight tensor."""

    name: str
    formula: str
    weighted: bool = False


OPS: dict[str, Op] = {op.name: op for op in (
    Op(DEFAULT_OP, "x if x > 0 else alpha * x"),
    Op("prelu", "x if x > 0 else w[c] * x, w learnable (1, C, or the input's shape without its batch axis)",
       weighted=True),
    Op("rrelu", "eval mode: x if x > 0 else (lower + upper) / 2 * x"),
)}


@dataclass(frozen=True)
class OpDefault:
    """A slope an op's API starts from, whose it is, and where that is declared."""

    op: str
    whose: str
    slope: float
    source: str


OP_DEFAULTS: tuple[OpDefault, ...] = (
    OpDefault("prelu", "torch's PReLU initial value", 0.25, "torch/nn/modules/activation.py (PReLU, init=0.25)"),
    OpDefault("prelu", "Keras's PReLU initial value", 0.0,
              "keras/src/layers/activations/prelu.py (alpha_initializer='Zeros')"),
    OpDefault("prelu", "Paddle's PReLU initial value", 0.25, "python/paddle/nn/layer/activation.py (init=0.25)"),
    OpDefault("prelu", "MindSpore's PReLU initial value", 0.25, "mindspore/python/mindspore/nn/layer/activation.py"),
    OpDefault("rrelu", "torch's RReLU eval slope (1/8 + 1/3) / 2 = 11/48", RRELU_EVAL_SLOPE,
              "torch/nn/modules/activation.py (RReLU, lower=1/8, upper=1/3)"),
)


def whose(slope: float) -> tuple[str, ...]:
    """The defaults equal to ``slope`` (compared in float32, bfloat16 and float16 too, as a kernel holds
    them), by whose they are: the PReLU and RReLU ones, then the LeakyReLU defaults
    (:mod:`conformance.reference.defaults`)."""
    found = []
    for d in OP_DEFAULTS:
        held = {np.float64(np.float32(d.slope)), np.float64(np.float16(d.slope)), np.float64(d.slope)}
        if float(slope) in held or _bfloat16(d.slope) == slope:
            found.append(d.whose)
    found += [f"the {framework} LeakyReLU default" for framework in frameworks_with_default(slope)]
    return tuple(dict.fromkeys(found))


def _bfloat16(v: float) -> float:
    return float(np.float64(np.array(v, dtype=np.float32).astype(info("bfloat16").dtype)))


def ops_of(backend: object) -> tuple[str, ...]:
    """The ops ``backend`` computes (``ops``; a backend that declares none computes LeakyReLU only)."""
    return tuple(getattr(backend, "ops", (DEFAULT_OP,)))


def prelu_runs(backend: object, dtype: str, direction: str) -> bool:
    """Whether ``backend`` runs its PReLU/RReLU rows on ``dtype`` in ``direction``: its ``prelu_supports``,
    else its LeakyReLU ``supports`` of (dtype, dtype)."""
    own = getattr(backend, "prelu_supports", None)
    if own is not None:
        return bool(own(dtype, direction))
    return bool(backend.supports(dtype, dtype, direction))  # type: ignore[attr-defined]
