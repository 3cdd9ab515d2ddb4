"""Generated defects confined to a region: a rule of the catalogue that holds in one core,
tile, tile head, axis slice or span of a tiling plan or an N-D shape alone, or the region
holding another region's results; two defects composed (a layout mix-up or a clamp on top
of a rule); and :func:`cases`, the corpus ``selftest --generated`` judges (every
``REGIONAL_EVERY``-th case regional, every ``COMPOSED_EVERY``-th composed, every
``QUANTIZED_EVERY``-th quantized, every ``PRELU_EVERY``-th a PReLU one, the rest from
:func:`defects.generate`)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import numpy as np

from conformance.cases.defects import (  # the layout and clamp edits of the unconfined generator
    ALPHAS,
    PAIRS,
    Defect,
    Planted,
    _clamp,
    _layout,
    _layout_shape,
    accepted,
    catalogue,
    compute,
    draw_values,
    generate,
    same_bits,
)
from conformance.cases.prelu_defects import generate_prelu
from conformance.cases.quantized_defects import generate_quantized
from conformance.dtypes import info
from conformance.records import TilePlan, TileSpan
from conformance.reference.semantics import EXACT

#: A tiling plan for (src, out, direction, numel), chosen with the generator (None: no plan for it).
PlanFn = Callable[[str, str, str, int, np.random.Generator], Optional[TilePlan]]
REGIONAL_EVERY = 8


def synthetic_plan(rng: np.random.Generator, n: int) -> TilePlan:
    """Core ranges of whole 32-byte blocks, each cut into equal tiles (the last shorter)."""
    cores = int(rng.integers(2, 49))
    per = -(-n // cores)
    per += -per % 8
    tile = max(8, -(-per // int(rng.integers(1, 5))))
    tile += -tile % 8
    spans = []
    for core, lo in enumerate(range(0, n, per)):
        hi = min(lo + per, n)
        spans += [TileSpan(core, t, s, min(tile, hi - s), is_tail=hi - s < tile)
                  for t, s in enumerate(range(lo, hi, tile))]
    return TilePlan(tile, tuple(spans), 8)


def _region_shape(rng: np.random.Generator) -> tuple[int, ...]:
    """Rank 1 to 5, 2,048 to about 16,000 elements."""
    rank = int(rng.integers(1, 6))
    while True:
        shape = (int(rng.integers(2048, 16_000)),) if rank == 1 else tuple(
            int(v) for v in rng.integers(2, max(3, int(round(12_000 ** (1 / rank)))) + 1, size=rank))
        if int(np.prod(shape)) >= 2048:
            return shape


def _by_core(tile_plan: TilePlan) -> dict[int, list[TileSpan]]:
    out: dict[int, list[TileSpan]] = {}
    for s in tile_plan.spans:
        out.setdefault(s.core, []).append(s)
    return out


Drawn = tuple[str, np.ndarray, Optional[np.ndarray]]  # words, flat indices, a same-size source or None


def _region(rng: np.random.Generator, shape: tuple[int, ...], tile_plan: TilePlan) -> Drawn:
    """A region drawn from the plan or the shape: its words, its flat indices, and the flat
    indices of a region of the same size its data may come from (None: none)."""
    cores = _by_core(tile_plan)
    multi = [c for c, v in cores.items() if len(v) > 1]
    kinds = ["span"] + (["axis", "rows"] if len(shape) > 1 and shape[-1] > 8 else []) \
        + (["core", "cores"] if len(cores) > 1 else []) + (["tiles", "head"] if multi else [])
    kind = str(rng.choice(kinds))
    if kind == "core":
        return _core_region(rng, cores)
    if kind == "tiles":
        return _tiles_region(rng, cores, multi)
    if kind == "head":
        return _partial(rng, "tile", [(s.start, s.stop) for s in tile_plan.spans])
    if kind == "cores":
        return _partial(rng, "core's range", [(v[0].start, v[-1].stop) for v in cores.values()])
    if kind == "rows":
        n, length = int(np.prod(shape)), int(shape[-1])
        return _partial(rng, "row", [(lo, lo + length) for lo in range(0, n, length)])
    if kind == "axis":
        return _axis_region(rng, shape)
    return _span_region(rng, int(np.prod(shape)), tile=tile_plan.tile_elements)


def _partial(rng: np.random.Generator, what: str, segments: list[tuple[int, int]]) -> Drawn:
    """The first or the last w elements of every segment (w under the longest one's length)."""
    longest = max(hi - lo for lo, hi in segments)
    w = int(rng.choice([w for w in (4, 16, 32, 64, 128) if w < longest] or [1]))
    last = bool(rng.integers(2))
    idx = np.concatenate([np.arange(max(lo, hi - w), hi) if last else np.arange(lo, min(hi, lo + w))
                          for lo, hi in segments])
    return f"{'last' if last else 'first'} {w} of each {what}", idx, None


def _core_region(rng: np.random.Generator, cores: dict[int, list[TileSpan]]) -> Drawn:
    """A core's range; its source, the core before's range (when as long)."""
    c = int(rng.choice(sorted(cores)[1:]))
    lo, hi = cores[c][0].start, cores[c][-1].stop
    plo = cores[c - 1][0].start
    return f"core {c}", np.arange(lo, hi), (np.arange(plo, plo + hi - lo) if plo + hi - lo <= lo else None)


def _tiles_region(rng: np.random.Generator, cores: dict[int, list[TileSpan]], multi: list[int]) -> Drawn:
    """Tile k of every core that has one; its source, tile k - 1 of the same core."""
    k = int(rng.integers(1, max(len(cores[c]) for c in multi)))
    pairs = [(v[k], v[k - 1]) for v in cores.values() if len(v) > k]
    idx = np.concatenate([np.arange(t.start, t.stop) for t, _ in pairs])
    src = np.concatenate([np.arange(s.start, s.start + t.length) for t, s in pairs])
    return f"tile {k} of {len(pairs)} cores", idx, src


def _axis_region(rng: np.random.Generator, shape: tuple[int, ...]) -> Drawn:
    """Index i on an axis; its source, index i - 1 on it."""
    a = int(rng.choice([d for d in range(len(shape)) if shape[d] > 1]))
    i = int(rng.integers(1, shape[a]))
    grid = np.arange(int(np.prod(shape))).reshape(shape)
    at = [slice(None)] * len(shape)
    at[a] = i
    prev = list(at)
    prev[a] = i - 1
    return f"index {i} on axis {a}", grid[tuple(at)].reshape(-1), grid[tuple(prev)].reshape(-1)


def _span_region(rng: np.random.Generator, n: int, *, tile: int) -> Drawn:
    """A contiguous span; its source, the span a tile before (the previous iteration's buffer)."""
    k = int(rng.integers(64, max(65, n // 8)))
    lo = int(rng.integers(0, n - k + 1))
    return f"[{lo}, {lo + k})", np.arange(lo, lo + k), (np.arange(lo - tile, lo + k - tile) if lo >= tile else None)


def _drawn(rng: np.random.Generator, *, shape_of: Callable[[np.random.Generator], tuple[int, ...]]) -> tuple:
    """A case's dtype pair, direction, slope (neither 0 nor 1), shape, inputs and exact result."""
    src, out = PAIRS[int(rng.integers(len(PAIRS)))]
    direction = "forward" if rng.random() < 0.55 else "backward"
    alpha = float(rng.choice([a for a in ALPHAS if a not in (0.0, 1.0)]))
    shape = shape_of(rng)
    n = int(np.prod(shape))
    x = draw_values(rng, src, n).reshape(shape)
    dy = draw_values(rng, src, n).reshape(shape) if direction == "backward" else None
    return src, out, direction, alpha, shape, x, dy, compute(x, dy, alpha, out, EXACT)


def generate_regional(seed: int, *, plan: Optional[PlanFn] = None) -> Planted:
    """One deterministic case with a defect confined to a region of the plan or the shape:
    a rule of the catalogue that holds there alone, or the region holding another region's
    results (a stale tile, the previous row or channel, another core's range)."""
    rng = np.random.default_rng([seed, 20])
    src, out, direction, alpha, shape, x, dy, golden = _drawn(rng, shape_of=_region_shape)
    n = x.size
    tile_plan = (plan(src, out, direction, n, rng) if plan is not None else None) or synthetic_plan(rng, n)
    defect, actual, accept = _plant_in_region(rng, x, dy, alpha, out, golden, _region(rng, shape, tile_plan))
    return Planted(seed, x, dy, alpha, direction, out, golden, actual, (defect,), accept, tile_plan)


def _plant_in_region(rng: np.random.Generator, x: np.ndarray, dy: Optional[np.ndarray], alpha: float, out: str,
                     golden: np.ndarray, region: Drawn) -> tuple[Defect, np.ndarray, dict]:
    """The defect, the defective output and, per changed element, the categories that name it."""
    words, idx, source = region
    actual = golden.copy()
    if source is not None and rng.random() < 0.3:
        actual[idx] = golden[source]
        changed = np.flatnonzero(~same_bits(actual, golden))
        return (Defect("stale-block", f"{words} holds the results of another region"), actual,
                {int(i): ("stale-block",) for i in changed})
    pool = catalogue(alpha=alpha, src=info(x.dtype).name, out=out, direction="forward" if dy is None else "backward")
    rule = pool[int(rng.integers(len(pool)))]
    actual[idx] = compute(x, dy, alpha, out, rule.semantics)[idx]
    symptom = ~np.isfinite(actual.astype(np.float64)) & np.isfinite(golden.astype(np.float64))
    narrowed = ("overflow", "spurious-nan") if rule.category == "input-precision" else ()
    changed = np.flatnonzero(~same_bits(actual, golden))
    return (Defect(rule.category, f"{rule.name} in {words}", rule.semantics), actual,
            {int(i): (rule.category,) + (narrowed if symptom[i] else ()) for i in changed})


def generate_composed(seed: int) -> Planted:
    """One deterministic case with two defects composed: a layout mix-up on top of a rule
    of the catalogue (the rule's output written in another layout), or a clamp at a limit
    on top of a rule (the rule's output clamped).  Per element, the categories of the
    defects that alone reproduce it, or both where neither does."""
    rng = np.random.default_rng([seed, 30])
    src, out, direction, alpha, shape, x, dy, golden = _drawn(rng, shape_of=_layout_shape)
    pool = catalogue(alpha=alpha, src=src, out=out, direction=direction)
    rule = pool[int(rng.integers(len(pool)))]
    ruled = compute(x, dy, alpha, out, rule.semantics)
    clamp = rng.random() >= 0.6 and rule.category not in _UNCLAMPED
    edit = _clamp(rng, ruled, out) if clamp else None
    if edit is None:  # no value beyond any limit: the layout instead
        edit = _layout(rng, shape, out)
    actual = edit.edit(ruled)
    return Planted(seed, x, dy, alpha, direction, out, golden, actual,
                   (edit, Defect(rule.category, rule.name, rule.semantics)),
                   _composed_accept(golden, actual, edit.edit(golden), ruled, (edit.category, rule.category)))


def _composed_accept(golden: np.ndarray, actual: np.ndarray, edited: np.ndarray, ruled: np.ndarray,
                     names: tuple[str, str]) -> dict:
    """Per changed element, the category of each defect that alone reproduces it (the edit
    on golden, the rule alone), or both where neither does; an operand overflowed when
    narrowed is also named by its value class (against golden edited: moved or clamped)."""
    changed = np.flatnonzero(~same_bits(actual, golden)).tolist()
    return accepted(names, (edited, ruled), actual, changed, symptom_against=edited)


#: rules a clamp is not composed with: operands narrowed to fp16 overflow to inf, and a
#: clamp of those infinities is a saturating cast, another rule of the catalogue
_UNCLAMPED = frozenset({"input-precision"})
COMPOSED_EVERY = 8  # every COMPOSED_EVERY-th case of the corpus composes two defects
QUANTIZED_EVERY = 8  # every QUANTIZED_EVERY-th, two before a regional one, is quantized
PRELU_EVERY = 8  # every PRELU_EVERY-th, one after a composed one, is a PReLU one


def cases(count: int, *, seed: int = 0, plan: Optional[PlanFn] = None) -> list[Planted]:
    """``count`` generated cases, seeds ``seed .. seed + count - 1``; every ``REGIONAL_EVERY``-th
    is a regional one (:func:`generate_regional`, on ``plan``'s tiling when given),
    every ``COMPOSED_EVERY``-th, four later, a composed one (:func:`generate_composed`),
    every ``QUANTIZED_EVERY``-th, two before a regional one, a quantized one
    (:func:`conformance.cases.quantized_defects.generate_quantized`), and every ``PRELU_EVERY``-th, one
    after a composed one, a PReLU one (:func:`conformance.cases.prelu_defects.generate_prelu`)."""
    def one(i: int) -> Planted:
        if i % REGIONAL_EVERY == REGIONAL_EVERY - 1:
            return generate_regional(seed + i, plan=plan)
        if i % COMPOSED_EVERY == COMPOSED_EVERY // 2 - 1:
            return generate_composed(seed + i)
        if i % QUANTIZED_EVERY == QUANTIZED_EVERY - 3:
            return generate_quantized(seed + i)
        if i % PRELU_EVERY == PRELU_EVERY // 2:
            return generate_prelu(seed + i)
        return generate(seed + i)

    return [one(i) for i in range(count)]
