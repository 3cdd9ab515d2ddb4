"""The compiled golden's loops (numba): one pass over the data, forward or backward.

Each element is read once, compared, multiplied by the slope (``negative``: the plain
product, DAZ and FTZ, or an opmath product), put through the formulation, saturated and
stored.  ``rules`` is the tuple ``conformance.reference.compiled`` builds per dtype pair and
slope; the lean select loops skip what a plain select never needs.
"""
from __future__ import annotations

import numba
import numpy as np

from conformance.reference.compiled_gradients import max_gradient, result_positive, step_gradient
from conformance.reference.compiled_rounding import (
    bits64,
    directed,
    first_touch,
    flushed,
    load,
    odd_product,
    product,
    round16,
    rounded,
    store,
    x86_tiny,
)

_DOUBLE_MAX = np.finfo(np.float64).max

__all__ = ["backward_loop", "backward_tables", "forward_loop", "gather", "narrowed_loop", "select_backward_loop",
           "select_forward_loop", "table_backward_loop"]


@numba.njit(cache=True)
def _negative(v, r):
    """``a * v`` as the output's float64 under the rules ``r``: an opmath product (the operand
    read under DAZ and the slope rounded to opmath, the product rounded to it), else as
    ``_plain_negative``."""
    if r[13] < 0:
        return _plain_negative(v, r)
    if r[7]:
        v = flushed(v, r[6])
    p = _opmath_product(v, r)
    return _flushed_opmath(p, v, r) if r[8] else p


@numba.njit(cache=True)
def _opmath_product(v, r):
    """``a * v`` in opmath: ``v`` and the slope rounded to it, the product rounded to it."""
    mid, mid_kind = r[12], r[13]
    w = rounded(v, mid_kind)
    return rounded(product(w, mid[0], mid[1], mid[2], mid[3], mid[4], mid[5]), mid_kind)


@numba.njit(cache=True)
def _opmath_tiny(v, r):
    """x86's FTZ test of the opmath product of ``v``: its float64 value ``v * slope`` (a
    bfloat16 opmath's own slope, else ``a``) is tiny in float32."""
    return x86_tiny(v * (r[12][0] if r[13] == 1 else r[0]))


@numba.njit(cache=True)
def _flushed_opmath(p, v, r):
    """FTZ of the opmath product ``p`` of the DAZ-read ``v``: a zero of its sign where the
    float64 product ``v * slope`` is tiny in float32 (a bfloat16 opmath, with its own slope;
    a bfloat16 or float32 output, with ``a``), or, for a bfloat16 opmath and a float16 or
    float64 output, where ``p`` rounds to a subnormal of the output."""
    kind, mid_kind = r[10], r[13]
    if mid_kind == 1 or kind == 1 or kind == 2:
        if _opmath_tiny(v, r):
            return np.copysign(0.0, p)
    if mid_kind == 1 or kind == 0 or kind == 3:
        n = rounded(p, kind)
        if n != 0 and abs(n) < r[5]:
            return np.copysign(0.0, p)
    return p


@numba.njit(cache=True)
def _unrounded(v, r):
    """The product a directed final rounding rounds, in float64: ``a * v`` rounded to odd (a
    finite product beyond float64's range its largest finite value, a non-finite one as it
    is), or the opmath product of ``v`` as it is read (no DAZ)."""
    if r[13] >= 0:
        return _opmath_product(v, r)
    p = v * r[0]
    if np.isfinite(p):
        return odd_product(v, r[0], r[1], r[2])
    if np.isfinite(v) and np.isfinite(r[0]):  # a finite product beyond float64's range, rounded to odd
        return np.copysign(_DOUBLE_MAX, p)
    return p


@numba.njit(cache=True)
def _rerounded(copy, v, pre, mode, r):
    """(copy, v) with the final conversion done in rounding ``mode`` (1 toward zero, 2 ties
    away) where the result is the round-to-nearest conversion of ``pre`` (the operand where
    the predicate selects it, else ``_unrounded``): a flush, clamp or formulation that
    changed it stays."""
    y = rounded(v, r[10])
    nearest, other = directed(pre, mode, r[10])
    if y == nearest and np.copysign(1.0, y) == np.copysign(1.0, nearest):
        return False, other
    return copy, v


