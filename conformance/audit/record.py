"""What the audit finds: one record per LeakyReLU, whatever the target kind.

Every default comes from ``conformance.reference.defaults`` (the one table);
a record names the table entry (``api``) whose default applies or matches.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from conformance.reference.defaults import DefaultSlope, entry_for

#: How the slope is known.
PASSED = "passed"    # written at the call or construction
DEFAULT = "default"  # nothing passed: the framework default applies (implicit)
STORED = "stored"    # a value stored in an artefact (a saved config, a module attribute)
DYNAMIC = "dynamic"  # not a literal: unknown before running (and it blocks Conv+LeakyReLU fusion)
ORIGINS = (PASSED, DEFAULT, STORED, DYNAMIC)


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

    @property
    def entry(self) -> DefaultSlope:
        return entry_for(self.api)

    @property
    def implicit(self) -> bool:
        """The slope is a framework default nobody wrote down."""
        return self.origin == DEFAULT

    @property
    def equals_default(self) -> bool:
        """The slope equals the default of its own API (compared as float32)."""
        return self.slope is not None and same_slope(self.slope, self.entry.declared)


def same_slope(a: Optional[float], b: Optional[float]) -> bool:
    """Two effective slopes agree (as float32, the way frameworks store them); unknown never agrees."""
    return a is not None and b is not None and bool(np.float32(a) == np.float32(b))


def from_default(*, where: str, api: str, dtype: Optional[str] = None) -> Activation:
    """A LeakyReLU that passed no slope: the table's default for ``api``."""
    entry = entry_for(api)
    return Activation(where, entry.framework, api, DEFAULT, entry.declared, dtype)


def with_value(value: float, *, where: str, api: str, origin: str = PASSED,
               dtype: Optional[str] = None) -> Activation:
    """A LeakyReLU whose slope is known: passed in source or stored in an artefact."""
    return Activation(where, entry_for(api).framework, api, origin, float(value), dtype)


def dynamic(expression: str, *, where: str, api: str) -> Activation:
    """A LeakyReLU whose slope is an expression the audit cannot evaluate without running it."""
    return Activation(where, entry_for(api).framework, api, DYNAMIC, None, expression=expression)


@dataclass(frozen=True)
class Audit:
    """Every LeakyReLU of one target, in the target's order."""

    target: str
    kind: str  # source, onnx, keras, savedmodel, torch, torch-export, msprobe-stats
    activations: tuple[Activation, ...]
    notes: tuple[str, ...] = ()
