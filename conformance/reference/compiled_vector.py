"""The golden's select vectorised (numba): loops without a branch, for float32 and float64 outputs.

Every element's product is rounded to odd (:func:`~conformance.reference.compiled_rounding.odd_rounded`,
a fused multiply-add's error deciding the step) and the select, DAZ and FTZ are selects, not
branches, so the compiler runs the loop on SIMD units, eight elements an instruction: at about
the speed of a memory copy.  The loops give the bits of the element-at-a-time select loops of
``conformance.reference.compiled_loops`` (which take a branch only where it is needed, faster
when the compiler cannot vectorise: a 16-bit output is rounded one element at a time).
``rules`` is the tuple ``conformance.reference.compiled`` builds per dtype pair and slope.
"""
from __future__ import annotations

import numba
import numpy as np

from conformance.reference.compiled_rounding import first_touch, flushed, kept, load, odd_rounded, x86_tiny

__all__ = ["vector_backward_loop", "vector_forward_loop"]


@numba.njit(cache=True)
def _exact_negative(v, r):
    """``a * v`` as the output's float64: rounded to odd, but for a float64 operand or output
    (whose one rounding is the product's own)."""
    return odd_rounded(v, r[0]) if r[4] else v * r[0]


@numba.njit(cache=True)
def _flushed_negative(v, r):
    """:func:`_exact_negative` of ``v`` read under DAZ, flushed under FTZ where tiny (float32 and
    bfloat16: as x86 decides, on the float64 product scaled by 2**64 and rounded to float32;
    float16 and float64: a subnormal result), as ``compiled_loops._plain_negative`` computes it."""
    a, daz, ftz, below, kind = r[0], r[7], r[8], r[9], r[10]
    v = flushed(v, r[6]) if daz else v
    p = _exact_negative(v, r)
    tiny = x86_tiny(v * a) if (kind == 1) | (kind == 2) else abs(p) < below
    return np.copysign(0.0, p) if ftz & tiny else p


@numba.njit(cache=True)
def _compared(w, ge):
    """``w > 0`` (``>=`` under ``ge``)."""
    return (w > 0) | (ge & (w == 0))


@numba.njit(cache=True)
def _flushed_compared(w, ge, r):
    """:func:`_compared` on ``w`` read under DAZ."""
    return _compared(flushed(w, r[6]) if r[7] else w, ge)


@numba.njit(cache=True, nogil=True)
def vector_forward_loop(xs, table, sink, ge, scale, r):
    """The select (``scale``: a*x everywhere) without saturation or an opmath product (DAZ and
    FTZ in a loop of their own: the exact one does less)."""
    kind, keep = r[10], not scale
    first_touch(sink)
    if r[7] | r[8]:
        for i in range(xs.size):
            w = load(xs[i], table)
            sink[i] = kept(sink, xs[i], keep & _flushed_compared(w, ge, r), w, _flushed_negative(w, r), kind)
    else:
        for i in range(xs.size):
            w = load(xs[i], table)
            sink[i] = kept(sink, xs[i], keep & _compared(w, ge), w, _exact_negative(w, r), kind)


@numba.njit(cache=True)
def _gradient_takes(compared, w, nan_dy, take_mode):
    """dx is dy itself: as x compared (``compared``), never (``take_mode`` 1) or the other way
    (2), or where x is NaN under ``nan_dy``."""
    return ((take_mode != 1) & (compared != (take_mode == 2))) | (nan_dy & (w != w))


@numba.njit(cache=True, nogil=True)
def vector_backward_loop(dys, xs, table, sink, ge, nan_dy, take_mode, r):
    """The gradient's select (``take_mode`` as ``compiled._BACKWARD_TAKE``) without saturation,
    an opmath product, a branch sum or a NaN rule of its own (DAZ and FTZ in a loop of their
    own: the exact one does less)."""
    kind = r[10]
    first_touch(sink)
    if r[7] | r[8]:
        for i in range(xs.size):
            w, d = load(xs[i], table), load(dys[i], table)
            take = _gradient_takes(_flushed_compared(w, ge, r), w, nan_dy, take_mode)
            sink[i] = kept(sink, dys[i], take, d, _flushed_negative(d, r), kind)
    else:
        for i in range(xs.size):
            w, d = load(xs[i], table), load(dys[i], table)
            take = _gradient_takes(_compared(w, ge), w, nan_dy, take_mode)
            sink[i] = kept(sink, dys[i], take, d, _exact_negative(d, r), kind)
