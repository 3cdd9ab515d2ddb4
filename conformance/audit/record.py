"""What the audit finds: one record per LeakyReLU, PReLU or RReLU, whatever the target kind.

Every LeakyReLU default comes from ``conformance.reference.defaults`` (the one table), every
PReLU and RReLU one from ``conformance.ops`` (:data:`OP_APIS`); a record names the entry
(``api``) whose default applies or matches.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from conformance.errors import UsageError
from conformance.ops import OP_DEFAULTS, RRELU_EVAL_SLOPE
from conformance.records import DEFAULT_OP
from conformance.reference.defaults import DEFAULTS, DefaultSlope

#: How the slope is known.
PASSED = "passed"    # written at the call or construction
DEFAULT = "default"  # nothing passed: the framework default applies (implicit)
STORED = "stored"    # a value stored in an artefact (a saved config, a module attribute)
DYNAMIC = "dynamic"  # not a literal: unknown before running (and it blocks Conv+LeakyReLU fusion)
ORIGINS = (PASSED, DEFAULT, STORED, DYNAMIC)

#: Where a built PReLU's weight stands.
INITIAL = "initial value"  # every element still equals the value it was initialised with
TRAINED = "trained"        # some element differs from it


def _op_default(api: str, framework: str, argument: str, *, whose: str) -> DefaultSlope:
    """``api``'s default as the ``conformance.ops`` default whose name starts with ``whose`` (its slope and
    source)."""
    found = next(d for d in OP_DEFAULTS if d.whose.startswith(whose))
    return DefaultSlope(api, framework, argument, found.slope, source=found.source)


#: The PReLU and RReLU APIs the audit reads, each with the slope it starts from: a PReLU's initial
#: weight, an RReLU's eval slope (lower + upper) / 2.  ``torch.nn.functional.prelu`` takes its weight
#: and has none.
OP_APIS: dict[str, tuple[str, Optional[DefaultSlope]]] = {
    "torch.nn.PReLU": ("prelu", _op_default("torch.nn.PReLU", "torch", "init", whose="torch's PReLU")),
    "torch.nn.functional.prelu": ("prelu", None),
    "torch.nn.RReLU": ("rrelu", _op_default("torch.nn.RReLU", "torch", "lower, upper", whose="torch's RReLU")),
    "torch.nn.functional.rrelu": ("rrelu", DefaultSlope(
        "torch.nn.functional.rrelu", "torch", "lower, upper", RRELU_EVAL_SLOPE,
        source="torch/nn/functional.py (rrelu, lower=1/8, upper=1/3, training=False)")),
    "keras.layers.PReLU": ("prelu", _op_default("keras.layers.PReLU", "Keras layer", "alpha_initializer",
                                                whose="Keras's PReLU")),
}
_FRAMEWORKS = {"torch.nn.functional.prelu": "torch"}


def default_of(api: str) -> Optional[DefaultSlope]:
    """The default of ``api``: the LeakyReLU table's entry, or a PReLU/RReLU one (None: the API has
    none, its weight is an argument); a UsageError naming the choices for an unknown API."""
    if api in OP_APIS:
        return OP_APIS[api][1]
    found = [d for d in DEFAULTS if d.api == api]
    if not found:
        choices = ", ".join([*(d.api for d in DEFAULTS), *OP_APIS])
        raise UsageError(f"no default-slope entry for {api!r}; choose from {choices}")
    return found[0]


def framework_of(api: str) -> str:
    entry = default_of(api)
    return entry.framework if entry is not None else _FRAMEWORKS[api]


def op_of(api: str) -> str:
    """The op an API computes: ``leaky_relu``, ``prelu`` or ``rrelu``."""
    return OP_APIS[api][0] if api in OP_APIS else DEFAULT_OP


@dataclass(frozen=True)
class Activation:
    """One LeakyReLU of a target: where, whose API, and its slope."""

    where: str            # file:line, module path or graph node name
    framework: str        # the defaults table's framework name (torch, Keras layer, ONNX, ...)
    api: str              # the defaults table's API name
    origin: str           # one of ORIGINS
    slope: Optional[float] = None  # the effective slope (None: dynamic)
    dtype: Optional[str] = None
    expression: Optional[str] = None  # the source text of a dynamic slope
    hazards: tuple[str, ...] = field(default_factory=tuple)
    stats: Optional[dict[str, float]] = None  # msprobe input Max/Min
    weight: Optional[tuple[float, ...]] = None  # a built PReLU's weight, element by element
    provenance: Optional[str] = None  # a built PReLU's: INITIAL or TRAINED
    bounds: Optional[tuple[float, float]] = None  # an RReLU's (lower, upper)
    arguments: tuple[str, ...] = ()  # other arguments that shape it, as written (``shared_axes=[1, 2]``)

    @property
    def op(self) -> str:
        return op_of(self.api)

    @property
    def entry(self) -> Optional[DefaultSlope]:
        return default_of(self.api)

    @property
    def implicit(self) -> bool:
        """The slope is a framework default nobody wrote down."""
        return self.origin == DEFAULT

    @property
    def equals_default(self) -> bool:
        """The slope equals the default of its own API (compared as float32)."""
        return self.entry is not None and same_slope(self.slope, self.entry.declared)


def same_slope(a: Optional[float], b: Optional[float]) -> bool:
    """Two effective slopes agree (as float32, the way frameworks store them); unknown never agrees."""
    return a is not None and b is not None and bool(np.float32(a) == np.float32(b))


def from_default(*, where: str, api: str, dtype: Optional[str] = None) -> Activation:
    """A LeakyReLU that passed no slope: the table's default for ``api``."""
    entry = default_of(api)
    assert entry is not None, f"{api} has no default"
    return Activation(where, entry.framework, api, DEFAULT, entry.declared, dtype)


def with_value(value: float, *, where: str, api: str, origin: str = PASSED,
               dtype: Optional[str] = None) -> Activation:
    """A LeakyReLU whose slope is known: passed in source or stored in an artefact."""
    return Activation(where, framework_of(api), api, origin, float(value), dtype)


def dynamic(expression: str, *, where: str, api: str) -> Activation:
    """A LeakyReLU whose slope is an expression the audit cannot evaluate without running it."""
    return Activation(where, framework_of(api), api, DYNAMIC, None, expression=expression)


@dataclass(frozen=True)
class Audit:
    """Every LeakyReLU, PReLU and RReLU of one target, in the target's order."""

    target: str
    kind: str  # source, onnx, keras, savedmodel, torch, torch-export, msprobe-stats
    activations: tuple[Activation, ...]
    notes: tuple[str, ...] = ()
