"""A slow, obviously-correct oracle: ``fractions.Fraction`` arithmetic, one element at a time.

It shares no code with ``conformance.reference.golden``: it rounds an exact
rational to a table dtype with integer arithmetic (round half to even), and
applies the IEEE rules for special values by hand.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from conformance.dtypes import DTypeInfo, info


def round_fraction(q: Fraction, out: DTypeInfo) -> float:
    """Nonnegative rational ``q`` correctly rounded (half to even) to ``out``, as a float (inf on overflow)."""
    if q == 0:
        return 0.0
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    ulp = Fraction(2) ** (max(e, out.emin) - out.mant_bits)
    n = q / ulp
    k, rem = divmod(n.numerator, n.denominator)
    twice = 2 * rem
    if twice > n.denominator or (twice == n.denominator and k % 2 == 1):
        k += 1
    value = k * ulp
    return math.inf if value > Fraction(out.max) else float(value)


def exact_scale(v: float, alpha: float, out: DTypeInfo) -> float:
    """``alpha * v`` exactly, rounded once to ``out``, with IEEE specials and signed zeros."""
    if math.isnan(v) or math.isinf(v):
        return v * alpha  # inf*0 -> nan, -inf*a -> -inf*sign(a): float64 IEEE suffices here
    sign = math.copysign(1.0, v) * math.copysign(1.0, alpha)
    magnitude = round_fraction(abs(Fraction(v) * Fraction(alpha)), out)
    return math.copysign(magnitude, sign)


def exact_round(v: float, out: DTypeInfo) -> float:
    """``v`` correctly rounded to ``out``; NaN and inf pass through."""
    if math.isnan(v) or math.isinf(v):
        return v
    return math.copysign(round_fraction(abs(Fraction(v)), out), v)


def exact_leaky_relu(x: np.ndarray, alpha: float, *, out_dtype: str) -> np.ndarray:
    """Element-by-element exact forward, returned in ``out_dtype``."""
    out = info(out_dtype)
    values = [exact_round(v, out) if v > 0 else exact_scale(v, alpha, out)
              for v in x.astype(np.float64).tolist()]
    return np.array(values, dtype=np.float64).astype(out.dtype)


def exact_backward(dy: np.ndarray, x: np.ndarray, alpha: float, *, out_dtype: str) -> np.ndarray:
    """Element-by-element exact ``dy if x > 0 else alpha*dy`` (x = +/-0 and NaN take alpha*dy)."""
    out = info(out_dtype)
    pairs = zip(dy.astype(np.float64).tolist(), x.astype(np.float64).tolist())
    values = [exact_round(d, out) if xv > 0 else exact_scale(d, alpha, out) for d, xv in pairs]
    return np.array(values, dtype=np.float64).astype(out.dtype)
