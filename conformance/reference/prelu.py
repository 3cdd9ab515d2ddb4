"""The exact, correctly rounded PReLU golden: forward, dx and dweight.

``y = x if x > 0 else w[c] * x`` and ``dx = dy if x > 0 else w[c] * dy``: the exact product
rounded once to the output dtype, as the LeakyReLU golden rounds ``alpha * x``
(:func:`conformance.reference.exact.scale_exact` for a wide slope; a slope of at most 24
significant bits times an operand of at most 24 is already exact in float64).  x = ±0 and
NaN take the product, as torch's kernel does (``aten/src/ATen/native/cpu/Activation.cpp``,
``prelu_kernel``: ``input > 0 ? input : weight * input``).

``dweight[c]`` is the sum, over the elements the weight element ``c`` was broadcast to, of
``x > 0 ? 0 : x * dy`` (``prelu_backward_kernel``): so x = ±0 contributes ``±0 * dy`` (NaN
when dy is ±inf or NaN) and a NaN x contributes NaN.  The golden is the **exact** sum of the
exact products, rounded once to the output dtype; IEEE gives the specials (a NaN or both
infinities: NaN; one infinity: it) and the sign of an exact zero (-0 only when every term is
-0; an empty sum is +0).  The order and accumulator a framework sums in are its own
(:mod:`conformance.reference.reductions`).

The weight's shapes (:func:`weight_per_element`): 1 element; C elements on ``channel_axis``
(torch and aclnn: axis 1, or 0 for an input of rank <= 1); the input's shape without its
batch axis (Keras), possibly with axes of length 1 it is shared along; or any shape that
broadcasts numpy-style to the input's (ONNX's ``PRelu``).
"""
from __future__ import annotations

from fractions import Fraction
from typing import Literal, Optional

import numpy as np

from conformance.dtypes import DTypeInfo, DTypeLike
from conformance.reference.exact import cast_exact, resolve_pair, round_float64, scale_exact

Formulation = Literal["select", "maxmin"]

__all__ = ["backward", "dweight", "exact_sums", "forward", "groups_of", "products", "round_exact",
           "weight_per_element"]


def channel_axis_of(ndim: int, *, channel_axis: int = 1) -> int:
    """The channel axis torch and aclnn use: ``channel_axis``, or 0 for an input of rank <= 1."""
    return channel_axis if ndim > channel_axis else 0


def expanded_weight(weight: np.ndarray, shape: tuple[int, ...], *, channel_axis: int = 1) -> np.ndarray:
    """``weight`` reshaped so that numpy broadcasts it to ``shape`` (same rank), or a ValueError
    naming the shapes: 1 element, C on ``channel_axis``, ``shape[1:]`` (Keras), or same rank."""
    w = np.asarray(weight)
    ndim = len(shape)
    if w.size == 1:
        return w.reshape((1,) * ndim)
    axis = channel_axis_of(ndim, channel_axis=channel_axis)
    if w.ndim == 1 and ndim and w.size == shape[axis]:
        return w.reshape(tuple(w.size if i == axis else 1 for i in range(ndim)))
    if w.ndim == ndim - 1 and _broadcasts(w.shape, shape[1:]):
        return w.reshape((1, *w.shape))
    if w.ndim == ndim and _broadcasts(w.shape, shape):
        return w
    raise ValueError(f"a weight of shape {w.shape} fits no PReLU weight rule for an input of shape {shape}: give "
                     f"1 element, {shape[axis] if ndim else 1} on axis {axis}, or a shape broadcasting to "
                     f"{shape[1:]} (without the batch axis)")