@numba.njit(cache=True)
def _plain_negative(v, r):
    """``a * v`` as the output's float64 (stored by ``store``) under the rules ``r``: DAZ reads
    ``v`` as zero, FTZ flushes a product that is tiny (float32/bfloat16: as x86 decides, on the
    float64 product scaled by 2**64 and rounded to float32; float16/float64: a subnormal result)."""
    a, hi, lo, k, check, smallest, in_smallest, daz, ftz, below, kind, _, _, _, _ = r
    if daz:
        v = flushed(v, in_smallest)
    p = product(v, a, hi, lo, k, check, smallest)
    if ftz:
        if kind == 1 or kind == 2:
            tiny = x86_tiny(v * a)
        else:
            tiny = abs(p) < below
        if tiny:
            return np.copysign(0.0, p)
    return p


@numba.njit(cache=True)
def _takes(w, ge, r):
    """The select takes the operand itself: ``w > 0`` (``>=`` under ``ge``), on the DAZ-read ``w``."""
    if r[7]:
        w = flushed(w, r[6])
    return w > 0 or (ge and w == 0)


@numba.njit(cache=True)
def _emit(sink, i, bits, copy, v, flags, r):
    """Store the result: ``bits`` themselves when it is the operand (``copy``) of the output's
    dtype, else ``v`` rounded; saturation first."""
    copy, v = _saturated(copy, v, flags[1], r)
    if copy and flags[0]:
        sink[i] = bits
    else:
        store(sink, i, v, r[10])


@numba.njit(cache=True)
def _saturated(copy, v, sat, r):
    """(copy, v) saturated as ``sat`` says: NaN -> +0 (1) or kept (2), ±inf -> ±max."""
    if sat != 0:
        if v != v:
            copy = False
            if sat == 1:
                v = 0.0
        elif abs(v) > r[11]:
            copy, v = False, np.copysign(r[11], v)
    return copy, v


@numba.njit(cache=True)
def _extremum(vo, flushed, w, n, p, is_max, kind):
    """``maximum(vo, n)`` (``minimum``) as numpy computes it in the output dtype, ``n`` the
    rounded product ``p``: a NaN operand wins (the first if both), a tie gives the first
    operand for float16 and the second otherwise.  (copy, value) as ``_emit`` takes them."""
    if vo != vo:
        first = True
    elif n != n:
        first = False
    elif vo != n:
        first = (vo > n) == is_max
    else:
        first = kind == 0
    if first:
        return (False, vo) if flushed else (True, w)
    return False, p


@numba.njit(cache=True)
def _maxmin(w, same, r):
    """``maximum(x, +0) + a*x`` where ``minimum(x, +0)`` is not a zero, else ``+0 * (a*x)``, as
    numpy computes it in the output dtype (one term is a zero or a NaN, so the sum is exact)."""
    kind = r[10]
    vo = w if same else rounded(w, kind)
    n = rounded(_negative(w, r), kind)
    hi = _extremum(vo, False, vo, 0.0, 0.0, True, kind)[1]
    lo = _extremum(vo, False, vo, 0.0, 0.0, False, kind)[1]
    return _sum(hi, 0.0 * n if lo == 0 else n, kind)


@numba.njit(cache=True)
def _mask_multiply(w, take, same, r):
    """``x*m + (a*x)*(1-m)`` (``m`` the predicate as 1 or 0) as numpy computes it in the output
    dtype: a product by 1 or 0 and a sum with a zero, exact but for NaN (``inf*0``).  An input
    wider than the output gives NaN only where its own dtype's formula does (an fp32 1e5 is
    finite), numpy's NaN; another NaN of the narrow formula is the select's value."""
    kind, src = r[10], r[14]
    vo = w if same else rounded(w, kind)
    p = _negative(w, r)
    m = 1.0 if take else 0.0
    y = _sum(vo * m, rounded(p, kind) * (1.0 - m), kind)
    if src < 2 or src <= kind:
        return y
    wide = rounded(_unrounded(w, r), src)  # a*x in the input's dtype: only whether it is finite counts
    if r[8] and r[13] >= 0 and _opmath_tiny(w, r):
        wide = 0.0  # FTZ flushes an opmath product whose exact value is tiny, a NaN of an overflowed operand too
    if not np.isfinite(wide) if take else (not np.isfinite(w) or wide != wide):
        return np.nan
    if y != y:
        return w if take else p
    return y


