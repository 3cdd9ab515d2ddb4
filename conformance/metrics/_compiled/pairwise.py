"""numpy's pairwise sums of the cosine's three products, compiled with numba.

``np.add.reduce`` of a float64 array sums a piece of more than 128 elements as the sum of its
halves (the first rounded down to a multiple of 8), and a piece of at most 128 with eight
accumulators, lane l taking elements l, l + 8, ..., then added pairwise.  :func:`pairwise_sums`
walks the same halves; a whole block of 128 is summed by :func:`_vector_block`, its eight lanes
one vector of eight float64 (each product and each sum rounded as numpy rounds it: no fused
multiply-add, no reordering), which numba's loop vectoriser cannot do for it (a sum per lane
is not a loop without a dependence); any other piece, by the scalar :func:`_block`.
"""
from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

__all__ = ["BLOCK", "block_sums", "pairwise_sums", "tree_shaped", "tree_sums"]

BLOCK = 128  # numpy's PW_BLOCKSIZE: a piece this short is summed by eight accumulators
_LANES = 8  # numpy's accumulators of a block: one vector of float64
_DEPTH = 128  # pieces a pairwise sum holds at once: two per halving, far more than 2^63 elements need


@intrinsic
def _vector_block(typingctx, a, g, lo):
    """The three sums (dot, aa, gg) of the block of 128 pairs of the C-contiguous float32 or
    float64 arrays ``a``, ``g`` from ``lo``, as :func:`_block` gives them: eight lanes, a row of
    eight products added to them at a time, then the lanes added pairwise."""
    return _lane_sums(a, g, lo, same=False)


@intrinsic
def _vector_squares(typingctx, a, g, lo):
    """:func:`_vector_block` of a block where ``a`` and ``g`` hold the same bits: the three sums
    are one, that of ``g[i] * g[i]`` (``a`` is not read)."""
    return _lane_sums(a, g, lo, same=True)