def _broadcasts(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
    return len(small) == len(big) and all(s in (1, b) for s, b in zip(small, big))


def weight_per_element(weight: np.ndarray, shape: tuple[int, ...], *, channel_axis: int = 1) -> np.ndarray:
    """The weight each element of an input of ``shape`` is multiplied by (a broadcast view)."""
    return np.broadcast_to(expanded_weight(weight, shape, channel_axis=channel_axis), shape)


def groups_of(weight: np.ndarray, shape: tuple[int, ...], *, channel_axis: int = 1) -> np.ndarray:
    """For every element of the input, the flat index of the weight element it was multiplied by."""
    w = expanded_weight(weight, shape, channel_axis=channel_axis)
    return np.broadcast_to(np.arange(w.size).reshape(w.shape), shape)


def products(v: np.ndarray, w: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """``w * v`` elementwise, each exact product rounded once to ``out`` (same shapes)."""
    v, w = np.asarray(v), np.asarray(w)
    if max(v.dtype.itemsize, w.dtype.itemsize) <= 4:  # <= 24 x 24 significant bits: exact in float64
        with np.errstate(invalid="ignore", over="ignore"):
            return round_float64(v.astype(np.float64) * w.astype(np.float64), out)
    result = np.empty(v.shape, dtype=out.dtype)
    for slope in np.unique(w.astype(np.float64)):  # the LeakyReLU machinery, one slope at a time
        at = w == slope
        with np.errstate(invalid="ignore", over="ignore"):
            result[at] = scale_exact(v[at], float(slope), out)
    nan = np.isnan(w)
    if nan.any():
        result[nan] = np.nan
    return result


def _select(x: np.ndarray, taken: np.ndarray, w: np.ndarray, out: DTypeInfo) -> np.ndarray:
    """``taken`` where x > 0 (NaN is not), the exact product ``w * taken`` elsewhere."""
    with np.errstate(invalid="ignore"):
        positive = x > 0
    return np.where(positive, cast_exact(taken, out), products(taken, w, out))


def forward(x: np.ndarray, weight: np.ndarray, *, channel_axis: int = 1,
            out_dtype: Optional[DTypeLike] = None, formulation: Formulation = "select") -> np.ndarray:
    """Exact PReLU forward: ``x if x > 0 else w * x``, the product rounded once; ``maxmin`` is
    aclnnPrelu's ``max(0, x) + w * min(0, x)``: one term is a zero, so the sum is the select's value
    except that a zero result on the non-positive side is ``0 + (±0) = +0``."""
    x = np.asarray(x)
    _, out = resolve_pair(x.dtype, out_dtype)
    y = _select(x, x, weight_per_element(weight, x.shape, channel_axis=channel_axis), out)
    if formulation == "maxmin":
        with np.errstate(invalid="ignore"):
            y = np.where((x <= 0) & (y == 0), np.zeros((), out.dtype), y)
    return y


def backward(dy: np.ndarray, x: np.ndarray, weight: np.ndarray, *, channel_axis: int = 1,
             out_dtype: Optional[DTypeLike] = None) -> np.ndarray:
    """Exact PReLU dx: ``dy if x > 0 else w * dy`` (x = ±0 and NaN take the product)."""
    x, dy = np.asarray(x), np.asarray(dy)
    if dy.shape != x.shape:
        raise ValueError(f"dy and x must match: got {dy.dtype}{dy.shape} and {x.dtype}{x.shape}")
    _, out = resolve_pair(x.dtype, out_dtype)
    return _select(x, dy, weight_per_element(weight, x.shape, channel_axis=channel_axis), out)


def terms(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each element's share of dweight, ``x > 0 ? +0 : x * dy``, in float64 (exact for inputs of at
    most 24 significant bits; wider inputs are summed as fractions by :func:`exact_sums`)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(x > 0, 0.0, x.astype(np.float64) * dy.astype(np.float64))


def dweight(dy: np.ndarray, x: np.ndarray, weight: np.ndarray, *, channel_axis: int = 1,
            out_dtype: Optional[DTypeLike] = None) -> np.ndarray:
    """Exact dweight, shaped as ``weight``: per weight element, the exact sum of ``x * dy`` over
    the elements it was broadcast to with x not positive, rounded once to the output dtype."""
    x, dy, weight = np.asarray(x), np.asarray(dy), np.asarray(weight)
    _, out = resolve_pair(x.dtype, out_dtype)
    groups = groups_of(weight, x.shape, channel_axis=channel_axis).ravel()
    if x.dtype.itemsize > 4:
        sums = _fraction_sums(dy.ravel(), x.ravel(), groups, size=weight.size, out=out)
    else:
        sums = exact_sums(terms(dy, x).ravel(), groups, size=weight.size, out=out)
    return sums.reshape(weight.shape)


# ----------------------------------------------------------------------------- exact sums

def _specials(t: np.ndarray, groups: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group: the IEEE special its sum is (NaN, ±inf; 0 where none), and whether it has one."""
    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(groups[mask], minlength=size)

    nan, pos, neg = count(np.isnan(t)), count(t == np.inf), count(t == -np.inf)
    special = np.where((nan > 0) | ((pos > 0) & (neg > 0)), np.nan, np.where(pos > 0, np.inf,
                                                                             np.where(neg > 0, -np.inf, 0.0)))
    return special, (nan + pos + neg) > 0


def exact_sums(t: np.ndarray, groups: np.ndarray, *, size: int, out: DTypeInfo) -> np.ndarray:
    """Per group ``0..size-1``, the exact sum of the float64 terms ``t`` of that group, rounded once
    to ``out``.  Each finite term is an integer significand times a power of two; the significands
    of one (group, exponent) are summed as int64 limbs, and the limbs of a group as a Python int."""
    special, has_special = _specials(t, groups, size)
    finite = np.isfinite(t)
    f, e = np.frexp(np.where(finite, t, 0.0))
    m = np.ldexp(f, 53).astype(np.int64)  # t = m * 2**(e - 53), |m| < 2**53
    high, low = m >> 26, m & ((1 << 26) - 1)  # m = high * 2**26 + low
    key = groups.astype(np.int64) * 4096 + (e.astype(np.int64) + 2048)
    keys, at = np.unique(key[m != 0], return_inverse=True)
    high_sums = np.zeros(keys.size, dtype=np.int64)
    low_sums = np.zeros(keys.size, dtype=np.int64)
    np.add.at(high_sums, at, high[m != 0])
    np.add.at(low_sums, at, low[m != 0])
    totals = [0] * size
    scales = [0] * size
    for k, hs, ls in zip(keys.tolist(), high_sums.tolist(), low_sums.tolist()):
        g, exp = divmod(k, 4096)
        totals[g], scales[g] = _added(totals[g], scales[g], (hs << 26) + ls, exp - 2048 - 53)
    members = np.bincount(groups, minlength=size)
    negative_zero = (np.bincount(groups[(t == 0) & np.signbit(t)], minlength=size) == members) & (members > 0)
    result = np.array([round_exact(n, s, out) for n, s in zip(totals, scales)], dtype=np.float64)
    result = np.where((result == 0) & negative_zero, -0.0, result)
    return cast_exact(np.where(has_special, special, result), out)


def _added(total: int, scale: int, n: int, exp: int) -> tuple[int, int]:
    """``total * 2**scale + n * 2**exp`` as (integer, scale), keeping the smaller scale."""
    if total == 0:
        return n, exp
    if exp < scale:
        return (total << (scale - exp)) + n, exp
    return total + (n << (exp - scale)), scale


def round_exact(n: int, scale: int, out: DTypeInfo) -> float:
    """``n * 2**scale`` rounded once to ``out``: rounded to odd in float64 (53 bits, at least two
    more than any narrower format's), then to nearest even, which is then correct (Boldo and
    Melquiond); float64 itself through ``Fraction``'s correctly rounded conversion."""
    if n == 0:
        return 0.0
    if out.name == "float64":
        return float(Fraction(n) * Fraction(2) ** scale) if abs(scale) < 4000 else _huge(n, scale)
    sign, mag = (-1 if n < 0 else 1), abs(n)
    drop = max(mag.bit_length() - 53, 0)
    kept = mag >> drop
    if kept << drop != mag:
        kept |= 1  # sticky: round to odd
    wide = np.array([sign * float(np.ldexp(float(kept), scale + drop))], dtype=np.float64)
    return float(round_float64(wide, out)[0])


def _huge(n: int, scale: int) -> float:
    return float("inf") * (1 if n > 0 else -1) if scale > 0 else 0.0 * (1 if n > 0 else -1)


def _fraction_sums(dy: np.ndarray, x: np.ndarray, groups: np.ndarray, *, size: int, out: DTypeInfo) -> np.ndarray:
    """:func:`exact_sums` for float64 inputs, whose products float64 cannot hold: fractions."""
    t = terms(dy, x)  # for the specials and the sign of zero only
    special, has_special = _specials(t, groups, size)
    sums = [Fraction(0)] * size
    for g, a, b in zip(groups.tolist(), x.tolist(), dy.tolist()):
        if a <= 0 and np.isfinite(a) and np.isfinite(b):
            sums[g] += Fraction(a) * Fraction(b)
    result = np.array([float(s) for s in sums], dtype=np.float64)
    negative_zero = np.array([bool(np.all(np.signbit(t[groups == g]) & (t[groups == g] == 0))) and
                              bool(np.any(groups == g)) for g in range(size)])
    result = np.where((result == 0) & negative_zero, -0.0, result)
    return cast_exact(np.where(has_special, special, result), out)
