"""Ascend C-like vector ops on UB buffers (numpy views), one rounding per op.

Ops take ``dst`` first and a ``count`` of lanes, like Ascend C.  Arithmetic
happens in the tensor's dtype (a scalar operand is first converted to that
dtype, as the instructions' ``T scalar`` parameter does).  The unit's
``float_mode`` applies to every op: in saturation mode each result saturates
(+/-inf -> +/-max, NaN -> 0).  ``subnormals="flush"`` treats subnormal operands
as zero and flushes subnormal results; ``maxmin_nan="number"`` makes Max/Min
prefer the number over a NaN.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Literal, Optional

import numpy as np

from conformance.dtypes import from_bits, info, is_nan, is_subnormal, to_bits
from conformance.errors import MissingInstruction
from conformance.npu_impl.chips import BLOCK_BYTES, FloatMode, MaxMinNan, SubnormalRule

CmpMode = Literal["GT", "GE", "LT"]
_COMPARE = {"GT": np.greater, "GE": np.greater_equal, "LT": np.less}


class RoundMode(str, Enum):
    """Ascend C cast round modes (NONE rounds half to even when precision is lost)."""

    NONE = "none"
    RINT = "rint"
    ROUND = "round"
    FLOOR = "floor"
    CEIL = "ceil"
    TRUNC = "trunc"
    ODD = "odd"


def step(a: np.ndarray, direction: int) -> np.ndarray:
    """The neighbouring value of each element, one ULP up (+1) or down (-1) in its dtype."""
    rec = info(a.dtype)
    bits = to_bits(a).astype(np.int64)
    mag = bits & (rec.sign_mask - 1)
    ordinal = np.where(bits & rec.sign_mask, -mag, mag) + direction
    return from_bits(np.where(ordinal < 0, rec.sign_mask | -ordinal, ordinal), rec)


def round_cast(src: np.ndarray, dtype: np.dtype, mode: RoundMode) -> np.ndarray:
    """``src`` converted to ``dtype`` under ``mode`` (no saturation: overflow is inf)."""
    nearest = src.astype(dtype)
    if mode in (RoundMode.NONE, RoundMode.RINT) or np.dtype(dtype).itemsize >= src.dtype.itemsize:
        return nearest
    wide, back = src.astype(np.float64), nearest.astype(np.float64)
    down = np.where(back > wide, step(nearest, -1), nearest)  # largest value <= src
    up = np.where(back < wide, step(nearest, +1), nearest)  # smallest value >= src
    negative = wide < 0
    picked = _directed(mode, nearest=nearest, down=down, up=up, wide=wide, back=back, negative=negative)
    signed_zero = np.copysign(np.zeros_like(wide), wide).astype(dtype)
    return np.where(picked.astype(np.float64) == 0, signed_zero, picked)  # a zero keeps the source's sign


def _directed(mode: RoundMode, *, nearest: np.ndarray, down: np.ndarray, up: np.ndarray,
              wide: np.ndarray, back: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """Pick between the neighbours ``down <= src <= up`` for a directed or odd mode."""
    if mode is RoundMode.FLOOR:
        return down
    if mode is RoundMode.CEIL:
        return up
    if mode is RoundMode.TRUNC:
        return np.where(negative, up, down)
    if mode is RoundMode.ROUND:
        with np.errstate(invalid="ignore"):
            tie = (wide - down.astype(np.float64)) == (up.astype(np.float64) - wide)
        return np.where(tie & (back != wide), np.where(negative, down, up), nearest)
    odd_down = (to_bits(down) & 1).astype(bool)
    return np.where((back == wide) | np.isnan(wide), nearest, np.where(odd_down, down, up))


def saturate(a: np.ndarray) -> None:
    """In place: NaN -> 0 and +/-inf -> +/-max of ``a``'s dtype."""
    finite = np.isfinite(a)
    if finite.all():
        return
    rec = info(a.dtype)
    top = np.asarray(rec.max).astype(a.dtype)
    a[is_nan(a)] = 0
    a[a == np.inf] = top
    a[a == -np.inf] = -top


def flush(a: np.ndarray, *, below: Optional[float] = None) -> None:
    """In place: subnormals (or nonzero values with magnitude < ``below``) become signed zeros."""
    if below is None:
        sub = is_subnormal(a)
    else:
        with np.errstate(invalid="ignore"):
            mag = np.abs(a.astype(np.float64))
        sub = (mag > 0) & (mag < below)
    if sub.any():
        to_bits(a)[sub] &= info(a.dtype).sign_mask


