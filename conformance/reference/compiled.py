"""The golden's inner loop compiled with numba: one pass over the data.

Each element is read once, compared, multiplied by the binary64 slope, and its product
rounded once to the output dtype: a binary64 product that may sit on a rounding midpoint of
the output is rounded to odd first (an error-free product says which way), so that the final
conversion rounds as the exact product would (``conformance.reference.exact`` says why).  The
exact select (and its plain variants) into a float32 or float64 output runs in loops without a
branch, which the compiler vectorises (``conformance.reference.compiled_vector``: every product
rounded to odd, a fused multiply-add giving its error), a range per thread for large inputs:
at about the speed of a memory copy.  A 16-bit dtype's backward into itself of 2**17 elements
or more decides each pattern's outcome once (whether that x takes dy, that dy's product) and
then only merges bits.  The numpy path in
``conformance.reference.golden`` is the reference implementation; this module reproduces its
bits, NaN payloads included, and ``tests/reference/test_compiled.py`` proves it on every 16-bit
pattern and on edge and random float32/float64 data, whatever the number of threads.

What it covers (:func:`covers`): every supported dtype pair, with the slope (``slope``,
``slope_dtype``, an ``opmath`` product, flushed under ``ftz`` as the numpy path flushes it),
``daz``, ``ftz``, ``predicate``, ``saturate``, a directed final conversion (``rounding`` ``rtz``
and ``rna``: the select's value rounded to odd, then one step of the output's bit pattern;
a float64 input is refused as the numpy path refuses it) and, forward, the ``select``,
``scale``, ``relu``, ``merge``, ``max``, ``min``, ``max_or_min`` (``nan_operand`` with them),
``maxmin`` and ``mask-multiply`` formulations and ``twice`` (the loop run on its own result);
backward, every ``grad_rule`` (``max``: MindSpore's gradient of max, ``result`` and ``step`` in
``conformance.reference.compiled_gradients``), every ``nan_grad``, the
``select``, ``sum`` and ``fma`` gradient forms and every formulation but ``relu`` (the
forward-only ones are its select); around the loop,
``flush_inputs``, ``saturate_inputs``, ``input_dtype``, ``result_dtype`` and ``flush_output`` as
the numpy path applies them.  The backward of ``relu`` (dy or +0, one numpy select, faster
than the loop) is computed by the numpy path.
``conformance.reference.compiled_loops`` holds the loops and
``conformance.reference.compiled_rounding`` how they read, multiply and round one element.

numba is optional (``conformance.jit`` says when it runs and where its cache lives).
"""
from __future__ import annotations

import math
from dataclasses import replace
from functools import cache
from typing import Any, NamedTuple, Optional

import numpy as np

from conformance import jit
from conformance.dtypes import DTypeInfo, info, to_bits, widened_patterns
from conformance.records import Direction
from conformance.reference.compiled_loops import (
    backward_loop,
    backward_tables,
    forward_loop,
    narrowed_loop,
    select_backward_loop,
    select_forward_loop,
    table_backward_loop,
)
from conformance.reference.compiled_rounding import KINDS
from conformance.reference.compiled_vector import vector_backward_loop, vector_forward_loop
from conformance.reference.exact import (
    check_alpha,
    effective_slope,
    flush_to_zero,
    narrowed,
    read_operand,
    resolve_pair,
    rounded_through,
    split_slope,
)
from conformance.reference.semantics import Semantics

__all__ = ["SelectLoop", "compute", "covers", "exact_forward", "room"]

#: Settings applied around the loop, as the numpy path applies them: operands saturated and
#: flushed as they are read and narrowed to ``input_dtype``, the result flushed.
_AROUND = frozenset({"flush_inputs", "saturate_inputs", "input_dtype", "flush_output"})
_SHARED = frozenset({"slope", "slope_dtype", "predicate", "daz", "ftz", "formulation", "grad_rule", "nan_grad",
                     "grad_form", "saturate", "opmath", "nan_operand", "rounding"}) | _AROUND
