"""The exact, correctly rounded LeakyReLU reference, and its semantic variants.

``y = x if x > 0 else alpha * x`` and ``dx = dy if x > 0 else alpha * dy``,
where ``alpha * v`` is the exact product with the binary64 ``alpha``, rounded
once (round half to even) to the output dtype (``conformance.reference.exact``
says how that stays exact without a loop over elements).

A :class:`~conformance.reference.semantics.Semantics` record selects a variant: the
semantics other frameworks, chips and hand-written kernels show, which triage and the
framework models compute with.  :func:`compute` is the one forward/backward dispatch.
"""
from __future__ import annotations

import functools
from dataclasses import replace
from typing import Optional

import numpy as np

from conformance import jit
from conformance.dtypes import DTypeInfo, DTypeLike, all_patterns, info, is_nan, to_bits
from conformance.records import Direction
from conformance.reference.exact import (
    STEP,
    SUPPORTED_PAIRS,
    add_once,
    cast_exact,
    check_alpha,
    effective_slope,
    flush_to_zero,
    ftz_float32,
    narrowed,
    read_operand,
    resolve_pair,
    round_directed,
    round_float64,
    round_to_odd_product,
    rounded_through,
    saturated,
    scale_exact,
)
from conformance.reference.semantics import (
    EXACT,
    Formulation,
    NanGrad,
    NanOperand,
    Predicate,
    Rounding,
    Saturate,
    Semantics,
)

__all__ = ["SUPPORTED_PAIRS", "EXACT", "Semantics", "backward", "cast_exact", "check_alpha", "compute",
           "reference_compute",
           "effective_slope", "flush_to_zero", "ftz_float32", "forward", "resolve_pair", "round_directed",
           "round_float64", "saturated", "scale_exact"]

_CHUNK = 1 << 16  # elements per chunk: bounds peak extra memory; temporaries that fit the cache are faster


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
    if formulation == "mask-multiply":  # x*m + (alpha*x)*(1-m): inf*0 is NaN
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
    if formulation == "mask-multiply" and info(v.dtype).bits > out.bits:
        y = _nan_as_computed_wide(y, v, alpha, take_v=take_v, opmath=opmath, daz=daz, ftz=ftz)
    return saturated(y, out, which=saturate) if saturate else y


def _nan_as_computed_wide(y: np.ndarray, v: np.ndarray, alpha: float, *, take_v: np.ndarray,
                          opmath: Optional[DTypeLike], daz: bool, ftz: bool) -> np.ndarray:
    """Mask-multiply of a wider input: inf*0 is NaN only where the wide operands are
    infinite (an fp32 1e5 is finite before the result is rounded to fp16)."""
    wide = info(v.dtype)
    neg = _product(v, alpha, wide, opmath=opmath, daz=daz, ftz=ftz)
    nan = is_nan(_formula(v, alpha, wide, formulation="mask-multiply", take_v=take_v, neg=neg))
    out = info(y.dtype)
    selected = np.where(take_v, cast_exact(v, out), _product(v, alpha, out, opmath=opmath, daz=daz, ftz=ftz))
    return np.where(nan, np.full((), np.nan, y.dtype), np.where(is_nan(y), selected, y))


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
    it would the exact product; a finite product beyond float64's range is its largest
    finite value), or the opmath product (exact in float64)."""
    if info(v.dtype).bits > 32:
        raise ValueError("a directed rounding of the result is modelled for inputs of at most 32 bits")
    w = v.astype(np.float64)
    if opmath is not None:
        mid = info(opmath)
        prod = scale_exact(cast_exact(v, mid), effective_slope(alpha, slope_dtype=mid), mid).astype(np.float64)
    else:
        with np.errstate(over="ignore"):
            prod = w * alpha
        finite = np.isfinite(prod)
        prod[finite] = round_to_odd_product(w[finite], alpha)
        overflowed = ~finite & np.isfinite(w) & np.isfinite(alpha)  # rounded to odd: the largest finite
        prod[overflowed] = np.copysign(np.finfo(np.float64).max, prod[overflowed])
    return np.where(take, w, prod)


def _rerounded(y: np.ndarray, v: np.ndarray, alpha: float, out: DTypeInfo, *, take: np.ndarray,
               opmath: Optional[DTypeLike], rounding: Rounding) -> np.ndarray:
    """``y`` with the select's final conversion done in ``rounding`` mode, where ``y`` is
    that conversion's round-to-nearest result (a flush or clamp applied after it stays)."""
    if rounding == "rne":
        return y
    pre = _unrounded(v, alpha, take=take, opmath=opmath)
    nearest = round_float64(pre, out)
    same = (to_bits(nearest) == to_bits(y)) & ~is_nan(y)
    return np.where(same, round_directed(pre, out, rounding, nearest=nearest), y)


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
        return fl(add_once(a, b, out), a.astype(np.float64) + b.astype(np.float64))

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


