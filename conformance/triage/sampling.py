"""What a selection is scored on: the scope of a batch, its sampling weights, and
:data:`SAMPLING`, the one table of every sampling size triage and the chunked
evaluation use."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from conformance import jit
from conformance.dtypes import info, to_bits
from conformance.triage.claims import Batch, special_values


@dataclass(frozen=True)
class Sampling:
    """Every sampling size triage and the chunked evaluation use, in elements.

    Up to ``full_scope`` elements a batch is scored on every element; a larger one on every
    mismatch and special value plus ``scope_plain`` plain others.  A rule's first look is
    every special mismatch and ``screening`` others.  More than ``select_sample`` remaining
    mismatches: the stack is selected on a stride sample of about ``sampled_mismatches`` of
    them (every candidate rule is computed on the sample alone) and of at most
    ``evidence_per_mismatch`` times as many other elements, then attributed, and so proved
    element by element, on all of them; the leftovers go round again.  Up to it, nothing is
    sampled.  A chunked evaluation keeps, per chunk, ``chunk_special`` special and
    ``chunk_plain`` plain matching elements (each a stride sample) as the evidence rules
    are scored against."""

    full_scope: int = 1 << 14
    scope_plain: int = 1 << 13
    screening: int = 1 << 12
    select_sample: int = 1 << 16
    sampled_mismatches: int = 1 << 14
    evidence_per_mismatch: int = 4
    chunk_special: int = 1 << 13
    chunk_plain: int = 1 << 11


SAMPLING = Sampling()


@dataclass(frozen=True)
class Scope:
    """The elements a selection is scored on, and what each stands for (sampling weight).
    Every mismatch stands for one element; ``weight`` is for the elements after them."""

    index: Optional[np.ndarray]  # batch positions, mismatches first (None: the batch in order)
    n_mis: int
    weight: np.ndarray  # aligned with the positions after the mismatches

    @property
    def size(self) -> int:
        return self.n_mis + int(self.weight.size)

    def take(self, values: np.ndarray, at: Any = slice(None)) -> np.ndarray:
        """``values`` (aligned with the batch) at the scope positions ``at``; a view when
        the scope is the batch in order and ``at`` a slice."""
        return values[at] if self.index is None else values[self.index[at]]

    def positions(self, at: np.ndarray) -> np.ndarray:
        """Batch positions of the scope positions ``at``."""
        return at if self.index is None else self.index[at]


def _special(batch: Batch, index: np.ndarray) -> np.ndarray:
    """Which of the elements ``index`` are special: found on the whole arrays and then taken at
    ``index`` (the test is elementwise; three gathers of most of a large batch cost more).
    A special x everywhere (a sweep's x class) makes every element special: golden and dy
    are not looked at, nor is the answer gathered."""
    out = special_values(batch.x.reshape(-1))
    if out.all():
        return np.ones(index.size, dtype=bool)
    out |= special_values(*(None if a is None else a.reshape(-1) for a in (batch.golden, batch.dy)))
    return out[index]


def _ascending(index: np.ndarray, n: int) -> bool:
    """``index`` is ascending, without repeats, within ``range(n)``."""
    return index.size == 0 or (int(index[0]) >= 0 and int(index[-1]) < n and bool((index[1:] > index[:-1]).all()))


def _split_compiled(batch: Batch, mismatches: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`_special`'s split of the elements other than the ascending ``mismatches`` by the
    compiled passes (``triage._compiled.scope_loops``): the special ones, the sample of the
    plain ones (:func:`_sample_ranks`; the plain ones are counted, never listed), and how
    many plain ones there are."""
    from conformance.triage._compiled.scope_loops import plain_at, split_others  # numba

    x = to_bits(batch.x.reshape(-1))
    operands = dict(x_exp=info(batch.x.dtype).exp_mask,
                    golden_bits=to_bits(batch.golden.reshape(-1)) if batch.golden is not None else x[:0],
                    golden_exp=info(batch.golden.dtype).exp_mask if batch.golden is not None else 0,
                    dy_bits=to_bits(batch.dy.reshape(-1)) if batch.dy is not None else x[:0])
    special, counts = split_others(mismatches, x, **operands)
    n_plain = int(counts.sum())
    return special, plain_at(_sample_ranks(n_plain), mismatches, x, plain_counts=counts, **operands), n_plain


def _sample_ranks(n_plain: int) -> np.ndarray:
    """Which of ``n_plain`` plain elements (ranks, ascending) a scope keeps: a seeded draw."""
    return np.sort(np.random.default_rng(0).choice(n_plain, min(SAMPLING.scope_plain, n_plain), replace=False))


def scope_of(batch: Batch, mismatches: np.ndarray) -> Scope:
    n = batch.x.size
    if batch.weight is not None:  # a reduced batch: its matching elements are already a sample
        if leading_mismatches(batch, mismatches):  # the batch's own order: mismatches first
            return Scope(None, mismatches.size, batch.weight_of(np.arange(mismatches.size, n)))
        keep = np.ones(n, dtype=bool)
        keep[mismatches] = False
        others = np.flatnonzero(keep)
        return Scope(np.concatenate([mismatches, others]), mismatches.size, batch.weight_of(others))
    if n > SAMPLING.full_scope and jit.enabled() and _ascending(mismatches, n):
        special, pick, n_plain = _split_compiled(batch, mismatches)
    else:
        keep = np.ones(n, dtype=bool)
        keep[mismatches] = False
        others = np.flatnonzero(keep)
        if n <= SAMPLING.full_scope:
            return Scope(np.concatenate([mismatches, others]), mismatches.size, np.ones(others.size))
        is_special = _special(batch, others)
        if is_special.all():  # every other element is special: all of them, in order, no copies
            special, plain = others, others[:0]
        else:
            special, plain = others[is_special], others[~is_special]
        pick, n_plain = plain[_sample_ranks(plain.size)], plain.size
    weight = np.ones(special.size + pick.size)
    weight[special.size:] = n_plain / max(pick.size, 1)
    return Scope(np.concatenate([mismatches, special, pick]), mismatches.size, weight)


def mismatch_scope(mismatches: np.ndarray) -> Scope:
    """The mismatches alone, each standing for itself: what attributing a chosen stack reads
    (its predictions on the mismatches; the whole batch's it computes in the batch's order)."""
    return Scope(mismatches, mismatches.size, np.ones(0))


def leading_mismatches(batch: Batch, mismatches: np.ndarray) -> bool:
    """Whether ``mismatches`` (ascending, as triage's state keeps them) are the batch's first
    positions, 0, 1, ..., k-1.  A reduced batch holds its mismatches first by construction
    (:class:`~conformance.triage.claims.Batch`): as many of them as it has positions
    before its weighted sample, the last of them the last of those, are exactly those
    positions, and no element of the index is looked at; any other index is."""
    if batch.weight is not None and mismatches.size == batch.x.size - batch.weight.size:
        return mismatches.size == 0 or int(mismatches[-1]) == mismatches.size - 1
    return _leading(mismatches)


def _leading(index: np.ndarray) -> bool:
    """``index`` is 0, 1, ..., k-1 (the batch's first k positions, in order)."""
    return index.size == 0 or (int(index[0]) == 0 and int(index[-1]) == index.size - 1
                               and bool((index[1:] > index[:-1]).all()))


def thinned_scope(scope: Scope, mis: np.ndarray, size: int) -> Scope:
    """``scope`` (scoped on the mismatches ``mis``) with every k-th mismatch alone, about
    ``size`` of them, and the other elements' weights divided by k: each kept mismatch
    stands for k, so the balance between mismatches explained and elements contradicted
    is the whole batch's.  More than ``evidence_per_mismatch * size`` other elements are thinned by a
    stride too, their total weight kept."""
    step = -(-mis.size // size)
    kept = np.arange(0, mis.size, step)
    evidence = scope.weight * (kept.size / mis.size)
    others = np.arange(scope.n_mis, scope.size)
    most = SAMPLING.evidence_per_mismatch * size
    if others.size > most:
        wide = -(-others.size // most)
        others, evidence = others[::wide], evidence[::wide] * (evidence.sum() / evidence[::wide].sum())
    index = np.concatenate([scope.positions(kept), scope.positions(others)])
    return Scope(index, kept.size, evidence)
