"""The input batches of the suite's rows: built once per key, the same for every backend.

- ``exhaustive16`` (labelled ``sweep`` in reports, a stable name): every 16-bit pattern
  (dy: the same patterns, shuffled), or for float32/float64 a seeded block of random bit
  patterns (labelled ``random``);
- ``edges``: the labelled edge pool built for the row's slope and output dtype;
- ``examples``: hypothesis-drawn tensors (``cases.strategies.collect``: fixed
  seed, no database, generate phase only) flattened into one array;
- ``shape N``: random patterns of a boundary size with edge values at the head and the tail.

Each batch is a pure function of its key and the seed (hypothesis's draws of its version
too), so it is built once per process (``cases.memo``: bounded) as a read-only master; every
``BatchCache`` gets its own copy, and the suite hands every backend a copy of that.
"""
from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Optional

import hypothesis
import numpy as np

from conformance.cases import strategies
from conformance.cases.edges import EdgePool, edge_pool
from conformance.cases.exhaustive import exhaustive16, random_bits, shuffled16
from conformance.cases.memo import Memo, read_only, slopes_key
from conformance.dtypes import info
from conformance.records import Direction

RANDOM_PATTERNS = 1 << 16  # random bit patterns per wide (fp32/fp64) row
SHAPE_EDGES = 64  # edge values written at the head and the tail of each boundary-shape batch


@dataclass(frozen=True)
class InputBatch:
    """One batch of inputs for a row, with its label (shown in offender locations); ``own``: a
    boundary batch of the row's backend alone, which other backends do not run."""

    label: str
    x: np.ndarray
    dy: Optional[np.ndarray] = None
    own: bool = False
    source: Optional[InputBatch] = field(default=None, compare=False, repr=False)  # the memo's master, if copied


def subseed(seed: int, *parts: object) -> int:
    """A stable per-purpose seed (crc32 of the parts; Python's hash() is salted per process)."""
    return zlib.crc32("|".join(map(str, (seed, *parts))).encode()) & 0xFFFFFFFF


def _with_dy(label: str, x: np.ndarray, direction: Direction, *, seed: int) -> InputBatch:
    """``x`` and, for backward, a seeded dy of the same size (bits permuted from x's pool)."""
    if direction == "forward":
        return InputBatch(label, x)
    rng = np.random.default_rng(seed)
    return InputBatch(label, x, x.reshape(-1)[rng.permutation(x.size)].reshape(x.shape))


def frozen(batch: InputBatch) -> InputBatch:
    """``batch`` with read-only arrays (the same object): a memo's master."""
    read_only(batch.x)
    if batch.dy is not None:
        read_only(batch.dy)
    return batch


def thawed(master: InputBatch) -> InputBatch:
    """A caller's own copy of a memo's master (writable arrays), naming the master as its source."""
    return replace(master, x=master.x.copy(), dy=None if master.dy is None else master.dy.copy(), source=master)


def _nbytes(batch: InputBatch) -> int:
    return batch.x.nbytes + (0 if batch.dy is None else batch.dy.nbytes)


#: Every batch master built in this process, by its kind, arguments and seed.
BATCHES: Memo[InputBatch] = Memo(entries=4096, budget=128 << 20, weight=_nbytes)