@numba.njit(cache=True)
def _sum(a, b, kind):
    """``a + b`` of two values of the output dtype, one a zero or a NaN (so exact), with the NaN
    numpy's add gives when both are: the first, quieted, but for float16 the second."""
    if a != a and b != b:  # quieted by its bits: the compiler may fold an add that would quiet it
        return np.uint64(bits64(b if kind == 0 else a) | np.uint64(1 << 51)).view(np.float64)
    return a + b


@numba.njit(cache=True)
def _forward_value(w, ge, form, nan_x, same, r):
    """The forward of one element under formulation ``form`` (see ``_FORWARD_FORM``)."""
    kind = r[10]
    if form == 2:  # relu: maximum(x, +0)
        vo = w if same else rounded(w, kind)
        return _extremum(vo, False, w, 0.0, 0.0, True, kind)
    if form == 6:
        return False, _maxmin(w, same, r)
    if form == 7:
        return False, _mask_multiply(w, _takes(w, ge, r), same, r)
    if form != 1 and form != 4 and form != 5 and _takes(w, ge, r):
        return True, w
    p = _negative(w, r)
    if form <= 1:
        return False, p
    n = rounded(p, kind)
    if form == 3:  # merge: a zero product is +0
        return False, (0.0 if n == 0 else p)
    if nan_x and n != n:  # a compare-select ignores a NaN product
        return True, w
    flushed = r[7] and w != 0 and abs(w) < r[6]  # max/min are arithmetic: DAZ reads x as zero
    operand = np.copysign(0.0, w) if flushed else w
    vo = operand if same else rounded(operand, kind)
    return _extremum(vo, flushed, w, n, p, form == 4, kind)


@numba.njit(cache=True, nogil=True)
def forward_loop(xs, table, sink, ge, form, nan_x, flags, r):
    for i in range(xs.size):
        w = load(xs[i], table)
        copy, v = _forward_value(w, ge, form, nan_x, flags[0], r)
        if flags[2] != 0:  # a directed final conversion, of the saturated result
            copy, v = _saturated(copy, v, flags[1], r)
            copy, v = _rerounded(copy, v, w if _takes(w, ge, r) else _unrounded(w, r), flags[2], r)
        _emit(sink, i, xs[i], copy, v, flags, r)


@numba.njit(cache=True)
def _gradient_value(d, w, take, modes, flags, r):
    """dx of one element: dy where ``take``, else ``a*dy``, its conversion in the rounding
    ``flags`` say; then the branch sum's zero signs (``where(c, dy, 0) + a*where(c, 0, dy)``:
    summed 1, or fused into one multiply-add, 2), the gradient of max or the step function and
    dx at x = NaN as ``modes`` say."""
    _, nan_mode, summed, rule = modes
    same = flags[0]
    copy, v = (True, d) if take else (False, _negative(d, r))
    if flags[2] != 0:
        copy, v = _rerounded(copy, v, d if take else _unrounded(d, r), flags[2], r)
    fused_keeps = summed == 2 and not take and r[0] != 0 and (flushed(d, r[6]) if r[7] else d) != 0
    if summed and not fused_keeps:  # a fused add sees a nonzero product exactly: dx as it is
        dv = d if copy and same else rounded(v, r[10])
        if r[7]:
            dv = flushed(dv, r[5])  # the add reads dx under DAZ
        copy, v = False, dv + (np.copysign(0.0, r[0]) if take else 0.0)
    if rule == 1:
        copy, v = max_gradient(copy, v, d, w, r)
    elif rule == 3:
        copy, v = step_gradient(copy, v, d, w, r)
    if nan_mode != 0 and w != w:
        copy, v = False, (0.0 if nan_mode == 1 else (np.nan if nan_mode == 3 else d * 0.0))
        if nan_mode == 4 and v != v:  # a bfloat16 product's NaN is the quiet NaN of its sign
            v = np.copysign(np.nan, v)
    return copy, v