#: The forward formulations the loop computes (``max_or_min`` is passed as max or min by the slope).
_FORWARD_FORM = {"select": 0, "scale": 1, "relu": 2, "merge": 3, "max": 4, "min": 5, "maxmin": 6, "mask-multiply": 7}
#: How the backward's select reads its comparison: as it is, never taken (``scale``: a*dy
#: everywhere) or inverted (``swap_branches``); the forward-only formulations are the select.
_BACKWARD_TAKE = {"scale": 1, "swap_branches": 2}
#: dx at x = NaN, after the select: as the select gives it, +0, dy*0 or a NaN (4: dy*0 in bfloat16).
_NAN_GRAD = {"alpha": 0, "dy": 0, "zero": 1, "dy*0": 2, "nan": 3}
_SATURATE = {False: 0, True: 1, "inf": 2}
_ROUNDING = {"rne": 0, "rtz": 1, "rna": 2}
_GRAD_FORM = {"select": 0, "sum": 1, "fma": 2}
#: The gradient rule the loop applies after the select (``ge`` is the select's own predicate).
_GRAD_RULE = {"gt": 0, "ge": 0, "max": 1, "result": 2, "step": 3}


def covers(direction: Direction, semantics: Semantics) -> bool:
    """True when the compiled loop computes ``semantics`` in ``direction`` (see the module doc)."""
    s = semantics
    if s.result_dtype is not None:  # the result rounded to it, then converted: as the numpy path
        return covers(direction, replace(s, result_dtype=None))
    if direction == "forward" and s.formulation == "twice":  # the select, twice over
        return covers(direction, replace(s, formulation="select"))
    if not s.settings().keys() <= _SHARED:
        return False
    if direction == "forward":
        return s.formulation in _FORWARD_FORM or s.formulation == "max_or_min"
    # relu's backward (dy or +0) is one numpy select, faster than the loop
    return s.formulation != "relu"


_NO_TABLE = np.zeros(1, dtype=np.float64)
SPLIT = 1 << 17  # elements from which the select loops split their work, a range per thread
TABLED = 1 << 17  # elements from which a 16-bit select's backward decides each pattern's outcome once


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
    return KINDS.index(out.name)


def _rules(src: DTypeInfo, out: DTypeInfo, a: float, daz: bool, ftz: bool, opmath: Optional[str]) -> tuple:
    """:func:`_cached_rules`, keyed on the slope's sign too (``0.0 == -0.0`` as a cache key)."""
    return _cached_rules(src, out, a, math.copysign(1.0, a), daz, ftz, opmath)


@cache
def _cached_rules(src: DTypeInfo, out: DTypeInfo, a: float, sign: float, daz: bool, ftz: bool,
                  opmath: Optional[str]) -> tuple:
    """What the loop's product needs: the product rules, the input's smallest normal, daz, ftz,
    the magnitude below which a float16/float64 result is subnormal, the output kind, the
    output's largest finite value, the opmath product's rules and kind (-1: none), and the
    input kind."""
    below = out.smallest_normal * (1 - 2.0 ** -(out.mant_bits + 1))  # rounds to the smallest normal
    mid = info(opmath) if opmath is not None else src
    mid_rules = _product_rules(mid, mid, effective_slope(a, slope_dtype=mid.name))
    return (*_product_rules(src, out, a), src.smallest_normal, daz, ftz, below, _kind(out), out.max,
            mid_rules, _kind(mid) if opmath is not None else -1, _kind(src))


def compute(direction: Direction, x: np.ndarray, alpha: float, *, dy: Optional[np.ndarray] = None,
            out_dtype=None, semantics: Semantics, into: Optional[np.ndarray] = None) -> np.ndarray:
    """The golden of ``direction`` under ``semantics`` (which :func:`covers`), compiled: the
    operands read, the result rounded to ``result_dtype`` and converted, then flushed, as the
    numpy path does; written into ``into`` where it is :func:`room` for the loop's own result."""
    s = semantics
    operands = [read_operand(np.asarray(v), s) for v in ((x,) if direction == "forward" else (dy, x))]
    if s.result_dtype is None:
        y = _core(direction, operands, alpha, out_dtype, s, into=None if s.flush_output else into)
    else:
        inner = replace(s, result_dtype=None)
        y = rounded_through(lambda held: _core(direction, held, alpha, s.result_dtype, inner), operands,
                            result_dtype=s.result_dtype, out_dtype=out_dtype)
    return flush_to_zero(y) if s.flush_output else y


