"""Layout mix-ups: the output is golden in another memory layout, read back flat.

A candidate transform maps each flat position of the output to the flat position of
golden it holds (or to a zero of padding): every axis permutation of the shape (rank 2
to 5; for 4-D, NCHW read as NHWC and back are named), and NCHW or NHWC packed to
NC1HWC0 (C0 elements of 32 bytes, or 16 for a 4-byte dtype) or unpacked from it,
zero padded, the packed tensor read back flat and cut or padded to the tensor's size.
A transform is found without assuming any value rule (the errors' values agree with
golden moved by it, by ratio within one input sign or by magnitude order, well above a
random shuffle's agreement), then proved by recomputation: the value passes run on golden,
x and dy moved by it, and golden moved, alone or under their rules, must reproduce the
errors bit for bit and contradict no element that is right.  The errors the move alone
reproduces are ``layout``; those that need a rule on top keep the rule's category.
Tried only when the batch has a shape of rank >= 2 and a quarter of it is wrong.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from itertools import permutations
from typing import Optional

import numpy as np

from conformance.dtypes import info, to_bits
from conformance.metrics.exact import match_mask
from conformance.triage.claims import Batch, Claim, State, beyond_rounding, comparable
from conformance.triage.value_classes import value_classes_of

_RANKS = range(2, 6)  # rank! permutations: at most 120 candidates
_SAMPLE = 256  # errors a candidate is first tried on
_ZERO, _UNKNOWN = -1, -2  # a source of padding; a source the batch does not hold
_C0_BY_ITEMSIZE = {1: (32,), 2: (16,), 4: (16, 8), 8: (4,)}  # 32-byte C0; 16 for the cube's fp32
_AGREE = 0.5  # share of sampled errors whose value agrees with golden moved: a candidate
_LIFT = 0.5  # of the way from a random shuffle's agreement (chance, on this data) to all
_SPREAD = 2.0 ** -4  # log2 ratio within a group's median: one slope, formulation or precision
_GROUP = 4  # elements a group of one sign relation needs before its median tells
_TRIED = 2  # candidates proved by recomputation, the most agreeing first
_NAMED = {(0, 2, 3, 1): "written NHWC, read as NCHW", (0, 3, 1, 2): "written NCHW, read as NHWC"}

Source = Callable[[np.ndarray], np.ndarray]  # flat output positions -> flat golden positions
Values = Callable[[Batch, State], None]  # the value passes (rules, clamps) run on a batch


@dataclass(frozen=True)
class Transform:
    """One way the output's memory may hold golden: what it is called, and where each
    output element comes from."""

    name: str
    detail: dict
    source: Source


def strides(shape: tuple[int, ...]) -> np.ndarray:
    """C-order element strides of ``shape``."""
    out = np.ones(len(shape), dtype=np.int64)
    for a in range(len(shape) - 2, -1, -1):
        out[a] = out[a + 1] * shape[a + 1]
    return out


def permuted_source(shape: tuple[int, ...], perm: tuple[int, ...]) -> Source:
    """Golden of ``shape`` transposed by ``perm`` and read flat: output position i is
    element j of the transposed array, which is golden's element j[a] on axis perm[a]."""
    moved, step = tuple(shape[p] for p in perm), strides(shape)[list(perm)]

    def source(flat: np.ndarray) -> np.ndarray:
        at = np.unravel_index(flat, moved)
        return sum((j * s for j, s in zip(at, step)), np.zeros(flat.shape, np.int64))

    return source


def _spatial(channel: int) -> tuple[int, int]:
    """The two spatial axes (H, W) of a 4-D shape whose channel axis is ``channel``."""
    h, w = (a for a in (1, 2, 3) if a != channel)
    return h, w


