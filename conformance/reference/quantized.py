"""The exact quantized LeakyReLU: per-tensor affine int8/uint8 codes in, codes out.

``real = s_in*(q - z_in)``; ``y = real`` if ``real >= 0`` else ``alpha*real``;
``q_out = clamp(round_half_even(y/s_out) + z_out)`` to the code range.  Scales and the slope
are taken as their exact binary64 values and the whole chain is computed in integers (each
binary64 is a ratio of integers), so a quotient that sits on a tie is seen as a tie and one
that misses it by 2**-50 is not.  Every code of a dtype is computed once, into a table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: quantized dtype name -> (numpy storage dtype, lowest code, highest code)
QDTYPES: dict[str, tuple[type, int, int]] = {
    "qint8": (np.int8, -128, 127),
    "quint8": (np.uint8, 0, 255),
}


@dataclass(frozen=True)
class QuantParams:
    """Per-tensor affine quantization of a LeakyReLU's input and output."""

    s_in: float
    z_in: int
    s_out: float
    z_out: int
    dtype: str = "qint8"

    def __post_init__(self) -> None:
        if self.dtype not in QDTYPES:
            raise ValueError(f"dtype must be one of {', '.join(QDTYPES)}, got {self.dtype!r}")
        for name in ("s_in", "s_out"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite scale > 0, got {value!r}")
        lo, hi = self.code_range
        for name in ("z_in", "z_out"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, (int, np.integer)) and lo <= value <= hi):
                raise ValueError(f"{name} must be an integer code in {lo}..{hi} for {self.dtype}, got {value!r}")

    @property
    def code_range(self) -> tuple[int, int]:
        """The lowest and highest code of the dtype."""
        return QDTYPES[self.dtype][1], QDTYPES[self.dtype][2]

    @property
    def storage(self) -> np.dtype:
        """The numpy dtype that holds the codes (int8 or uint8)."""
        return np.dtype(QDTYPES[self.dtype][0])

    def __str__(self) -> str:
        return f"{self.dtype}(s_in={self.s_in!r}, z_in={self.z_in}, s_out={self.s_out!r}, z_out={self.z_out})"


def all_codes(params: QuantParams) -> np.ndarray:
    """Every code of the dtype, lowest first, in its storage dtype."""
    lo, hi = params.code_range
    return np.arange(lo, hi + 1).astype(params.storage)


def round_half_even(numerator: int, denominator: int) -> int:
    """``numerator/denominator`` (denominator > 0) rounded to the nearest integer, ties to even."""
    quotient, remainder = divmod(numerator, denominator)
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient % 2):
        return quotient + 1
    return quotient


def exact_table(alpha: float, *, params: QuantParams) -> np.ndarray:
    """The exact output code of every input code, indexed by ``code - lowest code``."""
    return variant_table(alpha, params=params)


def lookup(table: np.ndarray, codes: np.ndarray, *, params: QuantParams) -> np.ndarray:
    """``table`` applied to ``codes`` (any shape, the dtype's storage)."""
    codes = np.asarray(codes)
    if codes.dtype != params.storage:
        raise ValueError(f"codes must be {params.storage} for {params.dtype}, got {codes.dtype}")
    return table[codes.astype(np.int64) - params.code_range[0]]


