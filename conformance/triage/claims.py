"""What triage works on and what it produces: a batch, the claims, what is left, and merge.

A :class:`Batch` holds one evaluated input batch; a :class:`Claim` the elements one
category explains; :class:`State` what is still unexplained.  The element helpers
here (special values, slopes, the 1-ULP residue) are shared by every pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Optional

import numpy as np

from conformance import categories, jit
from conformance.dtypes import info, to_bits, ulp_distance
from conformance.reference import golden as ref
from conformance.reference.semantics import EXACT, Semantics

MEMO_WHOLE = 1 << 14  # a batch up to this size recomputes a semantics on every element at once
MEMO_ELEMENTS = 1 << 16  # a larger one memoises its predictions on up to this many elements
MEMO_BYTES = 1 << 27  # at most this much memoised per batch


@dataclass(eq=False)
class Batch:
    """One evaluated input batch, flattened: what went in, what came out, what is right.

    Triage's working view of the batch, not a record: it memoises its predictions (the
    golden recomputed under each semantics tried) for the one triage that owns it, and is
    never handed downstream (the judge takes the claims).

    A batch may stand for a bigger tensor it was reduced from (``conformance compare`` on
    a large dump keeps every mismatch and a sample of the matching elements): ``where``
    holds each element's flat index in that tensor, ``numel`` its size, and ``weight`` how
    many of its elements each of the batch's last ``weight.size`` elements stands for; the
    elements before those stand for one each.  A reduced batch holds its mismatches first,
    then the sample, each in tensor order, so the mismatches need no weights and are the
    batch's leading positions.  None means the batch is the whole tensor.  ``shape`` is the
    tensor's N-D shape (None: 1-D), which the regions of an axis are read from."""

    x: np.ndarray
    dy: Optional[np.ndarray]
    alpha: float
    direction: str
    out_dtype: str
    golden: np.ndarray
    actual: np.ndarray
    where: Optional[np.ndarray] = None
    numel: Optional[int] = None
    weight: Optional[np.ndarray] = None
    shape: Optional[tuple[int, ...]] = None
    #: Predictions on every element, per semantics, memoised within one triage (the beam search
    #: asks for a rule again across rounds, states and scopes); see :meth:`recomputed`.
    _predictions: dict = field(default_factory=dict, init=False, compare=False, repr=False)
    _memo_bytes: list = field(default_factory=lambda: [0], init=False, compare=False, repr=False)
    _source: Optional[tuple[Batch, np.ndarray]] = field(default=None, init=False, compare=False, repr=False)
    _gathered: list = field(default_factory=lambda: [None], init=False, compare=False, repr=False)

    @property
    def tensor_size(self) -> int:
        return int(self.x.size if self.numel is None else self.numel)

    @property
    def tensor_shape(self) -> tuple[int, ...]:
        """The tensor's shape: ``shape`` when it holds as many elements, else 1-D."""
        if self.shape is not None and int(np.prod(self.shape, dtype=np.int64)) == self.tensor_size:
            return tuple(int(d) for d in self.shape)
        return (self.tensor_size,)

    def subset(self, index: np.ndarray) -> Batch:
        """The batch of the elements ``index`` (ascending batch positions), standing for the
        same tensor: flat indices and weights kept."""
        weight = None
        if self.weight is not None:
            lead = self.x.size - self.weight.size
            weight = self.weight[index[index >= lead] - lead]
        sub = Batch(self.x[index], None if self.dy is None else self.dy[index], self.alpha, self.direction,
                    self.out_dtype, self.golden[index], self.actual[index], where=self.flat(index),
                    numel=self.tensor_size, weight=weight, shape=self.shape)
        sub._source = (self, index)  # its predictions on every element: from this one's
        return sub

    def flat(self, index: np.ndarray) -> np.ndarray:
        """Flat indices in the whole tensor of the batch elements ``index``."""
        return index if self.where is None else self.where[index]

    def before(self, lo: int) -> np.ndarray:
        """x of the batch elements that lie before flat index ``lo`` of the tensor."""
        return self.x[:lo] if self.where is None else self.x[self.where < lo]

    def weight_of(self, index: np.ndarray) -> np.ndarray:
        """How many tensor elements each of the batch elements ``index`` stands for."""
        out = np.ones(index.size)
        if self.weight is not None:
            lead = self.x.size - self.weight.size
            tail = index >= lead
            out[tail] = self.weight[index[tail] - lead]
        return out

    def recomputed(self, index: Optional[np.ndarray] = None, *, semantics: Semantics = EXACT) -> np.ndarray:
        """Golden recomputed under ``semantics``, on the elements ``index`` (default: all).

        Memoised within the batch (triage asks for a rule again across rounds, beam states
        and scopes): a batch of at most ``MEMO_WHOLE`` elements recomputes each semantics once on
        every element and takes ``index`` from it; a larger one keeps each prediction on at
        most ``MEMO_ELEMENTS`` elements by its index.  Every semantics is elementwise, so the
        bits are those of computing on ``index`` alone."""
        if semantics == EXACT:
            return self.golden if index is None else self.golden[index]
        whole = self._predictions.get(semantics)
        if whole is None and (self.x.size <= MEMO_WHOLE or index is None):
            whole = self._whole(semantics)
        if whole is not None:
            return whole if index is None else whole[index]
        if index.size > MEMO_ELEMENTS or self._memo_bytes[0] > MEMO_BYTES:
            return self._computed(index, semantics)
        key = (semantics, index.size, hash(np.ascontiguousarray(index).data.tobytes()))
        hit = self._predictions.get(key)
        if hit is None or not np.array_equal(hit[0], index):
            hit = self._predictions[key] = (index.copy(), self._computed(index, semantics))
            self._memo_bytes[0] += 2 * hit[1].nbytes + index.nbytes
        return hit[1]

    def trial(self, index: np.ndarray, *, semantics: Semantics) -> np.ndarray:
        """:meth:`recomputed` on ``index`` for a look that is seldom repeated: computed on those
        elements alone and not kept, unless the batch keeps the prediction already."""
        if semantics == EXACT or semantics in self._predictions:
            return self.recomputed(index, semantics=semantics)
        return self._computed(index, semantics)

    def _whole(self, semantics: Semantics) -> np.ndarray:
        """The prediction on every element, kept when the batch is small enough."""
        if self._source is not None and semantics in self._source[0]._predictions:
            parent, index = self._source
            whole = parent.recomputed(index, semantics=semantics)
        else:
            whole = self._computed(None, semantics)
        if self.x.size <= MEMO_ELEMENTS and whole.nbytes <= MEMO_BYTES - self._memo_bytes[0]:
            self._predictions[semantics] = whole
            self._memo_bytes[0] += whole.nbytes
        return whole

    def _computed(self, index: Optional[np.ndarray], semantics: Semantics) -> np.ndarray:
        x, dy = self._operands_at(index)
        return ref.compute(self.direction, x, self.alpha, dy=dy, out_dtype=self.out_dtype, semantics=semantics)

    def _operands_at(self, index: Optional[np.ndarray]) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """x and dy at ``index`` (None: every element).  The last pair gathered is kept for the
        same index array: the search computes each rule on one scope in turn."""
        if index is None:
            return self.x, self.dy
        last = self._gathered[0]
        if last is not None and last[0] is index:
            return last[1], last[2]
        x, dy = self.x[index], None if self.dy is None else self.dy[index]
        self._gathered[0] = (index, x, dy)
        return x, dy

    @cached_property
    def dtypes(self) -> tuple[str, str]:
        return info(self.x.dtype).name, self.out_dtype


