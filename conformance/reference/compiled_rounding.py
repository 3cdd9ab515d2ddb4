"""How the compiled golden reads, multiplies and rounds one element (numba).

A 16-bit operand is read through its decode table and a float widened to float64; the
product ``w * a`` is formed in float64 and fixed up to round-to-odd where it may sit on a
rounding midpoint of the output (``conformance.reference.exact`` says why that makes the
one final rounding correct); a result is rounded to float16 or bfloat16 bits (NaN payloads
as numpy and ml_dtypes convert them), to float32 or kept in float64.  The loops in
``conformance.reference.compiled_loops`` are built of these.
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

__all__ = ["KINDS", "bits64", "converted", "directed", "first_touch", "flushed", "kept", "load", "odd_product",
           "odd_rounded", "product", "round16", "rounded", "store", "widened16", "x86_tiny"]

#: The output dtypes by the kind code the loops branch on.
KINDS = ("float16", "bfloat16", "float32", "float64")
_TINY, _HUGE = 2.0 ** -900, 2.0 ** 1000  # as conformance.reference.exact: no fix-up needed outside


def load(v, table):  # pragma: no cover - typed by the overload below
    raise NotImplementedError


def store(sink, i, p, kind):  # pragma: no cover - typed by the overload below
    raise NotImplementedError


def converted(sink, p, kind):  # pragma: no cover - typed by the overload below
    raise NotImplementedError


def kept(sink, bits, take, v, n, kind):  # pragma: no cover - typed by the overload below
    raise NotImplementedError


@overload(load)
def _load_typed(v, table):
    """A 16-bit pattern through its decode table; a float widened to float64."""
    if isinstance(v, types.Integer):
        return lambda v, table: table[v]
    return lambda v, table: np.float64(v)


@numba.njit(cache=True)
def bits64(p):
    return np.float64(p).view(np.uint64)


@numba.njit(cache=True)
def round16(p, kind):
    """float64 ``p`` rounded to nearest even to float16 (kind 0) or bfloat16 (kind 1), as bits.

    NaN as numpy (float16: the payload's top bits, kept a NaN) and ml_dtypes (bfloat16:
    the quiet NaN of its sign) convert it."""
    mant, bias, top = (10, 15, 0x1F) if kind == 0 else (7, 127, 0xFF)
    b = bits64(p)
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


@overload(converted)
def _converted_typed(sink, p, kind):
    """float64 ``p`` rounded to the output as ``sink`` holds it: a 16-bit sink holds bits."""
    if sink.dtype == types.uint16:
        return lambda sink, p, kind: round16(p, kind)
    if sink.dtype == types.float32:
        return lambda sink, p, kind: np.float32(p)
    return lambda sink, p, kind: p


@overload(store)
def _store_typed(sink, i, p, kind):
    """``p`` rounded to the output."""
    def store_one(sink, i, p, kind):
        sink[i] = converted(sink, p, kind)
    return store_one


@overload(kept)
def _kept_typed(sink, bits, take, v, n, kind):
    """What a select stores: the operand where ``take``, else the product ``n`` rounded.  An
    operand whose dtype is the output's keeps its ``bits`` (a NaN's payload too); another is its
    value ``v`` rounded.  A select of two stored values, without a branch."""
    if sink.dtype == bits:
        return lambda sink, bits, take, v, n, kind: bits if take else converted(sink, n, kind)
    return lambda sink, bits, take, v, n, kind: converted(sink, v if take else n, kind)


@numba.njit(cache=True)
def first_touch(sink):
    """Write a zero into every 4 KiB page of ``sink`` before a vectorised loop fills it: a new
    array's first-touch page faults cost about half as much here as inside that loop (measured
    on 64 MB)."""
    step = max(1, 4096 // sink.itemsize)
    for i in range(0, sink.size, step):
        sink[i] = 0


@numba.njit(cache=True)
def x86_tiny(exact):
    """x86's FTZ test of a float32 (or bfloat16, computed in float32) result whose exact value is
    the float64 ``exact``: tiny when, scaled by 2**64 and rounded to float32, it is below 2**-62."""
    return abs(np.float32(exact * 2.0 ** 64)) < np.float32(2.0 ** -62)


@numba.njit(cache=True)
def odd_product(w, a, hi, lo):
    """float64 round-to-odd of ``w * a`` (``w`` of at most 24 bits; ``a == hi + lo``)."""
    ph, pl = w * hi, w * lo
    s = ph + pl
    bb = s - ph
    err = (ph - (s - bb)) + (pl - bb)
    if err != 0 and (bits64(s) & np.uint64(1)) == 0:
        return np.nextafter(s, np.inf if err > 0 else -np.inf)
    return s


@intrinsic
def _fused(typingctx, w, a, c):
    """``w * a + c`` rounded once: LLVM's fused multiply-add (one instruction where the CPU has it)."""
    def codegen(context, builder, signature, args):
        double = ir.DoubleType()
        fma = builder.module.declare_intrinsic("llvm.fma", [double], ir.FunctionType(double, [double] * 3))
        return builder.call(fma, args)
    return types.float64(types.float64, types.float64, types.float64), codegen


