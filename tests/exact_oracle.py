"""A slow, obviously-correct oracle: exact integer arithmetic, shared with nothing it judges.

Every float is an exact ratio of integers (``float.as_integer_ratio``), and a product
of two is the product of the numerators over the product of the denominators.  The
element-at-a-time functions (:func:`round_ratio`, :func:`exact_scale`, :func:`exact_round`)
say that in plain Python integers (no ``Fraction`` normalisation, which is ten times
slower and proves nothing more).  The array functions the tests call
(:func:`exact_leaky_relu`, :func:`exact_backward`, :func:`exact_round_array`) do the same
sums on integer arrays: a value is an integer significand times a power of two
(``np.frexp`` splits a float64 exactly), a product of a significand of at most 24 bits
and the slope's 53 is held as two uint64 limbs, and it is rounded half to even by
shifting, with a round bit and a sticky bit.  ``tests/reference/test_golden.py`` proves the array
functions equal to the element-at-a-time ones on every hard case.  None of it uses
``conformance.reference``: it rounds to a table dtype with integer arithmetic and applies
the IEEE rules for special values by hand.
"""
from __future__ import annotations

import math

import numpy as np

from conformance.dtypes import DTypeInfo, info

LIMB = 26  # a product is (high << LIMB) + low: a 24-bit by 53-bit product in two uint64 limbs
OPERAND_BITS = 24  # the widest significand a product takes (float32 and narrower)


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


# --- the same sums on integer arrays ---------------------------------------------------------

def _bit_length(n: np.ndarray) -> np.ndarray:
    """Bits of each uint64 below 2**53 (exact as a float64, so ``frexp`` reads it); 0 for 0."""
    return np.frexp(n.astype(np.float64))[1].astype(np.int64)


def _mask(bits: np.ndarray) -> np.ndarray:
    """``2**bits - 1`` for 0 <= bits <= 63, as uint64."""
    return (np.uint64(1) << bits.astype(np.uint64)) - np.uint64(1)


def _dropped(high: np.ndarray, low: np.ndarray, drop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``P >> drop`` and whether a 1 bit was dropped, for ``P = (high << LIMB) + low`` (``low < 2**LIMB``)."""
    in_high = np.clip(drop - LIMB, 0, 63)  # P >> drop == high >> (drop - LIMB) when drop >= LIMB
    in_low = np.clip(drop, 0, LIMB)
    wide = drop >= LIMB
    shifted = np.where(wide, high >> in_high.astype(np.uint64),
                       (high << np.clip(LIMB - drop, 0, LIMB).astype(np.uint64)) + (low >> in_low.astype(np.uint64)))
    lost = np.where(wide, ((high & _mask(in_high)) | low) != 0, (low & _mask(in_low)) != 0)
    return shifted, lost


def _round_scaled(high: np.ndarray, low: np.ndarray, e: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """``((high << LIMB) + low) * 2**e``, nonnegative, rounded half to even to ``out`` (inf past its max)."""
    bits = np.where(high > 0, _bit_length(high) + LIMB, _bit_length(low))
    ulp = np.maximum(bits - 1 + e, out.emin) - out.mant_bits  # the result's ulp is 2**ulp
    drop = ulp - e  # the low bits of P below the ulp; none when P is already a multiple of it
    q, sticky = _dropped(high, low, np.maximum(drop - 1, 0))  # q keeps one round bit below the ulp
    k = q >> np.uint64(1)
    k = k + ((q & np.uint64(1)).astype(bool) & (sticky | (k & np.uint64(1)).astype(bool)))
    whole = high.astype(np.float64) * 2.0 ** LIMB + low.astype(np.float64)  # exact where P < 2**53
    with np.errstate(over="ignore"):  # drop <= 0: P has at most the format's bits, so it is its own result
        value = np.where(drop <= 0, np.ldexp(whole, e), np.ldexp(k.astype(np.float64), ulp))
    value = np.where((high == 0) & (low == 0), 0.0, value)
    return np.where(value > out.max, np.inf, value)


def _significands(v: np.ndarray, *, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """``|v| = m * 2**e`` with integer ``m < 2**bits`` (uint64), exactly; refuses wider significands."""
    f, e = np.frexp(np.abs(v))
    m = np.ldexp(f, bits)
    if not np.array_equal(m, np.floor(m)):
        raise ValueError(f"the oracle multiplies significands of at most {bits} bits")
    return m.astype(np.uint64), e.astype(np.int64) - bits


def _signed(value: np.ndarray, v: np.ndarray, sign: float, *, special: np.ndarray) -> np.ndarray:
    """``value`` with the sign of ``v`` times ``sign``, and ``special`` (NaN or inf ``v``) as IEEE gives it."""
    return np.where(np.isfinite(v), np.copysign(value, np.copysign(1.0, v) * sign), special)


def exact_round_array(v: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """Every float64 of ``v`` correctly rounded to ``out``, as float64; NaN and inf pass through."""
    finite = np.where(np.isfinite(v), v, 0.0)
    m, e = _significands(finite, bits=53)
    return _signed(_round_scaled(m, np.zeros_like(m), e - LIMB, out), v, 1.0, special=v)


def exact_scale_array(v: np.ndarray, alpha: float, out: DTypeInfo) -> np.ndarray:
    """``alpha * v`` exactly, each rounded once to ``out``, with IEEE specials and signed zeros."""
    finite = np.where(np.isfinite(v), v, 0.0)
    m, e = _significands(finite, bits=OPERAND_BITS)
    f, ea = math.frexp(abs(alpha))
    slope = int(math.ldexp(f, 53))  # |alpha| = slope * 2**(ea - 53)
    product_high = m * np.uint64(slope >> LIMB)  # below 2**(24 + 27)
    product_low = m * np.uint64(slope & ((1 << LIMB) - 1))  # below 2**(24 + 26)
    high = product_high + (product_low >> np.uint64(LIMB))
    low = product_low & np.uint64((1 << LIMB) - 1)
    with np.errstate(invalid="ignore", over="ignore"):
        special = v * alpha  # inf*0 -> nan, -inf*a -> -inf*sign(a): float64 IEEE suffices here
    return _signed(_round_scaled(high, low, e + ea - 53, out), v, math.copysign(1.0, alpha), special=special)


def _positive(v: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return v > 0  # NaN is not positive


def exact_leaky_relu(x: np.ndarray, alpha: float, *, out_dtype: str) -> np.ndarray:
    """The exact forward of every element, returned in ``out_dtype``."""
    out, v = info(out_dtype), x.astype(np.float64).ravel()
    y = np.where(_positive(v), exact_round_array(v, out), exact_scale_array(v, alpha, out))
    return y.astype(out.dtype).reshape(x.shape)


def exact_backward(dy: np.ndarray, x: np.ndarray, alpha: float, *, out_dtype: str) -> np.ndarray:
    """The exact ``dy if x > 0 else alpha*dy`` of every element (x = +/-0 and NaN take alpha*dy)."""
    out, d = info(out_dtype), dy.astype(np.float64).ravel()
    dx = np.where(_positive(x.astype(np.float64).ravel()), exact_round_array(d, out),
                  exact_scale_array(d, alpha, out))
    return dx.astype(out.dtype).reshape(dy.shape)
