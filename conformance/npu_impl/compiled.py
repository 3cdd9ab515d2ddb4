"""The emulator's vector instructions compiled with numba: a tile's (or a launch's) sequence in one loop.

Each lane goes through the same instructions as ``conformance.npu_impl.vector`` runs them
on whole tiles -- the narrowing and widening casts, the formulation's instructions, the cast
back and, over a whole launch, the host's output cast -- with each instruction's rounding
(fp16 and bf16 arithmetic in float32, then rounded, as numpy and ml_dtypes do), DAZ on its
operands, FTZ and saturation on its result.  Values travel as float32: a 16-bit value is the
float32 numpy or ml_dtypes widens it to (a decode table), and its bits come back exactly.

NaN payloads follow numpy's loops where those are the same in every lane: one NaN operand
gives that NaN quieted; two give the second one on fp16/bf16 (scalar C loops).  numpy's
float32 loops are not uniform there: with two NaN operands, and for ``fmax``/``fmin`` of a
signalling NaN, the SIMD body and the remainder loop pick differently, so a lane that meets
one is reported (the loops return its index) and the caller runs the numpy instructions for
that tile instead.  ``conformance.npu_impl.fusion`` decides where these loops may run;
``tests/npu/test_compiled.py`` proves them bit-identical to the instruction path.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import types
from numba.extending import overload

__all__ = ["Lanes", "KINDS", "FORMULATION_IDS", "run_lanes"]

F16, BF16, F32 = 0, 1, 2
KINDS = {"float16": F16, "bfloat16": BF16, "float32": F32}
FORMULATION_IDS = {"select": 0, "maxmin": 1, "vlrelu": 2, "step": 3, "mask-multiply": 4}
_VLRELU = FORMULATION_IDS["vlrelu"]
_SIGN, _QUIET, _EXP32 = np.uint32(0x80000000), np.uint32(0x00400000), np.uint32(0x7F800000)
_F16_MAX, _BF16_MAX = np.float32(65504.0), np.uint32(0x7F7F0000).view(np.float32)
_F32_MAX = np.float32(np.finfo(np.float32).max)


class Lanes(NamedTuple):
    """One build's lane program: dtype kinds (0 fp16, 1 bf16, 2 fp32; -1 none), the formulation,
    the unit's modes and the instructions' scalars, each already in the compute dtype."""

    src: int
    narrow: int
    compute: int
    kernel_out: int
    out: int
    formulation: int
    ge: bool
    saturation: bool
    flush: bool
    number: bool
    ftz: int
    daz_below: float
    slope: np.float32
    tiny: np.float32
    lift0: np.float32
    lift1: np.float32
    lift2: np.float32
    lifts: int


#: Formulations with a loop of their own for builds without DAZ/FTZ, saturation, a narrowing
#: cast or a NaN slope (the chips' common kernels); every other build runs the general loop.
PLAIN_FORMULATIONS = frozenset({FORMULATION_IDS["vlrelu"], FORMULATION_IDS["select"]})


def run_lanes(v: np.ndarray, g: np.ndarray, sink: np.ndarray, lanes: Lanes) -> int:
    """Compute every lane of ``v`` (``g``: the compared operand) into ``sink``; -1, or the first
    lane numpy's float32 loops decide by position (the caller redoes that tile on the numpy path)."""
    plain = (lanes.formulation in PLAIN_FORMULATIONS and not (lanes.flush or lanes.saturation)
             and lanes.narrow < 0 and lanes.slope == lanes.slope)
    if plain and {lanes.src, lanes.compute, lanes.kernel_out, lanes.out} == {F32}:
        return int(_float32_loop(v, g, sink, lanes.slope, lanes.formulation == _VLRELU, lanes.ge))
    return int((_plain_loop if plain else _loop)(v, g, sink, lanes))


# ---------------------------------------------------------------------------- bits
@numba.njit(cache=True)
def _bits(v):
    return np.float32(v).view(np.uint32)


@numba.njit(cache=True)
def _f32(b):
    return np.uint32(b).view(np.float32)


@numba.njit(cache=True)
def _quiet(v):
    return _f32(_bits(v) | _QUIET)


@numba.njit(cache=True)
def _zero_of(v):
    """The zero with ``v``'s sign."""
    return _f32(_bits(v) & _SIGN)