def leaky_relu_quantized(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """The exact quantized LeakyReLU of ``codes``."""
    return lookup(exact_table(alpha, params=params), codes, params=params)


# ----------------------------------------------------------------------------- variants

#: how the chain is computed: exact rationals; float32 steps; a Q31 fixed-point multiplier with
#: gemmlowp's double rounding; a Q8 multiplier (steps of 1/256)
ARITHMETICS: tuple[str, ...] = ("exact", "float32", "q31", "q8")
ROUNDINGS: tuple[str, ...] = ("half-even", "half-away", "half-up")
CLAMPS: tuple[str, ...] = ("saturate", "wrap", "narrow")
_F32 = np.float32


@dataclass(frozen=True)
class QuantSemantics:
    """One way to compute a quantized LeakyReLU: the exact rule (the defaults) or a golden
    variant that a framework, or a defect, computes instead.

    ``rounding`` rounds ``y/s_out`` (exact and float32 arithmetic); ``requantize`` is a float32
    division by ``s_out`` or a multiply by ``f32(1/s_out)``; ``dequantize`` is ``f32(s_in)*(q -
    z_in)`` with the subtraction in integers, or one fused ``fma(s_in, q, f32(s_in*-z_in))``;
    ``zero_point`` adds ``z_out`` as an integer after rounding or in float32 before it;
    ``clamp`` saturates at the code range, wraps around it (two's complement), or saturates at
    the narrow range that leaves the lowest code unused."""

    arithmetic: str = "exact"
    rounding: str = "half-even"
    requantize: str = "divide"
    dequantize: str = "integer"
    zero_point: str = "after"
    clamp: str = "saturate"

    def __post_init__(self) -> None:
        for name, choices in (("arithmetic", ARITHMETICS), ("rounding", ROUNDINGS),
                              ("requantize", ("divide", "reciprocal")), ("dequantize", ("integer", "fma")),
                              ("zero_point", ("after", "before")), ("clamp", CLAMPS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}")


EXACT_QUANT = QuantSemantics()


def round_rational(numerator: int, denominator: int, *, rounding: str = "half-even") -> int:
    """``numerator/denominator`` (denominator > 0) rounded to an integer by ``rounding``."""
    if rounding == "half-even":
        return round_half_even(numerator, denominator)
    if rounding == "half-up":
        return (2 * numerator + denominator) // (2 * denominator)
    magnitude = (2 * abs(numerator) + denominator) // (2 * denominator)  # half away from zero
    return magnitude if numerator >= 0 else -magnitude


def _round_float(t: np.ndarray, rounding: str) -> np.ndarray:
    """float32 ``t`` rounded to int64 (widened to float64 first: ``t + 0.5`` is then exact)."""
    wide = t.astype(np.float64)
    if rounding == "half-even":
        return np.rint(wide).astype(np.int64)
    if rounding == "half-up":
        return np.floor(wide + 0.5).astype(np.int64)
    return (np.sign(wide) * np.floor(np.abs(wide) + 0.5)).astype(np.int64)


def _exact_chain(q: np.ndarray, alpha: float, *, params: QuantParams, rounding: str) -> np.ndarray:
    a, b = float(params.s_in).as_integer_ratio()
    e, f = float(params.s_out).as_integer_ratio()
    c, d = float(alpha).as_integer_ratio()
    # y/s_out = (a/b)*(q - z_in)*(c/d)*(f/e); real < 0 exactly when q < z_in (s_in > 0)
    out = [round_rational(a * int(v - params.z_in) * (c if v < params.z_in else 1) * f,
                          b * (d if v < params.z_in else 1) * e, rounding=rounding) for v in q]
    return np.array(out, dtype=np.int64) + params.z_out


def _float32_chain(q: np.ndarray, alpha: float, *, params: QuantParams, rule: QuantSemantics) -> np.ndarray:
    s = _F32(params.s_in)
    if rule.dequantize == "fma":  # the float64 sum of a 24-bit by 8-bit product and a float32 is exact
        dx = (np.float64(s) * q + np.float64(s * -_F32(params.z_in))).astype(_F32)
    else:
        dx = s * (q - params.z_in).astype(_F32)
    dy = np.where(dx > 0, dx, dx * _F32(alpha))
    scaled = dy / _F32(params.s_out) if rule.requantize == "divide" else dy * (_F32(1) / _F32(params.s_out))
    if rule.zero_point == "before":
        return _round_float(scaled + _F32(params.z_out), rule.rounding)
    return _round_float(scaled, rule.rounding) + params.z_out


def quantize_multiplier(multiplier: float) -> tuple[int, int]:
    """TFLite ``QuantizeMultiplier``: ``frexp``, ``round(q * 2**31)`` half away from zero."""
    if multiplier == 0:
        return 0, 0
    fraction, shift = math.frexp(multiplier)
    fixed = int(math.copysign(math.floor(abs(fraction) * 2.0 ** 31 + 0.5), fraction))
    if abs(fixed) == 2 ** 31:
        fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return fixed, shift


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` (int32 ``a``, ``b``; no operand pair here
    is the saturating INT32_MIN*INT32_MIN)."""
    ab = a.astype(np.int64) * np.int64(b)
    nudged = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    return np.sign(nudged) * (np.abs(nudged) // (1 << 31))  # C division truncates toward zero


def rounding_divide_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded half away from zero."""
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier``, the double-rounding build."""
    left, right = max(shift, 0), max(-shift, 0)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x * (1 << left), multiplier), right)


def branch_scales(alpha: float, *, params: QuantParams) -> tuple[float, float]:
    """The positive and negative multipliers ``s_in/s_out`` and ``s_in*alpha/s_out``, formed in
    float32 as TFLite and XNNPACK form them."""
    positive = _F32(params.s_in) / _F32(params.s_out)
    return float(positive), float(_F32(params.s_in) * _F32(alpha) / _F32(params.s_out))


def q8_multipliers(alpha: float, *, params: QuantParams) -> tuple[int, int]:
    """XNNPACK's ``lrintf(256*scale)`` of the positive and negative multiplier."""
    positive = _F32(params.s_in) / _F32(params.s_out)
    negative = positive * _F32(alpha)
    return int(np.rint(_F32(256) * positive)), int(np.rint(_F32(256) * negative))


def _fixed_point_chain(q: np.ndarray, alpha: float, *, params: QuantParams, arithmetic: str) -> np.ndarray:
    x = q - params.z_in
    if arithmetic == "q8":
        positive, negative = q8_multipliers(alpha, params=params)
        return params.z_out + ((x * np.where(x >= 0, positive, negative) + 128) >> 8)
    identity, scaled = (quantize_multiplier(m) for m in branch_scales(alpha, params=params))
    return params.z_out + np.where(x >= 0, multiply_by_quantized_multiplier(x, *identity),
                                   multiply_by_quantized_multiplier(x, *scaled))


def _clamp_codes(values: np.ndarray, *, params: QuantParams, clamp: str) -> np.ndarray:
    lo, hi = params.code_range
    if clamp == "wrap":
        return ((values - lo) % (hi - lo + 1) + lo).astype(params.storage)
    if clamp == "narrow":  # TensorFlow's narrow_range: -127..127, 1..255
        lo += 1
    return np.clip(values, lo, hi).astype(params.storage)


def variant_table(alpha: float, *, params: QuantParams, semantics: QuantSemantics = EXACT_QUANT) -> np.ndarray:
    """The output code of every input code under ``semantics``, indexed by ``code - lowest
    code`` (:func:`exact_table` is the exact rule's)."""
    if not math.isfinite(alpha):
        raise ValueError(f"alpha must be finite, got {alpha!r}")
    q = all_codes(params).astype(np.int64)
    if semantics.arithmetic == "exact":
        unclamped = _exact_chain(q, alpha, params=params, rounding=semantics.rounding)
    elif semantics.arithmetic == "float32":
        unclamped = _float32_chain(q, alpha, params=params, rule=semantics)
    else:
        unclamped = _fixed_point_chain(q, alpha, params=params, arithmetic=semantics.arithmetic)
    return _clamp_codes(unclamped, params=params, clamp=semantics.clamp)


def parse_setting(text: str, *, dtype: str) -> QuantParams:
    """``S_IN:Z_IN:S_OUT:Z_OUT`` as the parameters of ``dtype``; a ValueError saying what to fix."""
    parts = text.split(":")
    if len(parts) != 4:
        raise ValueError(f"{text!r} is not S_IN:Z_IN:S_OUT:Z_OUT, e.g. 0.05:0:0.04:-28")
    try:
        s_in, s_out = float(parts[0]), float(parts[2])
        z_in, z_out = int(parts[1]), int(parts[3])
    except ValueError:
        raise ValueError(f"{text!r}: scales must be numbers and zero points integers, "
                         "e.g. 0.05:0:0.04:-28") from None
    return QuantParams(s_in, z_in, s_out, z_out, dtype)


def setting_text(params: QuantParams) -> str:
    """``S_IN:Z_IN:S_OUT:Z_OUT``, the form :func:`parse_setting` reads (scales as ``repr``)."""
    return f"{params.s_in!r}:{params.z_in}:{params.s_out!r}:{params.z_out}"
