"""One frozen record of every variant setting the golden computes.

The default record is the exact reference: ``y = x if x > 0 else alpha*x`` and
``dx = dy if x > 0 else alpha*dy``, with the binary64 ``alpha`` and one rounding to the
output dtype.  Every other value of a field is a semantic variant that some framework,
chip or hand-written kernel shows; ``conformance.reference.golden`` computes it.  The
fields, by what they change:

- the slope: ``slope`` (used instead of the alpha asked for), ``slope_dtype`` (the slope
  rounded to a dtype, or to each of a chain in turn: TensorFlow's float32 attribute
  converted to T), ``opmath`` (the product computed in that dtype, as PyTorch's float32
  opmath);
- subnormals: ``daz`` (arithmetic reads subnormal operands as zero, the comparison too),
  ``ftz`` (subnormal products flushed), ``flush_inputs`` (every read flushed, selected
  values included), ``flush_output`` (the result flushed);
- the formula: ``predicate`` (``x > 0`` or ``x >= 0``), ``formulation`` (``max(x, a*x)``,
  ``min(x, a*x)``, ``max_or_min``: max for a <= 1 and min above, ``maxmin``:
  ``max(x,0)+a*min(x,0)``, ``mask-multiply``: ``x*m + a*x*(1-m)``, ``relu``, ``scale``:
  a*x on both sides, ``twice``: applied to its own result, ``merge``: a select whose merge
  turns a selected zero product into +0 as ONNX Runtime's Where does; for the backward
  ``swap_branches``: a*dy where x > 0 and dy elsewhere, ``swap_operands``: x and dy passed
  the other way round), ``nan_operand`` (``x``: a max/min formulation returns x where the
  product is NaN, as a compare-select ``a > b ? a : b`` does; ``propagate`` is ``np.maximum``);
- limits and rounding: ``saturate`` (Ascend saturation mode: NaN -> 0 and ±inf -> ±max;
  ``"inf"`` clamps only the infinities), ``saturate_inputs`` (operands saturate as a
  float32 unit reads them, and narrowing to ``input_dtype`` saturates at its limits),
  ``rounding`` of the final conversion (``rtz`` truncates, so
  overflow gives ±max; ``rna`` rounds half away from zero), ``input_dtype`` (operands
  narrowed before computing), ``result_dtype`` (the result rounded to a narrower dtype,
  then converted to the output dtype);
- the gradient: ``grad_rule`` (``ge``: dx = dy at x == 0; ``max``: MindSpore's gradient of
  ``maximum(a*x, x)``; ``result``: selected on y > 0, wrong for a < 0; ``step``: the TBE
  pre-v200 step function, which gives a positive subnormal x a fraction of dy), ``nan_grad`` (dx at
  x = NaN), ``grad_form`` (``sum``: autodiff's branch sum; ``fma``: that sum fused).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Literal, Optional, Union, get_args

import numpy as np

from conformance.dtypes import info

Predicate = Literal["gt", "ge"]
GradRule = Literal["gt", "ge", "max", "result", "step"]
NanGrad = Literal["alpha", "dy", "zero", "dy*0", "nan"]
GradForm = Literal["select", "sum", "fma"]
Formulation = Literal["select", "max", "min", "maxmin", "mask-multiply", "relu", "scale", "max_or_min",
                      "twice", "swap_branches", "swap_operands", "merge"]
NanOperand = Literal["propagate", "x"]
Saturate = Union[bool, Literal["inf"]]  # "inf": only the infinities clamp
Rounding = Literal["rne", "rtz", "rna"]  # the final conversion: to nearest even, toward zero, half away
SlopeDTypes = Optional[Union[str, tuple[str, ...]]]

_CHOICES: dict[str, tuple] = {
    "predicate": get_args(Predicate), "grad_rule": get_args(GradRule), "nan_grad": get_args(NanGrad),
    "grad_form": get_args(GradForm), "formulation": get_args(Formulation),
    "nan_operand": get_args(NanOperand), "saturate": (False, True, "inf"), "rounding": get_args(Rounding),
}
#: Formulations the backward does not model: it computes them as the select.
FORWARD_ONLY: frozenset[str] = frozenset({"max", "min", "maxmin", "mask-multiply", "max_or_min", "twice", "merge"})
_FLAGS = ("daz", "ftz", "flush_inputs", "saturate_inputs", "flush_output")
_DTYPES = ("opmath", "input_dtype", "result_dtype")


@dataclass(frozen=True)
class Semantics:
    """How a LeakyReLU computes its bits; the default is the exact reference."""

    slope: Optional[float] = None
    slope_dtype: SlopeDTypes = None
    opmath: Optional[str] = None
    daz: bool = False
    ftz: bool = False
    predicate: Predicate = "gt"
    formulation: Formulation = "select"
    nan_operand: NanOperand = "propagate"
    saturate: Saturate = False
    rounding: Rounding = "rne"
    input_dtype: Optional[str] = None
    result_dtype: Optional[str] = None
    grad_rule: GradRule = "gt"
    nan_grad: NanGrad = "alpha"
    grad_form: GradForm = "select"
    flush_inputs: bool = False
    saturate_inputs: bool = False
    flush_output: bool = False

    def __post_init__(self) -> None:
        for name, choices in _CHOICES.items():
            _check_choice(name, getattr(self, name), choices)
        for name in _FLAGS:
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"Semantics.{name} must be True or False, got {getattr(self, name)!r}")
            object.__setattr__(self, name, bool(getattr(self, name)))
        for name in _DTYPES:
            object.__setattr__(self, name, _dtype_name(name, getattr(self, name)))
        object.__setattr__(self, "slope_dtype", _slope_dtypes(self.slope_dtype))
        if self.slope is not None:
            object.__setattr__(self, "slope", _finite_slope(self.slope))

    def __str__(self) -> str:
        """``exact``, or the settings that differ from it (a flag by its name alone)."""
        parts = []
        for name, value in self.settings().items():
            if value is True:
                parts.append(name)
            else:
                shown = "/".join(value) if isinstance(value, tuple) else value
                parts.append(f"{name}={shown}")
        return ", ".join(parts) or "exact"

    def settings(self) -> dict[str, object]:
        """The fields that differ from the exact reference, in field order."""
        return dict(self._settings)

    @cached_property
    def _settings(self) -> dict[str, object]:
        return {name: getattr(self, name) for name, default in _DEFAULTS if getattr(self, name) != default}

    def combined(self, other: Semantics) -> Semantics:
        """This record with ``other``'s settings on top (where both set a field, ``other`` wins)."""
        if not other._settings:
            return self
        if not self._settings:
            return other
        # both fields' values are already checked: triage combines records per stack it scores,
        # and checking them again would cost as much as a small batch's golden
        out = object.__new__(Semantics)
        out.__dict__.update({name: getattr(self, name) for name, _ in _DEFAULTS}, **other._settings)
        return out


