"""The golden's inner loop compiled with numba: one pass over the data.

Each element is read once, compared, multiplied by the binary64 slope, checked for a
rounding midpoint of the output dtype, fixed up by the error-free round-to-odd product
when it sits on one (``conformance.reference.exact`` says why), and rounded once to the
output dtype.  The numpy path in ``conformance.reference.golden`` is the reference
implementation; this module reproduces its bits, NaN payloads included, and
``tests/test_compiled.py`` proves it on every 16-bit pattern and on edge and random
float32/float64 data.

What it covers (:func:`covers`): every supported dtype pair, with the slope (``slope``,
``slope_dtype``, an ``opmath`` product without ``ftz``), ``daz``, ``ftz``, ``predicate``,
``saturate`` and, forward, the ``select``, ``scale``, ``relu``, ``merge``, ``max``, ``min`` and
``max_or_min`` formulations (``nan_operand`` with them); backward, ``grad_rule`` ``gt``/``ge``,
every ``nan_grad``, the ``select`` and ``sum`` gradient forms and every formulation but
``relu`` (the forward-only ones are its select); around the loop, ``flush_inputs``,
``saturate_inputs``, ``input_dtype`` and ``flush_output`` as the numpy path applies them.
Every other variant (a directed ``rounding``, ``result_dtype``, ``maxmin``, ``mask-multiply``,
``twice``, the gradient of max, the step gradient, the fused gradient form) is computed by
the numpy path.

numba is optional (``conformance.jit`` says when it runs and where its cache lives).
"""
from __future__ import annotations

import math
from functools import cache
from typing import Optional

import numba
import numpy as np
from numba import types
from numba.extending import overload

from conformance.dtypes import DTypeInfo, info, to_bits, widened_patterns
from conformance.records import Direction
from conformance.reference.exact import (
    check_alpha,
    effective_slope,
    flush_to_zero,
    narrowed,
    read_operand,
    resolve_pair,
    split_slope,
)
from conformance.reference.semantics import Semantics

__all__ = ["compute", "covers"]

#: Settings applied around the loop, as the numpy path applies them: operands saturated and
#: flushed as they are read and narrowed to ``input_dtype``, the result flushed.
_AROUND = frozenset({"flush_inputs", "saturate_inputs", "input_dtype", "flush_output"})
_SHARED = frozenset({"slope", "slope_dtype", "predicate", "daz", "ftz", "formulation", "grad_rule", "nan_grad",
                     "grad_form", "saturate", "opmath", "nan_operand"}) | _AROUND
#: The forward formulations the loop computes (``max_or_min`` is passed as max or min by the slope).
_FORWARD_FORM = {"select": 0, "scale": 1, "relu": 2, "merge": 3, "max": 4, "min": 5}
#: How the backward's select reads its comparison: as it is, never taken (``scale``: a*dy
#: everywhere) or inverted (``swap_branches``); the forward-only formulations are the select.
_BACKWARD_TAKE = {"scale": 1, "swap_branches": 2}
#: dx at x = NaN, after the select: as the select gives it, +0, dy*0 or a NaN (4: dy*0 in bfloat16).
_NAN_GRAD = {"alpha": 0, "dy": 0, "zero": 1, "dy*0": 2, "nan": 3}
_SATURATE = {False: 0, True: 1, "inf": 2}
_TINY, _HUGE = 2.0 ** -900, 2.0 ** 1000  # as conformance.reference.exact: no fix-up needed outside


def covers(direction: Direction, semantics: Semantics) -> bool:
    """True when the compiled loop computes ``semantics`` in ``direction`` (see the module doc)."""
    s = semantics
    if not s.settings().keys() <= _SHARED or (s.opmath is not None and s.ftz):
        return False
    if direction == "forward":
        return s.formulation in _FORWARD_FORM or s.formulation == "max_or_min"
    return s.grad_rule in ("gt", "ge") and s.grad_form in ("select", "sum") and s.formulation != "relu"


_NO_TABLE = np.zeros(1, dtype=np.float64)


