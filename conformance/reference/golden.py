"""The exact, correctly rounded LeakyReLU reference, and its semantic variants.

``y = x if x > 0 else alpha * x`` and ``dx = dy if x > 0 else alpha * dy``,
where ``alpha * v`` is the exact product with the binary64 ``alpha``, rounded
once (round half to even) to the output dtype.

How it stays exact without a Python loop over elements: the product is formed
in float64, which is already exact for almost every element.  Double rounding
(float64, then the output dtype) can only go wrong where the float64 product
sits on a rounding midpoint of the output dtype.  Those few candidates are
recomputed with an error-free product (Dekker split of ``alpha``) and rounded
to odd in float64, which makes the final round-to-nearest correct (Boldo and
Melquiond, "Emulation of FMA and correctly rounded sums", 2008).  bfloat16 is
reached through a float32 round-to-odd step, because ml_dtypes casts float64
to bfloat16 through float32 and would otherwise round twice.

The keyword variants model other frameworks' semantics for triage:
``slope_dtype`` (TensorFlow rounds the slope to T), ``opmath`` (PyTorch's
float32 opmath), ``daz``/``ftz`` (x86 denormals-are-zero on reads, flush-to-zero
of products; ``flush_subnormals`` is both), ``predicate`` (``x > 0`` or
``x >= 0``), ``formulation`` (``max(x, a*x)``, ``min(x, a*x)``,
``max(x,0)+a*min(x,0)``, mask-multiply, plain ReLU, ``scale``: alpha*x on both
sides, ``merge``: a select whose merge turns a selected zero product into +0, as
ONNX Runtime's Where does), ``saturate`` (Ascend
saturation mode), ``grad_rule`` (``ge``: JAX/Paddle's dx = dy at x == 0; ``max``:
MindSpore's gradient of ``maximum(a*x, x)``), ``nan_grad`` and ``input_dtype``
(operands narrowed, e.g. fp32 cast to fp16, before computing) and ``result_dtype``
(the result rounded to a narrower dtype before it is handed back).
"""
from __future__ import annotations

import struct
from typing import Literal, Optional, Union

import numpy as np

from conformance.dtypes import DTypeInfo, DTypeLike, from_bits, info, is_nan, is_subnormal, to_bits

GradRule = Literal["gt", "ge", "max", "result"]
NanGrad = Literal["alpha", "dy", "zero", "dy*0", "nan"]
Predicate = Literal["gt", "ge"]
GradForm = Literal["select", "sum", "fma"]
Formulation = Literal["select", "max", "min", "maxmin", "mask", "relu", "scale", "max_or_min",
                      "twice", "swap_branches", "swap_operands", "merge"]
NanOperand = Literal["propagate", "x"]
Saturate = Union[bool, Literal["inf"]]  # "inf": only the infinities clamp
Rounding = Literal["rne", "rtz", "rna"]  # the final conversion: to nearest even, toward zero, half away
SlopeDTypes = Optional[Union[DTypeLike, tuple[DTypeLike, ...]]]

#: (input dtype, output dtype) pairs the reference computes.
SUPPORTED_PAIRS: frozenset[tuple[str, str]] = frozenset(
    {(d, d) for d in ("float16", "bfloat16", "float32", "float64")}
    | {("float32", "float16"), ("float32", "bfloat16"),
       ("float16", "float32"), ("bfloat16", "float32")}
)
_CHUNK = 1 << 20  # elements per chunk: bounds peak extra memory, stays cache-friendly
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


def _split(alpha: float) -> tuple[float, float]:
    """Veltkamp-style split: ``hi`` keeps 26 significant bits, ``lo = alpha - hi`` exactly."""
    bits = struct.unpack("<Q", struct.pack("<d", alpha))[0] & ~((1 << 27) - 1)
    hi = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return hi, alpha - hi


def _round_to_odd_product(v: np.ndarray, alpha: float) -> np.ndarray:
    """float64 round-to-odd of ``v * alpha`` for v with <= 24 significant bits."""
    hi, lo = _split(alpha)
    ph, pl = v * hi, v * lo  # both exact: 26 + 24 and 27 + 24 bits
    s = ph + pl
    bb = s - ph
    err = (ph - (s - bb)) + (pl - bb)  # two-sum: v*alpha == s + err exactly
    even = (s.view(np.uint64) & 1) == 0
    return np.where((err != 0) & even, np.nextafter(s, np.copysign(np.inf, err)), s)


