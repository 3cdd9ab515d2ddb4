"""A slow, obviously-correct oracle: exact rational arithmetic, one element at a time.

Every float is an exact ratio of integers (``float.as_integer_ratio``); a
product of two is the product of the numerators over the product of the
denominators.  Only plain Python integers are used (no ``Fraction``
normalisation, which made the oracle ten times slower and proves nothing more).
It shares no code with ``conformance.reference.golden``: it rounds an exact
rational to a table dtype with integer arithmetic (round half to even), and
applies the IEEE rules for special values by hand.
"""
from __future__ import annotations

import math

import numpy as np

from conformance.dtypes import DTypeInfo, info


def round_ratio(n: int, d: int, out: DTypeInfo) -> float:
    """Nonnegative rational ``n/d`` correctly rounded (half to even) to ``out``, as a float (inf on overflow)."""
    if n == 0:
        return 0.0
    e = n.bit_length() - d.bit_length()  # floor(log2(n/d)) is e or e - 1
    if (d << e if e >= 0 else d) > (n if e >= 0 else n << -e):
        e -= 1
    s = max(e, out.emin) - out.mant_bits  # the ulp is 2**s
    num, den = (n << -s, d) if s <= 0 else (n, d << s)
    k, rem = divmod(num, den)
    if 2 * rem > den or (2 * rem == den and k % 2 == 1):
        k += 1
    try:
        value = math.ldexp(k, s)
    except OverflowError:
        return math.inf
    return math.inf if value > out.max else value


def exact_scale(v: float, alpha: float, out: DTypeInfo) -> float:
    """``alpha * v`` exactly, rounded once to ``out``, with IEEE specials and signed zeros."""
    if math.isnan(v) or math.isinf(v):
        return v * alpha  # inf*0 -> nan, -inf*a -> -inf*sign(a): float64 IEEE suffices here
    sign = math.copysign(1.0, v) * math.copysign(1.0, alpha)
    (nv, dv), (na, da) = abs(v).as_integer_ratio(), abs(alpha).as_integer_ratio()
    return math.copysign(round_ratio(nv * na, dv * da, out), sign)


def exact_round(v: float, out: DTypeInfo) -> float:
    """``v`` correctly rounded to ``out``; NaN and inf pass through."""
    if math.isnan(v) or math.isinf(v):
        return v
    return math.copysign(round_ratio(*abs(v).as_integer_ratio(), out), v)


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