def _slope(alpha: float, s: Semantics) -> float:
    """The slope multiplied by: ``s.slope`` or the alpha asked for, rounded as ``s`` says."""
    return effective_slope(check_alpha(alpha if s.slope is None else s.slope), slope_dtype=s.slope_dtype)


def _forward(x: np.ndarray, alpha: float, out_dtype: Optional[DTypeLike], s: Semantics) -> np.ndarray:
    """The forward under ``s`` (its result dtype, input and output flags aside).

    ``daz`` reads subnormal inputs as zero in the comparison and the product (a selected
    value keeps its bits); under ``daz`` a max/min formulation reads x as zero too (x86
    MAXPS/MINPS, measured on MindSpore's fp32 CPU kernels).  ``twice``: LeakyReLU applied
    to its own result (slope a*a, rounded twice)."""
    _, out = resolve_pair(x.dtype, out_dtype)
    x = narrowed(x, s.input_dtype, saturating=s.saturate_inputs)
    a, daz, ftz, opmath = _slope(alpha, s), s.daz, s.ftz, s.opmath

    def one(xs: np.ndarray) -> np.ndarray:
        compared = flush_to_zero(xs) if daz else xs
        take = _take(compared, s.predicate)
        if s.formulation == "twice":  # the first pass's result, in the output dtype, goes in again
            first = _rerounded(_select(xs, a, out, opmath=opmath, daz=daz, ftz=ftz, saturate=False,
                                       take_v=take), xs, a, out, take=take, opmath=opmath, rounding=s.rounding)
            return one_pass(first, flush_to_zero(first) if daz else first)
        return one_pass(xs, compared)

    def one_pass(xs: np.ndarray, compared: np.ndarray) -> np.ndarray:
        take = _take(compared, s.predicate)
        y = _select(xs, a, out, opmath=opmath, daz=daz, ftz=ftz, saturate=s.saturate, take_v=take,
                    formulation="select" if s.formulation == "twice" else s.formulation,
                    nan_operand=s.nan_operand)
        return _rerounded(y, xs, a, out, take=take, opmath=opmath, rounding=s.rounding)

    return _chunked(one, x, out=out)


def _gradient_select(compared: np.ndarray, xs: np.ndarray, a: float, s: Semantics) -> np.ndarray:
    """Where dx takes dy itself (True) rather than ``a*dy``."""
    if s.grad_rule == "result":  # y in x's dtype (a may be a rounded slope that overflowed)
        compared = np.where(compared > 0, compared, scale_exact(compared, a, info(compared.dtype)))
    take = _take(compared, "ge" if s.grad_rule == "ge" else "gt")
    if s.formulation == "scale":
        take = np.zeros(take.shape, dtype=bool)
    if s.formulation == "swap_branches":
        take = ~take
    return take | is_nan(xs) if s.nan_grad == "dy" else take


