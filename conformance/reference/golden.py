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
float32 opmath), ``flush_subnormals`` (x86 FTZ/DAZ), ``saturate`` (Ascend
saturation mode), ``grad_rule="ge"`` (JAX-style ``x >= 0``), ``nan_grad`` and
``input_dtype`` (operands narrowed, e.g. fp32 cast to fp16, before computing).
"""
from __future__ import annotations

import struct
from typing import Literal, Optional, Union

import numpy as np

from conformance.dtypes import DTypeInfo, DTypeLike, info, is_nan, is_subnormal

GradRule = Literal["gt", "ge"]
NanGrad = Literal["alpha", "dy", "zero"]
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


def saturated(v: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """Saturation mode: NaN becomes 0 and +/-inf becomes +/-max."""
    w = v.astype(np.float64)
    w = np.where(np.isnan(w), 0.0, np.clip(w, -out.max, out.max))
    return w.astype(out.dtype) if out.name != "bfloat16" else round_float64(w, out)


def _negative_side(v: np.ndarray, alpha: float, out: DTypeInfo, *,
                   opmath: Optional[DTypeLike]) -> np.ndarray:
    """``alpha * v`` rounded to ``out``, directly or through an opmath dtype."""
    if opmath is None:
        return scale_exact(v, alpha, out)
    mid = info(opmath)
    return cast_exact(scale_exact(v, effective_slope(alpha, slope_dtype=mid), mid), out)


def _flush_product(neg: np.ndarray, v: np.ndarray, alpha: float, out: DTypeInfo) -> np.ndarray:
    """FTZ as x86 applies it: bfloat16 is computed in float32, so a product that is
    subnormal in float32 is flushed even when it would round up to a bfloat16 normal."""
    if out.name == "bfloat16":
        neg = np.where(is_subnormal(scale_exact(v, alpha, info("float32"))), _signed_zero(neg), neg)
    return flush_to_zero(neg)


def _signed_zero(v: np.ndarray) -> np.ndarray:
    return np.copysign(0.0, v.astype(np.float64)).astype(v.dtype)


def _select(v: np.ndarray, alpha: float, out: DTypeInfo, *, opmath: Optional[DTypeLike],
            flush: bool, saturate: bool, take_v: np.ndarray) -> np.ndarray:
    """``where(take_v, v, alpha*v)`` in ``out``, with the post-processing variants.

    Under ``flush`` only arithmetic sees flushed operands (DAZ) and flushes its
    result (FTZ); the pass-through branch is a select and keeps ``v``'s bits.
    """
    neg = _negative_side(flush_to_zero(v) if flush else v, alpha, out, opmath=opmath)
    if flush:
        neg = _flush_product(neg, flush_to_zero(v), alpha, out)
    y = np.where(take_v, cast_exact(v, out), neg)
    return saturated(y, out) if saturate else y


def _narrowed(v: np.ndarray, input_dtype: Optional[DTypeLike]) -> np.ndarray:
    """``v`` rounded to ``input_dtype`` (overflow to inf) and widened back: a kernel that
    narrows its operands before computing.  None leaves ``v`` as it is."""
    if input_dtype is None:
        return v
    narrow = round_float64(v.astype(np.float64), info(input_dtype))
    return cast_exact(narrow, info(v.dtype))


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


def leaky_relu(x: np.ndarray, alpha: float, *, out_dtype: Optional[DTypeLike] = None,
               slope_dtype: SlopeDTypes = None, opmath: Optional[DTypeLike] = None,
               flush_subnormals: bool = False, saturate: bool = False,
               input_dtype: Optional[DTypeLike] = None) -> np.ndarray:
    """Exact forward LeakyReLU; the keywords select the semantic variants."""
    x = _narrowed(np.asarray(x), input_dtype)
    _, out = resolve_pair(x.dtype, out_dtype)
    a = effective_slope(check_alpha(alpha), slope_dtype=slope_dtype)

    def one(xs: np.ndarray) -> np.ndarray:
        compared = flush_to_zero(xs) if flush_subnormals else xs
        return _select(xs, a, out, opmath=opmath, flush=flush_subnormals,
                       saturate=saturate, take_v=compared > 0)

    return _chunked(one, x, out=out)


def leaky_relu_backward(dy: np.ndarray, x: np.ndarray, alpha: float, *,
                        out_dtype: Optional[DTypeLike] = None,
                        slope_dtype: SlopeDTypes = None, opmath: Optional[DTypeLike] = None,
                        flush_subnormals: bool = False, saturate: bool = False,
                        grad_rule: GradRule = "gt", nan_grad: NanGrad = "alpha",
                        input_dtype: Optional[DTypeLike] = None) -> np.ndarray:
    """Exact ``dx = dy if x > 0 else alpha*dy``; x = +/-0 and NaN take ``alpha*dy``."""
    dy, x = _narrowed(np.asarray(dy), input_dtype), _narrowed(np.asarray(x), input_dtype)
    if dy.shape != x.shape or dy.dtype != x.dtype:
        raise ValueError(f"dy and x must match: got {dy.dtype}{dy.shape} and {x.dtype}{x.shape}")
    _, out = resolve_pair(x.dtype, out_dtype)
    a = effective_slope(check_alpha(alpha), slope_dtype=slope_dtype)

    def one(ds: np.ndarray, xs: np.ndarray) -> np.ndarray:
        xs = flush_to_zero(xs) if flush_subnormals else xs  # DAZ applies to the comparison
        take = xs >= 0 if grad_rule == "ge" else xs > 0
        if nan_grad == "dy":
            take = take | is_nan(xs)
        dx = _select(ds, a, out, opmath=opmath, flush=flush_subnormals,
                     saturate=saturate, take_v=take)
        return np.where(is_nan(xs), np.zeros((), out.dtype), dx) if nan_grad == "zero" else dx

    return _chunked(one, dy, x, out=out)
