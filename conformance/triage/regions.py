"""Regions of a tensor as data: where a defect may live, derived from the plan and the shape.

A :class:`Region` is a set of flat indices of the tensor, with the words that name it:

- from the tiling plan (a ``TilePlan``): a core's range, one tile, tile k of every core;
- from the N-D shape: index i on axis a (a channel, a plane, a batch element, a row);
- partial ones: the first or the last w elements of every tile, of every core's range or of
  every row of the shape's last axis (overlapping in-place tiles, a head or tail loop), w
  the smallest length that holds every error;
- from the errors' own extent: a contiguous span, or every k-th element of a range.

Families are enumerated from the plan and the shape alone; the errors only rank them
(:func:`ranked`: regions that hold much of the residue, where it is denser than elsewhere,
first), so a search tries few.  A region's ``cost`` is its description length in rules: a region the
plan or the shape names costs one; a span or a stride, whose bounds the data gives, two.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from conformance.dtypes import ordered, to_bits
from conformance.records import TilePlan

MIN_EVIDENCE = 4  # errors a region needs before it is tried
MIN_SHARE = 0.25  # share of the errors a region must hold to be tried
MIN_LIFT = 1.5  # how much denser the errors must be in the region than in the tensor
TOP = 3  # regions tried per search


@dataclass(frozen=True)
class Region:
    """A set of flat indices: ``spans`` ([start, stop) rows, disjoint, ascending), or
    ``axis`` (stride, length, index: index i on one axis), or ``window`` (the elements
    [lo, hi) of each span, counted from its start, or from its end with ``from_end``), or
    ``step`` (lo, hi, k: every k-th)."""

    kind: str
    text: str
    size: int
    cost: float = 1.0
    spans: Optional[np.ndarray] = field(default=None, compare=False)
    axis: tuple = ()
    window: tuple = ()
    from_end: bool = False
    step: tuple = ()
    detail: dict = field(default_factory=dict, compare=False)

    def contains(self, flat: np.ndarray) -> np.ndarray:
        """Which of the flat indices ``flat`` lie in the region."""
        if self.axis:
            stride, length, index = self.axis
            return (flat // stride) % length == index
        if self.step:
            lo, hi, k = self.step
            return (flat >= lo) & (flat < hi) & ((flat - lo) % k == 0)
        at = np.searchsorted(self.spans[:, 0], flat, side="right") - 1
        ok = at >= 0
        at = np.maximum(at, 0)
        start, stop = self.spans[at, 0], self.spans[at, 1]
        if self.window:
            lo, hi = self.window
            off = stop - 1 - flat if self.from_end else flat - start
            return ok & (flat < stop) & (flat >= start) & (off >= lo) & (off < hi)
        return ok & (flat < stop)

    def key(self) -> tuple:
        """What tells two regions apart: their elements' description."""
        spans = () if self.spans is None else tuple(map(tuple, self.spans.tolist()))
        return spans, self.axis, self.window, self.from_end, self.step


def _spans(rows: list[tuple[int, int]]) -> np.ndarray:
    return np.asarray(sorted(rows), dtype=np.int64).reshape(-1, 2)


# ----------------------------------------------------------------------------- families

def sorted_by_position(x: np.ndarray) -> bool:
    """Inputs that rise or fall with the position (an enumeration of bit patterns, a
    linspace): there the position and the value cannot be told apart."""
    for key in (to_bits(x).astype(np.int64), ordered(x)):
        step = np.diff(key)
        if (step >= 0).all() or (step <= 0).all():
            return True
    return False