_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


@lru_cache(maxsize=256)
def scalar_as(value: float, dtype: np.dtype) -> np.generic:
    """``value`` converted (round to nearest even) to ``dtype``, as the instructions' ``T scalar``."""
    return np.asarray(value, dtype=np.float64).astype(dtype)[()]


def blend(out: np.ndarray, mask: np.ndarray, src0: np.ndarray, src1: np.ndarray) -> None:
    """out = mask ? src0 : src1, bit for bit (a branch-free bitwise blend)."""
    if np.may_share_memory(out, src0) or np.may_share_memory(out, src1):
        src0, src1 = src0.copy(), src1.copy()
    u = _UINT[out.dtype.itemsize]
    full = mask.view(np.uint8).astype(u)
    np.negative(full, out=full)  # 1 -> all ones
    o, s1 = out.view(u), src1.view(u)
    np.bitwise_xor(src0.view(u), s1, out=o)
    o &= full
    o ^= s1


@dataclass(frozen=True)
class VectorUnit:
    """The vector unit of one core, with the float semantics of its mode and knobs.

    With ``subnormals="flush"``, arithmetic ops and Compare read subnormal
    operands as zero (DAZ) and arithmetic results are flushed (FTZ); Select,
    Duplicate and Cast move bits unchanged.  "Subnormal" is judged in the
    kernel's tensor dtypes when given (``daz_dtype`` for operands, results that
    would round to a subnormal ``ftz_dtype``), so a kernel computing fp16 in
    fp32 flushes what is subnormal in fp16.
    """

    float_mode: FloatMode = "inf_nan"
    subnormals: SubnormalRule = "keep"
    maxmin_nan: MaxMinNan = "propagate"
    daz_dtype: Optional[str] = None
    ftz_dtype: Optional[str] = None

    def _in(self, src: np.ndarray, count: int, *, arithmetic: bool = True) -> np.ndarray:
        """Operand lanes; under DAZ a copy whose subnormals read as zero."""
        lanes = src[:count]
        if self.subnormals == "flush" and arithmetic and lanes.dtype != np.bool_:
            lanes = lanes.copy()
            flush(lanes, below=info(self.daz_dtype or lanes.dtype).smallest_normal)
        return lanes

    def _done(self, dst: np.ndarray, count: int, *, arithmetic: bool = True) -> None:
        """Apply the mode to an op's result lanes (FTZ only after arithmetic)."""
        if self.subnormals == "flush" and arithmetic:
            out = dst[:count]
            flush(out)
            if self.ftz_dtype and info(self.ftz_dtype).dtype != out.dtype:
                with np.errstate(all="ignore"):
                    tiny = is_subnormal(out.astype(info(self.ftz_dtype).dtype))
                to_bits(out)[tiny] &= info(out.dtype).sign_mask
        if self.float_mode == "saturation":
            saturate(dst[:count])

    def _scalar(self, value: float, dtype: np.dtype) -> np.generic:
        return scalar_as(float(value), np.dtype(dtype))

    def muls(self, dst: np.ndarray, src: np.ndarray, scalar: float, count: int) -> None:
        """dst = src * T(scalar)."""
        np.multiply(self._in(src, count), self._scalar(scalar, dst.dtype), out=dst[:count])
        self._done(dst, count)

    def maxs(self, dst: np.ndarray, src: np.ndarray, scalar: float, count: int) -> None:
        """dst = max(src, T(scalar)) under the unit's NaN rule."""
        fn = np.fmax if self.maxmin_nan == "number" else np.maximum
        fn(self._in(src, count), self._scalar(scalar, dst.dtype), out=dst[:count])
        self._done(dst, count)

    def mins(self, dst: np.ndarray, src: np.ndarray, scalar: float, count: int) -> None:
        """dst = min(src, T(scalar)) under the unit's NaN rule."""
        fn = np.fmin if self.maxmin_nan == "number" else np.minimum
        fn(self._in(src, count), self._scalar(scalar, dst.dtype), out=dst[:count])
        self._done(dst, count)

    def add(self, dst: np.ndarray, a: np.ndarray, b: np.ndarray, count: int) -> None:
        """dst = a + b."""
        np.add(self._in(a, count), self._in(b, count), out=dst[:count])
        self._done(dst, count)

    def adds(self, dst: np.ndarray, src: np.ndarray, scalar: float, count: int) -> None:
        """dst = src + T(scalar)."""
        np.add(self._in(src, count), self._scalar(scalar, dst.dtype), out=dst[:count])
        self._done(dst, count)

    def abs(self, dst: np.ndarray, src: np.ndarray, count: int) -> None:
        """dst = |src| (the sign bit cleared, NaN kept)."""
        np.abs(self._in(src, count), out=dst[:count])
        self._done(dst, count)

    def mul(self, dst: np.ndarray, a: np.ndarray, b: np.ndarray, count: int) -> None:
        """dst = a * b."""
        np.multiply(self._in(a, count), self._in(b, count), out=dst[:count])
        self._done(dst, count)

    def compare_scalar(self, mask: np.ndarray, src: np.ndarray, scalar: float, *,
                       mode: CmpMode, count: int) -> None:
        """mask = src <mode> scalar (one byte per lane here; the chip packs bits)."""
        _COMPARE[mode](self._in(src, count), self._scalar(scalar, src.dtype), out=mask[:count])

    def select(self, dst: np.ndarray, mask: np.ndarray, src0: np.ndarray, src1: np.ndarray,
               count: int) -> None:
        """dst = mask ? src0 : src1."""
        blend(dst[:count], mask[:count], src0[:count], src1[:count])
        self._done(dst, count, arithmetic=False)

    def duplicate(self, dst: np.ndarray, scalar: float, count: int) -> None:
        """dst = T(scalar) in every lane."""
        dst[:count] = self._scalar(scalar, dst.dtype)
        self._done(dst, count, arithmetic=False)

    def cast(self, dst: np.ndarray, src: np.ndarray, *, mode: RoundMode, count: int,
             saturating: bool = False) -> None:
        """dst = convert(src) under ``mode``; ``saturating`` clamps even in INF_NAN mode.

        A widening cast is exact and keeps inf/NaN even in saturation mode (the
        next arithmetic op saturates); a narrowing one saturates in that mode.
        """
        lanes = src[:count]
        if mode in (RoundMode.NONE, RoundMode.RINT):
            np.copyto(dst[:count], lanes, casting="unsafe")
        else:
            dst[:count] = round_cast(lanes, dst.dtype, mode)
        widening = dst.dtype.itemsize > lanes.dtype.itemsize
        if saturating or (self.float_mode == "saturation" and not widening):
            saturate(dst[:count])

    def leaky_relu(self, dst: np.ndarray, src: np.ndarray, scalar: float, count: int) -> None:
        """The LeakyRelu instruction: dst = src < 0 ? T(scalar) * src : src."""
        lanes = self._in(src, count)
        keep = ~(lanes < 0)
        np.multiply(lanes, self._scalar(scalar, dst.dtype), out=dst[:count])
        np.copyto(dst[:count], lanes, where=keep)
        self._done(dst, count)


CopyHow = Literal["block", "pad", "scalar"]


def moved_elements(count: int, itemsize: int, *, how: CopyHow, has_pad: bool) -> int:
    """Elements a copy of ``count`` really moves: DataCopy rounds up to 32-byte blocks."""
    if how == "pad" and not has_pad:
        raise MissingInstruction("DataCopyPad is not available on this chip")
    if how == "block":
        return -(-count * itemsize // BLOCK_BYTES) * BLOCK_BYTES // itemsize
    return count


def copy_in(ub: np.ndarray, gm, start: int, count: int, *, how: CopyHow, has_pad: bool) -> None:
    """GM -> UB: DataCopy (whole blocks), DataCopyPad (exact) or scalar GetValue (exact)."""
    n = moved_elements(count, ub.dtype.itemsize, how=how, has_pad=has_pad)
    ub[:n] = gm.read(start, n)


def copy_out(gm, start: int, ub: np.ndarray, count: int, *, core: int, how: CopyHow,
             has_pad: bool) -> None:
    """UB -> GM on behalf of ``core``; DataCopy writes whole blocks whatever ``count`` is."""
    n = moved_elements(count, ub.dtype.itemsize, how=how, has_pad=has_pad)
    gm.write(start, ub[:n], core=core)