def _backward(dy: np.ndarray, x: np.ndarray, alpha: float, out_dtype: Optional[DTypeLike],
              s: Semantics) -> np.ndarray:
    """The backward under ``s`` (its result dtype, input and output flags aside); ``daz``
    reads x as zero in the comparison and dy as zero in the product."""
    if s.formulation == "swap_operands":
        dy, x, s = x, dy, replace(s, formulation="select")
    _, out = resolve_pair(x.dtype, out_dtype)
    dy, x = (narrowed(v, s.input_dtype, saturating=s.saturate_inputs) for v in (dy, x))
    if dy.shape != x.shape or dy.dtype != x.dtype:
        raise ValueError(f"dy and x must match: got {dy.dtype}{dy.shape} and {x.dtype}{x.shape}")
    a, daz, ftz, opmath = _slope(alpha, s), s.daz, s.ftz, s.opmath

    def one(ds: np.ndarray, xs: np.ndarray) -> np.ndarray:
        take = _gradient_select(flush_to_zero(xs) if daz else xs, xs, a, s)  # DAZ applies to the comparison
        if s.formulation == "relu":
            return np.where(take, cast_exact(ds, out), np.zeros((), out.dtype))
        dx = _select(ds, a, out, opmath=opmath, daz=daz, ftz=ftz, saturate=False, take_v=take)
        dx = _rerounded(dx, ds, a, out, take=take, opmath=opmath, rounding=s.rounding)
        if s.grad_form == "sum":
            dx = _branch_sum(flush_to_zero(dx) if daz else dx, take, a, out)  # the add reads dy
        elif s.grad_form == "fma":
            dx = _branch_fma(dx, ds, take, a, daz=daz, out=out)
        if s.grad_rule == "max":
            dx = _gradient_of_max(dx, ds, xs, a, out, daz=daz, ftz=ftz)
        if s.grad_rule == "step":
            dx = _step_gradient(dx, ds, xs, a, out)
        dx = _nan_gradient(dx, ds, xs, s.nan_grad, out)
        return saturated(dx, out, which=s.saturate) if s.saturate else dx

    return _chunked(one, dy, x, out=out)


def _step_gradient(dx: np.ndarray, ds: np.ndarray, xs: np.ndarray, a: float, out: DTypeInfo) -> np.ndarray:
    """``dx`` where x is not a positive subnormal; there the step function's
    dy * (|r - 1| * a + r), r = min(x, tiny) / tiny, every operation rounded in x's dtype."""
    if xs.dtype.name not in STEP:
        return dx
    tiny, lifts = STEP[xs.dtype.name]
    t_ = xs.dtype.type
    sub = (xs > 0) & (xs < t_(tiny))
    if not sub.any():
        return dx
    r = np.minimum(xs[sub], t_(tiny))
    for lift in lifts:
        r = r * t_(lift)
    frac = (np.abs(r - t_(1)) * t_(a)) + r
    out_dx = dx.copy()
    out_dx[sub] = cast_exact(ds[sub] * frac, out)
    return out_dx


def compute(direction: Direction, x: np.ndarray, alpha: float, *, dy: Optional[np.ndarray] = None,
            out_dtype: Optional[DTypeLike] = None, semantics: Semantics = EXACT,
            into: Optional[np.ndarray] = None) -> np.ndarray:
    """The golden of one direction under ``semantics`` (``dy`` is required for backward).
    ``into``: room the compiled loops may write it into instead of a new array (flat, of the
    output's dtype and x's size: :func:`conformance.reference.compiled.room`), so a caller that
    computes many goldens of one size pays for fresh memory once; the golden is what is returned,
    written there or not."""
    if direction == "backward" and dy is None:
        raise ValueError("backward needs dy")
    if direction == "forward" and _tabled(x):
        return _from_table(np.asarray(x), alpha, out_dtype=out_dtype, semantics=semantics, into=into)
    if _compiles(direction, x, dy, semantics):
        from conformance.reference import compiled  # numba, imported on the first compiled call

        return compiled.compute(direction, x, alpha, dy=dy, out_dtype=out_dtype, semantics=semantics, into=into)
    return reference_compute(direction, x, alpha, dy=dy, out_dtype=out_dtype, semantics=semantics)


TABLE_MIN = 1 << 17  # elements from which a 16-bit forward is read from the golden of every pattern


