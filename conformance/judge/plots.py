"""What the HTML report draws for a row, as bounded counts computed where the row is judged.

Per category of the row's findings: a histogram of the ULP distances of its elements
(bins ``[2^(k-1), 2^k)``, plus ``0`` and ``nan``), the value classes of their inputs
(sign and binade, or zero, subnormal, inf, nan), and coarse grids of counts over the
kernel's plan (cores x tiles) and over the N-D shape (channel x spatial, or the two axes
of a matrix); and, for the transfer picture (output against input), a deterministic sample
of the batch's elements and of each category's differing ones, spread over their inputs.
Every size is bounded by the bins and the sample sizes, never by the tensor: a 16M-element
dump gives a few hundred numbers.  ``Plots.as_dict`` is the ``plots`` field of a JSON row.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from conformance import jit
from conformance.dtypes import info, to_bits, ulp_distance
from conformance.records import Grid, Plots, Sample, Shape, TilePlan
from conformance.triage import Batch, Claim
from conformance.triage.claims import as_slice

MAX_BINS = 64  # per grid axis: a grid has at most 64 x 64 cells per category
MAX_GRIDS = 4  # per row: the grids of its parts with the most errors
_STEP = 1 << 20  # elements handled at once (bounds the temporaries of a 16M-element dump)
SAMPLED_ALL = 96  # elements of the whole batch a row's transfer picture keeps
SAMPLED_PER_CATEGORY = 48  # differing elements per category it keeps


_ULP_NAMES = ["0"] + [str(1 << (k - 1)) for k in range(1, 65)] + ["nan"]


def _ulp_names(counts: np.ndarray) -> dict[str, int]:
    """The 66 ULP bins' counts by their labels (the bins counted, none)."""
    return {_ULP_NAMES[k]: int(counts[k]) for k in np.flatnonzero(counts).tolist()}


def _ulp_counts(actual: np.ndarray, golden: np.ndarray) -> dict[str, int]:
    """ULP bins and their counts: ``0``, a bin's lower edge ``2^(k-1)``, or ``nan``."""
    rec = info(actual.dtype)
    if jit.enabled() and rec.bits <= 32 and actual.shape == golden.shape:
        from conformance.metrics._compiled import metric_loops  # numba, imported on the first compiled call

        return _ulp_names(metric_loops.ulp_bin_counts(to_bits(np.ravel(actual)), to_bits(np.ravel(golden)),
                                                      bits=rec.bits, mant_bits=rec.mant_bits))
    dist = ulp_distance(actual, golden)
    v = dist.ulps.astype(np.uint64)
    _, bits = np.frexp(v.astype(np.float64))  # the bit length, or one more where the float rounded up
    bits = bits.astype(np.int64)
    bits -= (bits > 0) & (np.left_shift(np.uint64(1), np.maximum(bits - 1, 0).astype(np.uint64)) > v)
    counts = np.bincount(np.where(dist.nan, 65, bits), minlength=66)
    return {_ULP_NAMES[k]: int(counts[k]) for k in np.flatnonzero(counts).tolist()}


def _class_name(code: int, *, bias: int, top: int) -> str:
    """The class of an input from its code ``(sign * 2 + mantissa != 0) + 4 * exponent field``."""
    field_, sign, mant = code >> 2, "-" if code & 2 else "+", code & 1
    if field_ == top:
        return "nan" if mant else f"{sign}inf"
    if field_ == 0:
        return f"{sign}subnormal" if mant else f"{sign}0"
    return f"{sign}2^{field_ - bias}"


def _class_counts(x: np.ndarray) -> dict[str, int]:
    """Input classes and their counts: ``±0``, ``±subnormal``, ``±2^e`` (the binade), ``±inf``, ``nan``."""
    rec = info(x.dtype)
    if jit.enabled():
        from conformance.metrics._compiled import metric_loops  # numba, imported on the first compiled call

        counts = metric_loops.class_counts(to_bits(np.ravel(x)), mant_bits=rec.mant_bits, exp_mask=rec.exp_mask,
                                           sign_mask=rec.sign_mask)
    else:
        bits = to_bits(x).astype(np.uint64)
        field_ = (bits & np.uint64(rec.exp_mask)) >> np.uint64(rec.mant_bits)
        sign = (bits & np.uint64(rec.sign_mask)) != 0
        mant = (bits & np.uint64(rec.mant_mask)) != 0
        counts = np.bincount(field_.astype(np.int64) * 4 + sign * 2 + mant)
    return _class_names(counts, x.dtype)