@dataclass(frozen=True)
class Claim:
    """Elements one category explains.  ``index`` is outside [0, n) for red-zone writes."""

    category: str
    index: np.ndarray
    count: int
    summary: str
    detail: dict = field(default_factory=dict)
    in_tensor: bool = True

    def __post_init__(self) -> None:
        categories.check(self.category)


@dataclass
class State:
    """What is still unexplained, and the claims so far (``by_rules``: those the
    semantic pass proved by recomputing golden under a rule)."""

    remaining: np.ndarray
    claims: list = field(default_factory=list)
    by_rules: list = field(default_factory=list)

    def claim(self, claim: Claim, *, by_rule: bool = False) -> None:
        self.claims.append(claim)
        if by_rule:
            self.by_rules.append(claim)
        if claim.in_tensor:
            self.remaining = without(self.remaining, claim.index)

    def withdraw(self, claims: list) -> None:
        """Drop ``claims`` (their elements stay explained: the caller claims them again)."""
        gone = {id(c) for c in claims}
        self.claims = [c for c in self.claims if id(c) not in gone]
        self.by_rules = [c for c in self.by_rules if id(c) not in gone]


_MARKED = 8  # an index holding at least 1/8 of the places below its top is removed by marking


def without(remaining: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``np.setdiff1d(remaining, index, assume_unique=True)``: ascending ``remaining`` is
    searched (binary) instead of compared with every element of ``index``; a dense
    ``index`` marks its places in a mask instead (one pass, no search per element)."""
    if index is remaining:
        return remaining[:0]
    if remaining.size < 2 or index.size == 0 or not (remaining[1:] > remaining[:-1]).all():
        return np.setdiff1d(remaining, index, assume_unique=True)
    top = max(int(remaining[-1]), int(index.max())) + 1
    if _MARKED * index.size >= top and int(index.min()) >= 0:
        gone = np.zeros(top, dtype=bool)
        gone[index] = True
        return remaining[~gone[remaining]]
    at = np.minimum(np.searchsorted(remaining, index), remaining.size - 1)
    keep = np.ones(remaining.size, dtype=bool)
    keep[at[remaining[at] == index]] = False
    return remaining[keep]


def special_values(*arrays: Optional[np.ndarray]) -> np.ndarray:
    """Zeros, subnormals, infinities and NaN of any of ``arrays`` (x, dy, golden): rare, and
    where rules differ."""
    present = [a for a in arrays if a is not None]
    out = np.zeros(present[0].shape, dtype=bool)
    for v in present:  # the exponent field all zeros (zero, subnormal) or all ones (inf, NaN)
        top = info(v.dtype).exp_mask
        field = to_bits(v) & top
        out |= (field == 0) | (field == top)
    return out


def comparable(v: np.ndarray) -> np.ndarray:
    """``v`` in a dtype numpy compares, tests and takes ``abs`` of exactly: its own when
    numpy's (no float64 copy), else float64 (bfloat16)."""
    if v.dtype.kind == "f":
        return v
    with np.errstate(invalid="ignore"):  # NaN payloads of bfloat16 warn when widened
        return v.astype(np.float64)


PIECE = 1 << 20  # elements per piece where a large batch's temporaries would be big


def observed_slopes(batch: Batch, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The slopes the elements ``index`` show, actual / input (x forward, dy backward),
    wherever both are finite and the input is not zero (a zero actual counts as slope 0):
    every slope the output shows.  With them, which are informative (the exact result is a
    normal number) and which lie on the negative side (x < 0 forward; x <= 0 or NaN backward).
    Computed a piece at a time into arrays as long as ``index`` (a view of their start is
    returned: the pages past it are never touched)."""
    native = {batch.x.dtype.name, batch.actual.dtype.name, batch.golden.dtype.name} <= {"float32", "float64"}
    if jit.enabled() and native:
        from conformance.metrics._compiled import metric_loops  # numba, imported on the first compiled call

        operand = batch.x if batch.direction == "forward" else batch.dy
        at = as_slice(index)  # consecutive (a reduced batch's mismatches): read in order, no indices
        return metric_loops.slopes(batch.actual[at], operand[at], batch.x[at], batch.golden[at], None,
                                   smallest_normal=info(batch.out_dtype).smallest_normal,
                                   forward=batch.direction == "forward") if isinstance(at, slice) else \
            metric_loops.slopes(batch.actual, operand, batch.x, batch.golden, index,
                                smallest_normal=info(batch.out_dtype).smallest_normal,
                                forward=batch.direction == "forward")
    slopes, normal, negative = np.empty(index.size), np.empty(index.size, bool), np.empty(index.size, bool)
    done = 0
    for lo in range(0, index.size, PIECE):
        piece = _slopes_of_piece(batch, index[lo:lo + PIECE])
        end = done + piece[0].size
        slopes[done:end], normal[done:end], negative[done:end] = piece
        done = end
    return slopes[:done], normal[:done], negative[:done]


def as_slice(index: np.ndarray) -> Any:
    """``index`` as a slice when it is consecutive and ascending (taking is then a view)."""
    if index.size and int(index[-1]) - int(index[0]) == index.size - 1 and bool((index[1:] > index[:-1]).all()):
        return slice(int(index[0]), int(index[-1]) + 1)
    return index


def _slopes_of_piece(batch: Batch, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    at = as_slice(index)
    a, xs = comparable(batch.actual[at]), comparable(batch.x[at])
    v = xs if batch.direction == "forward" else comparable(batch.dy[at])
    ok = np.isfinite(a) & np.isfinite(v) & (v != 0)
    slopes = a[ok].astype(np.float64) / v[ok].astype(np.float64)
    g, xs = comparable(batch.golden[at][ok]), xs[ok]
    normal = (np.abs(g) >= info(batch.out_dtype).smallest_normal) & np.isfinite(g)
    # forward, x = v is finite and not zero: on one side or the other
    negative = xs < 0 if batch.direction == "forward" else (xs <= 0) | np.isnan(xs)
    return slopes, normal, negative


def beyond_rounding(batch: Batch, index: np.ndarray) -> np.ndarray:
    """The elements of ``index`` that the 1-ULP residue rule would not take: a non-finite
    value on a side, or more than 1 ULP apart."""
    if jit.enabled() and index.size:
        from conformance.metrics._compiled import metric_loops  # numba, imported on the first compiled call

        rec, at = info(batch.actual.dtype), as_slice(index)
        ab, gb = to_bits(batch.actual), to_bits(batch.golden)
        near = metric_loops.within_rounding(ab[at], gb[at], None, bits=rec.bits, mant_bits=rec.mant_bits) \
            if isinstance(at, slice) else metric_loops.within_rounding(ab, gb, index, bits=rec.bits,
                                                                         mant_bits=rec.mant_bits)
        return index[~near] if near.any() else index  # a defect's mismatches: most are beyond
    return reference_beyond_rounding(batch, index)


def reference_beyond_rounding(batch: Batch, index: np.ndarray) -> np.ndarray:
    """The numpy path of :func:`beyond_rounding`."""
    a, g = batch.actual[index], batch.golden[index]
    top = info(a.dtype).exp_mask  # an exponent field all ones: inf or NaN (no float64 copy of either side)
    finite = ((to_bits(a) & top) != top) & ((to_bits(g) & top) != top)
    return index[~(finite & (ulp_distance(a, g).ulps <= 1))]


def max_ulp(batch: Batch, index: np.ndarray) -> int:
    return ulp_distance(batch.actual[index], batch.golden[index]).max()


def merge_claims(claims: list[Claim]) -> list[Claim]:
    """One claim per category: indices joined, details merged (``categories.DETAIL_MERGE``),
    summaries listed."""
    by: dict[str, Claim] = {}
    for c in claims:
        prev = by.get(c.category)
        if prev is None:
            by[c.category] = c
            continue
        detail = categories.merge_detail(prev.detail, c.detail, scope="claims")
        summary = prev.summary if c.summary == prev.summary else f"{prev.summary}; {c.summary}"
        index = np.union1d(prev.index, c.index)
        by[c.category] = Claim(c.category, index, int(index.size), summary, detail)
    return list(by.values())