def _plan_families(tile_plan: TilePlan) -> list[list[Region]]:
    """Each core's range, each tile, tile k of every core (when several cores have one)."""
    by_core: dict[int, list] = defaultdict(list)
    by_tile: dict[int, list] = defaultdict(list)
    for s in tile_plan.spans:
        by_core[s.core].append(s)
        by_tile[s.tile].append(s)
    cores = []
    for c, spans in sorted(by_core.items()):
        lo, hi = min(s.start for s in spans), max(s.stop for s in spans)
        cores.append(Region("core", f"core {c} [{lo}, {hi})", hi - lo, spans=_spans([(lo, hi)]),
                            detail={"core": c, "start": lo, "stop": hi}))
    tiles = [Region("tile", f"tile {s.tile} of core {s.core} [{s.start}, {s.stop})", s.length,
                    spans=_spans([(s.start, s.stop)]),
                    detail={"core": s.core, "tile": s.tile, "start": s.start, "stop": s.stop})
             for s in tile_plan.spans if len(by_core[s.core]) > 1]
    every = [Region("tiles", f"tile {k} of each of {len(spans)} cores", sum(s.length for s in spans),
                    spans=_spans([(s.start, s.stop) for s in spans]), detail={"tile": k, "cores": len(spans)})
             for k, spans in sorted(by_tile.items()) if len(spans) > 1]
    return [cores, tiles, every]


def _axis_word(axis: int, rank: int) -> str:
    """What index i on ``axis`` of a tensor of ``rank`` is usually called."""
    if rank == 2:
        return ("row", "column")[axis]
    words = {0: "batch element", 1: "channel", rank - 1: "column"}
    if rank >= 4:
        words[rank - 2] = "row"
    return words.get(axis, "plane")