def packed_shape(shape: tuple[int, ...], *, channel: int, c0: int) -> tuple[int, ...]:
    """NC1HWC0 of a 4-D ``shape`` (channel axis ``channel``): C padded to C1 * C0."""
    h, w = _spatial(channel)
    return shape[0], -(-shape[channel] // c0), shape[h], shape[w], c0


def packed_source(shape: tuple[int, ...], *, channel: int, c0: int) -> Source:
    """Golden packed to NC1HWC0 and read back flat as ``shape``: positions in the padded
    channels hold zeros."""
    packed, step = packed_shape(shape, channel=channel, c0=c0), strides(shape)
    (h, w), c = _spatial(channel), shape[channel]

    def source(flat: np.ndarray) -> np.ndarray:
        b, c1, y, x, lane = np.unravel_index(flat, packed)
        ch = c1 * c0 + lane
        src = b * step[0] + ch * step[channel] + y * step[h] + x * step[w]
        return np.where(ch < c, src, _ZERO)

    return source


def unpacked_source(shape: tuple[int, ...], *, channel: int, c0: int) -> Source:
    """Golden's flat memory read as NC1HWC0 (zeros past its end) and unpacked to ``shape``."""
    packed, numel = packed_shape(shape, channel=channel, c0=c0), int(np.prod(shape))
    h, w = _spatial(channel)

    def source(flat: np.ndarray) -> np.ndarray:
        at = np.unravel_index(flat, shape)
        ch = at[channel]
        q = np.ravel_multi_index((at[0], ch // c0, at[h], at[w], ch % c0), packed)
        return np.where(q < numel, q, _ZERO)

    return source


def _permutations(shape: tuple[int, ...]) -> Iterator[Transform]:
    """Every permutation that moves data (axes of size 1 do not), one per memory order:
    the named 4-D ones first."""
    seen = set()
    for perm in sorted(permutations(range(len(shape))), key=lambda p: p not in _NAMED):
        order = tuple(a for a in perm if shape[a] != 1)
        if order in seen or list(order) == sorted(order):
            continue
        seen.add(order)
        name = _NAMED.get(perm, f"permutation {perm}") if len(shape) == 4 else f"permutation {perm}"
        yield Transform(name, {"transform": name, "permutation": list(perm)}, permuted_source(shape, perm))


def _packings(shape: tuple[int, ...], *, itemsize: int) -> Iterator[Transform]:
    """NCHW and NHWC packed to NC1HWC0 and unpacked from it, each C0 the dtype has."""
    for c0 in _C0_BY_ITEMSIZE.get(itemsize, ()):
        for channel, layout in ((1, "NCHW"), (3, "NHWC")):
            base = {"c0": c0, "packed_shape": list(packed_shape(shape, channel=channel, c0=c0))}
            name = f"written NC1HWC0 with C0={c0}, read as {layout}"
            yield Transform(name, {"transform": name, **base}, packed_source(shape, channel=channel, c0=c0))
            name = f"written {layout}, read as NC1HWC0 with C0={c0}"
            yield Transform(name, {"transform": name, **base}, unpacked_source(shape, channel=channel, c0=c0))


def transforms(shape: tuple[int, ...], *, itemsize: int) -> Iterator[Transform]:
    """The candidate layouts of a tensor of ``shape`` (none below rank 2 or above 5)."""
    if len(shape) not in _RANKS:
        return
    yield from _permutations(shape)
    if len(shape) == 4:
        yield from _packings(shape, itemsize=itemsize)


class _Lookup:
    """Batch positions of flat tensor indices (``_UNKNOWN`` where the batch has no such
    element: a reduced batch holds the mismatches and a sample)."""

    def __init__(self, batch: Batch) -> None:
        self.order = None if batch.where is None else np.argsort(batch.where, kind="stable")
        self.known = None if batch.where is None else batch.where[self.order]

    def __call__(self, flat: np.ndarray) -> np.ndarray:
        if self.order is None:
            return flat
        at = np.minimum(np.searchsorted(self.known, flat), self.known.size - 1)
        found = self.known[at] == flat
        return np.where(flat == _ZERO, _ZERO, np.where(found, self.order[at], _UNKNOWN))


def moved_batch(batch: Batch, t: Transform, *, lookup: Optional[_Lookup] = None) -> Batch:
    """``batch`` with x, dy and golden moved by ``t``: each output position gets the inputs
    and the exact result of the element it holds (zeros for padding; its own where a
    reduced batch lacks the source).  The actual output stays as it is."""
    lookup = _Lookup(batch) if lookup is None else lookup
    here = np.arange(batch.x.size)
    src = lookup(t.source(batch.flat(here).astype(np.int64)))
    take, pad = np.where(src >= 0, src, here), src == _ZERO

    def moved(v: Optional[np.ndarray]) -> Optional[np.ndarray]:
        if v is None:
            return None
        out = v[take]
        out[pad] = 0
        return out

    return replace(batch, x=moved(batch.x), dy=moved(batch.dy), golden=moved(batch.golden))


def _agreement(actual: np.ndarray, moved: np.ndarray, side: np.ndarray, valid: np.ndarray, *,
               tiny: float) -> np.ndarray:
    """Per row of ``moved`` (golden or an input, moved by one transform each), the share of
    the ``valid`` elements whose value agrees with ``actual``, whatever value rule is on
    top: the same bits, both below the smallest normal (a flush), or, within a group of
    one input sign (``side``) and one sign relation, a log2 magnitude ratio within
    ``_SPREAD`` of the group's median (a slope, a formulation, a narrower precision) or
    zero for most of the group (a slope 0)."""
    a, g = comparable(actual).astype(np.float64)[None, :], comparable(moved).astype(np.float64)
    agree = (to_bits(moved) == to_bits(actual)[None, :]) | (np.isnan(a) & np.isnan(g))
    agree = valid & (agree | ((np.abs(a) < tiny) & (np.abs(g) < tiny)))
    zero = valid & (a == 0) & (g != 0) & ~agree
    for s in (side, ~side):
        most = 2 * np.count_nonzero(zero & s, axis=1) >= np.count_nonzero(valid & s & (g != 0), axis=1)
        agree |= zero & s & most[:, None]
    both = valid & np.isfinite(a) & np.isfinite(g) & (a != 0) & (g != 0) & ~agree
    with np.errstate(divide="ignore", invalid="ignore"):  # log2 of zeros the mask leaves out
        ratio = np.where(both, np.log2(np.abs(a)) - np.log2(np.abs(g)), np.nan)
    flipped = (a < 0) != (g < 0)
    close = np.zeros(g.shape, dtype=bool)
    for group in (side & flipped, side & ~flipped, ~side & flipped, ~side & ~flipped):
        member = both & group
        enough = np.count_nonzero(member, axis=1) >= _GROUP
        if enough.any():
            with warnings.catch_warnings():  # a row without members has no median
                warnings.simplefilter("ignore", RuntimeWarning)
                centre = np.nanmedian(np.where(member, ratio, np.nan), axis=1)
            close |= member & enough[:, None] & (np.abs(ratio - centre[:, None]) <= _SPREAD)
    return (agree.sum(axis=1) + close.sum(axis=1)) / np.maximum(valid.sum(axis=1), 1)


def _concordance(actual: np.ndarray, moved: np.ndarray, side: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per row of ``moved``, the share of neighbours in its magnitude order, within one
    input sign, whose actual magnitudes keep that order: what any value rule monotone on
    each side keeps (a slope, a narrowing that overflows to inf and underflows to 0, a clamp)."""
    a, g = np.abs(comparable(actual).astype(np.float64)), np.abs(comparable(moved).astype(np.float64))
    ok = valid & ~np.isnan(a)[None, :] & ~np.isnan(g)
    group = np.where(ok, side.astype(np.int8), 2)  # 2: left out, sorted last
    order = np.argsort(np.where(ok, g, np.inf), axis=1, kind="stable")
    order = np.take_along_axis(order, np.argsort(np.take_along_axis(group, order, 1), axis=1, kind="stable"), 1)
    ranked, kind = a[order], np.take_along_axis(group, order, 1)
    pair = (kind[:, 1:] == kind[:, :-1]) & (kind[:, 1:] < 2)
    kept = np.count_nonzero(pair & (ranked[:, 1:] >= ranked[:, :-1]), axis=1)
    return kept / np.maximum(np.count_nonzero(pair, axis=1), 1)


def _scores(batch: Batch, pick: np.ndarray, src: np.ndarray, *, tiny: float) -> np.ndarray:
    """For the elements ``pick`` and each row of sources ``src`` (batch positions,
    ``_ZERO`` for padding, ``_UNKNOWN`` where a reduced batch lacks one): how they agree
    with golden so taken, or with x for a gradient (a formula may swap dy and x; dy itself
    tells what golden does).  Columns: the value agreement, the magnitude concordance,
    each the best over those references."""
    valid, side = src != _UNKNOWN, comparable(_taken(batch.x, src)) < 0
    actual, best = batch.actual[pick], np.zeros((src.shape[0], 2))
    for values in [batch.golden] + ([batch.x] if batch.dy is not None else []):
        moved = _taken(values, src)
        found = np.stack([_agreement(actual, moved, side, valid, tiny=tiny),
                          _concordance(actual, moved, side, valid)], axis=1)
        best = np.maximum(best, found)
    return best


def _taken(values: np.ndarray, src: np.ndarray) -> np.ndarray:
    """``values`` at the batch positions ``src`` (zero for padding or an unknown source)."""
    out = np.zeros(src.shape, dtype=values.dtype)
    held = src >= 0
    out[held] = values[src[held]]
    return out


def _candidates(batch: Batch, state: State, lookup: _Lookup) -> list[Transform]:
    """The transforms under which the sampled errors agree with golden (or an input)
    moved, by value or by magnitude order: at least ``_AGREE``, and ``_LIFT`` of the way
    from a random shuffle's agreement (chance, on this data) to all.  Found without
    assuming any value rule, all transforms scored at once; those golden moved reproduces
    bit for bit on more of them first, then the most agreeing; proved by recomputation
    afterwards."""
    pick = _sample(beyond_rounding(batch, _sample(state.remaining, most=4 * _SAMPLE)), most=_SAMPLE)
    if pick.size < 4:
        return []
    flat = batch.flat(pick).astype(np.int64)
    found = list(transforms(batch.tensor_shape, itemsize=batch.golden.dtype.itemsize))
    if not found:
        return []
    shuffled = np.random.default_rng(0).integers(0, batch.x.size, pick.size)
    src = np.stack([lookup(t.source(flat)) for t in found] + [shuffled])
    scores = _scores(batch, pick, src, tiny=info(batch.out_dtype).smallest_normal)
    chance, scores = scores[-1], scores[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        lift = np.where(chance < 1, (scores - chance) / (1 - chance), 0.0).max(axis=1)
    ok = (np.count_nonzero(src[:-1] != _UNKNOWN, axis=1) >= 4) & (lift >= _LIFT) & (scores.max(axis=1) >= _AGREE)
    alone = _exact(batch, pick, src[:-1])
    return [found[i] for i in sorted(np.flatnonzero(ok).tolist(), key=lambda i: (-alone[i], -lift[i], i))]


def _exact(batch: Batch, pick: np.ndarray, src: np.ndarray) -> np.ndarray:
    """For each row of sources ``src``: how many of the elements ``pick`` golden so moved
    reproduces bit for bit, with no value rule on top (the shorter proof goes first)."""
    actual = batch.actual[pick]
    return np.array([int(np.count_nonzero(match_mask(actual, _taken(batch.golden, row)) & (row != _UNKNOWN)))
                     for row in src])


@dataclass
class _Proof:
    """A transform proved: the batch moved by it, the errors golden moved reproduces by
    itself, and the claims of the value rules on top of it (on the moved batch)."""

    transform: Transform
    moved: Batch
    alone: np.ndarray
    trial: State
    shifted: np.ndarray  # where the move changes the inputs


def _masks(batch: Batch, state: State) -> tuple[np.ndarray, np.ndarray]:
    """Which elements are still wrong, and which are right (no earlier pass claimed them)."""
    wrong, claimed = np.zeros(batch.x.size, dtype=bool), np.zeros(batch.x.size, dtype=bool)
    wrong[state.remaining] = True
    for c in state.claims:
        if c.in_tensor:
            claimed[c.index] = True
    return wrong, ~wrong & ~claimed


def _prove(batch: Batch, state: State, t: Transform, lookup: _Lookup, values: Values) -> Optional[_Proof]:
    """``t`` with the value rules on golden moved by it (``values``, on every element it
    alone gets wrong) reproduces at least half of the errors bit for bit and, with the
    value classes on golden moved (a narrowed operand's overflow, a NaN, a zero's sign),
    at least 90%; the move itself is needed for at least half of them (their inputs
    differ); and it contradicts no element that is right."""
    moved = moved_batch(batch, t, lookup=lookup)
    wrong, right = _masks(batch, state)
    hits = match_mask(batch.actual, moved.golden)
    pad = lookup(t.source(batch.flat(np.arange(batch.x.size)).astype(np.int64))) == _ZERO
    trial = _trial(moved, np.flatnonzero((wrong | right) & ~hits), pad, values)
    left = pad & (wrong | right) & ~hits  # padding no rule computes
    left[trial.remaining] = True
    classed = np.zeros(batch.x.size, dtype=bool)
    rest = trial.remaining
    named = value_classes_of(batch.actual[rest], moved.golden[rest])[:4]  # overflow, NaN, zero signs
    classed[rest] = np.logical_or.reduce([m for _, m, _ in named])
    proved, shifted = wrong & ~left, _shifted(batch, moved)
    errors = state.remaining.size
    if (right & left & ~classed).any() or 2 * int(proved.sum()) < errors:
        return None
    if 10 * int((proved | (wrong & classed)).sum()) < 9 * errors or 2 * int((proved & shifted).sum()) < errors:
        return None
    return _Proof(t, moved, np.flatnonzero(wrong & hits), trial, shifted)


def _trial(moved: Batch, open_: np.ndarray, pad: np.ndarray, values: Values) -> State:
    """The value passes on the elements ``open_`` of the moved batch, the padding left out
    (no kernel computes it: its zeros are no evidence for or against a rule); the claims
    and what is left, in the moved batch's positions."""
    if not pad.any():
        trial = State(open_)
        values(moved, trial)
        return trial
    keep = np.flatnonzero(~pad)
    sub = State(np.searchsorted(keep, open_[~pad[open_]]))
    values(moved.subset(keep), sub)
    out = State(keep[sub.remaining])
    ruled = {id(c) for c in sub.by_rules}
    for c in sub.claims:
        lifted = replace(c, index=keep[c.index]) if c.in_tensor else c
        out.claims.append(lifted)
        if id(c) in ruled:
            out.by_rules.append(lifted)
    return out


def _shifted(batch: Batch, moved: Batch) -> np.ndarray:
    """Where the move changes the inputs (there the transform is needed)."""
    out = to_bits(moved.x) != to_bits(batch.x)
    if batch.dy is not None:
        out |= to_bits(moved.dy) != to_bits(batch.dy)
    return out


def _commit(batch: Batch, state: State, proof: _Proof, others: list[Transform]) -> None:
    """``layout`` for the errors golden moved reproduces by itself, then each value rule's
    claim on the moved batch, cut to the errors, saying it holds on golden moved.  When
    the move alone reproduces none (every value also changed), ``layout`` takes those
    where the move is needed and names the rules in its detail; the rules keep the rest."""
    t, wrong = proof.transform, _masks(batch, state)[0]
    ruled = [(c, replace(c, index=c.index[wrong[c.index]])) for c in proof.trial.claims if c.in_tensor]
    ruled = [(c, cut) for c, cut in ruled if cut.index.size]
    alone, composed = proof.alone, [f"{cut.category}: {cut.summary}" for _, cut in ruled]
    if not alone.size and ruled:  # where the move is needed; the rules keep the rest
        alone = np.concatenate([cut.index[proof.shifted[cut.index]] for _, cut in ruled])
        alone.sort()
        ruled = [(c, replace(cut, index=cut.index[~proof.shifted[cut.index]])) for c, cut in ruled]
        ruled = [(c, cut) for c, cut in ruled if cut.index.size]
    detail = {**t.detail, "shape": list(batch.tensor_shape), "explained": int(alone.size), "contradicted": 0}
    if others:
        detail["alternatives"] = [o.name for o in others]
    if composed:
        detail["composed_with"] = composed
    summary = f"the output is golden in another layout: {t.name}" + "".join(f"; or equally: {o.name}" for o in others)
    if composed and proof.alone.size:
        extra = sum(cut.index.size for _, cut in ruled)
        cats = ", ".join(dict.fromkeys(cut.category for _, cut in ruled))
        summary += f"; {extra} more errors need a value rule on top of it ({cats})"
    elif composed:
        summary += "; every value moved also needs " + "; ".join(composed)
    state.claim(Claim("layout", alone, int(alone.size), summary, detail))
    for c, cut in ruled:
        note = {**cut.detail, "explained": int(cut.index.size), "layout": t.name}
        state.claim(replace(cut, count=int(cut.index.size), detail=note,
                            summary=f"{cut.summary} (on golden moved: {t.name})"),
                    by_rule=any(c is r for r in proof.trial.by_rules))


def _same_memory(batch: Batch, t: Transform, others: list[Transform]) -> list[Transform]:
    """The transforms that hold every element where ``t`` does (the same memory order)."""
    flat = batch.flat(np.arange(batch.x.size)).astype(np.int64)
    mine = t.source(flat)
    return [o for o in others if o is not t and np.array_equal(o.source(flat), mine)]


def _gate(batch: Batch, wrong: np.ndarray) -> bool:
    """A shape of rank 2 to 5 for the whole tensor, and a quarter of it wrong or more."""
    shape = batch.tensor_shape
    return (len(shape) in _RANKS and int(np.prod(shape)) == batch.tensor_size
            and wrong.size >= 4 and 4 * wrong.size >= batch.tensor_size)


def _sample(wrong: np.ndarray, *, most: int) -> np.ndarray:
    return wrong[np.linspace(0, wrong.size - 1, min(wrong.size, most)).astype(np.int64)]


def claim_layout(batch: Batch, state: State, *, values: Values) -> Optional[Batch]:
    """The output in another layout, perhaps with a value rule on top: the first candidate
    transform proved with the value rules ``values`` (the attribution and clamp passes)
    on golden moved by it.  Its errors are ``layout`` and the value rules' claims; the
    batch moved by it is returned, for the passes after ``values`` to run on (None: no
    layout proved; ``values`` is then still to run)."""
    if not _gate(batch, state.remaining):
        return None
    lookup = _Lookup(batch)
    found = _candidates(batch, state, lookup)
    for t in found[:_TRIED]:
        proof = _prove(batch, state, t, lookup, values)
        if proof is not None:
            _commit(batch, state, proof, _same_memory(batch, t, found))
            return proof.moved
    return None
