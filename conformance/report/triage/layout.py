"""Layout mix-ups: the output is golden in another memory layout, read back flat.

A candidate transform maps each flat position of the output to the flat position of
golden it holds (or to a zero of padding): every axis permutation of the shape (rank 2
to 5; for 4-D, NCHW read as NHWC and back are named), and NCHW or NHWC packed to
NC1HWC0 (C0 elements of 32 bytes, or 16 for a 4-byte dtype) or unpacked from it,
zero padded, the packed tensor read back flat and cut or padded to the tensor's size.
A transform is ``layout`` when golden moved by it reproduces the actual bits of the
errors and contradicts none of the elements that are right.  Tried only when the
batch has a shape of rank >= 2 and most of it is wrong.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import permutations

import numpy as np

from conformance.report.metrics import match_mask
from conformance.report.triage.claims import Batch, Claim, State, beyond_rounding

_RANKS = range(2, 6)  # rank! permutations: at most 120 candidates
_SAMPLE = 256  # errors a candidate is first tried on
_ZERO, _UNKNOWN = -1, -2  # a source of padding; a source the batch does not hold
_C0_BY_ITEMSIZE = {1: (32,), 2: (16,), 4: (16, 8), 8: (4,)}  # 32-byte C0; 16 for the cube's fp32
_NAMED = {(0, 2, 3, 1): "written NHWC, read as NCHW", (0, 3, 1, 2): "written NCHW, read as NHWC"}

Source = Callable[[np.ndarray], np.ndarray]  # flat output positions -> flat golden positions


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


def _reproduced(batch: Batch, lookup: _Lookup, index: np.ndarray, t: Transform) -> tuple[np.ndarray, np.ndarray]:
    """Of the batch elements ``index``: whose source the batch holds, and of those which
    the transform reproduces bit for bit."""
    src = lookup(t.source(batch.flat(index).astype(np.int64)))
    known = src != _UNKNOWN
    pred = np.zeros(index.size, dtype=batch.golden.dtype)
    held = src >= 0
    pred[held] = batch.golden[src[held]]
    return known, known & match_mask(batch.actual[index], pred)


def _gate(batch: Batch, wrong: np.ndarray) -> bool:
    """A shape of rank 2 to 5 for the whole tensor, and a quarter of it wrong or more."""
    shape = batch.tensor_shape
    return (len(shape) in _RANKS and int(np.prod(shape)) == batch.tensor_size
            and wrong.size >= 4 and 4 * wrong.size >= batch.tensor_size)


def _sample(wrong: np.ndarray, *, most: int) -> np.ndarray:
    return wrong[np.linspace(0, wrong.size - 1, min(wrong.size, most)).astype(np.int64)]


def _passes_sample(batch: Batch, lookup: _Lookup, pick: np.ndarray, t: Transform) -> bool:
    known, hits = _reproduced(batch, lookup, pick, t)
    return known.sum() >= 4 and 10 * int(hits.sum()) >= 9 * int(known.sum())


def _proof(batch: Batch, lookup: _Lookup, state: State, t: Transform) -> tuple[np.ndarray, int]:
    """The remaining errors the transform reproduces, and the elements that are right and
    that it would change (its contradictions)."""
    everything = np.arange(batch.x.size)
    known, hits = _reproduced(batch, lookup, everything, t)
    wrong = np.zeros(batch.x.size, dtype=bool)
    wrong[state.remaining] = True
    right = match_mask(batch.actual, batch.golden)
    return everything[wrong & hits], int((known & ~hits & right).sum())


def _proved(batch: Batch, state: State) -> list[tuple[Transform, np.ndarray]]:
    """Each transform that reproduces at least 90% of the remaining errors and contradicts
    no element that is right, with the errors it reproduces (tried first on a sample of
    the errors beyond 1 ULP)."""
    rest = state.remaining
    pick = _sample(beyond_rounding(batch, _sample(rest, most=4 * _SAMPLE)), most=_SAMPLE)
    lookup, found = _Lookup(batch), []
    for t in transforms(batch.tensor_shape, itemsize=batch.golden.dtype.itemsize):
        if _passes_sample(batch, lookup, pick, t):
            index, contradicted = _proof(batch, lookup, state, t)
            if contradicted == 0 and 10 * index.size >= 9 * rest.size:
                found.append((t, index))
    return found


def claim_layout(batch: Batch, state: State) -> bool:
    """The output in another layout: the errors the first proved transform reproduces are
    ``layout``; the transforms that reproduce the same errors are its alternatives."""
    if not _gate(batch, state.remaining):
        return False
    found = _proved(batch, state)
    if not found:
        return False
    (t, index), others = found[0], [o for o, i in found[1:] if np.array_equal(i, found[0][1])]
    detail = {**t.detail, "shape": list(batch.tensor_shape), "explained": int(index.size), "contradicted": 0}
    if others:
        detail["alternatives"] = [o.name for o in others]
    summary = f"the output is golden in another layout: {t.name}" + "".join(f"; or equally: {o.name}" for o in others)
    state.claim(Claim("layout", index, int(index.size), summary, detail))
    return True