def _axis_regions(shape: tuple[int, ...], rest: np.ndarray) -> list[tuple[Region, int]]:
    """Index i on axis a, for every axis of a shape of rank 2 or more, with the errors each holds
    (only the indices that hold some are built)."""
    out: list[tuple[Region, int]] = []
    if len(shape) < 2:
        return out
    numel = int(np.prod(shape, dtype=np.int64))
    dims = "x".join(map(str, shape))
    for a, length in enumerate(shape):
        if length < 2:
            continue
        stride = int(np.prod(shape[a + 1:], dtype=np.int64))
        counts = np.bincount((rest // stride) % length, minlength=length)
        for i in np.flatnonzero(counts >= MIN_EVIDENCE).tolist():
            text = f"{_axis_word(a, len(shape))} {i} on axis {a} of {dims}"
            out.append((Region("axis", text, numel // length, axis=(stride, length, i),
                               detail={"axis": a, "index": i, "shape": list(shape)}), int(counts[i])))
    return out


def _segments(tile_plan: Optional[TilePlan], shape: tuple[int, ...]) -> list[tuple[str, np.ndarray]]:
    """The segment families a partial region may cut: the plan's tiles and cores' ranges, and
    the rows of the shape's last axis, each as ``[start, stop)`` spans."""
    out = []
    if tile_plan is not None and tile_plan.spans:
        out.append(("tiles", _spans([(s.start, s.stop) for s in tile_plan.spans])))
        ranges: dict[int, list[int]] = {}
        for s in tile_plan.spans:
            lo_hi = ranges.setdefault(s.core, [s.start, s.stop])
            lo_hi[0], lo_hi[1] = min(lo_hi[0], s.start), max(lo_hi[1], s.stop)
        out.append(("cores' ranges", _spans([tuple(v) for v in ranges.values()])))
    if len(shape) >= 2 and shape[-1] >= 2:
        n, length = int(np.prod(shape, dtype=np.int64)), int(shape[-1])
        starts = np.arange(0, n, length, dtype=np.int64)
        out.append((f"rows of {'x'.join(map(str, shape))}", np.stack([starts, starts + length], axis=1)))
    return out


def _window_regions(tile_plan: Optional[TilePlan], shape: tuple[int, ...], rest: np.ndarray, *,
                    partial: bool) -> list[tuple[Region, int]]:
    """The first or the last w elements of every segment (:func:`_segments`), when every error
    lies within that many elements of its segment's start (or end) and w is less than a
    whole segment; without ``partial``, only the first w of every tile (overlapping in-place
    tiles), the one partial region inputs sorted by position cannot fake."""
    out: list[tuple[Region, int]] = []
    for name, spans in _segments(tile_plan, shape)[:None if partial else 1]:
        if spans.shape[0] < 2 or rest.size < MIN_EVIDENCE:
            continue
        at = np.searchsorted(spans[:, 0], rest, side="right") - 1
        at_ok = np.maximum(at, 0)
        if not ((at >= 0) & (rest < spans[at_ok, 1])).all():
            continue
        lengths = spans[:, 1] - spans[:, 0]
        ends = ((False, rest - spans[at_ok, 0]), (True, spans[at_ok, 1] - 1 - rest))
        for from_end, off in ends[:None if partial else 1]:
            w = int(off.max()) + 1
            if w >= int(lengths.max()):
                continue
            held = np.minimum(lengths, w)
            count = int(np.count_nonzero(held))
            words = f"the {'last' if from_end else 'first'} {w} elements of each of {count} {name}"
            out.append((Region("window", words, int(held.sum()), spans=spans, window=(0, w), from_end=from_end,
                               detail={"window": [0, w], "from_end": from_end, "of": name, "count": count}),
                        int(rest.size)))
    return out


def _extent_regions(rest: np.ndarray) -> list[tuple[Region, int]]:
    """The span the errors fill, and every k-th element of it when they share a stride."""
    lo, hi = int(rest.min()), int(rest.max()) + 1
    out = [(Region("span", f"[{lo}, {hi})", hi - lo, cost=2.0, spans=_spans([(lo, hi)]),
                   detail={"start": lo, "stop": hi}), int(rest.size))]
    k = int(np.gcd.reduce(np.diff(rest))) if rest.size >= 3 else 1
    if k > 1:
        out.append((Region("stride", f"every {k}th element of [{lo}, {hi})", (hi - 1 - lo) // k + 1, cost=2.0,
                           step=(lo, hi, k), detail={"start": lo, "stop": hi, "step": k}), int(rest.size)))
    return out


def _counted(regions: list[Region], rest: np.ndarray) -> list[tuple[Region, int]]:
    """Each region with the errors it holds (``rest`` ascending)."""
    out = []
    for r in regions:
        lo = np.searchsorted(rest, r.spans[:, 0])
        hi = np.searchsorted(rest, r.spans[:, 1])
        out.append((r, int((hi - lo).sum())))
    return out


def ranked(rest: np.ndarray, *, numel: int, shape: tuple[int, ...], tile_plan: Optional[TilePlan],
           top: int = TOP, partial: bool = True) -> list[Region]:
    """The regions most worth trying for the errors ``rest`` (flat indices, ascending): those
    that hold much of them (``share``, at least ``MIN_SHARE``) where they are denser than in
    the whole tensor (``lift``, at least ``MIN_LIFT``): share times log2(lift), per unit of
    the region's cost.  Sparse errors (a flush of the few subnormals) rank as dense ones do.
    The span of every error is tried too when it ranks lower (a region no plan or shape names).
    ``partial``: the first or last w elements of every segment are tried (not on inputs sorted
    by position, where the place of an error is its value)."""
    if rest.size < MIN_EVIDENCE:
        return []
    counted: list[tuple[Region, int]] = []
    if tile_plan is not None and tile_plan.spans:
        for family in _plan_families(tile_plan):
            counted += _counted(family, rest)
    counted += _window_regions(tile_plan, tuple(shape), rest, partial=partial)
    counted += _axis_regions(tuple(shape), rest) + _extent_regions(rest)
    scored: dict[tuple, tuple[float, Region]] = {}
    for region, count in counted:
        share, lift = count / rest.size, (count / rest.size) / (region.size / numel)
        if count < MIN_EVIDENCE or region.size >= numel or share < MIN_SHARE or lift < MIN_LIFT:
            continue
        score = share * np.log2(lift) / region.cost
        key = region.key()
        if key not in scored or scored[key][0] < score:
            scored[key] = (score, region)
    best = [r for _, r in sorted(scored.values(), key=lambda sr: (-sr[0], sr[1].cost, sr[1].size))]
    extent = [r for r in best[top:] if r.kind == "span"][:1]  # the span of every error, always tried
    return best[:top] + extent


# ----------------------------------------------------------------------------- mappings

def shifts(*, numel: int, shape: tuple[int, ...], tile_plan: Optional[TilePlan]) -> list[int]:
    """Offsets one region's data may be found at from another's, from the plan and the shape:
    one or two tiles (the previous iteration's ping-pong buffer), a core's range, and one
    index on each axis (the previous row, channel, batch element); either way."""
    found: list[int] = []
    if tile_plan is not None and tile_plan.spans:
        t = int(tile_plan.tile_elements)
        found += [t, 2 * t]
        by_core: dict[int, list] = defaultdict(list)
        for s in tile_plan.spans:
            by_core[s.core].append(s)
        found += sorted({max(s.stop for s in v) - min(s.start for s in v) for v in by_core.values()})
    for a in range(len(shape)):
        found.append(int(np.prod(shape[a + 1:], dtype=np.int64)))
    out = []
    for k in found:
        for s in (k, -k):
            if 0 < abs(s) < numel and s not in out:
                out.append(s)
    return out


def mapping_text(target: np.ndarray, shift: int, *, tile_plan: Optional[TilePlan], shape: tuple[int, ...]) -> str:
    """Which regions hold which regions' values, in words: "tile 1 of each of 48 cores holds
    tile 0's output" when the plan tells; else by the axis the shift is one index of; else
    the span."""
    what = "output"
    numel = int(np.prod(shape, dtype=np.int64))
    if tile_plan is not None and tile_plan.spans and shift in shifts(numel=numel, shape=(), tile_plan=tile_plan):
        return _tile_mapping(target, shift, tile_plan, what)
    for a in range(len(shape)):
        stride = int(np.prod(shape[a + 1:], dtype=np.int64))
        if stride == abs(shift) and shape[a] > 1:
            held = np.unique((target // stride) % shape[a])
            word = _axis_word(a, len(shape))
            step = 1 if shift > 0 else -1
            first = int(held[0])
            names = f"{word} {first}" if held.size == 1 else f"{held.size} {word}s ({word} {first}, ...)"
            return f"{names} on axis {a} hold{'s' if held.size == 1 else ''} the {what} of the {word} " \
                   f"{'before' if step > 0 else 'after'}"
    lo, hi = int(target.min()), int(target.max()) + 1
    return f"[{lo}, {hi}) holds the {what} of the elements {abs(shift)} {'before' if shift > 0 else 'after'}"


def _tile_mapping(target: np.ndarray, shift: int, tile_plan: TilePlan, what: str) -> str:
    spans = sorted(tile_plan.spans, key=lambda s: s.start)
    starts = np.asarray([s.start for s in spans])
    of = np.searchsorted(starts, target, side="right") - 1
    src = np.searchsorted(starts, target - shift, side="right") - 1
    pairs = {(spans[i].core, spans[i].tile, spans[j].core, spans[j].tile)
             for i, j in zip(np.unique(of).tolist(), [int(src[of == i][0]) for i in np.unique(of).tolist()])}
    tiles = {p[1] for p in pairs}
    sources = {p[3] for p in pairs}
    same_core = all(p[0] == p[2] for p in pairs)
    cores = {p[0] for p in pairs}
    if len(tiles) == 1 and len(sources) == 1 and same_core:
        (k,), (j,) = tiles, sources
        who = f"of each of {len(cores)} cores" if len(cores) > 1 else f"of core {next(iter(cores))}"
        return f"tile {k} {who} holds tile {j}'s {what}"
    if not same_core and len({(p[0], p[2]) for p in pairs}) == len(cores):
        return f"{len(pairs)} tiles of {len(cores)} cores hold the {what} of the core " \
               f"{abs(shift)} elements {'before' if shift > 0 else 'after'}"
    return f"{len(pairs)} tiles hold the {what} of the tile {abs(shift)} elements {'before' if shift > 0 else 'after'}"