@numba.njit(cache=True, nogil=True)
def backward_loop(dys, xs, table, sink, ge, nan_dy, modes, flags, r):
    take_mode, on_result = modes[0], modes[3] == 2
    for i in range(xs.size):
        w = load(xs[i], table)
        taken = result_positive(w, r) if on_result else _takes(w, ge, r)
        take = False if take_mode == 1 else taken != (take_mode == 2)
        take = take or (nan_dy and w != w)
        copy, v = _gradient_value(load(dys[i], table), w, take, modes, flags, r)
        _emit(sink, i, dys[i], copy, v, flags, r)


@numba.njit(cache=True, nogil=True)
def select_forward_loop(xs, table, sink, ge, scale, same, r):
    """The select (``scale``: a*x everywhere) without saturation or an opmath product."""
    for i in range(xs.size):
        w = load(xs[i], table)
        if not scale and _takes(w, ge, r):
            if same:
                sink[i] = xs[i]
            else:
                store(sink, i, w, r[10])
        else:
            store(sink, i, _plain_negative(w, r), r[10])


@numba.njit(cache=True, nogil=True)
def select_backward_loop(dys, xs, table, sink, ge, nan_dy, take_mode, same, r):
    """The gradient's select (``take_mode`` as ``_BACKWARD_TAKE``) without saturation, an
    opmath product, a branch sum or a NaN rule of its own."""
    for i in range(xs.size):
        w = load(xs[i], table)
        take = False if take_mode == 1 else _takes(w, ge, r) != (take_mode == 2)
        if take or (nan_dy and w != w):
            if same:
                sink[i] = dys[i]
            else:
                store(sink, i, load(dys[i], table), r[10])
        else:
            store(sink, i, _plain_negative(load(dys[i], table), r), r[10])


@numba.njit(cache=True, nogil=True)
def backward_tables(table, ge, nan_dy, take_mode, r):
    """What :func:`select_backward_loop` decides for a 16-bit dtype into itself, per pattern:
    for each x pattern a mask, all ones where dx is dy; for each dy pattern ``a*dy`` rounded, as
    bits."""
    takes = np.empty(table.size, dtype=np.uint16)
    products = np.empty(table.size, dtype=np.uint16)
    for i in range(table.size):
        w = table[i]
        take = False if take_mode == 1 else _takes(w, ge, r) != (take_mode == 2)
        takes[i] = 0xFFFF if take or (nan_dy and w != w) else 0
        products[i] = round16(_plain_negative(w, r), r[10])
    return takes, products


@numba.njit(cache=True, nogil=True)
def table_backward_loop(dys, xs, takes, products, sink):
    """:func:`select_backward_loop` of a 16-bit dtype into itself, from :func:`backward_tables`:
    dy's bits where x's mask takes dy, else dy's product, merged by the mask (a branch the data
    decides would be mispredicted half the time)."""
    first_touch(sink)
    for i in range(xs.size):
        d, mask = dys[i], takes[xs[i]]
        sink[i] = (d & mask) | (products[d] & ~mask)


@numba.njit(cache=True, nogil=True)
def gather(table, index, out):
    """``out[i] = table[index[i]]``: a 16-bit dtype's golden read from the golden of every
    pattern (the loop releases the GIL)."""
    first_touch(out)
    for i in range(index.size):
        out[i] = table[index[i]]


@numba.njit(cache=True, nogil=True)
def narrowed_loop(vs, kind, sink):
    """A float32 or float64 operand narrowed to float16 (kind 0) or bfloat16 (kind 1) and widened
    back into ``sink`` (its dtype): ``exact.narrowed_by_formula`` without saturation, one pass."""
    for i in range(vs.size):
        sink[i] = rounded(np.float64(vs[i]), kind)
