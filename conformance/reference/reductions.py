"""dweight's sum as implementations compute it: in an order, in an accumulator dtype.

The golden's dweight is the exact sum rounded once (:func:`conformance.reference.prelu.dweight`).
A framework instead forms each share ``x * dy`` in some dtype (``terms``: the input's, or
exactly), adds the shares of one weight element in an order (``sequential`` left to right in
memory order; ``pairwise`` as numpy's ``add.reduce`` does; ``eigen`` as TensorFlow's CPU ``Sum``
does, :mod:`conformance.reference.eigen_reduction`; ``cascade`` as torch's ``at::sum`` does on CPU,
:mod:`conformance.reference.torch_reduction`; per ``tile`` of that many elements first, the
tiles' partial sums then added in order, as a kernel that reduces each tile on chip does), in an
``accumulator`` dtype, and rounds the sum to the output dtype.  A sequential sum in a 16-bit
accumulator adds each share unrounded and rounds each partial sum once to the accumulator, so an
exact share (``terms`` None) is rounded only as part of the sum: XLA:CPU's float16 reduce fused
with the product that forms its shares (JAX, on a host where XLA fuses it; where it widens the
float16 operations one by one, the shares are rounded first).  A
:class:`Reduction` names one such way; :data:`CATALOGUE` lists the ways triage tries.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from conformance.dtypes import DTypeLike, info
from conformance.reference.eigen_reduction import eigen_sums
from conformance.reference.exact import cast_exact, resolve_pair
from conformance.reference.prelu import expanded_weight, groups_of, terms
from conformance.reference.torch_reduction import cascade_sums

Order = Literal["sequential", "pairwise", "eigen", "cascade"]


@dataclass(frozen=True)
class Reduction:
    """One way to sum dweight: shares rounded to ``terms`` (None: exact), added in ``order`` in
    ``accumulator`` (a dtype's name, or ``input``: the input's own), per ``tile`` elements first when given."""

    accumulator: str = "float32"
    order: Order = "sequential"
    terms: Optional[str] = None  # "input": each share rounded to the input dtype first
    tile: Optional[int] = None

    def __str__(self) -> str:
        shares = "shares rounded to the input dtype" if self.terms == "input" else "exact shares"
        tiles = f", per tile of {self.tile} then across tiles" if self.tile else ""
        acc = "the input dtype" if self.accumulator == "input" else self.accumulator
        order = {"eigen": "sum in Eigen's order (TensorFlow's CPU Sum)",
                 "cascade": "cascade sum (torch's at::sum on CPU)"}.get(self.order, f"{self.order} sum")
        return f"{order} in {acc}{tiles}, {shares}"


def _added(values: np.ndarray, acc: np.dtype, order: Order) -> np.generic:
    """``values`` summed in ``acc`` (each addition rounded to it) in ``order``."""
    with np.errstate(invalid="ignore", over="ignore"):
        if acc.itemsize < 4 and order == "sequential" and values.size:
            total = acc.type(values[0])
            for v in values[1:]:  # the unrounded share added, the sum rounded once to the accumulator
                total = acc.type(np.float64(total) + v)
            return total
        values = values.astype(acc)
        if order == "pairwise" or values.size == 0:
            return np.add.reduce(values, dtype=acc) if values.size else acc.type(0)
        total = values[0]
        for v in values[1:]:
            total = acc.type(total + v)
        return total


def _summed(shares: np.ndarray, places: np.ndarray, reduction: Reduction, *, src: str) -> np.generic:
    """One weight element's ``shares`` (at flat ``places`` of the input, ascending) summed."""
    acc = info(src if reduction.accumulator == "input" else reduction.accumulator).dtype
    if reduction.tile is None:
        return _added(shares, acc, reduction.order)
    tiles = places // reduction.tile
    cuts = np.flatnonzero(np.diff(tiles)) + 1
    partials = np.array([_added(part, acc, reduction.order) for part in np.split(shares, cuts)], dtype=acc)
    return _added(partials, acc, "sequential")


def _framework_order(shares: np.ndarray, reduced: tuple[bool, ...], reduction: Reduction, *, src: str) -> np.ndarray:
    """Per weight element (memory order), the ``shares`` (the input's shape) summed over the ``reduced`` axes
    in TensorFlow's (``eigen``) or torch's (``cascade``) order, as float64."""
    acc = info(src if reduction.accumulator == "input" else reduction.accumulator).dtype
    with np.errstate(invalid="ignore", over="ignore"):
        if reduction.order == "eigen":
            return eigen_sums(shares, reduced, acc).astype(np.float64)
        return cascade_sums(shares.astype(acc), reduced).astype(np.float64)


def reduce_dweight(dy: np.ndarray, x: np.ndarray, weight: np.ndarray, reduction: Reduction, *,
                   channel_axis: int = 1, out_dtype: Optional[DTypeLike] = None) -> np.ndarray:
    """dweight, shaped as ``weight``, summed the way ``reduction`` says, the shares of each weight
    element taken in the input's memory order (``tile``: the flat input cut into tiles of that many
    elements, each tile's shares summed first, the partial sums then in tile order)."""
    x, dy, weight = np.asarray(x), np.asarray(dy), np.asarray(weight)
    src, out = resolve_pair(x.dtype, out_dtype)
    shares = terms(dy, x).ravel()
    if reduction.terms == "input":
        with np.errstate(invalid="ignore", over="ignore"):
            shares = cast_exact(shares, src).astype(np.float64)
    if reduction.order in ("eigen", "cascade"):
        held = expanded_weight(weight, x.shape, channel_axis=channel_axis).shape
        reduced = tuple(w == 1 and n > 1 for w, n in zip(held, x.shape))
        sums = _framework_order(shares.reshape(x.shape), reduced, reduction, src=src.name)
        return cast_exact(sums, out).reshape(weight.shape)
    groups = groups_of(weight, x.shape, channel_axis=channel_axis).ravel()
    order = np.argsort(groups, kind="stable")
    bounds = np.searchsorted(groups[order], np.arange(weight.size + 1))
    sums = np.array([_summed(shares[order[a:b]], order[a:b], reduction, src=src.name)
                     for a, b in zip(bounds, bounds[1:])], dtype=np.float64)
    return cast_exact(sums, out).reshape(weight.shape)


#: The ways triage tries, the likeliest first (torch's half-precision sums are the first one, its float32 ones
#: the cascade; TensorFlow's float16 sums are Eigen's; JAX's float16 ones the sequential input-dtype sum of
#: exact shares, or of rounded ones, by host: docs/reference/prelu.md).
CATALOGUE: tuple[Reduction, ...] = tuple(
    Reduction(acc, order, shares)
    for shares in ("input", None) for acc in ("float32", "float64", "input") for order in ("pairwise", "sequential")
) + (Reduction("input", "eigen", "input"), Reduction("float32", "cascade", "input"))
