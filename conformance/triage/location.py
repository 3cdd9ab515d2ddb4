"""Location proofs: errors explained by where they are, not by their values.

``tail-block`` by confinement to the tail regions of the tiling plan or to the end of
the tensor; ``stale-block`` for one block, a stride, or an output shifted by k elements.
Tile layouts are read as data.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Optional

import numpy as np

from conformance.dtypes import info, is_nan, to_bits
from conformance.metrics.exact import match_mask
from conformance.records import TilePlan
from conformance.reference.semantics import Semantics
from conformance.triage.claims import Batch, Claim, State, beyond_rounding, comparable, observed_slopes
from conformance.triage.regions import MIN_EVIDENCE, mapping_text, shifts, sorted_by_position
from conformance.triage.rules import slope_dtypes
from conformance.triage.value_classes import value_classes_of

_SHIFTS = np.array([k for k in range(-64, 65) if k])  # an output offset by up to 64 elements
_BLOCK_EVIDENCE, _STRIDE_EVIDENCE = 4, 8  # errors a block / a stride needs before it is one
_GAP = 3  # slots a block's edge may skip (elements a stale value happens to get right)


def claim_shift(batch: Batch, state: State, rest: np.ndarray) -> bool:
    """An output written k elements off: element i holds the exact result of element i - k
    (proved by the values themselves).  Claims those elements, and the k at the edge that
    have no source, as ``stale-block``."""
    n = batch.golden.size
    if batch.where is not None or rest.size < 4 or 2 * int(rest[-1] - rest[0] + 1) < n:
        return False  # a shift moves the whole output; a copied block is a block or a tail
    if sorted_by_position(batch.x[rest]):
        return False  # over sorted inputs a neighbour's result is a value a few ULP away
    a = comparable(batch.actual[rest])
    telling = rest[np.isfinite(a) & (a != 0)]  # a zero or NaN matches some neighbour by chance
    if telling.size < 4:
        return False
    pick = telling[np.linspace(0, telling.size - 1, min(telling.size, 256)).astype(np.int64)]
    src = pick[None, :] - _SHIFTS[:, None]
    ok = (src >= 0) & (src < n)
    hits = np.array([match_mask(batch.actual[pick[o]], batch.golden[s[o]]).sum()
                     for s, o in zip(src, ok)])
    best = int(np.argmax(hits))
    k = int(_SHIFTS[best])
    if 10 * hits[best] < 9 * pick.size:
        return False
    rem = state.remaining
    src = rem - k
    inside = (src >= 0) & (src < n)
    moved = np.zeros(rem.size, dtype=bool)
    moved[inside] = match_mask(batch.actual[rem[inside]], batch.golden[src[inside]])
    index = rem[moved | ~inside]
    if 10 * int(np.isin(rest, index).sum()) < 9 * rest.size:
        return False
    state.claim(Claim(
        "stale-block", index, index.size,
        f"the output is shifted: element i holds the result of element i{-k:+d} (written {abs(k)} "
        f"element{'s' if abs(k) > 1 else ''} {'late' if k > 0 else 'early'})",
        {"shift": k, "explained": int(index.size), "contradicted": 0}))
    return True


MAPPED_ROUNDS = 4  # mappings tried one after another on what the earlier ones left


def claim_mapped(batch: Batch, state: State, tile_plan: Optional[TilePlan]) -> None:
    """Regions holding another region's data: element i holds the exact result of element
    i - k, for an offset k the plan or the shape gives (another tile, the previous
    iteration's buffer, another core's range, the previous row or channel), proved value by
    value on the errors; several regions at once, the mapping stated; then, on the errors it
    leaves, the next offset so proved (a core whose last tile is another tile of it, say).
    ``stale-block``."""
    if batch.where is not None:
        return  # a reduced batch lacks the other regions' values
    offsets = shifts(numel=batch.golden.size, shape=batch.tensor_shape, tile_plan=tile_plan)
    for _ in range(MAPPED_ROUNDS):
        if not _claim_one_mapping(batch, state, offsets, tile_plan=tile_plan):
            return


def _claim_one_mapping(batch: Batch, state: State, offsets: list[int], *, tile_plan: Optional[TilePlan]) -> bool:
    """The offset that holds most of the telling errors left, claimed when it holds at least
    half of them; whether one was."""
    rest = beyond_rounding(batch, state.remaining)
    if rest.size < MIN_EVIDENCE or sorted_by_position(batch.x[rest]):
        return False
    a = comparable(batch.actual[rest])
    telling = rest[np.isfinite(a) & (a != 0)]  # a zero or NaN matches some other element by chance
    if telling.size < MIN_EVIDENCE:
        return False
    hits, k = max(((_held(batch, telling, k), k) for k in offsets), default=(0, 0), key=lambda t: t[0])
    if hits < MIN_EVIDENCE or 2 * hits < telling.size:
        return False
    n, rem = batch.golden.size, state.remaining
    ok = (rem - k >= 0) & (rem - k < n)
    moved = np.zeros(rem.size, dtype=bool)
    moved[ok] = match_mask(batch.actual[rem[ok]], batch.golden[rem[ok] - k])
    index = rem[moved]
    text = mapping_text(index, k, tile_plan=tile_plan, shape=batch.tensor_shape)
    state.claim(Claim("stale-block", index, index.size, f"{text} (proved value by value)",
                      {"shift": k, "mapping": text, "explained": int(index.size), "contradicted": 0}))
    return True


def _held(batch: Batch, index: np.ndarray, k: int) -> int:
    """How many of the elements ``index`` hold the exact result of element i - k (a wrong
    value copied along, a constant run, would match the written values by itself)."""
    at = index - k
    ok = (at >= 0) & (at < batch.golden.size)
    return int(match_mask(batch.actual[index[ok]], batch.golden[at[ok]]).sum())


def tail_regions(tile_plan: TilePlan, numel: int) -> list[tuple[int, int, dict]]:
    """(start, stop, description) of the tail regions: the tail tile of each core that has
    body tiles too, the tensor's last tile when it is shorter, the unaligned tail (last
    partial block plus the block before it, which a shifted-back copy overlaps) and
    anything past the last span."""
    tiles_per_core = Counter(s.core for s in tile_plan.spans)
    last = max(tile_plan.spans, key=lambda s: s.start, default=None)
    spans = [s for s in tile_plan.spans if s.is_tail and (tiles_per_core[s.core] > 1 or s is last)]
    regions = [(s.start, s.stop, {"core": s.core, "tile": s.tile, "start": s.start, "stop": s.stop})
               for s in spans]
    align = max(tile_plan.align_elements, 1)
    if numel % align:
        lo = max(0, numel - numel % align - align)
        regions.append((lo, numel, {"unaligned_tail": True, "start": lo, "stop": numel}))
        regions.append((numel - numel % align, numel,
                        {"last_partial_block": True, "start": numel - numel % align, "stop": numel}))
    covered = max((s.stop for s in tile_plan.spans), default=0)
    if covered < numel:
        regions.append((covered, numel, {"uncovered": True, "start": covered, "stop": numel}))
    return regions


def _confined(rest: np.ndarray, regions: list[tuple[int, int, dict]], numel: int) -> list[dict]:
    """The regions holding the errors, if they hold all of them, are at least half wrong
    (a tail defect garbles its tail, not one value class) and leave elements outside.
    When the tail tiles are the whole tensor (each core's only tile is a short one), nearly
    every element must be wrong.  Each error counts against the smallest region that holds it, so a 1-element dropped
    tile is not diluted by the wider unaligned-tail region around it."""
    mask = np.zeros(numel, dtype=bool)
    used, left = [], rest
    for lo, hi, desc in sorted(regions, key=lambda r: r[1] - r[0]):
        inside = (left >= lo) & (left < hi)
        if inside.any():
            mask[lo:hi] = True
            used.append(desc)
            left = left[~inside]
    dense = 2 * rest.size >= int(mask.sum())
    whole = mask.all() and 10 * rest.size >= 9 * numel  # a plan of tail tiles alone, all left unwritten
    return used if left.size == 0 and dense and (whole or not mask.all()) else []


def claim_tail(batch: Batch, state: State, tile_plan: Optional[TilePlan]) -> None:
    """Errors beyond 1-ULP residue, confined to the tail regions of the tiling plan or, with
    or without a plan, to the last k elements, are ``tail-block``."""
    rest = beyond_rounding(batch, state.remaining)
    if rest.size == 0:
        return
    n = batch.tensor_size
    used = _confined(batch.flat(rest), tail_regions(tile_plan, n), n) if tile_plan is not None else []
    if used:
        spans = [(d["start"], d["stop"]) for d in used]
        rest = absorb_contained(state, rest, covers=lambda at: _in_spans(batch.flat(at), spans)
                                and beyond_rounding(batch, at).size == at.size)
        lo, hi = int(batch.flat(rest).min()), int(batch.flat(rest).max()) + 1
        state.claim(Claim(
            "tail-block", rest, rest.size,
            "the remaining errors all lie in tail tiles or the unaligned tail; "
            + ("the rest is clean" if lo > 0 or hi < n else "the plan has no other tiles"),
            {"start": lo, "stop": hi, "regions": used, "align_elements": tile_plan.align_elements,
             "explained": int(rest.size), "contradicted": 0}))
    else:
        _last_elements(batch, state, rest)


def _last_elements(batch: Batch, state: State, rest: np.ndarray) -> None:
    """Errors confined to the end of the tensor, filling at least half of it, are
    ``tail-block`` "confined to the last k elements", value classes and zero signs
    included.  The end is where all errors are, when the same kinds of input before it
    are right (so the position, not the value, is what differs); otherwise the run of
    wrong elements that ends the tensor and holds every error no value class names."""
    n = batch.tensor_size
    if rest.size and _dense_end(batch.flat(rest), n) and _position_proved(batch, rest):
        wrong = batch.flat(state.remaining)  # the run of wrong elements it starts, zero signs included
        lo = _run_start(wrong, int(batch.flat(rest).min()))
        _claim_end(batch, state, state.remaining[wrong >= lo], n, proved=True)
        return
    odd = rest[~_named_by_value_class(batch, rest)]
    if odd.size == 0:
        return
    lo = _run_start(batch.flat(state.remaining), int(batch.flat(odd).min()))
    inside = rest[batch.flat(rest) >= lo]
    if not _dense_end(batch.flat(inside), n):
        return
    _claim_end(batch, state, state.remaining[batch.flat(state.remaining) >= lo], n,
               proved=_position_proved(batch, inside))


def _dense_end(rest: np.ndarray, n: int) -> bool:
    """The errors fill at least half of the end they span, and that end is no longer than
    the clean part before it (a tail leaves most of the tensor right; errors spread over
    nearly all of it are a value defect, not a position)."""
    lo = int(rest.min())
    return lo > 0 and 2 * rest.size >= n - lo and n - lo <= lo


def _run_start(remaining: np.ndarray, lo: int) -> int:
    """Start of the run of consecutive wrong elements (ascending flat indices) that ends at ``lo``."""
    p = int(np.searchsorted(remaining, remaining.dtype.type(lo)))  # in its dtype: no copy of remaining
    if p == 0 or remaining[p - 1] != lo - 1:
        return lo
    gaps = np.flatnonzero(np.diff(remaining[:p]) != 1)
    return int(remaining[gaps[-1] + 1 if gaps.size else 0])


def _claim_end(batch: Batch, state: State, index: np.ndarray, n: int, *, proved: bool) -> None:
    lo = int(batch.flat(index).min())
    index = absorb_contained(state, index, covers=lambda at: bool((batch.flat(at) >= lo).all()))
    why = "the same kinds of input before them are right" if proved else "the rest is clean"
    state.claim(Claim(
        "tail-block", index, index.size,
        f"the remaining errors are confined to the last {n - lo} elements [{lo}, {n}); {why}",
        {"start": lo, "stop": n, "last": n - lo, "explained": int(index.size), "contradicted": 0}))


def _value_kinds(v: np.ndarray) -> np.ndarray:
    """Sign and biased exponent of each value, NaN apart: what a value defect depends on."""
    bits = to_bits(v).astype(np.int64)
    rec = info(v.dtype)
    return np.where(is_nan(v), -1, bits >> rec.mant_bits)


def _position_proved(batch: Batch, rest: np.ndarray) -> bool:
    """For at least half of the errors the same kind of input occurs earlier, so the
    position, not the value, is what differs."""
    seen = np.isin(_value_kinds(batch.x[rest]), _value_kinds(batch.before(int(batch.flat(rest).min()))))
    return 2 * int(seen.sum()) >= rest.size


def _named_by_value_class(batch: Batch, index: np.ndarray) -> np.ndarray:
    """Elements a value class (overflow, NaN, signed zero) names."""
    masks = value_classes_of(batch.actual[index], batch.golden[index])[:4]
    return np.logical_or.reduce([m for _, m, _ in masks])


def claim_blocks(batch: Batch, state: State) -> None:
    """Errors beyond 1-ULP residue that fill one contiguous block, or every k-th element of
    a range, away from the tail, where the same kinds of input elsewhere are right, are
    ``stale-block``: the position, not the value, is what differs (a tile never written or
    written from the wrong buffer, a row, a stride of one lane)."""
    rest = beyond_rounding(batch, state.remaining)
    if rest.size < 2:
        return
    flat, wrong = batch.flat(rest), batch.flat(state.remaining)
    step = int(np.gcd.reduce(np.diff(flat))) if rest.size >= 3 else 1
    step = step if step > 1 else 1
    lo, hi = _block_edges(wrong, int(flat.min()), int(flat.max()), step)  # its edges may be zero signs
    pos = batch.flat(np.arange(batch.x.size))
    inside = (pos >= lo) & (pos < hi) & ((pos - lo) % step == 0)
    slots, n = (hi - 1 - lo) // step + 1, batch.tensor_size
    hidden = int((inside & (comparable(batch.golden) == 0) & (comparable(batch.actual) == 0)).sum())
    if 2 * int(inside[state.remaining].sum()) < slots - hidden or 2 * slots > n:
        return  # (a zero result is invisible under a block of zeros)
    if rest.size < (_STRIDE_EVIDENCE if step > 1 else _BLOCK_EVIDENCE):
        return  # a few leftovers line up by chance
    kinds = _value_kinds(batch.x)
    if 2 * int(np.isin(kinds[rest], kinds[~inside]).sum()) < rest.size or sorted_by_position(batch.x[rest]):
        return  # inputs of kinds seen nowhere else, or sorted: a value defect may explain it
    index = absorb_contained(state, state.remaining[inside[state.remaining]],
                             covers=lambda at: bool(inside[at].all()))
    where = f"[{lo}, {hi})" if step == 1 else f"every {step}th element of [{lo}, {hi})"
    state.claim(Claim(
        "stale-block", index, index.size,
        f"the remaining errors fill {where} ({_stale_values(batch, index)}); the same kinds of "
        "input elsewhere are right",
        {"start": lo, "stop": hi, "step": step, "explained": int(index.size), "contradicted": 0}))


def _block_edges(wrong: np.ndarray, first: int, last: int, step: int) -> tuple[int, int]:
    """[lo, hi) from ``first`` to ``last``, grown by ``step`` while one of the next few slots
    on either side is wrong too (``wrong``: ascending flat indices)."""
    def has(i: int) -> bool:
        at = int(np.searchsorted(wrong, i))
        return i >= 0 and at < wrong.size and int(wrong[at]) == i

    def edge(i: int, sign: int) -> int:
        while True:
            nxt = next((i + sign * k * step for k in range(1, _GAP + 1) if has(i + sign * k * step)), None)
            if nxt is None:
                return i
            i = nxt

    return edge(first, -1), edge(last, 1) + 1


def _stale_values(batch: Batch, index: np.ndarray) -> str:
    """What the wrong elements hold: zeros, or another block's exact results."""
    a = batch.actual[index]
    if (comparable(a) == 0).all():
        return "zeros"
    if batch.where is None:
        span = int(index.max() - index.min()) + 1
        for shift in (span, -span):
            src = index - shift
            if src.min() >= 0 and src.max() < batch.golden.size and match_mask(a, batch.golden[src]).all():
                return f"the results of the elements {abs(shift)} {'before' if shift > 0 else 'after'}"
    slopes, normal, negative = observed_slopes(batch, index)
    ratio, negative = slopes[normal], negative[normal]
    if negative.any():  # a per-block parameter: this block's negative side has its own slope
        c = float(np.median(ratio[negative]))
        for digits in range(1, 8):
            slope = float(f"{c:.{digits}g}")
            for held in (None, *slope_dtypes(batch.dtypes)):  # exact, or held in a narrower dtype
                y = batch.recomputed(index, semantics=Semantics(slope=slope, slope_dtype=held))
                if 10 * int(match_mask(y, a).sum()) >= 9 * index.size:
                    return f"computed with slope {slope!r}" + (f" held as {held}" if held else "")
    return "other values"


def _in_spans(flat: np.ndarray, spans: list[tuple[int, int]]) -> bool:
    """Every one of the flat indices ``flat`` lies in one of the [start, stop) ``spans``."""
    inside = np.zeros(flat.size, dtype=bool)
    for lo, hi in spans:
        inside |= (flat >= lo) & (flat < hi)
    return bool(inside.all())


def absorb_contained(state: State, index: np.ndarray, *, covers: Callable[[np.ndarray], bool]) -> np.ndarray:
    """A location claim's elements ``index``, joined by those of every claim the semantic
    pass proved by a rule whose elements all lie where the location claim explains them
    (``covers``); those claims are withdrawn.

    Minimal description: such a rule explains no element the location does not, so it
    adds its cost and explains nothing more.  When a real flush coincides with a stride
    the rule is no better: a flush-to-zero kernel flushes every subnormal result, so if
    the only ones it explains lie in the stride both explain them, and the stride
    explains strictly more; the one explanation is the location.  A rule that also
    explains an element outside (a flush over the whole batch beside a stale block)
    keeps every element it explains."""
    inside = [c for c in state.by_rules if c.in_tensor and c.index.size and covers(c.index)]
    if not inside:
        return index
    state.withdraw(inside)
    return np.union1d(index, np.concatenate([c.index for c in inside]))