def _tabled(x: np.ndarray) -> bool:
    """A 16-bit forward large enough that the golden of all 65,536 patterns, gathered, is the
    cheaper way to its bits (compiled: the gather runs at the memory's speed)."""
    return np.size(x) >= TABLE_MIN and jit.enabled() and np.asarray(x).dtype.kind in "fV" \
        and info(np.asarray(x).dtype).bits == 16


@functools.lru_cache(maxsize=16)
def _pattern_table(src: str, alpha: float, out_dtype: Optional[str], semantics: Semantics) -> np.ndarray:
    """The forward golden of every pattern of ``src``, in bit order, read-only."""
    table = compute("forward", all_patterns(src), alpha, out_dtype=out_dtype, semantics=semantics)
    table.flags.writeable = False
    return table


def _from_table(x: np.ndarray, alpha: float, *, out_dtype: Optional[DTypeLike], semantics: Semantics,
                into: Optional[np.ndarray] = None) -> np.ndarray:
    """The forward of a 16-bit ``x``: each element's pattern looked up in :func:`_pattern_table`
    (every forward semantics is elementwise, so the bits are those computed on ``x`` itself)."""
    from conformance.reference.compiled import room  # numba, imported on the first compiled call
    from conformance.reference.compiled_loops import gather

    src = info(x.dtype)
    out = None if out_dtype is None else info(out_dtype).name
    table = _pattern_table(src.name, float(check_alpha(alpha)), out, semantics)
    bits = to_bits(np.ascontiguousarray(x).reshape(-1))
    result = room(into, size=bits.size, dtype=table.dtype)
    sink, patterns = to_bits(result), to_bits(table)
    jit.split(lambda lo, hi: gather(patterns, bits[lo:hi], sink[lo:hi]), bits.size, least=TABLE_MIN)
    return result.reshape(x.shape)


def _compiles(direction: Direction, x: np.ndarray, dy: Optional[np.ndarray], semantics: Semantics) -> bool:
    """True when the compiled loop computes this call (numba there and enabled, the variant
    covered, and for the backward dy shaped and typed as x)."""
    if not jit.enabled():
        return False
    from conformance.reference import compiled

    if not compiled.covers(direction, semantics):
        return False
    if direction == "forward":
        return True
    return np.shape(dy) == np.shape(x) and np.asarray(dy).dtype == np.asarray(x).dtype


def reference_compute(direction: Direction, x: np.ndarray, alpha: float, *, dy: Optional[np.ndarray] = None,
                      out_dtype: Optional[DTypeLike] = None, semantics: Semantics = EXACT) -> np.ndarray:
    """The numpy path of :func:`compute`: the reference implementation, every variant."""
    if direction == "backward" and dy is None:
        raise ValueError("backward needs dy")
    s = semantics
    operands = [read_operand(np.asarray(v), s) for v in ((x,) if direction == "forward" else (dy, x))]
    core = _forward if direction == "forward" else _backward
    if s.result_dtype is None:
        y = core(*operands, alpha, out_dtype, s)
    else:  # rounded to result_dtype, then converted to the output dtype
        inner = replace(s, result_dtype=None)
        y = rounded_through(lambda held: core(*held, alpha, s.result_dtype, inner), operands,
                            result_dtype=s.result_dtype, out_dtype=out_dtype)
    return flush_to_zero(y) if s.flush_output else y


def forward(x: np.ndarray, alpha: float, *, out_dtype: Optional[DTypeLike] = None,
            semantics: Semantics = EXACT) -> np.ndarray:
    """Exact forward LeakyReLU, or the variant ``semantics`` describes."""
    return compute("forward", x, alpha, out_dtype=out_dtype, semantics=semantics)


def backward(dy: np.ndarray, x: np.ndarray, alpha: float, *, out_dtype: Optional[DTypeLike] = None,
             semantics: Semantics = EXACT) -> np.ndarray:
    """Exact ``dx = dy if x > 0 else alpha*dy`` (x = ±0 and NaN take ``alpha*dy``), or the
    variant ``semantics`` describes."""
    return compute("backward", x, alpha, dy=dy, out_dtype=out_dtype, semantics=semantics)