@numba.njit(cache=True)
def odd_rounded(w, a):
    """``w * a`` in float64 rounded to odd where the product lies in ``[2**-900, 2**1000)``, else
    the plain product; without a branch, so a loop of it is vectorised.  ``fma(w, a, -p)`` is the
    product's rounding error, exactly (``w`` of at most 24 significant bits: no underflow in that
    range), so an even ``p`` with an error steps one ulp towards the exact product.  Rounded once more to 51 bits or
    fewer it gives that rounding of the exact product, as :func:`product` does (which rounds to
    odd only its midpoint candidates: elsewhere the step from an even pattern to its odd
    neighbour crosses no midpoint)."""
    p = w * a
    err = _fused(w, a, -p)
    u, mag = bits64(p), abs(p)
    fix = (err != 0) & ((u & np.uint64(1)) == 0) & (mag >= _TINY) & (mag < _HUGE)
    away = ((u ^ bits64(err)) >> np.uint64(63)) == 0  # err has p's sign: one step away from zero
    step = np.uint64(1) if away else np.uint64(0xFFFFFFFFFFFFFFFF)  # +1 or -1, modulo 2**64
    return np.uint64(u + step).view(np.float64) if fix else p


@numba.njit(cache=True)
def product(w, a, hi, lo, k, check, smallest):
    """``w * a`` in float64, fixed up to round-to-odd where it may sit on a midpoint."""
    p = w * a
    if not check:
        return p
    u, mag = bits64(p), abs(p)
    low = u & np.uint64((1 << k) - 1)
    mid = low == np.uint64(1 << (k - 1)) or (mag < smallest and (u & np.uint64((1 << (k - 1)) - 1)) == 0)
    if mid and mag >= _TINY and mag < _HUGE:
        return odd_product(w, a, hi, lo)
    return p


@numba.njit(cache=True)
def flushed(w, smallest):
    """DAZ: a subnormal (below ``smallest``, not zero) read as a zero of its sign."""
    return np.copysign(0.0, w) if w != 0 and abs(w) < smallest else w


@numba.njit(cache=True)
def widened16(h, kind):
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
def rounded(p, kind):
    """float64 ``p`` rounded to the dtype of ``kind``, as float64."""
    if kind == 0 or kind == 1:
        return widened16(round16(p, kind), kind)
    if kind == 2:
        return np.float64(np.float32(p))
    return p


@numba.njit(cache=True)
def _out_bits(p, kind):
    """float64 ``p`` rounded to nearest even to the 16- or 32-bit output ``kind``, as bits."""
    if kind == 2:
        return np.uint64(np.float32(p).view(np.uint32))
    return np.uint64(round16(p, kind))


@numba.njit(cache=True)
def _out_value(b, kind):
    """The value of the output ``kind``'s bit pattern ``b``, as float64."""
    if kind == 2:
        return np.float64(np.uint32(b).view(np.float32))
    return widened16(b, kind)


@numba.njit(cache=True)
def directed(pre, mode, kind):
    """(nearest, directed): float64 ``pre`` (exact, or rounded to odd with at least 2 more
    bits than the output) rounded to the 16- or 32-bit output ``kind`` to nearest even, and
    toward zero (mode 1) or to nearest with ties away from zero (mode 2), as
    ``conformance.reference.exact.round_directed`` rounds it: one step of the bit pattern."""
    b = _out_bits(pre, kind)
    nearest = _out_value(b, kind)
    mag, w = abs(nearest), abs(pre)
    if mode == 1:
        if np.isfinite(pre) and mag > w:
            return nearest, _out_value(b - np.uint64(1), kind)
    elif np.isfinite(mag):
        away = _out_value(b + np.uint64(1), kind)
        if w == (mag + abs(away)) / 2:
            return nearest, away
    return nearest, nearest