def _lane_sums(a: types.Type, g: types.Type, lo: types.Type, *, same: bool) -> Any:
    """The signature and code of :func:`_vector_block` (``same``: of :func:`_vector_squares`)."""
    if not (_vectorised(a, g) and isinstance(lo, types.Integer)):
        return None
    sig = types.UniTuple(types.float64, 3)(a, g, lo)

    def codegen(context, builder, signature, args):
        item = context.get_data_type(signature.args[0].dtype)
        wide = ir.VectorType(ir.DoubleType(), _LANES)
        row_type = ir.VectorType(item, _LANES).as_pointer()
        start = context.cast(builder, args[2], signature.args[2], types.intp)
        firsts = [builder.gep(context.make_array(kind)(context, builder, value).data, [start])
                  for kind, value in zip(signature.args[:2], args[:2])]

        def row(first, t):
            at = builder.bitcast(builder.gep(first, [ir.Constant(ir.IntType(64), t * _LANES)]), row_type)
            values = builder.load(at, align=context.get_abi_sizeof(item))
            return values if isinstance(item, ir.DoubleType) else builder.fpext(values, wide)

        lanes = None
        for t in range(BLOCK // _LANES):
            y = row(firsts[1], t)
            x = y if same else row(firsts[0], t)
            products = (builder.fmul(y, y),) if same else (builder.fmul(x, y), builder.fmul(x, x), builder.fmul(y, y))
            lanes = products if lanes is None else tuple(builder.fadd(s, p) for s, p in zip(lanes, products))
        sums = [_pairwise_lanes(builder, v) for v in lanes]
        return context.make_tuple(builder, signature.return_type, sums * 3 if same else sums)

    return sig, codegen


def _vectorised(a: types.Type, g: types.Type) -> bool:
    """Whether :func:`_vector_block` reads ``a`` and ``g``: C-contiguous, both float32 or both float64."""
    return all(isinstance(v, types.Array) and v.layout == "C" and v.ndim == 1 for v in (a, g)) \
        and a.dtype == g.dtype and a.dtype in (types.float32, types.float64)


def _pairwise_lanes(builder: ir.IRBuilder, lanes: ir.Value) -> ir.Value:
    """The eight lanes added pairwise, as numpy adds its eight accumulators."""
    r = [builder.extract_element(lanes, ir.Constant(ir.IntType(32), i)) for i in range(_LANES)]
    add = builder.fadd
    return add(add(add(r[0], r[1]), add(r[2], r[3])), add(add(r[4], r[5]), add(r[6], r[7])))


def _whole_block(a, g, lo, lanes):  # pragma: no cover - typed by the overload below
    raise NotImplementedError


def _whole_squares(a, g, lo, lanes):  # pragma: no cover - typed by the overload below
    raise NotImplementedError


@overload(_whole_squares)
def _whole_squares_typed(a, g, lo, lanes):
    """:func:`_whole_block` of pairs with the same bits: :func:`_vector_squares` where it reads them."""
    if _vectorised(a, g):
        return lambda a, g, lo, lanes: _vector_squares(a, g, lo)
    return lambda a, g, lo, lanes: _block(a, g, lo, BLOCK, lanes)


@overload(_whole_block)
def _whole_block_typed(a, g, lo, lanes):
    """A whole block of 128 pairs: one vector of lanes when both arrays are C-contiguous, else
    :func:`_block` (the same bits)."""
    if _vectorised(a, g):
        return lambda a, g, lo, lanes: _vector_block(a, g, lo)
    return lambda a, g, lo, lanes: _block(a, g, lo, BLOCK, lanes)


@numba.njit(cache=True)
def pairwise_sums(a, g, lo, n):
    """``np.add.reduce`` of each of the float64 products ``a[i] * g[i]``, ``a[i] * a[i]`` and
    ``g[i] * g[i]`` over ``lo .. lo + n - 1``, in numpy's order: a piece of more than 128
    elements is split in halves (the first rounded down to a multiple of 8) summed apart, a
    shorter one by eight accumulators; plus the reduction's initial 0.0.  The halves are
    walked with a stack of their own (numba's cache does not keep recursive functions)."""
    lanes = np.empty((3, _LANES), dtype=np.float64)
    if n <= BLOCK:
        return _plus_zero(_leaf(a, g, lo, n, lanes))
    starts, sizes = np.empty(_DEPTH, dtype=np.int64), np.empty(_DEPTH, dtype=np.int64)
    split, sums = np.zeros(_DEPTH, dtype=np.bool_), np.empty((_DEPTH, 3), dtype=np.float64)
    starts[0], sizes[0], split[0], top, done = lo, n, False, 1, 0
    while top:
        at, size = starts[top - 1], sizes[top - 1]
        if size <= BLOCK:
            sums[done, 0], sums[done, 1], sums[done, 2] = _leaf(a, g, at, size, lanes)
            done, top = done + 1, top - 1
        elif split[top - 1]:  # both halves summed: the first is below the second
            for j in range(3):
                sums[done - 2, j] += sums[done - 1, j]
            done, top = done - 1, top - 1
        else:
            half = size // 2
            half -= half % _LANES
            split[top - 1] = True
            starts[top], sizes[top], split[top] = at + half, size - half, False
            starts[top + 1], sizes[top + 1], split[top + 1] = at, half, False
            top += 2
    return _plus_zero((sums[0, 0], sums[0, 1], sums[0, 2]))


@numba.njit(cache=True)
def tree_shaped(piece, run):
    """Whether numpy's halves of a piece of ``piece`` elements are whole blocks of 128, a power of
    two of them (so its sums are :func:`tree_sums` of its blocks), and runs of ``run`` elements
    (a multiple of 128) tile it."""
    blocks = piece // BLOCK
    return piece % BLOCK == 0 and blocks & (blocks - 1) == 0 and piece % run == 0 and run % BLOCK == 0


@numba.njit(cache=True, nogil=True)
def block_sums(a, g, lo, n, blocks, at, same):
    """The three sums of each block of 128 of the ``n`` pairs (a multiple of 128) from ``lo`` of
    the float32 or float64 arrays ``a``, ``g`` into ``blocks[at]``, ``blocks[at + 1]``, ...: what
    :func:`tree_sums` adds up (``same``: the pairs have the same bits, so the three are one)."""
    lanes = np.empty((3, _LANES), dtype=np.float64)
    for b in range(n // BLOCK):
        start = lo + b * BLOCK
        found = _whole_squares(a, g, start, lanes) if same else _whole_block(a, g, start, lanes)
        blocks[at + b, 0], blocks[at + b, 1], blocks[at + b, 2] = found


@numba.njit(cache=True, nogil=True)
def tree_sums(blocks, first, count):
    """:func:`pairwise_sums` of a piece of ``count`` blocks (a power of two) whose sums are
    ``blocks[first:first + count]`` (:func:`block_sums`): its halves added, as numpy adds them
    (the blocks are overwritten)."""
    width = 1
    while width < count:
        for b in range(first, first + count, 2 * width):
            for j in range(3):
                blocks[b, j] += blocks[b + width, j]
        width *= 2
    return _plus_zero((blocks[first, 0], blocks[first, 1], blocks[first, 2]))


@numba.njit(cache=True, inline="always")
def _plus_zero(sums):
    return 0.0 + sums[0], 0.0 + sums[1], 0.0 + sums[2]


@numba.njit(cache=True, inline="always")
def _leaf(a, g, lo, n, lanes):
    """The three sums of a piece of at most 128 pairs: a whole block by vector lanes."""
    if n == BLOCK:
        return _whole_block(a, g, lo, lanes)
    return _block(a, g, lo, n, lanes)


@numba.njit(cache=True)
def _block(a, g, lo, n, lanes):
    """The three sums of a piece of at most 128 pairs: eight accumulators each (``lanes``), lane
    l taking elements l, l + 8, ..., then added pairwise, then the elements past the last
    eight one by one; a piece shorter than eight, one by one."""
    if n < _LANES:
        dot = aa = gg = 0.0
        for i in range(lo, lo + n):
            x, y = np.float64(a[i]), np.float64(g[i])
            dot, aa, gg = dot + x * y, aa + x * x, gg + y * y
        return dot, aa, gg
    for lane in range(_LANES):
        x, y = np.float64(a[lo + lane]), np.float64(g[lo + lane])
        lanes[0, lane], lanes[1, lane], lanes[2, lane] = x * y, x * x, y * y
    whole = n - n % _LANES
    for t in range(_LANES, whole, _LANES):
        for lane in range(_LANES):
            x, y = np.float64(a[lo + t + lane]), np.float64(g[lo + t + lane])
            lanes[0, lane] += x * y
            lanes[1, lane] += x * x
            lanes[2, lane] += y * y
    dot, aa, gg = _lanes_added(lanes, 0), _lanes_added(lanes, 1), _lanes_added(lanes, 2)
    for i in range(lo + whole, lo + n):
        x, y = np.float64(a[i]), np.float64(g[i])
        dot, aa, gg = dot + x * y, aa + x * x, gg + y * y
    return dot, aa, gg


@numba.njit(cache=True, inline="always")
def _lanes_added(lanes, j):
    """The eight accumulators of sum ``j`` added pairwise, as numpy adds its eight."""
    r = lanes[j]
    return ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
