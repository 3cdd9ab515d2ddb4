"""Gradient rules of the compiled golden (numba), as ``conformance.reference.golden`` computes
them on the numpy path: MindSpore's gradient of ``maximum(a*x, x)``, which rounds every step;
the gradient selected on the result (``result_positive``) and the TBE step function
(``step_gradient``).

MaximumGrad gives a tie (``a*x == x``: x = ±0, ±inf) ``dy/2`` to each operand and a NaN
comparison ``dy`` to each; ``dx = a*d1 + d2`` then rounds every step to the output dtype.
Under ``ftz`` each step's result is flushed (a float32 result as x86 decides, on its float64
value scaled by 2**64 and rounded to float32; any other a subnormal of its dtype); under
``daz`` the comparison, Div, Mul and Add read their subnormal operands as zero.  ``r`` is the
rules tuple of ``conformance.reference.compiled``.
"""
from __future__ import annotations

import numba
import numpy as np

from conformance.dtypes import info
from conformance.reference.compiled_rounding import KINDS, flushed, product, rounded, x86_tiny
from conformance.reference.exact import STEP

__all__ = ["max_gradient", "result_positive", "step_gradient"]

_MANT_BITS = tuple(info(name).mant_bits for name in KINDS)  # by kind
_SMALLEST = tuple(info(name).smallest_normal for name in KINDS)


@numba.njit(cache=True)
def _step(v, exact, kind, ftz):
    """One step's result ``v`` (of ``kind``, its float64 value ``exact``) flushed under ``ftz``."""
    if not ftz:
        return v
    if kind == 2:
        tiny = x86_tiny(exact)
    else:
        tiny = v != 0 and abs(v) < _SMALLEST[kind]
    return np.copysign(0.0, v) if tiny else v


@numba.njit(cache=True)
def _times_alpha(v, kind, r):
    """``a * v`` correctly rounded to ``kind``, flushed as a step."""
    p = product(v, r[0], r[1], r[2], 52 - _MANT_BITS[kind], kind != 3, _SMALLEST[kind])
    return _step(rounded(p, kind), v * r[0], kind, r[8])


@numba.njit(cache=True)
def _plus(a, b, kind, ftz):
    """``a + b`` rounded once to ``kind`` (float32 and float64 in their own arithmetic), flushed."""
    if kind == 2:
        s = np.float64(np.float32(a) + np.float32(b))
    elif kind == 3:
        s = a + b
    else:
        s = rounded(a + b, kind)  # exact in float64 for 16-bit operands
    return _step(s, a + b, kind, ftz)


@numba.njit(cache=True)
def max_gradient(copy, v, d, w, r):
    """(copy, v) of the select, or dx of the gradient of max at a tie or a NaN product of the
    element with dy ``d`` and x ``w``."""
    src, kind, daz, ftz = r[14], r[10], r[7], r[8]
    x = flushed(w, r[6]) if daz else w  # compared in the input's dtype
    prod = _times_alpha(x, src, r)  # the forward Mul read x under DAZ too
    if daz:
        prod = flushed(prod, r[6])
    nan = x != x or prod != prod
    if not nan and prod != x:
        return copy, v
    read = flushed(d, r[6]) if daz else d  # Div, Mul and Add read dy under DAZ
    if nan:
        return False, _plus(_times_alpha(read, kind, r), rounded(read, kind), kind, ftz)
    halved = read / 2.0
    half = _step(rounded(halved, kind), halved, kind, ftz)
    return False, _plus(_times_alpha(half, kind, r), half, kind, ftz)


@numba.njit(cache=True)
def result_positive(w, r):
    """The forward's result in x's dtype is positive: the DAZ-read x, or ``a*x`` rounded to x's
    dtype (a zero x times an infinite rounded slope is NaN, not positive)."""
    src = r[14]
    x = flushed(w, r[6]) if r[7] else w
    if x > 0:
        return True
    return rounded(product(x, r[0], r[1], r[2], 52 - _MANT_BITS[src], src != 3, _SMALLEST[src]), src) > 0


#: ``exact.STEP`` by x's kind (0.0: no clamp), the lifts padded with 1.0 to three.
_STEP_TINY = tuple(STEP[k][0] if k in STEP else 0.0 for k in KINDS)
_STEP_LIFTS = tuple(tuple(STEP[k][1]) + (1.0,) * (3 - len(STEP[k][1])) if k in STEP else (1.0, 1.0, 1.0)
                    for k in KINDS)


@numba.njit(cache=True)
def step_gradient(copy, v, d, w, r):
    """(copy, v), or where x is a positive subnormal of float16 or float32 the step function's
    ``dy * (|s - 1| * a + s)``, ``s = x / tiny`` lifted by powers of two, every operation
    rounded in x's dtype (float64 rounds each of them exactly once more)."""
    src = r[14]
    tiny = _STEP_TINY[src]
    if not (w > 0 and w < tiny):
        return copy, v
    s = w
    for lift in _STEP_LIFTS[src]:
        s = s * lift  # exact: powers of two, far from the limits
    frac = rounded(rounded(abs(rounded(s - 1.0, src)) * rounded(r[0], src), src) + s, src)
    return False, rounded(d * frac, src)
