"""The compiled scan's first pass over one chunk (``scan_loops.find``), on every thread.

The chunk is cut into ranges of whole runs, one per thread (:func:`conformance.jit.ranges`);
each range lists its own mismatches and special matching elements, computes its part of a
fused golden and sums its blocks of the cosine sums, at the same time as the others
(``nogil``).  The lists are then joined in order and the cosine sums taken from the blocks
of the whole chunk, so what the caller gets is what one pass over the chunk gives, bit for
bit: the same lists, counts, largest magnitude and sums.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np

from conformance import jit
from conformance.metrics.exact import DOT_PIECE

__all__ = ["RANGE", "Found", "Room", "find"]

RANGE = 1 << 18  # elements of a chunk found on one thread at least (fewer: not worth a thread)


class Found(NamedTuple):
    """What the first pass found in a chunk: where its mismatches end in the kept list, the bits
    of its largest finite magnitude, how many matching elements are special and plain and how
    many pairs are NaN and an infinity on both sides (``kinds``), and its cosine sums."""

    end: int
    top: Any
    kinds: np.ndarray
    sums: np.ndarray


class Room:
    """What every chunk's first pass reuses: room for the values of one piece of the cosine
    sums and for the blocks' sums, the chunk's special matching elements (:attr:`at`, local
    indices), and each later range's own lists before they are joined."""

    def __init__(self) -> None:
        self.pieces = np.empty((2, DOT_PIECE), dtype=np.float64)  # finite pairs summed as one piece
        self.at = np.empty(0, dtype=np.int64)
        self.blocks = np.empty((0, 3), dtype=np.float64)
        self.lists: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # a later range's mismatches and specials

    def positions(self, n: int) -> np.ndarray:
        """Room for the local indices of ``n`` elements, and one more."""
        if self.at.size <= n:
            self.at = np.empty(n + 1, dtype=np.int64)
        return self.at

    def block_room(self, count: int) -> np.ndarray:
        if self.blocks.shape[0] < count:
            self.blocks = np.empty((count, 3), dtype=np.float64)
        return self.blocks

    def range_lists(self, part: int, n: int, where: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """The ``part``-th range's own room for ``n`` mismatches and specials, and one more."""
        held = self.lists.get(part)
        if held is None or held[0].size <= n or held[0].dtype != where:
            held = self.lists[part] = (np.empty(n + 1, dtype=where), np.empty(n + 1, dtype=np.int64))
        return held


def _cuts(n: int) -> list[tuple[int, int]]:
    """``0:n`` in ranges of whole runs, one per thread, or one range under :data:`RANGE`."""
    from conformance.metrics._compiled.metric_loops import RUN  # numba, imported on the first compiled call

    bounds = [lo // RUN * RUN for lo, _ in jit.ranges(0, n, least=RANGE)] + [n]
    return [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo] or [(0, n)]


def find(bits: Any, golden: Any, *, offset: int, where: np.ndarray, start: int, room: Room,
         masks: tuple[Any, Any, Any, Any]) -> Found:
    """The first pass over the chunk ``bits`` (``scan_loops.ChunkBits``): its mismatches' flat
    indices (``offset`` + local) written from ``start`` of ``where`` (room for the chunk's size
    and one more), its special matching elements' local indices in ``room.at``, the counts,
    the largest finite magnitude's bits and the cosine sums (:class:`Found`).  ``masks``: the
    output's exponent and mantissa masks and x's exponent mask, in the bits' types."""
    from conformance.metrics._compiled import pairwise, scan_loops  # numba, imported on the first compiled call

    exp_mask, mant_mask, x_exp = masks[1:]
    n = bits.actual.size
    at = room.positions(n)
    whole = scan_loops.whole_pieces(bits, room.pieces.shape[1])
    blocks = room.block_room(whole // pairwise.BLOCK)
    cuts = _cuts(n)
    counts = np.zeros((len(cuts), 5), dtype=np.int64)

    def part(i: int) -> Any:
        lo, hi = cuts[i]
        out, special = (where, at) if i == 0 else room.range_lists(i, hi - lo, where.dtype)
        return scan_loops.find(bits, golden, lo, hi, offset, out, start if i == 0 else 0, blocks, whole, special,
                               counts[i], exp_mask, mant_mask, x_exp)

    tops = jit.in_parallel([functools.partial(part, i) for i in range(len(cuts))])
    end, n_special = start + int(counts[0, 0]), int(counts[0, 1])
    for i in range(1, len(cuts)):  # the later ranges' lists after the first's, in order
        k, s = int(counts[i, 0]), int(counts[i, 1])
        out, special = room.lists[i]
        where[end:end + k], at[n_special:n_special + s] = out[:k], special[:s]
        end, n_special = end + k, n_special + s
    finite, nan_both, inf_both = (int(c) for c in counts[:, 2:].sum(axis=0))
    sums = np.zeros(3)
    scan_loops.cosine_sums(bits, blocks, whole, finite, room.pieces, sums, exp_mask)
    kinds = np.array([n_special, n - (end - start) - n_special, nan_both, inf_both], dtype=np.int64)
    return Found(end, max(tops), kinds, sums)