_DEFAULTS: tuple[tuple[str, object], ...] = tuple((f.name, f.default) for f in fields(Semantics))


def _check_choice(name: str, value: object, choices: tuple) -> None:
    if isinstance(value, str) and value in choices:
        return
    if not any(value is c for c in choices):  # True and False themselves, never 1 or 0
        raise ValueError(f"Semantics.{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def _dtype_name(name: str, dtype: object) -> Optional[str]:
    if dtype is None:
        return None
    try:
        return info(dtype).name
    except (TypeError, ValueError, KeyError):
        raise ValueError(f"Semantics.{name} must be a float dtype name such as 'float16'; got {dtype!r}") from None


def _slope_dtypes(chain: object) -> SlopeDTypes:
    """One dtype name, a tuple of them (rounded in turn), or None."""
    if isinstance(chain, (tuple, list)):
        if not chain:
            raise ValueError("Semantics.slope_dtype must name at least one dtype; pass None for the exact slope")
        return tuple(_dtype_name("slope_dtype", d) for d in chain)
    return _dtype_name("slope_dtype", chain)


def _finite_slope(slope: object) -> float:
    if isinstance(slope, bool) or not isinstance(slope, numbers.Real) or not math.isfinite(float(slope)):
        raise ValueError(f"Semantics.slope must be a finite number (or None for the alpha asked for); got {slope!r}")
    return float(slope)


EXACT = Semantics()  # the exact reference
