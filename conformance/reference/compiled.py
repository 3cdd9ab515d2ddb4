"""The golden's inner loop compiled with numba: one pass over the data.

Each element is read once, compared, multiplied by the binary64 slope, checked for a
rounding midpoint of the output dtype, fixed up by the error-free round-to-odd product
when it sits on one (``conformance.reference.exact`` says why), and rounded once to the
output dtype.  The numpy path in ``conformance.reference.golden`` is the reference
implementation; this module reproduces its bits, NaN payloads included, and
``tests/test_compiled.py`` proves it on every 16-bit pattern and on edge and random
float32/float64 data.

What it covers (:func:`covers`): every supported dtype pair, with the semantics whose
settings change the slope, the comparison, the flushing of subnormals or which branch the
select takes -- ``slope``, ``slope_dtype``, ``daz``, ``ftz``, ``predicate`` and the ``select``
and ``scale`` formulations (forward); ``grad_rule`` ``gt``/``ge``, ``nan_grad``
``alpha``/``dy`` and every formulation but ``relu`` (backward: the forward-only ones are its
select); around the loop, ``flush_inputs``, ``input_dtype`` and ``flush_output`` as the numpy
path applies them.  Every other variant is computed by the numpy path.

numba is optional (``conformance.jit`` says when it runs and where its cache lives).
"""
from __future__ import annotations

from functools import cache
from typing import Optional

import numba
import numpy as np
from numba import types
from numba.extending import overload

from conformance.dtypes import DTypeInfo, all_patterns, info, to_bits
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

#: Settings applied around the loop, as the numpy path applies them: operands flushed as they
#: are read and narrowed to ``input_dtype``, the result flushed.
_AROUND = frozenset({"flush_inputs", "input_dtype", "flush_output"})
_FORWARD_SETTINGS = frozenset({"slope", "slope_dtype", "predicate", "daz", "ftz", "formulation", "grad_rule",
                               "nan_grad", "grad_form"}) | _AROUND
_BACKWARD_SETTINGS = frozenset({"slope", "slope_dtype", "predicate", "daz", "ftz", "formulation", "grad_rule",
                                "nan_grad"}) | _AROUND
#: How the backward's select reads its comparison: as it is, never taken (``scale``: a*dy
#: everywhere) or inverted (``swap_branches``); the forward-only formulations are the select.
_BACKWARD_TAKE = {"scale": 1, "swap_branches": 2}
_TINY, _HUGE = 2.0 ** -900, 2.0 ** 1000  # as conformance.reference.exact: no fix-up needed outside


def covers(direction: Direction, semantics: Semantics) -> bool:
    """True when the compiled loop computes ``semantics`` in ``direction`` (see the module doc)."""
    settings = semantics.settings()
    if direction == "forward":
        return settings.keys() <= _FORWARD_SETTINGS and semantics.formulation in ("select", "scale")
    return (settings.keys() <= _BACKWARD_SETTINGS and semantics.grad_rule in ("gt", "ge")
            and semantics.nan_grad in ("alpha", "dy") and semantics.formulation != "relu")


@cache
def _decode_table(name: str) -> np.ndarray:
    """Every pattern of a 16-bit dtype widened to float64 as numpy/ml_dtypes widen it."""
    with np.errstate(invalid="ignore"):
        return all_patterns(name).astype(np.float64)


_NO_TABLE = np.zeros(1, dtype=np.float64)


def _operand(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The flat array the loop reads (bits for a 16-bit dtype) and its decode table."""
    flat = np.ascontiguousarray(v).reshape(-1)
    rec = info(flat.dtype)
    if rec.bits == 16:
        return to_bits(flat), _decode_table(rec.name)
    return flat, _NO_TABLE


def _rules(src: DTypeInfo, out: DTypeInfo, a: float, s: Semantics) -> tuple:
    """What the loop's product needs: (a, hi, lo, midpoint bit count k, whether to check
    midpoints, the output's smallest normal, the input's, daz, ftz, the magnitude below which
    a float16/float64 result is subnormal, output kind 0 float16 / 1 bfloat16 / 2 float32 / 3 float64)."""
    hi, lo = split_slope(a)
    kind = ("float16", "bfloat16", "float32", "float64").index(out.name)
    check = out.name != "float64" and src.name != "float64"
    below = out.smallest_normal * (1 - 2.0 ** -(out.mant_bits + 1))  # rounds to the smallest normal
    return (a, hi, lo, 52 - out.mant_bits, check, out.smallest_normal, src.smallest_normal, s.daz, s.ftz,
            below, kind)


def compute(direction: Direction, x: np.ndarray, alpha: float, *, dy: Optional[np.ndarray] = None,
            out_dtype=None, semantics: Semantics) -> np.ndarray:
    """The golden of ``direction`` under ``semantics`` (which :func:`covers`), compiled."""
    x = np.asarray(x)
    _, out = resolve_pair(x.dtype, out_dtype)
    s = semantics
    shape, x = x.shape, _prepared(x, s)
    src = info(x.dtype)  # narrowed operands are computed in the dtype that holds them
    a = effective_slope(check_alpha(alpha if s.slope is None else s.slope), slope_dtype=s.slope_dtype)
    rules, same = _rules(src, out, a, s), src.name == out.name
    result = np.empty(x.size, dtype=out.dtype)
    sink = to_bits(result) if out.bits == 16 else result
    xs, table = _operand(x)
    if direction == "forward":
        _forward_loop(xs, table, sink, s.predicate == "ge", s.formulation == "scale", same, rules)
    else:
        dys, _ = _operand(_prepared(np.asarray(dy), s))
        if s.formulation == "swap_operands":  # x and dy passed the other way round
            xs, dys = dys, xs
        _backward_loop(dys, xs, table, sink, s.grad_rule == "ge", s.nan_grad == "dy",
                       _BACKWARD_TAKE.get(s.formulation, 0), same, rules)
    return (flush_to_zero(result) if s.flush_output else result).reshape(shape)


def _prepared(v: np.ndarray, s: Semantics) -> np.ndarray:
    """An operand as the loop reads it: flushed as it is read, narrowed to ``input_dtype``."""
    return narrowed(read_operand(v, s), s.input_dtype, saturating=s.saturate_inputs)


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
def _negative(v, r):
    """``a * v`` as the output's float64 (stored by ``_store``) under the rules ``r``: DAZ reads
    ``v`` as zero, FTZ flushes a product that is tiny (float32/bfloat16: as x86 decides, on the
    float64 product scaled by 2**64 and rounded to float32; float16/float64: a subnormal result)."""
    a, hi, lo, k, check, smallest, in_smallest, daz, ftz, below, kind = r
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
def _forward_loop(xs, table, sink, ge, scale, same, r):
    for i in range(xs.size):
        w = _load(xs[i], table)
        if not scale and _takes(w, ge, r):
            if same:
                sink[i] = xs[i]
            else:
                _store(sink, i, w, r[10])
        else:
            _store(sink, i, _negative(w, r), r[10])


@numba.njit(cache=True)
def _backward_loop(dys, xs, table, sink, ge, nan_dy, take_mode, same, r):
    for i in range(xs.size):
        w = _load(xs[i], table)
        take = False if take_mode == 1 else _takes(w, ge, r) != (take_mode == 2)
        if take or (nan_dy and w != w):
            if same:
                sink[i] = dys[i]
            else:
                _store(sink, i, _load(dys[i], table), r[10])
        else:
            _store(sink, i, _negative(_load(dys[i], table), r), r[10])