def _core(direction: Direction, operands: list[np.ndarray], alpha: float, out_dtype, s: Semantics, *,
          into: Optional[np.ndarray] = None) -> np.ndarray:
    """The golden of the read operands (x last), its result dtype and output flush aside."""
    x = operands[-1]
    _, out = resolve_pair(x.dtype, out_dtype)
    shape, x = x.shape, _narrowed(x, s).reshape(-1)
    a = effective_slope(check_alpha(alpha if s.slope is None else s.slope), slope_dtype=s.slope_dtype)
    if direction == "forward":
        return _forward(x, a, out, s, into=into).reshape(shape)
    return _backward(_narrowed(operands[0], s).reshape(-1), x, a, out, s, into=into).reshape(shape)


def room(into: Optional[np.ndarray], *, size: int, dtype: np.dtype) -> np.ndarray:
    """``into`` when a loop may write a result of ``size`` elements of ``dtype`` there (flat,
    C-contiguous, writable), else a new array."""
    if into is not None and into.shape == (size,) and into.dtype == dtype and into.flags.c_contiguous \
            and into.flags.writeable:
        return into
    return np.empty(size, dtype=dtype)


def _loop_inputs(x: np.ndarray, a: float, out: DTypeInfo, s: Semantics, *, into: Optional[np.ndarray]) -> tuple:
    """(the operand the loop reads, its decode table, the result, its sink, the rules, the flags)."""
    src = info(x.dtype)  # narrowed operands are computed in the dtype that holds them
    if s.rounding != "rne" and src.bits > 32:
        raise ValueError("a directed rounding of the result is modelled for inputs of at most 32 bits")
    result = room(into, size=x.size, dtype=out.dtype)
    xs, table = _operand(x)
    flags = (src.name == out.name, _SATURATE[s.saturate], _ROUNDING[s.rounding])
    return xs, table, result, to_bits(result) if out.bits == 16 else result, \
        _rules(src, out, a, s.daz, s.ftz, s.opmath), flags


def _forward(x: np.ndarray, a: float, out: DTypeInfo, s: Semantics, *, into: Optional[np.ndarray]) -> np.ndarray:
    """The forward of the flat, read and narrowed ``x`` with the slope ``a``; ``twice``: the
    select's result (unsaturated) through the select again."""
    if s.formulation == "twice":
        first = _forward(x, a, out, replace(s, formulation="select", saturate=False), into=None)
        return _forward(first, a, out, replace(s, formulation="select"), into=into)
    xs, table, result, sink, rules, flags = _loop_inputs(x, a, out, s, into=into)
    form = s.formulation if s.formulation != "max_or_min" else ("max" if a <= 1 else "min")
    if _FORWARD_FORM[form] <= 1 and _plain(s):
        ge, scale = s.predicate == "ge", form == "scale"
        if out.bits == 16:  # rounded an element at a time: the loop that branches
            jit.split(lambda lo, hi: select_forward_loop(xs[lo:hi], table, sink[lo:hi], ge, scale, flags[0], rules),
                      x.size, least=SPLIT)
        else:
            jit.split(lambda lo, hi: vector_forward_loop(xs[lo:hi], table, sink[lo:hi], ge, scale, rules), x.size,
                      least=SPLIT)
    else:
        forward_loop(xs, table, sink, s.predicate == "ge", _FORWARD_FORM[form], s.nan_operand == "x", flags, rules)
    return result


