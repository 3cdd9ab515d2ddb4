"""Hypothesis strategies: width-aware, validated, built on bit patterns.

Elements are drawn as unsigned bit patterns of the dtype's width, so every
format is covered the same way (bfloat16 included, which hypothesis cannot
infer) and NaN payloads and signalling NaNs appear.  Tensors mix a seeded
block of random bits with values picked from the labelled edge pools, and
report which edge classes they used, so meta-tests can count them.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Optional, TypeVar

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from conformance.cases.edges import EdgePool, edge_pool
from conformance.cases.exhaustive import random_bits
from conformance.dtypes import DTypeInfo, DTypeLike, from_bits, info
from conformance.npu_impl.boundaries import boundary_sizes
from conformance.records import Direction
from conformance.reference.defaults import DEFAULTS

T = TypeVar("T")
Shape = tuple[int, ...]
#: Slopes worth naming: every framework default, slopes fp16 cannot represent,
#: 1, slopes above 1 (overflow on the negative side) and negative slopes.
NOTABLE_ALPHAS: tuple[float, ...] = tuple(sorted(
    {d.declared for d in DEFAULTS} | {0.1, 0.2, 0.3, 1 / 3, 0.01, 1.0, 1.5, 2.0, 10.0, -0.01, -0.2, -1.5}))


@dataclass(frozen=True)
class Drawn:
    """One drawn tensor (and dy for backward), with the edge classes injected into it."""

    x: np.ndarray
    dy: Optional[np.ndarray]
    edge_classes: tuple[str, ...]


def _check_count(name: str, value: int, *, low: int = 0) -> int:
    if not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


def bit_patterns(dtype: DTypeLike | DTypeInfo) -> st.SearchStrategy[int]:
    """Every bit pattern of ``dtype`` as an unsigned int (width from the dtype table)."""
    return st.integers(min_value=0, max_value=(1 << info(dtype).bits) - 1)


def scalars(dtype: DTypeLike | DTypeInfo, *, pool: Optional[EdgePool] = None) -> st.SearchStrategy[np.ndarray]:
    """0-d arrays of ``dtype``: edge values (when a pool is given) or any bit pattern."""
    rec = info(dtype)
    if pool is not None and pool.dtype != rec:
        raise ValueError(f"edge pool is {pool.dtype.name} but the strategy is {rec.name}; build the pool "
                         f"with edge_pool({rec.name!r})")
    raw = bit_patterns(rec).map(lambda b: from_bits(b, rec))
    if pool is None:
        return raw
    return st.one_of(st.sampled_from(range(len(pool))).map(lambda i: pool.values[i]), raw)


def alphas(*, allow_negative: bool = True) -> st.SearchStrategy[float]:
    """Notable slopes (defaults, fp16-unrepresentable, 1, > 1, negative) or any finite float."""
    named = [a for a in NOTABLE_ALPHAS if allow_negative or a >= 0]
    low = -16.0 if allow_negative else 0.0
    return st.one_of(st.sampled_from(named),
                     st.floats(min_value=low, max_value=16.0, allow_nan=False, allow_infinity=False))


def block_elements(dtype: DTypeLike | DTypeInfo) -> int:
    """Elements in one 32-byte DataCopy block of ``dtype``."""
    from conformance.npu_impl.chips import block_elements as per_block

    return per_block(info(dtype).bits // 8)


def small_shapes(dtype: DTypeLike | DTypeInfo, *, max_elements: int = 64) -> st.SearchStrategy[Shape]:
    """0-d, empty, one element, below one 32-byte block, or a small random shape."""
    _check_count("max_elements", max_elements, low=1)
    below = tuple((n,) for n in range(2, block_elements(dtype)))
    fixed = st.sampled_from(((), (0,), (1,)) + below)
    dims = st.lists(st.integers(0, max_elements), min_size=1, max_size=3).map(tuple)
    return st.one_of(fixed, dims.filter(lambda s: math.prod(s) <= max_elements))


def shapes(dtype: DTypeLike | DTypeInfo, *, profile: Optional[str] = None,
           max_elements: int = 64) -> st.SearchStrategy[Shape]:
    """Small shapes, plus the tiling boundary sizes of ``profile`` (k*tile +/- 1, core boundaries)."""
    boundary = st.sampled_from(tuple((n,) for n in boundary_sizes(dtype, profile=profile)))
    return st.one_of(small_shapes(dtype, max_elements=max_elements), boundary)


def _inject(base: np.ndarray, picks: list[tuple[int, str, int]], pool: EdgePool) -> tuple[str, ...]:
    """Overwrite ``base`` (flat) at each pick with the chosen class member.

    Returns the classes actually present afterwards (a later pick at the same
    position replaces an earlier one, and so does its label).
    """
    final: dict[int, str] = {}
    for position, label, member in picks:
        values = pool.of(label)
        base[position % base.size] = values[member % values.size]
        final[position % base.size] = label
    return tuple(final.values())


EdgePicks = st.SearchStrategy[list[tuple[int, str, int]]]
_SEEDS = st.integers(0, 2 ** 32 - 1)


def _edge_picks(n: int, pool: EdgePool, *, max_edges: int) -> EdgePicks:
    """Positions, classes (uniform over classes, so rare ones appear) and members to inject."""
    if n == 0:
        return st.just([])
    pick = st.tuples(st.integers(0, n - 1), st.sampled_from(sorted(pool.classes())),
                     st.integers(0, max(len(pool) - 1, 0)))
    return st.lists(pick, max_size=min(n, max_edges))


@st.composite
def _filled(draw: Callable, shape: Shape, pool: EdgePool, picks: EdgePicks) -> tuple[np.ndarray, tuple[str, ...]]:
    """Random bits of ``shape`` from a drawn seed, with edge values injected at ``picks``."""
    n = math.prod(shape)
    flat = random_bits(pool.dtype, n, seed=draw(_SEEDS))
    used = _inject(flat, draw(picks), pool) if n else ()
    return flat.reshape(shape), used


def tensors(dtype: DTypeLike | DTypeInfo, *, direction: Direction = "forward",
            shape: Optional[st.SearchStrategy[Shape]] = None, pool: Optional[EdgePool] = None,
            max_edges: int = 32) -> st.SearchStrategy[Drawn]:
    """x (and dy for backward) mixing random bit patterns with labelled edge values."""
    rec = info(dtype)
    _check_count("max_edges", max_edges)
    pool = pool if pool is not None else edge_pool(rec)
    if pool.dtype != rec:
        raise ValueError(f"edge pool is {pool.dtype.name}, tensors are {rec.name}; use edge_pool({rec.name!r})")
    if direction not in ("forward", "backward"):
        raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")
    shape = shape if shape is not None else small_shapes(rec)

    # One strategy per shape, built on its first draw: hypothesis validates and analyses a strategy
    # when it is first drawn from, which for a new one at every example cost more than the draw.
    @functools.cache
    def filled(s: Shape) -> st.SearchStrategy[tuple[np.ndarray, tuple[str, ...]]]:
        return _filled(s, pool, _edge_picks(math.prod(s), pool, max_edges=max_edges))

    @st.composite
    def build(draw: Callable) -> Drawn:
        s = draw(shape)
        x, used = draw(filled(s))
        if direction == "forward":
            return Drawn(x, None, used)
        dy, used_dy = draw(filled(s))
        return Drawn(x, dy, used + used_dy)

    return build()


@contextlib.contextmanager
def without_source_constants() -> Iterator[None]:
    """Hypothesis draws no literal of the loaded local modules' source for the duration.

    Hypothesis mixes the integer and float literals of every *local* module (one not in
    site-packages) into its draws.  Which modules count as local depends on how the
    package was installed (editable or not), on the current directory and on the user's
    own kernel file, so the same seed would draw other inputs in another directory or
    after a change that adds one literal.  With the collector returning nothing, the
    draws depend only on the seed, the strategy and hypothesis's version.  The collector
    and its per-kind cache are private (``hypothesis.internal.conjecture.providers``:
    ``_get_local_constants``, ``CONSTANTS_CACHE``); both are restored afterwards, and where
    a hypothesis version lacks them nothing is replaced (a test then fails).
    """
    from hypothesis.internal.conjecture import providers

    collector = getattr(providers, "_get_local_constants", None)
    empty = getattr(providers, "Constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)  # the constants chosen per choice kind
    if collector is None or empty is None or cache is None:
        yield
        return
    providers._get_local_constants = empty
    providers.CONSTANTS_CACHE = type(cache)(1024)  # a cache filled without the local literals
    try:
        yield
    finally:
        providers._get_local_constants = collector
        providers.CONSTANTS_CACHE = cache


STORAGE_ENV = "HYPOTHESIS_STORAGE_DIRECTORY"


@contextlib.contextmanager
def private_storage() -> Iterator[None]:
    """Hypothesis's storage directory in a temporary directory for the duration.

    With ``database=None`` hypothesis still caches the constants it collects
    from local source files under its storage directory, by default
    ``./.hypothesis`` in the current directory, which left a ``.hypothesis/`` in
    every directory the harness ran in.  The directory is pointed at a temporary
    one and restored afterwards, so the process (a pytest session included)
    keeps its own setting.  A user who set ``HYPOTHESIS_STORAGE_DIRECTORY`` keeps it.
    """
    if os.environ.get(STORAGE_ENV):
        yield
        return
    from hypothesis import configuration

    home = configuration.storage_directory()  # a Path before hypothesis 6.13x, then an object
    previous = getattr(home, "home_directory", home)
    with tempfile.TemporaryDirectory(prefix="conformance-hypothesis-") as tmp:
        configuration.set_hypothesis_home_dir(tmp)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(previous)


def collect(strategy: st.SearchStrategy[T], *, count: int, seed: int) -> list[T]:
    """``count`` examples of ``strategy``, the same list for the same seed.

    Hypothesis drives generation (``@seed``, no database, generate phase only),
    so the draws are hypothesis's own distribution yet reproducible: the same
    seed and hypothesis version give the same examples in any directory and
    installation (see :func:`without_source_constants`).
    """
    _check_count("count", count)
    drawn: list[T] = []

    @hypothesis_seed(seed)
    @settings(max_examples=max(count, 1), database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), derandomize=False)
    @given(strategy)
    def run(value: T) -> None:
        drawn.append(value)

    if count:
        with private_storage(), without_source_constants():
            run()
    return drawn[:count]