class BatchCache:
    """The batches of each (dtype, out_dtype, direction[, alpha]) for a seed: one copy per key for
    this cache's caller, of a master built once per process (:data:`BATCHES`)."""

    def __init__(self, *, seed: int, max_examples: int, alphas: Sequence[float]):
        self.seed, self.max_examples = seed, max_examples
        self.alphas = tuple(alphas)
        self.exhaustive16 = functools.lru_cache(maxsize=None)(self._exhaustive16)
        self.edges = functools.lru_cache(maxsize=None)(self._edges)
        self.examples = functools.lru_cache(maxsize=None)(self._examples)
        self.shapes = functools.lru_cache(maxsize=None)(self._shapes)

    def _master(self, key: tuple[Hashable, ...], build: Callable[[], InputBatch]) -> InputBatch:
        """The read-only master for ``key`` (the kind, its arguments and what else it depends on)."""
        return BATCHES.get((*key, self.seed), lambda: frozen(build()))

    def _exhaustive16(self, dtype: str, direction: Direction) -> InputBatch:
        build = lambda: self._built_exhaustive16(dtype, direction)  # noqa: E731
        return thawed(self._master(("exhaustive16", dtype, direction), build))

    def _edges(self, dtype: str, out_dtype: str, direction: Direction, alpha: float) -> InputBatch:
        key = ("edges", dtype, out_dtype, direction, slopes_key([alpha]))
        return thawed(self._master(key, lambda: self._built_edges(dtype, out_dtype, direction, alpha)))

    def _examples(self, dtype: str, out_dtype: str, direction: Direction) -> InputBatch:
        return thawed(self._drawn_master(dtype, out_dtype, direction))

    def _shapes(self, dtype: str, out_dtype: str, direction: Direction,
                sizes: tuple[int, ...]) -> tuple[InputBatch, ...]:
        """One batch per boundary size in ``sizes``."""
        def build(n: int) -> InputBatch:
            pool = edge_pool(dtype, out_dtype=out_dtype, alphas=self.alphas)
            return _shaped(n, pool, direction, seed=subseed(self.seed, "shape", dtype, n))
        slopes = slopes_key(self.alphas)
        return tuple(thawed(self._master(("shape", dtype, out_dtype, direction, n, slopes),
                                         functools.partial(build, n))) for n in sizes)

    def _drawn_master(self, dtype: str, out_dtype: str, direction: Direction) -> InputBatch:
        """The drawn batch (a pure function of the seed, the count, the slopes of the edge pool it
        draws from, and hypothesis's version); forward uses its x only, so both share one draw."""
        key = ("examples", dtype, out_dtype, direction, self.max_examples, slopes_key(self.alphas),
               hypothesis.__version__)
        if direction == "forward":
            return self._master(key, lambda: replace(self._drawn_master(dtype, out_dtype, "backward"), dy=None))
        return self._master(key, lambda: self._drawn(dtype, out_dtype))

    def _built_exhaustive16(self, dtype: str, direction: Direction) -> InputBatch:
        if info(dtype).bits == 16:
            dy = shuffled16(dtype, seed=subseed(self.seed, "sweep-dy", dtype)) if direction == "backward" else None
            return InputBatch("sweep", exhaustive16(dtype), dy)  # the label reports print: kept stable
        x = random_bits(dtype, RANDOM_PATTERNS, seed=subseed(self.seed, "random", dtype))
        dy = random_bits(dtype, RANDOM_PATTERNS, seed=subseed(self.seed, "random-dy", dtype))
        return InputBatch("random", x, dy if direction == "backward" else None)

    def _built_edges(self, dtype: str, out_dtype: str, direction: Direction, alpha: float) -> InputBatch:
        pool = edge_pool(dtype, out_dtype=out_dtype, alphas=(alpha,))
        return _with_dy("edges", pool.values, direction, seed=subseed(self.seed, "edges-dy", dtype))

    def _drawn(self, dtype: str, out_dtype: str) -> InputBatch:
        """Hypothesis tensors (x and dy) for one pair, flattened into one batch."""
        pool = edge_pool(dtype, out_dtype=out_dtype, alphas=self.alphas)
        drawn = strategies.collect(strategies.tensors(dtype, direction="backward", pool=pool),
                                   count=self.max_examples, seed=subseed(self.seed, "examples", dtype, out_dtype))
        empty = [np.empty(0, info(dtype).dtype)]
        return InputBatch("examples", np.concatenate([d.x.reshape(-1) for d in drawn] or empty),
                          np.concatenate([d.dy.reshape(-1) for d in drawn] or empty))


def _shaped(n: int, pool: EdgePool, direction: Direction, *, seed: int) -> InputBatch:
    """``n`` random patterns with edge values written at the head and at the tail."""
    x = random_bits(pool.dtype, n, seed=seed)
    k = min(SHAPE_EDGES, n // 2, len(pool))
    rng = np.random.default_rng(seed)
    picks = pool.values[rng.choice(len(pool), size=2 * k, replace=False)] if k else pool.values[:0]
    x[:k], x[n - k:] = picks[:k], picks[k:]
    return _with_dy(f"shape ({n},)", x, direction, seed=seed + 1)


@functools.cache
def shared_sizes(dtype: str, out_dtype: str, direction: Direction) -> tuple[int, ...]:
    """The boundary sizes every backend runs: the default chip's one- and two-core boundaries
    (a function of the chip table alone, so worked out once per process)."""
    return strategies.boundary_sizes(dtype, out_dtype=out_dtype, direction=direction, tiles=False)
