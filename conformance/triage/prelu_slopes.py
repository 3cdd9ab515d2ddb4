"""The slopes a PReLU weight element may have used, read from its own elements: worth trying, never
claimed here (:mod:`conformance.triage.prelu` proves each by recomputation).

Two sources, the named ones first:

- the declared slope, the decimal it was written from, and every default (PReLU's and RReLU's,
  :data:`conformance.ops.OP_DEFAULTS`, and each framework's LeakyReLU default,
  :mod:`conformance.reference.defaults`), each also held in float32, bfloat16 and float16;
- the slope the data shows: each element with x <= 0 bounds it to ``(a ± ulp(a)/2) / v`` (``a`` the
  output, ``v`` the multiplied operand; one rounding moves a product half an ULP), or to one ULP (a
  second rounding through float32 moves it a little more), and the interval most elements agree on
  holds the slope, however a few others were disturbed. From it: zero, then the shortest decimals in
  it (a constant someone typed), then the values float16, bfloat16 and float32 hold in it (a slope kept
  narrow), then its middle (a learned value of no shorter form).
"""
from __future__ import annotations

import numpy as np

from conformance.dtypes import from_bits, info, to_bits
from conformance.ops import OP_DEFAULTS
from conformance.reference.defaults import default_slopes
from conformance.reference.exact import cast_exact

HELD_IN = ("float32", "bfloat16", "float16")  # the dtypes a kernel may hold a slope in


def held(value: float, dtype: str) -> float:
    """``value`` rounded to ``dtype``, as a float."""
    return float(cast_exact(np.array([value], dtype=np.float64), info(dtype))[0])


def decimal_of(value: float, dtype: np.dtype) -> float:
    """The shortest decimal that rounds to ``value`` in ``dtype``: the number a weight was written from."""
    for digits in range(1, 18):
        decimal = float(f"{value:.{digits}g}")
        if float(cast_exact(np.array([decimal]), info(dtype))[0]) == value:
            return decimal
    return value


def named_slopes(declared: float, weight_dtype: np.dtype) -> list[float]:
    """The declared slope, its decimal and every default, each as given and held in :data:`HELD_IN`."""
    found: list[float] = []
    for slope in (declared, decimal_of(declared, weight_dtype), *(d.slope for d in OP_DEFAULTS), *default_slopes()):
        found += [slope, *(held(slope, t) for t in HELD_IN)]
    return found


def _ulps(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The spacing of ``dtype`` at each finite ``a`` (the smallest subnormal's at zero)."""
    t = info(dtype)
    _, e = np.frexp(np.abs(a))
    return np.ldexp(1.0, np.maximum(e.astype(np.int64) - 1, t.emin) - t.mant_bits)


def bounds(operand: np.ndarray, actual: np.ndarray, x: np.ndarray, *,
           ulps: float) -> tuple[np.ndarray, np.ndarray]:
    """Per element with x <= 0 and a finite non-zero operand and finite output: the slopes whose product is
    within ``ulps`` of its output (half: rounded once to it; one: through float32 first too)."""
    with np.errstate(all="ignore"):
        v, a = operand.astype(np.float64), actual.astype(np.float64)
        usable = (x <= 0) & np.isfinite(v) & np.isfinite(a) & (v != 0)
        v, a = v[usable], a[usable]
        spacing = ulps * _ulps(a, actual.dtype)
        ends = ((a - spacing) / v, (a + spacing) / v)
    return np.minimum(*ends), np.maximum(*ends)


def densest(lo: np.ndarray, hi: np.ndarray) -> tuple[float, float, int]:
    """The interval most of ``[lo, hi]`` overlap on, and how many do (a sweep: starts before ends)."""
    points = np.concatenate([lo, hi])
    steps = np.concatenate([np.ones(lo.size, np.int64), -np.ones(hi.size, np.int64)])
    order = np.lexsort((-steps, points))
    covering = np.cumsum(steps[order])
    at = int(np.argmax(covering))
    return float(points[order][at]), float(points[order][min(at + 1, points.size - 1)]), int(covering[at])


def within(lo: float, hi: float) -> list[float]:
    """Slopes in ``[lo, hi]``, the simplest first (:func:`digits`): zero, the shortest decimals, the float16,
    bfloat16 and float32 values nearest the middle, the middle."""
    middle = (lo + hi) / 2
    found = [0.0] if lo <= 0.0 <= hi else []
    found += [d for d in (float(f"{middle:.{digits}e}") for digits in range(17)) if lo <= d <= hi]
    for dtype in ("float16", "bfloat16", "float32"):
        near = held(middle, dtype)
        found += [v for v in (near, *_neighbours(near, dtype)) if lo <= v <= hi]
    return sorted(dict.fromkeys([*found, middle]), key=digits)


def digits(slope: float) -> int:
    """The significant digits of the shortest decimal ``slope`` is, or rounds to in a dtype holding it
    exactly: 0.13671875 is 0.137 held in bfloat16, three digits, simpler than the decimal 0.13672."""
    forms = [slope, *(decimal_of(slope, info(t).dtype) for t in HELD_IN if held(slope, t) == slope)]
    return min(_significant(f) for f in forms)


def _significant(value: float) -> int:
    mantissa = np.format_float_scientific(abs(value), unique=True).split("e")[0]
    return len(mantissa.replace(".", "").rstrip("0")) or 1


def _neighbours(value: float, dtype: str) -> list[float]:
    """The finite non-zero ``value``'s neighbours in ``dtype`` (one step of its bits either way)."""
    if not np.isfinite(value) or value == 0:
        return []
    bits = to_bits(cast_exact(np.array([value]), info(dtype))).astype(np.int64)
    stepped = np.concatenate([bits - 1, bits + 1]).astype(info(dtype).uint)
    return [float(v) for v in from_bits(stepped, info(dtype).dtype).astype(np.float64)]


def data_slopes(operand: np.ndarray, actual: np.ndarray, x: np.ndarray) -> list[float]:
    """The slopes in the interval most of these elements' bounds agree on (:func:`within`): half an ULP
    wide first (where most products rounded once, every slope in it reproduces them), then one ULP (a
    second rounding through float32); none without an element that bounds the slope."""
    found: list[float] = []
    for ulps in (0.5, 1.0):
        lo, hi = bounds(operand, actual, x, ulps=ulps)
        found += within(*densest(lo, hi)[:2]) if lo.size else []
    return list(dict.fromkeys(found))


def candidate_slopes(operand: np.ndarray, actual: np.ndarray, x: np.ndarray, *, declared: float,
                     weight_dtype: np.dtype) -> list[float]:
    """Slopes worth trying on one weight element's open elements: the named ones, then the data's."""
    return list(dict.fromkeys([*named_slopes(declared, weight_dtype), *data_slopes(operand, actual, x)]))
