"""Exact primitives of the reference: correctly rounded conversions and products.

``alpha * v`` is formed in float64, which is already exact for almost every element.
Double rounding (float64, then the output dtype) can only go wrong where the float64
product sits on a rounding midpoint of the output dtype.  Those few candidates are
recomputed with an error-free product (Dekker split of ``alpha``) and rounded to odd in
float64, which makes the final round-to-nearest correct (Boldo and Melquiond, "Emulation
of FMA and correctly rounded sums", 2008).  bfloat16 is reached through a float32
round-to-odd step, because ml_dtypes casts float64 to bfloat16 through float32 and would
otherwise round twice.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from typing import Optional

import numpy as np

from conformance.dtypes import DTypeInfo, DTypeLike, all_patterns, from_bits, info, is_subnormal, to_bits
from conformance.reference.semantics import Rounding, Saturate, Semantics, SlopeDTypes

#: The TBE pre-v200 backward's clamp per dtype, and the multipliers that lift it to 1
#: (``leaky_relu_grad.py``: vmins(x, tiny), vmaxs(.., 0), vmuls(.., 2**38), ...; docs/explanation/emulated-kernel.md).
STEP = {"float32": (2.0 ** -126, (2.0 ** 38, 2.0 ** 44, 2.0 ** 44)),
        "float16": (2.0 ** -24, (2.0 ** 12, 2.0 ** 12))}

#: (input dtype, output dtype) pairs the reference computes.
SUPPORTED_PAIRS: frozenset[tuple[str, str]] = frozenset(
    {(d, d) for d in ("float16", "bfloat16", "float32", "float64")}
    | {("float32", "float16"), ("float32", "bfloat16"),
       ("float16", "float32"), ("bfloat16", "float32")}
)
_TINY, _HUGE = 2.0 ** -900, 2.0 ** 1000  # outside this range no rounding fix is needed


def check_alpha(alpha: float) -> float:
    """``alpha`` as a finite Python float, or a ValueError saying what to pass."""
    try:
        value = float(alpha)
    except (TypeError, ValueError):
        raise ValueError(f"alpha must be a number, got {alpha!r}") from None
    if not np.isfinite(value):
        raise ValueError(f"alpha must be finite, got {value!r}; pass a finite slope such as 0.01")
    return value


def resolve_pair(dtype: DTypeLike, out_dtype: Optional[DTypeLike]) -> tuple[DTypeInfo, DTypeInfo]:
    """Table records of (input, output), checked against ``SUPPORTED_PAIRS``."""
    src = info(dtype)
    out = info(out_dtype) if out_dtype is not None else src
    if (src.name, out.name) not in SUPPORTED_PAIRS:
        raise ValueError(f"unsupported dtype pair {src.name}->{out.name}; supported: "
                         + ", ".join(f"{a}->{b}" for a, b in sorted(SUPPORTED_PAIRS)))
    return src, out


def split_slope(alpha: float) -> tuple[float, float]:
    """Veltkamp-style split: ``hi`` keeps 26 significant bits, ``lo = alpha - hi`` exactly."""
    bits = struct.unpack("<Q", struct.pack("<d", alpha))[0] & ~((1 << 27) - 1)
    hi = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return hi, alpha - hi


def round_to_odd_product(v: np.ndarray, alpha: float) -> np.ndarray:
    """float64 round-to-odd of ``v * alpha`` for v with <= 24 significant bits."""
    hi, lo = split_slope(alpha)
    ph, pl = v * hi, v * lo  # both exact: 26 + 24 and 27 + 24 bits
    s = ph + pl
    bb = s - ph
    err = (ph - (s - bb)) + (pl - bb)  # two-sum: v*alpha == s + err exactly
    even = (s.view(np.uint64) & 1) == 0
    return np.where((err != 0) & even, np.nextafter(s, np.copysign(np.inf, err)), s)


def round_float64(v: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """Correctly rounded (half to even) float64 -> ``out``, bfloat16 included."""
    with np.errstate(all="ignore"):  # overflow to inf and NaN casts are intended
        if out.name == "float16":
            return _round_to_float16(v)
        if out.name != "bfloat16":
            return v.astype(out.dtype)
        return _round_to_bfloat16(v, out)


#: float64 magnitudes at and above which float16 rounds to inf, at and below which to zero (ties to even).
_FLOAT16_INF, _FLOAT16_ZERO = 65520.0, 2.0 ** -25


def _round_to_float16(v: np.ndarray) -> np.ndarray:
    """numpy's float64 -> float16 cast (correctly rounded), with the values that round to ±inf
    or ±0 given as those first: the cast raises the overflow or underflow flag one element at
    a time, which costs several times the cast itself where most of an array is out of range."""
    if not isinstance(v, np.ndarray) or not v.ndim:  # a scalar stays one
        return v.astype(np.float16)
    mag = np.abs(v)
    beyond = (mag >= _FLOAT16_INF) | (mag <= _FLOAT16_ZERO)
    if beyond.any():
        v = np.where(beyond, np.copysign(np.where(mag >= _FLOAT16_INF, np.inf, 0.0), v), v)
    return v.astype(np.float16)


def _round_to_bfloat16(v: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """float64 -> float32 rounded to odd, then float32 -> bfloat16 rounded to nearest even."""
    r32 = v.astype(np.float32)
    inexact = (r32.astype(np.float64) != v) & np.isfinite(r32)
    fix = inexact & ((r32.view(np.uint32) & 1) == 0)
    toward = np.copysign(np.float32(np.inf), (v - r32.astype(np.float64)).astype(np.float32))
    r32 = np.where(fix, np.nextafter(r32, toward), r32)  # round to odd in float32
    return r32.astype(out.dtype)


def cast_exact(v: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """``v`` correctly rounded to ``out`` (a no-op when the dtype already matches); a 16-bit
    ``v`` is looked up in :func:`_cast_table` (the same conversion of its every pattern)."""
    if v.dtype == out.dtype:
        return v
    if v.dtype.itemsize == 2 and isinstance(v, np.ndarray) and v.ndim:  # an array (a scalar stays one)
        return _cast_table(info(v.dtype).name, out.name)[to_bits(v)]
    return round_float64(v.astype(np.float64), out)


@cache
def _cast_table(dtype: str, out: str) -> np.ndarray:
    """Every bit pattern of the 16-bit ``dtype`` widened to float64 and rounded to ``out``, in
    bit order (cached: do not write into it)."""
    with np.errstate(all="ignore"):  # NaN payloads warn when widened
        table = round_float64(all_patterns(dtype).astype(np.float64), info(out))
    table.flags.writeable = False
    return table


def _midpoint_candidates(p: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """Where the float64 product may sit on a rounding midpoint of ``out``.

    In ``out``'s normal range a midpoint has its low ``k`` bits equal to
    ``100...0`` (k = 52 - mant_bits); below it (subnormal results) the midpoint
    bit sits higher, so only the low ``k - 1`` bits are known to be zero.
    """
    k = 52 - out.mant_bits
    u = p.view(np.uint64)
    mag = np.abs(p)
    normal_mid = (u & np.uint64((1 << k) - 1)) == np.uint64(1 << (k - 1))
    small_mid = (mag < out.smallest_normal) & ((u & np.uint64((1 << (k - 1)) - 1)) == 0)
    return (normal_mid | small_mid) & (mag >= _TINY) & (mag < _HUGE)


def scale_exact(v: np.ndarray, alpha: float, out: DTypeInfo) -> np.ndarray:
    """``alpha * v`` computed exactly and rounded once to ``out``."""
    p = v.astype(np.float64) * alpha
    if out.name == "float64" or v.dtype == np.float64:
        return round_float64(p, out)
    idx = np.flatnonzero(_midpoint_candidates(p, out))
    if idx.size:
        p[idx] = round_to_odd_product(v.astype(np.float64).ravel()[idx], alpha)
    return round_float64(p, out)


def effective_slope(alpha: float, *, slope_dtype: SlopeDTypes) -> float:
    """The slope a framework multiplies by: alpha, or alpha rounded to each dtype in turn.

    TensorFlow stores ``alpha`` as a float32 attribute and then converts it to
    T, so its slope is ``("float32", T)``; a single dtype is the common case.
    """
    if slope_dtype is None:
        return alpha
    return _rounded_slope(float(alpha).hex(), slope_dtype if isinstance(slope_dtype, tuple) else (slope_dtype,))


@lru_cache(maxsize=4096)
def _rounded_slope(alpha_hex: str, chain: tuple[str, ...]) -> float:
    """The slope (keyed by its hex spelling, so -0.0 and 0.0 stay apart) rounded to each dtype
    of ``chain`` in turn; triage asks for the same few slopes many times."""
    alpha = float.fromhex(alpha_hex)
    for dtype in chain:
        alpha = float(round_float64(np.array([alpha]), info(dtype))[0].astype(np.float64))
    return alpha


def flush_to_zero(v: np.ndarray) -> np.ndarray:
    """Subnormals become zero of the same sign (x86 DAZ / FTZ)."""
    return np.where(is_subnormal(v), _signed_zero(v), v)


def saturated(v: np.ndarray, out: DTypeInfo, *, which: Saturate = True) -> np.ndarray:
    """Saturation mode: NaN becomes 0 and +/-inf becomes +/-max.  ``which="inf"`` clamps
    only the infinities (a saturating cast or clamp, NaN kept)."""
    w = np.clip(v.astype(np.float64), -out.max, out.max)
    if which is True:
        w = np.where(np.isnan(w), 0.0, w)
    return w.astype(out.dtype) if out.name != "bfloat16" else round_float64(w, out)


_SCALE = 2.0 ** 64  # moves a float32 result near its smallest normal far from it


def ftz_float32(v: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """x86 FTZ of a float32 operation whose exact result is ``exact`` (float64) and whose
    rounded result is ``v``: the result becomes a zero of its sign when it is tiny, i.e.
    below the smallest normal after rounding to 24 bits with an unbounded exponent.  So
    an exact value in [2**-126 - 2**-150, 2**-126 - 2**-151) is flushed although rounding
    it to float32 gives the smallest normal (measured: MindSpore's ``Div(dy, 2)`` of
    dy = -0x80ffffff gives -0)."""
    scaled = (exact.astype(np.float64) * _SCALE).astype(np.float32)  # 24-bit rounding, no subnormal step
    tiny = np.abs(scaled) < np.float32(info("float32").smallest_normal * _SCALE)
    return np.where(tiny, _signed_zero(v), v)


def _signed_zero(v: np.ndarray) -> np.ndarray:
    """A zero of each element's sign (a NaN's sign bit too), made from the bits: widening a
    16-bit array to copy the sign costs many times more."""
    rec = info(np.asarray(v).dtype)
    return (to_bits(v) & np.array(rec.sign_mask, dtype=rec.uint)).view(rec.dtype)


def round_directed(v: np.ndarray, out: DTypeInfo, rounding: Rounding, *,
                   nearest: Optional[np.ndarray] = None) -> np.ndarray:
    """float64 ``v`` (exact, or rounded to odd with at least 2 more bits than ``out``)
    rounded to ``out`` toward zero (``rtz``) or to nearest, ties away from zero (``rna``).
    ``nearest``: ``round_float64(v, out)`` when the caller has it."""
    r = round_float64(v, out) if nearest is None else nearest
    if rounding == "rne":
        return r
    bits = to_bits(r).astype(np.int64)
    mag, w = np.abs(r.astype(np.float64)), np.abs(v)
    if rounding == "rtz":
        step = np.where(np.isfinite(v) & ~np.isnan(v) & (mag > w), -1, 0)
    else:
        away = np.abs(from_bits((bits + 1).astype(out.uint), out.dtype).astype(np.float64))
        step = np.where(np.isfinite(mag) & (w == (mag + away) / 2), 1, 0)
    return from_bits((bits + step).astype(out.uint), out.dtype)


def add_once(a: np.ndarray, b: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """``a + b`` rounded once to ``out`` (exact in float64 for 16-bit operands; for
    float32 and float64 the operands' own add is that single rounding)."""
    if out.bits == 16:
        return round_float64(a.astype(np.float64) + b.astype(np.float64), out)
    return (a + b).astype(out.dtype)


def narrowed(v: np.ndarray, input_dtype: Optional[DTypeLike], *, saturating: bool = False) -> np.ndarray:
    """``v`` rounded to ``input_dtype`` (overflow to inf) and widened back: a kernel that
    narrows its operands before computing.  None leaves ``v`` as it is.  A 16-bit ``v``
    (rounded to the other 16-bit dtype, whose range or precision differs) comes back as
    float32, which holds both exactly.  ``saturating``: the conversion of a chip in
    saturation mode, where overflow gives ±max of ``input_dtype`` and NaN gives 0.  A 16-bit
    ``v`` is looked up in :func:`_narrowing_table` (the same conversion of its every pattern)."""
    if input_dtype is None:
        return v
    if v.dtype.itemsize == 2 and isinstance(v, np.ndarray) and v.ndim:  # an array (a scalar stays one)
        return _narrowing_table(info(v.dtype).name, info(input_dtype).name, saturating)[to_bits(v)]
    return narrowed_by_formula(v, input_dtype, saturating=saturating)


def narrowed_by_formula(v: np.ndarray, input_dtype: DTypeLike, *, saturating: bool = False) -> np.ndarray:
    """:func:`narrowed` computed on ``v`` itself, whatever its dtype."""
    narrow = round_float64(v.astype(np.float64), info(input_dtype))
    if saturating:
        narrow = saturated(narrow, info(input_dtype))
    return cast_exact(narrow, info("float32" if info(v.dtype).bits == 16 else v.dtype))


@cache
def _narrowing_table(dtype: str, input_dtype: str, saturating: bool) -> np.ndarray:
    """:func:`narrowed_by_formula` of every bit pattern of the 16-bit ``dtype``, in bit order
    (cached: do not write into it)."""
    with np.errstate(all="ignore"):  # NaN payloads warn when widened
        table = narrowed_by_formula(all_patterns(dtype), input_dtype, saturating=saturating)
    table.flags.writeable = False
    return table


def read_operand(v: np.ndarray, s: Semantics) -> np.ndarray:
    """An operand as the kernel reads it: saturated as a float32 unit reads it (NaN -> 0,
    ±inf -> ±max), then flushed on every read, as ``s`` says."""
    if s.saturate_inputs:
        v = saturated(v.astype(np.float32), info("float32"))
    return flush_to_zero(v) if s.flush_inputs else v


def rounded_through(compute_in: Callable[[list[np.ndarray]], np.ndarray], operands: Sequence[np.ndarray], *,
                    result_dtype: DTypeLike, out_dtype: Optional[DTypeLike]) -> np.ndarray:
    """A result rounded to ``result_dtype``, then converted to the output dtype of the last
    operand (x): ``compute_in`` computes it from the operands, each widened to float32
    (exactly) when its dtype has no pair with ``result_dtype`` (a 16-bit tensor whose result
    is rounded to the other 16-bit type)."""
    held = [v if (v.dtype.name, info(result_dtype).name) in SUPPORTED_PAIRS else v.astype(np.float32)
            for v in map(np.asarray, operands)]
    return cast_exact(compute_in(held), resolve_pair(operands[-1].dtype, out_dtype)[1])