def round_float64(v: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """Correctly rounded (half to even) float64 -> ``out``, bfloat16 included."""
    with np.errstate(all="ignore"):  # overflow to inf and NaN casts are intended
        if out.name != "bfloat16":
            return v.astype(out.dtype)
        return _round_to_bfloat16(v, out)


def _round_to_bfloat16(v: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """float64 -> float32 rounded to odd, then float32 -> bfloat16 rounded to nearest even."""
    r32 = v.astype(np.float32)
    inexact = (r32.astype(np.float64) != v) & np.isfinite(r32)
    fix = inexact & ((r32.view(np.uint32) & 1) == 0)
    toward = np.copysign(np.float32(np.inf), (v - r32.astype(np.float64)).astype(np.float32))
    r32 = np.where(fix, np.nextafter(r32, toward), r32)  # round to odd in float32
    return r32.astype(out.dtype)


def cast_exact(v: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """``v`` correctly rounded to ``out`` (a no-op when the dtype already matches)."""
    if v.dtype == out.dtype:
        return v
    return round_float64(v.astype(np.float64), out)


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
        p[idx] = _round_to_odd_product(v.astype(np.float64).ravel()[idx], alpha)
    return round_float64(p, out)


def effective_slope(alpha: float, *, slope_dtype: SlopeDTypes) -> float:
    """The slope a framework multiplies by: alpha, or alpha rounded to each dtype in turn.

    TensorFlow stores ``alpha`` as a float32 attribute and then converts it to
    T, so its slope is ``("float32", T)``; a single dtype is the common case.
    """
    if slope_dtype is None:
        return alpha
    chain = slope_dtype if isinstance(slope_dtype, tuple) else (slope_dtype,)
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


def _negative_side(v: np.ndarray, alpha: float, out: DTypeInfo, *,
                   opmath: Optional[DTypeLike]) -> np.ndarray:
    """``alpha * v`` rounded to ``out``, directly or through an opmath dtype."""
    if opmath is None:
        return scale_exact(v, alpha, out)
    mid = info(opmath)  # the operand is converted to opmath too (a no-op unless v is wider)
    return cast_exact(scale_exact(cast_exact(v, mid), effective_slope(alpha, slope_dtype=mid), mid), out)


def _flush_product(neg: np.ndarray, v: np.ndarray, alpha: float, out: DTypeInfo, *,
                   opmath: Optional[DTypeLike] = None) -> np.ndarray:
    """FTZ as x86 applies it: bfloat16 is computed in float32, so a product that is
    tiny in float32 is flushed even when it would round up to a bfloat16 normal.
    That holds for a bfloat16 ``opmath`` too (a float32 tensor computed in bfloat16, as
    Keras's mixed_bfloat16 policy does), with the slope rounded to bfloat16."""
    if opmath is not None and info(opmath).name == "bfloat16":
        slope = effective_slope(alpha, slope_dtype="bfloat16")
        return flush_to_zero(ftz_float32(neg, v.astype(np.float64) * slope))
    if out.name in ("bfloat16", "float32"):
        return ftz_float32(neg, v.astype(np.float64) * alpha)
    return flush_to_zero(neg)


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
    return np.copysign(0.0, v.astype(np.float64)).astype(v.dtype)


def _product(v: np.ndarray, alpha: float, out: DTypeInfo, *, opmath: Optional[DTypeLike],
             daz: bool, ftz: bool) -> np.ndarray:
    """``alpha * v`` rounded to ``out``; DAZ reads subnormal operands as zero, FTZ flushes
    subnormal products."""
    operand = flush_to_zero(v) if daz else v
    neg = _negative_side(operand, alpha, out, opmath=opmath)
    return _flush_product(neg, operand, alpha, out, opmath=opmath) if ftz else neg


def _take(compared: np.ndarray, predicate: Predicate) -> np.ndarray:
    return compared >= 0 if predicate == "ge" else compared > 0


def _formula(v: np.ndarray, alpha: float, out: DTypeInfo, *, formulation: Formulation,
             take_v: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """The forward formula in ``out``; ``neg`` is ``alpha*v`` rounded, ``take_v`` the predicate."""
    vo = cast_exact(v, out)
    if formulation == "max_or_min":  # max(x, a*x) for a <= 1, min(x, a*x) above (Paddle, MindSpore)
        formulation = "max" if alpha <= 1 else "min"
    if formulation == "max":
        return np.maximum(vo, neg)
    if formulation == "min":
        return np.minimum(vo, neg)
    if formulation == "scale":  # the select forgotten: alpha*x on both sides
        return neg
    zero = np.zeros((), out.dtype)
    if formulation == "relu":
        return np.maximum(vo, zero)
    if formulation == "maxmin":  # max(x,0) + alpha*min(x,0): one term is a zero, so the sum is exact
        return (np.maximum(vo, zero) + np.where(np.minimum(vo, zero) == 0, zero * neg, neg)).astype(out.dtype)
    if formulation == "merge":  # ONNX Runtime's Where: x_sel != 0 ? x_sel : y_sel, a zero product is +0
        return np.where(take_v, vo, np.where(neg == 0, zero, neg))
    if formulation == "mask":  # x*m + (alpha*x)*(1-m): inf*0 is NaN
        m = take_v.astype(out.dtype)
        return (vo * m + neg * (np.ones((), out.dtype) - m)).astype(out.dtype)
    return np.where(take_v, vo, neg)


def _select(v: np.ndarray, alpha: float, out: DTypeInfo, *, opmath: Optional[DTypeLike],
            daz: bool, ftz: bool, saturate: Saturate, take_v: np.ndarray,
            formulation: Formulation = "select", nan_operand: NanOperand = "propagate") -> np.ndarray:
    """``where(take_v, v, alpha*v)`` (or another formula) in ``out``, with the variants.

    DAZ/FTZ touch only arithmetic; the pass-through branch is a select and keeps ``v``'s bits.
    """
    neg = _product(v, alpha, out, opmath=opmath, daz=daz, ftz=ftz)
    # max/min are arithmetic (x86 MAXPS/MINPS): under DAZ they read x as a zero, as the product does
    operand = flush_to_zero(v) if daz and formulation in ("max", "min", "max_or_min") else v
    y = _formula(operand, alpha, out, formulation=formulation, take_v=take_v, neg=neg)
    if nan_operand == "x" and formulation in ("max", "min", "max_or_min"):
        y = np.where(is_nan(neg), cast_exact(v, out), y)  # a compare-select ignores a NaN product
    if formulation == "mask" and info(v.dtype).bits > out.bits:
        y = _nan_as_computed_wide(y, v, alpha, take_v=take_v, opmath=opmath, daz=daz, ftz=ftz)
    return saturated(y, out, which=saturate) if saturate else y


def _nan_as_computed_wide(y: np.ndarray, v: np.ndarray, alpha: float, *, take_v: np.ndarray,
                          opmath: Optional[DTypeLike], daz: bool, ftz: bool) -> np.ndarray:
    """Mask-multiply of a wider input: inf*0 is NaN only where the wide operands are
    infinite (an fp32 1e5 is finite before the result is rounded to fp16)."""
    wide = info(v.dtype)
    neg = _product(v, alpha, wide, opmath=opmath, daz=daz, ftz=ftz)
    nan = is_nan(_formula(v, alpha, wide, formulation="mask", take_v=take_v, neg=neg))
    out = info(y.dtype)
    selected = np.where(take_v, cast_exact(v, out), _product(v, alpha, out, opmath=opmath, daz=daz, ftz=ftz))
    return np.where(nan, np.full((), np.nan, y.dtype), np.where(is_nan(y), selected, y))


def _narrowed(v: np.ndarray, input_dtype: Optional[DTypeLike]) -> np.ndarray:
    """``v`` rounded to ``input_dtype`` (overflow to inf) and widened back: a kernel that
    narrows its operands before computing.  None leaves ``v`` as it is.  A 16-bit ``v``
    (rounded to the other 16-bit dtype, whose range or precision differs) comes back as
    float32, which holds both exactly."""
    if input_dtype is None:
        return v
    narrow = round_float64(v.astype(np.float64), info(input_dtype))
    return cast_exact(narrow, info("float32" if info(v.dtype).bits == 16 else v.dtype))


def _holding(v: np.ndarray, result_dtype: DTypeLike) -> np.ndarray:
    """``v`` widened to float32 (exactly) when its dtype has no pair with ``result_dtype``:
    a 16-bit tensor whose result is rounded to the other 16-bit type."""
    v = np.asarray(v)
    return v if (v.dtype.name, info(result_dtype).name) in SUPPORTED_PAIRS else v.astype(np.float32)


def _chunked(fn, *arrays: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """Apply ``fn`` chunk by chunk over flattened, equally shaped arrays."""
    shape = arrays[0].shape
    flat = [a.reshape(-1) for a in arrays]
    result = np.empty(flat[0].size, dtype=out.dtype)
    with np.errstate(all="ignore"):  # inf/NaN/overflow are computed on purpose
        for start in range(0, max(flat[0].size, 1), _CHUNK):
            part = slice(start, start + _CHUNK)
            result[part] = fn(*(a[part] for a in flat))
    return result.reshape(shape)


def _unrounded(v: np.ndarray, alpha: float, *, take: np.ndarray,
               opmath: Optional[DTypeLike]) -> np.ndarray:
    """The value a select's final conversion rounds, in float64: ``v`` where ``take``, else
    ``alpha*v`` rounded to odd in float64 (which any rounding to 24 bits or fewer rounds as
    it would the exact product), or the opmath product (exact in float64)."""
    if info(v.dtype).bits > 32:
        raise ValueError("a directed rounding of the result is modelled for inputs of at most 32 bits")
    w = v.astype(np.float64)
    if opmath is not None:
        mid = info(opmath)
        prod = scale_exact(cast_exact(v, mid), effective_slope(alpha, slope_dtype=mid), mid).astype(np.float64)
    else:
        prod = w * alpha
        finite = np.isfinite(prod)
        prod[finite] = _round_to_odd_product(w[finite], alpha)
    return np.where(take, w, prod)


def round_directed(v: np.ndarray, out: DTypeInfo, rounding: Rounding) -> np.ndarray:
    """float64 ``v`` (exact, or rounded to odd with at least 2 more bits than ``out``)
    rounded to ``out`` toward zero (``rtz``) or to nearest, ties away from zero (``rna``)."""
    r = round_float64(v, out)
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


def _rerounded(y: np.ndarray, v: np.ndarray, alpha: float, out: DTypeInfo, *, take: np.ndarray,
               opmath: Optional[DTypeLike], rounding: Rounding) -> np.ndarray:
    """``y`` with the select's final conversion done in ``rounding`` mode, where ``y`` is
    that conversion's round-to-nearest result (a flush or clamp applied after it stays)."""
    if rounding == "rne":
        return y
    pre = _unrounded(v, alpha, take=take, opmath=opmath)
    nearest = round_float64(pre, out)
    same = (to_bits(nearest) == to_bits(y)) & ~is_nan(y)
    return np.where(same, round_directed(pre, out, rounding), y)


def leaky_relu(x: np.ndarray, alpha: float, *, out_dtype: Optional[DTypeLike] = None,
               slope_dtype: SlopeDTypes = None, opmath: Optional[DTypeLike] = None,
               flush_subnormals: bool = False, saturate: Saturate = False,
               input_dtype: Optional[DTypeLike] = None, daz: bool = False, ftz: bool = False,
               predicate: Predicate = "gt", formulation: Formulation = "select",
               nan_operand: NanOperand = "propagate", rounding: Rounding = "rne",
               result_dtype: Optional[DTypeLike] = None) -> np.ndarray:
    """Exact forward LeakyReLU; the keywords select the semantic variants.

    ``flush_subnormals`` is ``daz`` and ``ftz`` together.  ``daz`` reads subnormal inputs as
    zero in the comparison and the product (a selected value keeps its bits), ``ftz``
    flushes subnormal products.  ``predicate`` is the select's ``x > 0`` or ``x >= 0``.
    ``nan_operand="x"``: a max/min formulation returns ``x`` where the product is NaN
    (``x = ±inf`` with alpha 0), as a compare-select ``a > b ? a : b`` does (Eigen's
    ``cwiseMax`` in Paddle, MindSpore's CPU Maximum); ``propagate`` is ``np.maximum``.
    ``formulation="twice"``: LeakyReLU applied to its own result (slope a*a, rounded twice).
    ``rounding``: the final conversion to the output dtype rounds to nearest even (``rne``),
    toward zero (``rtz``: truncation, so overflow gives ±max) or half away from zero
    (``rna``).  ``result_dtype``: the result is rounded to that dtype, then converted to
    the output dtype (an fp16 kernel's result widened to float32).
    Under ``daz`` a max/min formulation reads x as zero too (x86 MAXPS/MINPS, measured on
    MindSpore's fp32 CPU kernels), so a subnormal x gives a zero of its sign.
    """
    if result_dtype is not None:
        narrow = leaky_relu(_holding(x, result_dtype), alpha, out_dtype=result_dtype, slope_dtype=slope_dtype,
                            opmath=opmath, flush_subnormals=flush_subnormals, saturate=saturate,
                            input_dtype=input_dtype, daz=daz, ftz=ftz, predicate=predicate, formulation=formulation,
                            nan_operand=nan_operand, rounding=rounding)
        return cast_exact(narrow, resolve_pair(np.asarray(x).dtype, out_dtype)[1])
    _, out = resolve_pair(np.asarray(x).dtype, out_dtype)
    x = _narrowed(np.asarray(x), input_dtype)
    a = effective_slope(check_alpha(alpha), slope_dtype=slope_dtype)
    daz, ftz = daz or flush_subnormals, ftz or flush_subnormals

    def one(xs: np.ndarray) -> np.ndarray:
        compared = flush_to_zero(xs) if daz else xs
        take = _take(compared, predicate)
        if formulation == "twice":  # the first pass's result, in the output dtype, goes in again
            first = _rerounded(_select(xs, a, out, opmath=opmath, daz=daz, ftz=ftz, saturate=False,
                                       take_v=take), xs, a, out, take=take, opmath=opmath, rounding=rounding)
            return one_pass(first, flush_to_zero(first) if daz else first)
        return one_pass(xs, compared)

    def one_pass(xs: np.ndarray, compared: np.ndarray) -> np.ndarray:
        take = _take(compared, predicate)
        y = _select(xs, a, out, opmath=opmath, daz=daz, ftz=ftz, saturate=saturate, take_v=take,
                    formulation="select" if formulation == "twice" else formulation,
                    nan_operand=nan_operand)
        return _rerounded(y, xs, a, out, take=take, opmath=opmath, rounding=rounding)

    return _chunked(one, x, out=out)


def _gradient_of_max(dx: np.ndarray, ds: np.ndarray, xs: np.ndarray, alpha: float,
                     out: DTypeInfo, *, daz: bool = False, ftz: bool = False) -> np.ndarray:
    """The gradient of ``maximum(alpha*x, x)`` (``minimum`` for alpha > 1), as MindSpore
    builds it: MaximumGrad gives a tie (alpha*x == x: x = ±0, ±inf) ``dy/2`` to each
    operand and a NaN comparison ``dy`` to each, then ``dx = alpha*d1 + d2`` rounds every
    step: a tie gives ``round(round(alpha*round(dy/2)) + round(dy/2))``, a NaN product
    (x = NaN, or ±inf with alpha 0) ``round(round(alpha*dy) + dy)``.  Under ``ftz`` the
    recomputed product ``alpha*x`` and every intermediate are flushed; under ``daz`` every
    op reads its subnormal operands as zero (MindSpore's CPU threads run with FZ and DAZ):
    the forward Mul and the comparisons read x, so a subnormal x ties with its product,
    and Div, Mul and Add read dy (``Select`` moves bits and flushes nothing)."""
    def fl(v: np.ndarray, exact: np.ndarray) -> np.ndarray:  # one op's rounded result, flushed
        if not ftz:
            return v
        return ftz_float32(v, exact) if info(v.dtype).name == "float32" else flush_to_zero(v)

    def times_alpha(v: np.ndarray, out: DTypeInfo) -> np.ndarray:
        return fl(scale_exact(v, alpha, out), v.astype(np.float64) * alpha)

    def plus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fl(_add(a, b, out), a.astype(np.float64) + b.astype(np.float64))

    w = flush_to_zero(xs) if daz else xs  # compared in the input's dtype
    prod = times_alpha(w, info(xs.dtype))  # the forward Mul read x under DAZ too
    prod = flush_to_zero(prod) if daz else prod
    nan = is_nan(w) | is_nan(prod)
    tie = (prod == w) & ~nan
    read = flush_to_zero(ds) if daz else ds  # Div, Mul and Add read dy under DAZ
    halved = read.astype(np.float64) / 2.0
    half = fl(cast_exact(halved, out), halved)
    dx = np.where(tie, plus(times_alpha(half, out), half), dx)
    return np.where(nan, plus(times_alpha(read, out), cast_exact(read, out)), dx)


def _add(a: np.ndarray, b: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """``a + b`` rounded once to ``out`` (exact in float64 for 16-bit operands; for
    float32 and float64 the operands' own add is that single rounding)."""
    if out.bits == 16:
        return round_float64(a.astype(np.float64) + b.astype(np.float64), out)
    return (a + b).astype(out.dtype)


def _branch_sum(dx: np.ndarray, take: np.ndarray, alpha: float, out: DTypeInfo) -> np.ndarray:
    """``where(c, dy, 0) + alpha*where(c, 0, dy)``: one term is a zero, so only zero signs
    change (a selected dy gets ``+ alpha*(+0)``, a product gets ``+0 +``), and under DAZ
    the add reads a selected subnormal dy as zero."""
    zero = np.zeros((), out.dtype)
    other = np.where(take, np.copysign(0.0, alpha), 0.0).astype(out.dtype)
    return (dx + np.where(take, other, zero)).astype(out.dtype)


def _branch_fma(dx: np.ndarray, ds: np.ndarray, take: np.ndarray, alpha: float, *,
                daz: bool, out: DTypeInfo) -> np.ndarray:
    """``fma(a, where(c, 0, dy), where(c, dy, 0))``, the branch sum contracted to one fused
    multiply-add (XLA:CPU): as the sum, except that a nonzero product flushed to zero keeps
    its sign (the add sees the exact product, not the flushed zero); an exact zero product
    (dy or a zero, or dy read as zero under DAZ) still gives ``+0``."""
    summed = _branch_sum(flush_to_zero(dx) if daz else dx, take, alpha, out)
    read = flush_to_zero(ds) if daz else ds
    nonzero = (read.astype(np.float64) != 0) & (alpha != 0)
    return np.where(~take & nonzero, dx, summed)


def _nan_gradient(dx: np.ndarray, ds: np.ndarray, xs: np.ndarray, nan_grad: NanGrad,
                  out: DTypeInfo) -> np.ndarray:
    """dx at x = NaN: ``zero`` writes +0; ``dy*0`` is a zero with dy's sign (NaN for a
    non-finite dy), as Paddle's ``dout * (a*(x<0) + (x>=0))`` gives."""
    if nan_grad == "zero":
        return np.where(is_nan(xs), np.zeros((), out.dtype), dx)
    if nan_grad == "dy*0":
        return np.where(is_nan(xs), cast_exact(ds * np.zeros((), ds.dtype), out), dx)
    if nan_grad == "nan":
        return np.where(is_nan(xs), np.full((), np.nan, out.dtype), dx)
    return dx


def leaky_relu_backward(dy: np.ndarray, x: np.ndarray, alpha: float, *,
                        out_dtype: Optional[DTypeLike] = None,
                        slope_dtype: SlopeDTypes = None, opmath: Optional[DTypeLike] = None,
                        flush_subnormals: bool = False, saturate: Saturate = False,
                        grad_rule: GradRule = "gt", nan_grad: NanGrad = "alpha",
                        input_dtype: Optional[DTypeLike] = None, daz: bool = False,
                        ftz: bool = False, formulation: Formulation = "select",
                        grad_form: GradForm = "select", rounding: Rounding = "rne",
                        result_dtype: Optional[DTypeLike] = None) -> np.ndarray:
    """Exact ``dx = dy if x > 0 else alpha*dy``; x = +/-0 and NaN take ``alpha*dy``.

    ``grad_rule``: ``gt`` (golden), ``ge`` (dx = dy at x == 0) or ``max`` (the gradient of
    ``maximum(alpha*x, x)``); ``nan_grad``: ``alpha``, ``dy``, ``zero`` (+0) or ``dy*0``;
    ``daz`` reads x as zero in the comparison and dy as zero in the product.
    ``formulation="relu"`` is a plain ReLU's gradient (+0 where x <= 0).  ``grad_form="sum"``
    is autodiff through ``where(c, x, a*x)``: ``where(c, dy, 0) + a*where(c, 0, dy)`` (JAX),
    which differs from a select only in the sign of zeros; ``grad_form="fma"`` is that sum
    contracted to one fused multiply-add (XLA:CPU's fused kernel).  ``grad_rule="result"``
    selects on the forward result ``y > 0`` (y in x's dtype), as a kernel that keeps only
    y does: wrong for alpha < 0.  ``formulation``: ``swap_branches`` gives ``a*dy`` where
    x > 0 and ``dy`` elsewhere, ``swap_operands`` passes x and dy the other way round.
    ``nan_grad="nan"`` gives NaN at x = NaN.  ``rounding`` and ``result_dtype`` as in
    :func:`leaky_relu`."""
    if result_dtype is not None:
        narrow = leaky_relu_backward(_holding(dy, result_dtype), _holding(x, result_dtype), alpha,
                                     out_dtype=result_dtype, slope_dtype=slope_dtype, opmath=opmath,
                                     flush_subnormals=flush_subnormals, saturate=saturate,
                                     grad_rule=grad_rule, nan_grad=nan_grad, input_dtype=input_dtype,
                                     daz=daz, ftz=ftz, formulation=formulation, grad_form=grad_form,
                                     rounding=rounding)
        return cast_exact(narrow, resolve_pair(np.asarray(x).dtype, out_dtype)[1])
    if formulation == "swap_operands":
        dy, x, formulation = x, dy, "select"
    _, out = resolve_pair(np.asarray(x).dtype, out_dtype)
    dy, x = _narrowed(np.asarray(dy), input_dtype), _narrowed(np.asarray(x), input_dtype)
    if dy.shape != x.shape or dy.dtype != x.dtype:
        raise ValueError(f"dy and x must match: got {dy.dtype}{dy.shape} and {x.dtype}{x.shape}")
    a = effective_slope(check_alpha(alpha), slope_dtype=slope_dtype)
    daz, ftz = daz or flush_subnormals, ftz or flush_subnormals

    def one(ds: np.ndarray, xs: np.ndarray) -> np.ndarray:
        compared = flush_to_zero(xs) if daz else xs  # DAZ applies to the comparison
        if grad_rule == "result":  # y in x's dtype (a may be a rounded slope that overflowed)
            compared = np.where(compared > 0, compared, scale_exact(compared, a, info(compared.dtype)))
        take = _take(compared, "ge" if grad_rule == "ge" else "gt")
        if formulation == "scale":
            take = np.zeros(take.shape, dtype=bool)
        if formulation == "swap_branches":
            take = ~take
        if nan_grad == "dy":
            take = take | is_nan(xs)
        if formulation == "relu":
            return np.where(take, cast_exact(ds, out), np.zeros((), out.dtype))
        dx = _select(ds, a, out, opmath=opmath, daz=daz, ftz=ftz, saturate=False, take_v=take)
        dx = _rerounded(dx, ds, a, out, take=take, opmath=opmath, rounding=rounding)
        if grad_form == "sum":
            dx = _branch_sum(flush_to_zero(dx) if daz else dx, take, a, out)  # the add reads dy
        elif grad_form == "fma":
            dx = _branch_fma(dx, ds, take, a, daz=daz, out=out)
        if grad_rule == "max":
            dx = _gradient_of_max(dx, ds, xs, a, out, daz=daz, ftz=ftz)
        dx = _nan_gradient(dx, ds, xs, nan_grad, out)
        return saturated(dx, out, which=saturate) if saturate else dx

    return _chunked(one, dy, x, out=out)