@numba.njit(cache=True)
def _to16(v, kind):
    """float32 ``v`` converted to fp16 (numpy's rule) or bf16 (ml_dtypes': a NaN becomes the
    quiet NaN of its sign), round to nearest even, as bits."""
    b = _bits(v)
    sign, mag = (b >> np.uint32(16)) & np.uint32(0x8000), b & np.uint32(0x7FFFFFFF)
    if kind == BF16:
        if mag > _EXP32:
            return sign | np.uint32(0x7FC0)
        return (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    if mag >= _EXP32:
        if mag == _EXP32:
            return sign | np.uint32(0x7C00)
        r = np.uint32(0x7C00) + ((mag & np.uint32(0x7FFFFF)) >> np.uint32(13))
        return sign | (r + np.uint32(1) if r == np.uint32(0x7C00) else r)
    if mag >= np.uint32(0x477FF000):  # 65520 and up round to inf
        return sign | np.uint32(0x7C00)
    if mag >= np.uint32(0x38800000):  # a normal fp16
        r = (mag + np.uint32(0xFFF) + ((mag >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13)
        return sign | (r - np.uint32(112 << 10))
    return sign | np.uint32(np.rint(np.float64(abs(v)) * 2.0 ** 24))  # the subnormal grid


@numba.njit(cache=True)
def _pack(v, kind):
    """The bits of a value already in ``kind`` (the exact inverse of the decode table)."""
    if kind == BF16:
        return _bits(v) >> np.uint32(16)
    return _to16(v, kind)


@numba.njit(cache=True)
def _round(v, kind):
    """An arithmetic result rounded to ``kind``."""
    if kind == F32:
        return v
    return _from16(_to16(v, kind), kind)


@numba.njit(cache=True)
def _from16(h, kind):
    """fp16 or bf16 bits widened to float32 as numpy and ml_dtypes do (a NaN keeps its payload)."""
    h = np.uint32(h)
    if kind == BF16:
        return _f32(h << np.uint32(16))
    sign = (h & np.uint32(0x8000)) << np.uint32(16)
    exp, mant = (h >> np.uint32(10)) & np.uint32(0x1F), h & np.uint32(0x3FF)
    if exp == np.uint32(0x1F):
        return _f32(sign | _EXP32 | (mant << np.uint32(13)))
    if exp == 0:
        return _f32(_bits(np.float32(mant) * np.float32(2.0 ** -24)) | sign)
    return _f32(sign | ((exp + np.uint32(112)) << np.uint32(23)) | (mant << np.uint32(13)))


@numba.njit(cache=True)
def _subnormal16(h, kind):
    exp, mant = (0x7C00, 0x3FF) if kind == F16 else (0x7F80, 0x7F)
    return (h & np.uint32(exp)) == 0 and (h & np.uint32(mant)) != 0


@numba.njit(cache=True)
def _subnormal(v, kind):
    """``v`` (a value of ``kind``) is a nonzero subnormal there."""
    a = abs(v)
    return a > 0 and a < (np.float32(2.0 ** -14) if kind == F16 else np.float32(2.0 ** -126))


# ---------------------------------------------------------------------------- the unit's modes
@numba.njit(cache=True)
def _saturate(v, kind):
    """NaN -> +0, +/-inf -> +/-max of ``kind``."""
    if v != v:
        return np.float32(0.0)
    if v == np.inf or v == -np.inf:
        top = _F16_MAX if kind == F16 else _BF16_MAX if kind == BF16 else _F32_MAX
        return top if v > 0 else -top
    return v


@numba.njit(cache=True)
def _daz(v, m):
    """An arithmetic operand: under ``flush`` read as zero below the DAZ dtype's smallest normal."""
    if m.flush:
        a = abs(np.float64(v))
        if a > 0 and a < m.daz_below:
            return _zero_of(v)
    return v


@numba.njit(cache=True)
def _done(v, kind, m):
    """An arithmetic result: FTZ in its dtype and in the FTZ dtype, then saturation."""
    if m.flush:
        if _subnormal(v, kind):
            v = _zero_of(v)
        elif m.ftz >= 0 and m.ftz != kind:
            if m.ftz == F32:
                tiny = _subnormal(v, F32)
            else:
                tiny = _subnormal16(_to16(v, m.ftz), m.ftz)
            if tiny:
                v = _zero_of(v)
    return _moved(v, kind, m)


@numba.njit(cache=True)
def _moved(v, kind, m):
    """A result that only moves bits (Select, Duplicate): saturation alone."""
    return _saturate(v, kind) if m.saturation else v


# ---------------------------------------------------------------------------- instructions
@numba.njit(cache=True)
def _arith(a, b, multiply, both_arrays, kind, m):
    """(a * b or a + b, lane decided by position): ``both_arrays`` DAZes ``b`` too (not a scalar)."""
    a = _daz(a, m)
    if both_arrays:
        b = _daz(b, m)
    if a != a and b != b:
        if kind == F32:
            return np.float32(0.0), True
        r = _quiet(b)
    elif a != a:
        r = _quiet(a)
    elif b != b:
        r = _quiet(b)
    else:
        r = a * b if multiply else a + b
    return _done(_round(r, kind), kind, m), False


@numba.njit(cache=True)
def _extreme(a, s, upper, kind, m):
    """(max(a, s) or min(a, s) with a non-NaN scalar, lane decided by position) under the NaN rule:
    a NaN kept raw, or (``number``) the scalar; a tie (+0/-0) gives fp16's first operand, else s."""
    a = _daz(a, m)
    if a != a:
        if not m.number:
            return _moved(a, kind, m), False
        if kind == F32 and (_bits(a) & _QUIET) == 0:
            return np.float32(0.0), True
        r = s
    elif a == s:
        r = a if kind == F16 else s
    elif (a > s) == upper:
        r = a
    else:
        r = s
    return _done(r, kind, m), False


@numba.njit(cache=True)
def _abs(a, kind, m):
    return _done(_f32(_bits(_daz(a, m)) & np.uint32(0x7FFFFFFF)), kind, m)


@numba.njit(cache=True)
def _compare(g, m):
    """Compare GT (GE) with 0 on the DAZ-read operand."""
    g = _daz(g, m)
    return g > 0 or (m.ge and g == 0)


@numba.njit(cache=True)
def _cast(v, frm, to, m):
    """Cast (RINT/NONE): exact when widening; a narrowing or same-size cast saturates in that mode."""
    if frm == to or to == F32:
        r = v
    elif frm == BF16 and v != v:  # ml_dtypes' bf16 -> fp16 gives the quiet NaN of its sign
        r = _from16((_bits(v) >> np.uint32(16)) & np.uint32(0x8000) | np.uint32(0x7E00), to)
    else:
        r = _from16(_to16(v, to), to)
    if m.saturation and (to != F32 or frm == F32):
        r = _saturate(r, to)
    return r


# ---------------------------------------------------------------------------- formulations
@numba.njit(cache=True)
def _select(v, g, k, m):
    """Compare + Muls + Select; the product is computed only where it is selected."""
    if _compare(g, m):
        return _moved(v, k, m), False
    r, bad = _arith(v, m.slope, True, False, k, m)
    return _moved(r, k, m), bad


@numba.njit(cache=True)
def _maxmin(v, g, k, m):
    t0, b0 = _extreme(v, np.float32(0.0), True, k, m)
    t1, b1 = _extreme(v, np.float32(0.0), False, k, m)
    t1, b2 = _arith(t1, m.slope, True, False, k, m)
    r, b3 = _arith(t0, t1, False, True, k, m)
    return r, b0 or b1 or b2 or b3


@numba.njit(cache=True)
def _vlrelu(v, g, k, m):
    """The LeakyRelu instruction: the DAZ-read lane kept unless negative, then the unit's modes."""
    lane = _daz(v, m)
    if lane < 0:
        r, bad = _arith(lane, m.slope, True, False, k, m)
        return _done(r, k, m), bad
    return _done(lane, k, m), False


@numba.njit(cache=True)
def _step(v, g, k, m):
    """v * (|r - 1| * slope + r), r = max(min(g, tiny), 0) lifted to 1 (kernel._step)."""
    r, b0 = _extreme(g, m.tiny, False, k, m)
    r, b1 = _extreme(r, np.float32(0.0), True, k, m)
    r, b2 = _arith(r, m.lift0, True, False, k, m)
    r, b3 = _arith(r, m.lift1, True, False, k, m)
    bad = b0 or b1 or b2 or b3
    if m.lifts == 3:
        r, b = _arith(r, m.lift2, True, False, k, m)
        bad = bad or b
    t, b2 = _arith(r, np.float32(-1.0), False, False, k, m)
    t, b3 = _arith(_abs(t, k, m), m.slope, True, False, k, m)
    t, b4 = _arith(t, r, False, True, k, m)
    out, b5 = _arith(v, t, True, True, k, m)
    return out, bad or b2 or b3 or b4 or b5


@numba.njit(cache=True)
def _mask_multiply(v, g, k, m):
    """v*m + (slope*v)*(1-m) with m = (g > 0) as 1.0/0.0 (kernel._mask_multiply)."""
    one, zero = _moved(np.float32(1.0), k, m), _moved(np.float32(0.0), k, m)
    mask = _compare(g, m)
    on, off = _moved(one if mask else zero, k, m), _moved(zero if mask else one, k, m)
    t0, b0 = _arith(v, on, True, True, k, m)
    t1, b1 = _arith(v, m.slope, True, False, k, m)
    t1, b2 = _arith(t1, off, True, True, k, m)
    out, b3 = _arith(t0, t1, False, True, k, m)
    return out, b0 or b1 or b2 or b3


@numba.njit(cache=True)
def _formulation(v, g, m):
    k, f = m.compute, m.formulation
    if f == 0:
        return _select(v, g, k, m)
    if f == 1:
        return _maxmin(v, g, k, m)
    if f == 2:
        return _vlrelu(v, g, k, m)
    if f == 3:
        return _step(v, g, k, m)
    return _mask_multiply(v, g, k, m)


@numba.njit(cache=True)
def _operand(v, m):
    """An input lane in the compute dtype: through the narrowing cast, then widened."""
    kind = m.src
    if m.narrow >= 0:
        v, kind = _cast(v, kind, m.narrow, m), m.narrow
    if kind != m.compute:
        v = _cast(v, kind, m.compute, m)
    return v


@numba.njit(cache=True)
def _lane(v, g, m):
    r, bad = _formulation(_operand(v, m), _operand(g, m), m)
    if m.compute != m.kernel_out:
        r = _cast(r, m.compute, m.kernel_out, m)
    if m.kernel_out != m.out:
        r = _cast(r, m.kernel_out, m.out, m)
    return r, bad


# ---------------------------------------------------------------------------- loads, stores, loop
def _load(a, i, kind):  # pragma: no cover - typed by the overload below
    raise NotImplementedError


def _store(sink, i, v, kind):  # pragma: no cover - typed by the overload below
    raise NotImplementedError


@overload(_load)
def _load_typed(a, i, kind):
    """A 16-bit pattern widened; a float32 as it is."""
    if a.dtype == types.uint16:
        return lambda a, i, kind: _from16(a[i], kind)
    return lambda a, i, kind: a[i]


@overload(_store)
def _store_typed(sink, i, v, kind):
    """A 16-bit sink holds bits."""
    if sink.dtype == types.uint16:
        def store16(sink, i, v, kind):
            sink[i] = np.uint16(_pack(v, kind))
        return store16

    def store32(sink, i, v, kind):
        sink[i] = v
    return store32


@numba.njit(cache=True)
def _loop(v, g, sink, m):
    for i in range(sink.size):
        r, bad = _lane(_load(v, i, m.src), _load(g, i, m.src), m)
        if bad:
            return i
        _store(sink, i, r, m.out)
    return -1


@numba.njit(cache=True, nogil=True)
def _plain_loop(v, g, sink, m):
    """_loop for a plain build (and a slope that is not NaN): widening is exact, there is no
    DAZ/FTZ or saturation, and a NaN operand is the product's only NaN, quieted by the multiply."""
    k, vlrelu, ge, s = m.compute, m.formulation == _VLRELU, m.ge, m.slope
    for i in range(sink.size):
        x = _load(v, i, m.src)
        c = x if vlrelu else _load(g, i, m.src)
        keep = (c >= 0) | (c != c) if vlrelu else (c > 0) | (ge & (c == 0))
        prod = _round(x * s, k)
        r = x if keep else prod
        if k != m.kernel_out:
            r = _cast(r, k, m.kernel_out, m)
        if m.kernel_out != m.out:
            r = _cast(r, m.kernel_out, m.out, m)
        _store(sink, i, r, m.out)
    return -1


@numba.njit(cache=True, nogil=True)
def _float32_loop(v, g, sink, s, vlrelu, ge):
    """_plain_loop with every dtype float32: a branch-free select the compiler vectorizes."""
    if vlrelu:
        for i in range(sink.size):
            x = v[i]
            sink[i] = x if not x < 0 else x * s
    else:
        for i in range(sink.size):
            x, c = v[i], g[i]
            sink[i] = x if (c > 0) | (ge & (c == 0)) else x * s
    return -1