def _operand(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The flat array the loop reads (bits for a 16-bit dtype) and its decode table."""
    flat = np.ascontiguousarray(v).reshape(-1)
    rec = info(flat.dtype)
    if rec.bits == 16:
        return to_bits(flat), widened_patterns(rec.name)
    return flat, _NO_TABLE


def _product_rules(src: DTypeInfo, out: DTypeInfo, a: float) -> tuple:
    """What a product rounded to ``out`` needs: (a, hi, lo, midpoint bit count k, whether to
    check midpoints, the output's smallest normal)."""
    hi, lo = split_slope(a)
    return a, hi, lo, 52 - out.mant_bits, out.name != "float64" and src.name != "float64", out.smallest_normal


def _kind(out: DTypeInfo) -> int:
    """0 float16, 1 bfloat16, 2 float32, 3 float64: how the loop rounds to ``out``."""
    return ("float16", "bfloat16", "float32", "float64").index(out.name)


def _rules(src: DTypeInfo, out: DTypeInfo, a: float, daz: bool, ftz: bool, opmath: Optional[str]) -> tuple:
    """:func:`_cached_rules`, keyed on the slope's sign too (``0.0 == -0.0`` as a cache key)."""
    return _cached_rules(src, out, a, math.copysign(1.0, a), daz, ftz, opmath)


@cache
def _cached_rules(src: DTypeInfo, out: DTypeInfo, a: float, sign: float, daz: bool, ftz: bool,
                  opmath: Optional[str]) -> tuple:
    """What the loop's product needs: the product rules, the input's smallest normal, daz, ftz,
    the magnitude below which a float16/float64 result is subnormal, the output kind, the
    output's largest finite value, and the opmath product's rules and kind (-1: none)."""
    below = out.smallest_normal * (1 - 2.0 ** -(out.mant_bits + 1))  # rounds to the smallest normal
    mid = info(opmath) if opmath is not None else src
    mid_rules = _product_rules(mid, mid, effective_slope(a, slope_dtype=mid.name))
    return (*_product_rules(src, out, a), src.smallest_normal, daz, ftz, below, _kind(out), out.max,
            mid_rules, _kind(mid) if opmath is not None else -1)


def compute(direction: Direction, x: np.ndarray, alpha: float, *, dy: Optional[np.ndarray] = None,
            out_dtype=None, semantics: Semantics) -> np.ndarray:
    """The golden of ``direction`` under ``semantics`` (which :func:`covers`), compiled."""
    s = semantics
    x = read_operand(np.asarray(x), s)
    _, out = resolve_pair(x.dtype, out_dtype)
    shape, x = x.shape, _narrowed(x, s)
    src = info(x.dtype)  # narrowed operands are computed in the dtype that holds them
    a = effective_slope(check_alpha(alpha if s.slope is None else s.slope), slope_dtype=s.slope_dtype)
    rules = _rules(src, out, a, s.daz, s.ftz, s.opmath)
    result = np.empty(x.size, dtype=out.dtype)
    sink = to_bits(result) if out.bits == 16 else result
    xs, table = _operand(x)
    flags = (src.name == out.name, _SATURATE[s.saturate])
    if direction == "forward":
        form = s.formulation if s.formulation != "max_or_min" else ("max" if a <= 1 else "min")
        if _FORWARD_FORM[form] <= 1 and _plain(s):
            _select_forward_loop(xs, table, sink, s.predicate == "ge", form == "scale", flags[0], rules)
        else:
            _forward_loop(xs, table, sink, s.predicate == "ge", _FORWARD_FORM[form], s.nan_operand == "x", flags,
                          rules)
    else:
        dys, _ = _operand(_narrowed(read_operand(np.asarray(dy), s), s))
        if s.formulation == "swap_operands":  # x and dy passed the other way round
            xs, dys = dys, xs
        nan_mode = _NAN_GRAD[s.nan_grad] + (2 if s.nan_grad == "dy*0" and src.name == "bfloat16" else 0)
        modes = (_BACKWARD_TAKE.get(s.formulation, 0), nan_mode, s.grad_form == "sum")
        if modes[1:] == (0, False) and _plain(s):
            _select_backward_loop(dys, xs, table, sink, s.grad_rule == "ge", s.nan_grad == "dy", modes[0],
                                  flags[0], rules)
        else:
            _backward_loop(dys, xs, table, sink, s.grad_rule == "ge", s.nan_grad == "dy", modes, flags, rules)
    return (flush_to_zero(result) if s.flush_output else result).reshape(shape)


def _plain(s: Semantics) -> bool:
    """No saturation and no opmath product: the lean select loops compute it (the general loops
    give the same bits, but their per-element branches cost up to twice the time)."""
    return s.saturate is False and s.opmath is None


def _narrowed(v: np.ndarray, s: Semantics) -> np.ndarray:
    """An operand narrowed to ``input_dtype`` as the loop reads it (after it was read)."""
    return narrowed(v, s.input_dtype, saturating=s.saturate_inputs)


def _load(v, table):  # pragma: no cover - typed by the overload below
    raise NotImplementedError


def _store(sink, i, p, kind):  # pragma: no cover - typed by the overload below
    raise NotImplementedError


@overload(_load)
def _load_typed(v, table):
    """A 16-bit pattern through its decode table; a float widened to float64."""
    if isinstance(v, types.Integer):
        return lambda v, table: table[v]
    return lambda v, table: np.float64(v)

@numba.njit(cache=True)
def _bits64(p):
    return np.float64(p).view(np.uint64)

@numba.njit(cache=True)
def _round16(p, kind):
    """float64 ``p`` rounded to nearest even to float16 (kind 0) or bfloat16 (kind 1), as bits.

    NaN as numpy (float16: the payload's top bits, kept a NaN) and ml_dtypes (bfloat16:
    the quiet NaN of its sign) convert it."""
    mant, bias, top = (10, 15, 0x1F) if kind == 0 else (7, 127, 0xFF)
    b = _bits64(p)
    sign = np.uint64((b >> np.uint64(63)) << np.uint64(15))
    mag = b & np.uint64(0x7FFFFFFFFFFFFFFF)
    if mag >= np.uint64(0x7FF0000000000000):
        inf = np.uint64(top << mant)
        if mag == np.uint64(0x7FF0000000000000):
            return np.uint16(sign | inf)
        if kind == 1:
            return np.uint16(sign | np.uint64(0x7FC0))
        r = inf + ((mag & np.uint64(0xFFFFFFFFFFFFF)) >> np.uint64(42))
        return np.uint16(sign | (r + np.uint64(1) if r == inf else r))
    if (mag >> np.uint64(52)) >= np.uint64(1023 + 1 - bias):  # a normal result, or overflow
        shift = np.uint64(52 - mant)
        odd = (mag >> shift) & np.uint64(1)
        r = (mag + (np.uint64(1) << (shift - np.uint64(1))) - np.uint64(1) + odd) >> shift
        r -= np.uint64((1023 - bias) << mant)
        return np.uint16(sign | min(r, np.uint64(top << mant)))
    scaled = np.abs(p) * 2.0 ** (bias - 1 + mant)  # the subnormal grid is the integers
    return np.uint16(sign | np.uint64(np.rint(scaled)))

@overload(_store)
def _store_typed(sink, i, p, kind):
    """``p`` rounded to the output: a 16-bit sink holds bits."""
    if sink.dtype == types.uint16:
        def store16(sink, i, p, kind):
            sink[i] = _round16(p, kind)
        return store16
    if sink.dtype == types.float32:
        def store32(sink, i, p, kind):
            sink[i] = np.float32(p)
        return store32

    def store64(sink, i, p, kind):
        sink[i] = p
    return store64

@numba.njit(cache=True)
def _odd_product(w, a, hi, lo):
    """float64 round-to-odd of ``w * a`` (``w`` of at most 24 bits; ``a == hi + lo``)."""
    ph, pl = w * hi, w * lo
    s = ph + pl
    bb = s - ph
    err = (ph - (s - bb)) + (pl - bb)
    if err != 0 and (_bits64(s) & np.uint64(1)) == 0:
        return np.nextafter(s, np.inf if err > 0 else -np.inf)
    return s

@numba.njit(cache=True)
def _product(w, a, hi, lo, k, check, smallest):
    """``w * a`` in float64, fixed up to round-to-odd where it may sit on a midpoint."""
    p = w * a
    if not check:
        return p
    u, mag = _bits64(p), abs(p)
    low = u & np.uint64((1 << k) - 1)
    mid = low == np.uint64(1 << (k - 1)) or (mag < smallest and (u & np.uint64((1 << (k - 1)) - 1)) == 0)
    if mid and mag >= _TINY and mag < _HUGE:
        return _odd_product(w, a, hi, lo)
    return p


@numba.njit(cache=True)
def _flushed(w, smallest):
    """DAZ: a subnormal (below ``smallest``, not zero) read as a zero of its sign."""
    return np.copysign(0.0, w) if w != 0 and abs(w) < smallest else w


@numba.njit(cache=True)
def _widened16(h, kind):
    """16-bit pattern ``h`` of float16 (kind 0) or bfloat16 (kind 1) as float64, as numpy and
    ml_dtypes widen it (no table: a loop that may index out of bounds is not inlined)."""
    if kind == 1:
        return np.float64(np.uint32(np.uint32(h) << np.uint32(16)).view(np.float32))
    b = np.uint64(h)
    sign, e, m = b >> np.uint64(15), (b >> np.uint64(10)) & np.uint64(0x1F), b & np.uint64(0x3FF)
    if e == 0:
        return np.copysign(np.float64(m) * 2.0 ** -24, -1.0 if sign else 1.0)
    top = np.uint64(0x7FF) if e == np.uint64(0x1F) else np.uint64(e + np.uint64(1023 - 15))
    return np.uint64(sign << np.uint64(63) | top << np.uint64(52) | m << np.uint64(42)).view(np.float64)


@numba.njit(cache=True)
def _rounded(p, kind):
    """float64 ``p`` rounded to the dtype of ``kind``, as float64."""
    if kind == 0 or kind == 1:
        return _widened16(_round16(p, kind), kind)
    if kind == 2:
        return np.float64(np.float32(p))
    return p


@numba.njit(cache=True)
def _negative(v, r):
    """``a * v`` as the output's float64 under the rules ``r``: an opmath product (the operand
    read under DAZ and the slope rounded to opmath, the product rounded to it), else as
    ``_plain_negative``."""
    mid, mid_kind = r[12], r[13]
    if mid_kind < 0:
        return _plain_negative(v, r)
    if r[7]:
        v = _flushed(v, r[6])
    w = _rounded(v, mid_kind)
    return _rounded(_product(w, mid[0], mid[1], mid[2], mid[3], mid[4], mid[5]), mid_kind)


@numba.njit(cache=True)
def _plain_negative(v, r):
    """``a * v`` as the output's float64 (stored by ``_store``) under the rules ``r``: DAZ reads
    ``v`` as zero, FTZ flushes a product that is tiny (float32/bfloat16: as x86 decides, on the
    float64 product scaled by 2**64 and rounded to float32; float16/float64: a subnormal result)."""
    a, hi, lo, k, check, smallest, in_smallest, daz, ftz, below, kind, _, _, _ = r
    if daz:
        v = _flushed(v, in_smallest)
    p = _product(v, a, hi, lo, k, check, smallest)
    if ftz:
        if kind == 1 or kind == 2:
            tiny = abs(np.float32(v * a * 2.0 ** 64)) < np.float32(2.0 ** -62)
        else:
            tiny = abs(p) < below
        if tiny:
            return np.copysign(0.0, p)
    return p


@numba.njit(cache=True)
def _takes(w, ge, r):
    """The select takes the operand itself: ``w > 0`` (``>=`` under ``ge``), on the DAZ-read ``w``."""
    if r[7]:
        w = _flushed(w, r[6])
    return w > 0 or (ge and w == 0)


@numba.njit(cache=True)
def _emit(sink, i, bits, copy, v, flags, r):
    """Store the result: ``bits`` themselves when it is the operand (``copy``) of the output's
    dtype, else ``v`` rounded; saturation (NaN -> +0 or kept, ±inf -> ±max) first."""
    same, sat = flags
    if sat != 0:
        if v != v:
            copy = False
            if sat == 1:
                v = 0.0
        elif abs(v) > r[11]:
            copy, v = False, np.copysign(r[11], v)
    if copy and same:
        sink[i] = bits
    else:
        _store(sink, i, v, r[10])


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
def _forward_value(w, ge, form, nan_x, same, r):
    """The forward of one element under formulation ``form`` (see ``_FORWARD_FORM``)."""
    kind = r[10]
    if form == 2:  # relu: maximum(x, +0)
        vo = w if same else _rounded(w, kind)
        return _extremum(vo, False, w, 0.0, 0.0, True, kind)
    if form != 1 and form != 4 and form != 5 and _takes(w, ge, r):
        return True, w
    p = _negative(w, r)
    if form <= 1:
        return False, p
    n = _rounded(p, kind)
    if form == 3:  # merge: a zero product is +0
        return False, (0.0 if n == 0 else p)
    if nan_x and n != n:  # a compare-select ignores a NaN product
        return True, w
    flushed = r[7] and w != 0 and abs(w) < r[6]  # max/min are arithmetic: DAZ reads x as zero
    operand = np.copysign(0.0, w) if flushed else w
    vo = operand if same else _rounded(operand, kind)
    return _extremum(vo, flushed, w, n, p, form == 4, kind)


@numba.njit(cache=True)
def _forward_loop(xs, table, sink, ge, form, nan_x, flags, r):
    for i in range(xs.size):
        w = _load(xs[i], table)
        copy, v = _forward_value(w, ge, form, nan_x, flags[0], r)
        _emit(sink, i, xs[i], copy, v, flags, r)


@numba.njit(cache=True)
def _gradient_value(d, w, take, modes, same, r):
    """dx of one element: dy where ``take``, else ``a*dy``; then the branch sum's zero signs
    (``where(c, dy, 0) + a*where(c, 0, dy)``) and dx at x = NaN as ``modes`` say."""
    _, nan_mode, summed = modes
    copy, v = (True, d) if take else (False, _negative(d, r))
    if summed:
        dv = d if copy and same else _rounded(v, r[10])
        if r[7]:
            dv = _flushed(dv, r[5])  # the add reads dx under DAZ
        copy, v = False, dv + (np.copysign(0.0, r[0]) if take else 0.0)
    if nan_mode != 0 and w != w:
        copy, v = False, (0.0 if nan_mode == 1 else (np.nan if nan_mode == 3 else d * 0.0))
        if nan_mode == 4 and v != v:  # a bfloat16 product's NaN is the quiet NaN of its sign
            v = np.copysign(np.nan, v)
    return copy, v


@numba.njit(cache=True)
def _backward_loop(dys, xs, table, sink, ge, nan_dy, modes, flags, r):
    take_mode = modes[0]
    for i in range(xs.size):
        w = _load(xs[i], table)
        take = False if take_mode == 1 else _takes(w, ge, r) != (take_mode == 2)
        take = take or (nan_dy and w != w)
        copy, v = _gradient_value(_load(dys[i], table), w, take, modes, flags[0], r)
        _emit(sink, i, dys[i], copy, v, flags, r)


@numba.njit(cache=True)
def _select_forward_loop(xs, table, sink, ge, scale, same, r):
    """The select (``scale``: a*x everywhere) without saturation or an opmath product."""
    for i in range(xs.size):
        w = _load(xs[i], table)
        if not scale and _takes(w, ge, r):
            if same:
                sink[i] = xs[i]
            else:
                _store(sink, i, w, r[10])
        else:
            _store(sink, i, _plain_negative(w, r), r[10])


@numba.njit(cache=True)
def _select_backward_loop(dys, xs, table, sink, ge, nan_dy, take_mode, same, r):
    """The gradient's select (``take_mode`` as ``_BACKWARD_TAKE``) without saturation, an
    opmath product, a branch sum or a NaN rule of its own."""
    for i in range(xs.size):
        w = _load(xs[i], table)
        take = False if take_mode == 1 else _takes(w, ge, r) != (take_mode == 2)
        if take or (nan_dy and w != w):
            if same:
                sink[i] = dys[i]
            else:
                _store(sink, i, _load(dys[i], table), r[10])
        else:
            _store(sink, i, _plain_negative(_load(dys[i], table), r), r[10])