def _backward(dy: np.ndarray, x: np.ndarray, a: float, out: DTypeInfo, s: Semantics, *,
              into: Optional[np.ndarray]) -> np.ndarray:
    """The backward of the flat, read and narrowed ``dy`` and ``x`` with the slope ``a``."""
    xs, table, result, sink, rules, flags = _loop_inputs(x, a, out, s, into=into)
    dys, _ = _operand(dy)
    if s.formulation == "swap_operands":  # x and dy passed the other way round
        xs, dys = dys, xs
    nan_mode = _NAN_GRAD[s.nan_grad] + (2 if s.nan_grad == "dy*0" and info(x.dtype).name == "bfloat16" else 0)
    modes = (_BACKWARD_TAKE.get(s.formulation, 0), nan_mode, _GRAD_FORM[s.grad_form], _GRAD_RULE[s.grad_rule])
    if modes[1:] == (0, 0, 0) and _plain(s):
        ge, nan_dy, take = s.grad_rule == "ge", s.nan_grad == "dy", modes[0]
        if flags[0] and out.bits == 16 and x.size >= TABLED:  # every pattern's outcome decided once
            takes, products = backward_tables(table, ge, nan_dy, take, rules)
            dy_bits, x_bits = jit.read_only(dys), jit.read_only(xs)  # one compiled signature, however given
            jit.split(lambda lo, hi: table_backward_loop(dy_bits[lo:hi], x_bits[lo:hi], takes, products, sink[lo:hi]),
                      x.size, least=SPLIT)
        elif out.bits == 16:  # rounded an element at a time: the loop that branches
            jit.split(lambda lo, hi: select_backward_loop(dys[lo:hi], xs[lo:hi], table, sink[lo:hi], ge, nan_dy, take,
                                                          flags[0], rules), x.size, least=SPLIT)
        else:
            jit.split(lambda lo, hi: vector_backward_loop(dys[lo:hi], xs[lo:hi], table, sink[lo:hi], ge, nan_dy, take,
                                                          rules), x.size, least=SPLIT)
    else:
        backward_loop(dys, xs, table, sink, s.grad_rule == "ge", s.nan_grad == "dy", modes, flags, rules)
    return result


class SelectLoop(NamedTuple):
    """What ``compiled_vector.vector_forward_loop`` computes a forward golden from, beside the
    flat x it reads and its sink: x's decode table, ``ge``, ``scale`` and the product's rules."""

    table: np.ndarray
    ge: bool
    scale: bool
    rules: Any


def exact_forward(src: str, alpha: float, *, out_dtype: str) -> Optional[SelectLoop]:
    """The select loop that computes the exact forward golden of float32 or float64 ``src`` values
    into a float32 or float64 output, as :func:`compute` runs it (None for other dtypes: the loop
    that computes them branches, or reads bits)."""
    x, out = info(src), info(out_dtype)
    if x.bits <= 16 or out.bits <= 16:
        return None
    a = effective_slope(check_alpha(alpha), slope_dtype=None)
    return SelectLoop(_NO_TABLE, False, False, _rules(x, out, a, False, False, None))


def _plain(s: Semantics) -> bool:
    """No saturation, opmath product or directed rounding: the select loops compute it, without a
    branch (the general loops give the same bits, one element at a time, several times slower)."""
    return s.saturate is False and s.opmath is None and s.rounding == "rne"


def _narrowed(v: np.ndarray, s: Semantics) -> np.ndarray:
    """An operand narrowed to ``input_dtype`` as the loop reads it (after it was read): a float32
    or float64 one to a 16-bit dtype without saturation in one compiled pass (the numpy path takes
    several), the others as ``exact.narrowed``."""
    to = None if s.input_dtype is None else info(s.input_dtype)
    if to is None or to.bits != 16 or s.saturate_inputs or v.dtype not in _WIDE or not v.ndim:
        return narrowed(v, s.input_dtype, saturating=s.saturate_inputs)
    flat = jit.read_only(v).reshape(-1)
    out = np.empty(flat.size, dtype=flat.dtype)
    narrowed_loop(flat, _kind(to), out)
    return out.reshape(v.shape)


_WIDE = (np.dtype(np.float32), np.dtype(np.float64))  # what the narrowing loop reads