def _class_names(counts: np.ndarray, dtype: np.dtype) -> dict[str, int]:
    """Class codes' counts by the classes' labels (several codes may share one)."""
    rec = info(dtype)
    found: Counter = Counter()
    for code in np.flatnonzero(counts).tolist():
        found[_class_name(code, bias=rec.bias, top=(1 << rec.exp_bits) - 1)] += int(counts[code])
    return dict(found)


# ----------------------------------------------------------------------------- grids

def _bins(length: int) -> int:
    """Elements per bin so that ``length`` fits in MAX_BINS bins."""
    return max(1, -(-length // MAX_BINS))


class _Plan:
    """Vectorised ``TilePlan.locate``: the (core, tile) of flat indices."""

    def __init__(self, tile_plan: TilePlan) -> None:
        spans = sorted(tile_plan.spans, key=lambda s: s.start)
        self.start = np.array([s.start for s in spans], dtype=np.int64)
        self.stop = np.array([s.stop for s in spans], dtype=np.int64)
        self.core = np.array([s.core for s in spans], dtype=np.int64)
        self.tile = np.array([s.tile for s in spans], dtype=np.int64)
        self.size = (int(self.core.max()) + 1, int(self.tile.max()) + 1) if spans else (0, 0)

    def cells(self, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        at = np.clip(np.searchsorted(self.start, flat, side="right") - 1, 0, None)
        inside = (flat >= self.start[at]) & (flat < self.stop[at]) if self.start.size else flat < 0
        return self.core[at], self.tile[at], inside


def _shape_axes(shape: Shape) -> Optional[tuple[tuple[str, str], tuple[int, int]]]:
    """Channel x spatial (batch summed) for 3 or more axes, the two axes of a matrix."""
    if len(shape) == 2:
        return ("axis 0", "axis 1"), (int(shape[0]), int(shape[1]))
    if len(shape) >= 3:
        spatial = int(np.prod(shape[2:]))
        return ("channel (axis 1)", f"spatial (axes 2-{len(shape) - 1})"), (int(shape[1]), spatial)
    return None


def _shape_cells(flat: np.ndarray, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = size
    return (flat // cols) % rows, flat % cols


@dataclass
class _Acc:
    """One grid being counted."""

    grid: Grid

    def add(self, category: str, r: np.ndarray, c: np.ndarray) -> None:
        (br, bc), width = self.grid.bins, MAX_BINS + 1
        counts = np.bincount((r // br) * width + c // bc)
        cnt = self.grid.cells.setdefault(category, Counter())
        for key in np.flatnonzero(counts).tolist():
            cnt[divmod(key, width)] += int(counts[key])


# ----------------------------------------------------------------------------- measure

class Tally:
    """The ULP bins and the input classes of a row's ``count`` mismatches, counted where they
    were found (the compiled chunk scan) for the claim that takes all of them; no ULP bins
    (``ulp`` empty) for outputs wider than 32 bits."""

    def __init__(self, x_dtype: np.dtype, out_dtype: np.dtype) -> None:
        rec = info(x_dtype)
        self.count = 0
        self.ulp = np.zeros(66 if info(out_dtype).bits <= 32 else 0, dtype=np.int64)
        self.classes = np.zeros(((rec.exp_mask >> rec.mant_bits) + 1) * 4, dtype=np.int64)

    def covers(self, index: np.ndarray) -> bool:
        """``index`` (unique batch positions of mismatches) is every one of them."""
        return index.size == self.count and int(index[0]) == 0 and int(index[-1]) == self.count - 1


def _steps(index: np.ndarray) -> Iterator[np.ndarray]:
    for lo in range(0, index.size, _STEP):
        yield index[lo:lo + _STEP]


def measure(claims: Sequence[Claim], batch: Batch, *, tile_plan: Optional[TilePlan] = None,
            shape: Optional[Shape] = None, part: str = "", tally: Optional[Tally] = None) -> Optional[Plots]:
    """The plot data of the in-tensor claims of one batch (``claim.index``: batch positions);
    None when no element differs.  A claim of every mismatch takes what ``tally`` counted
    of them, when given."""
    counted = [c for c in claims if c.in_tensor and c.index.size]
    if not counted:
        return None
    plan = _Plan(tile_plan) if tile_plan is not None and tile_plan.spans else None
    shaped = _shape_axes(shape) if shape is not None else None
    accs = []
    if plan is not None:
        accs.append(("plan", _Acc(Grid("plan", part, ("core", "tile"), plan.size,
                                       (_bins(plan.size[0]), _bins(plan.size[1]))))))
    if shaped is not None:
        axes, size = shaped
        accs.append(("shape", _Acc(Grid("shape", part, axes, size, (_bins(size[0]), _bins(size[1]))))))
    plots = Plots()
    for claim in counted:
        ulp = plots.ulp.setdefault(claim.category, Counter())
        values = plots.values.setdefault(claim.category, Counter())
        tallied = tally is not None and tally.covers(claim.index)
        if tallied:
            values.update(_class_names(tally.classes, batch.x.dtype))  # type: ignore[union-attr]
            ulp.update(_ulp_names(tally.ulp))  # type: ignore[union-attr]
            if tally.ulp.size and not accs:  # type: ignore[union-attr]
                continue
        for pos in _steps(np.asarray(claim.index)):
            at = as_slice(pos)  # consecutive positions (a reduced batch's mismatches): views, not copies
            if not tallied:
                values.update(_class_counts(batch.x[at]))
            if not (tallied and tally.ulp.size):  # type: ignore[union-attr]
                ulp.update(_ulp_counts(batch.actual[at], batch.golden[at]))
            if not accs:
                continue
            flat = np.asarray(batch.flat(pos), dtype=np.int64)
            for kind, acc in accs:
                if kind == "plan":
                    core, tile, inside = plan.cells(flat)  # type: ignore[union-attr]
                    acc.add(claim.category, core[inside], tile[inside])
                else:
                    acc.add(claim.category, *_shape_cells(flat, acc.grid.size))
    return Plots(plots.ulp, plots.values, tuple(a.grid for _, a in accs if a.grid.cells),
                 _transfer(counted, batch))


# ----------------------------------------------------------------------------- the transfer sample

def _evenly(n: int, k: int) -> np.ndarray:
    """At most ``k`` positions spread evenly over ``range(n)``, first and last included."""
    return np.unique(np.linspace(0, n - 1, num=min(n, k)).round().astype(np.int64))


def _floats(values: Optional[np.ndarray], at: np.ndarray) -> list[Optional[float]]:
    if values is None:
        return [None] * at.size
    with np.errstate(invalid="ignore"):  # a bfloat16 NaN widens with a warning
        return np.asarray(values[at]).astype(np.float64).tolist()


def _sampled(batch: Batch, at: np.ndarray, *, category: str) -> list[Sample]:
    columns = (_floats(v, at) for v in (batch.x, batch.dy, batch.golden, batch.actual))
    return [Sample(category, *values) for values in zip(*columns)]


def _spread(samples: Sequence[Sample], k: int) -> list[Sample]:
    """At most ``k`` of ``samples``, spread evenly over their inputs (NaN inputs last)."""
    if len(samples) <= k:
        return list(samples)
    ordered = sorted(samples, key=lambda s: (s.x != s.x, s.x if s.x == s.x else 0.0))
    return [ordered[i] for i in _evenly(len(ordered), k).tolist()]


def thinned(samples: Sequence[Sample]) -> tuple[Sample, ...]:
    """Each category's samples (and the whole batch's) spread down to their bound."""
    by_category: dict[str, list[Sample]] = {}
    for sample in samples:
        by_category.setdefault(sample.category, []).append(sample)
    return tuple(s for category, found in by_category.items()
                 for s in _spread(found, SAMPLED_PER_CATEGORY if category else SAMPLED_ALL))


_FEW_RUNS = 8  # up to this many ascending runs, ranks are found by search; beyond, by one sort


def _ascending_runs(flat: np.ndarray) -> list[np.ndarray]:
    """``flat`` cut where it stops ascending: a reduced batch holds its mismatches first (the compiled
    paths) and then its evidence, each in place; numpy's holds them in place already."""
    cuts = np.flatnonzero(flat[1:] <= flat[:-1]) + 1
    return np.split(flat, cuts) if cuts.size < _FEW_RUNS else []


def _place_ranks(batch: Batch, index: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The batch positions ``index`` whose places in the tensor are the ``ranks``-th smallest (ranks
    ascending, places distinct), without sorting every place: each rank's place is found by a search
    over the place values, counting through the few ascending runs."""
    flat = np.asarray(batch.flat(index), dtype=np.int64)
    runs = _ascending_runs(flat) if flat.size > 1 else [flat]
    if not runs:
        return index[np.argsort(flat, kind="stable")[ranks]]
    lo = np.full(ranks.size, min(int(r[0]) for r in runs), dtype=np.int64)
    hi = np.full(ranks.size, max(int(r[-1]) for r in runs), dtype=np.int64)
    while bool((lo < hi).any()):  # the smallest place with more than ``rank`` places at or below it
        mid = (lo + hi) // 2
        below = sum(np.searchsorted(r, mid, side="right") for r in runs)
        hi, lo = np.where(below > ranks, mid, hi), np.where(below > ranks, lo, mid + 1)
    starts = np.cumsum([0] + [r.size for r in runs[:-1]])
    at = np.zeros(ranks.size, dtype=np.int64)
    for start, run in zip(starts, runs):
        found = np.minimum(np.searchsorted(run, lo), run.size - 1)
        at = np.where(run[found] == lo, start + found, at)
    return index[at]


def _picked(batch: Batch, index: np.ndarray, k: int) -> np.ndarray:
    """At most ``k`` of the batch positions ``index``, picked evenly by their places in the tensor."""
    return _place_ranks(batch, index, _evenly(index.size, k)) if index.size else index


def _transfer(claims: Sequence[Claim], batch: Batch) -> tuple[Sample, ...]:
    """Elements of the whole batch, then each claim's differing ones: a few times the bound
    picked evenly by place in the tensor, then spread over their inputs."""
    found = _sampled(batch, _picked(batch, np.arange(batch.x.size, dtype=np.int64), 4 * SAMPLED_ALL), category="")
    for claim in claims:
        index = np.asarray(claim.index, dtype=np.int64)
        found += _sampled(batch, _picked(batch, index, 4 * SAMPLED_PER_CATEGORY), category=claim.category)
    return thinned(found)


# ----------------------------------------------------------------------------- merge

def _sum(a: dict[str, Counter], b: dict[str, Counter]) -> dict[str, Counter]:
    out = {k: Counter(v) for k, v in a.items()}
    for k, v in b.items():
        out.setdefault(k, Counter()).update(v)
    return out


def merge(a: Optional[Plots], b: Optional[Plots]) -> Optional[Plots]:
    """Two batches' plot data as one row's: counts summed, the grids with the most errors kept."""
    if a is None or b is None:
        return a or b
    grids = sorted(a.grids + b.grids, key=lambda g: -g.errors)[:MAX_GRIDS]
    return Plots(_sum(a.ulp, b.ulp), _sum(a.values, b.values), tuple(grids), thinned(a.transfer + b.transfer))


# ----------------------------------------------------------------------------- stored form

def to_state(plots: Plots) -> dict:
    """Plain dicts, tuples and ints (a sweep store keeps them; :func:`from_state` reads them back)."""
    grids = [{"kind": g.kind, "part": g.part, "axes": g.axes, "size": g.size, "bins": g.bins,
              "cells": {c: dict(n) for c, n in g.cells.items()}} for g in plots.grids]
    return {"ulp": {c: dict(n) for c, n in plots.ulp.items()},
            "values": {c: dict(n) for c, n in plots.values.items()}, "grids": grids,
            "transfer": [s.as_list() for s in plots.transfer]}


def from_state(state: dict) -> Plots:
    def counters(d: dict) -> dict[str, Counter]:
        return {c: Counter(n) for c, n in d.items()}

    grids = tuple(Grid(**{**g, "cells": counters(g["cells"])}) for g in state["grids"])
    return Plots(counters(state["ulp"]), counters(state["values"]), grids,
                 tuple(sample_of(s) for s in state.get("transfer", ())))


def sample_of(entry: Sequence) -> Sample:
    """A sample back from :meth:`Sample.as_list`."""
    category, *values = entry
    return Sample(category, *(None if v is None else float(v) for v in values))
