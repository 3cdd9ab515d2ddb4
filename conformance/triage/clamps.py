"""Clamps at a limit: the output is golden clamped to ±L for a limit L the data shows.

L is the one magnitude the errors agree on where the actual value is smaller than the
exact one (or the exact one is not a number): a dtype's finite max (an fp32 kernel built
with fp16 limits), an int8 code limit, or another value every clamped element shows (a
fused clamp at 6).  The proof is a recomputation: golden clamped at L on one or both
sides, with the NaN and ±inf behaviour the output shows (NaN kept, or become 0 or ±L;
±inf become ±L or kept), reproduces the actual bits of every claimed element and
contradicts none (no element beyond L that stays unclamped).  Its category is
``saturation``; L, the sides and the NaN/inf behaviour go into the detail.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import Optional

import numpy as np

import conformance.triage.sampling as sampling
from conformance.dtypes import DTYPES, info
from conformance.metrics.exact import match_mask
from conformance.triage.candidates import candidates_for
from conformance.triage.claims import Batch, Claim, State, beyond_rounding, comparable
from conformance.triage.rules import Rule
from conformance.triage.search import stack_semantics

_SIDES = ("both", "upper", "lower")
_NAN = ("kept", "0", "+L", "-L")
_INF = ("L", "kept")
_INT8_CODES = (127.0, 128.0)  # a requantised int8 code at its limit
_ROUNDS = 2  # an asymmetric clamp is one side, then the other
_SEARCHED = 1 << 16  # errors left beyond which no single rule is tried under a clamp
_SHARED = 4  # errors at one magnitude before a single rule is tried under a clamp there


@dataclass(frozen=True)
class Clamp:
    """Golden clamped at ``limit``: on which ``side``, and what NaN and ±inf become."""

    limit: float
    side: str = "both"
    nan: str = "kept"
    inf: str = "L"

    def apply(self, golden: np.ndarray) -> np.ndarray:
        """``golden`` (any float dtype) under this clamp, in its own dtype."""
        g, out = comparable(golden), golden.copy()
        finite = np.isfinite(g) if self.inf == "kept" else np.ones(g.shape, bool)
        hi, lo = np.array(self.limit, golden.dtype), np.array(-self.limit, golden.dtype)
        if self.side != "lower":
            out[(g > self.limit) & finite] = hi
        if self.side != "upper":
            out[(g < -self.limit) & finite] = lo
        if self.nan != "kept":
            out[np.isnan(g)] = {"0": np.zeros((), golden.dtype), "+L": hi, "-L": lo}[self.nan]
        return out


def limit_of(limit: float) -> Optional[str]:
    """The dtype whose finite max ``limit`` is, or ``int8`` for a code limit; else None."""
    for name in DTYPES:
        if info(name).max == limit:
            return name
    return "int8" if limit in _INT8_CODES else None


def _limit_shared(actual: np.ndarray, values: np.ndarray) -> Optional[float]:
    """The magnitude most errors (actual values ``actual``, ``values`` under the base: golden,
    or a rule's variant of it) clamped below their value share (None when none is, or no two
    share one)."""
    a, g = comparable(actual), comparable(values)
    below = np.isfinite(a) & (a != 0) & (np.isnan(g) | (np.abs(g) > np.abs(a)))
    if not below.any():
        return None
    values, counts = np.unique(np.abs(a[below]).astype(np.float64), return_counts=True)
    top = int(np.argmax(counts))
    return float(values[top]) if counts[top] >= 2 or limit_of(float(values[top])) else None


@dataclass(frozen=True)
class _Proof:
    clamp: Clamp
    explained: np.ndarray
    contradicted: int
    seen: tuple[bool, bool] = (False, False)  # the batch has NaN, ±inf beyond the limit
    base: tuple = ()  # the rules the clamp sits on (none: on golden)


#: What a clamp writes where: (the group of affected elements, the value written there).
Writes = tuple[tuple[str, str], ...]


def writes(clamp: Clamp) -> Writes:
    """The groups of elements beyond the limit ``clamp`` changes ("up", "up_inf", "down",
    "down_inf": above L or below -L, finite or infinite; "nan") and the value it writes in
    each ("hi" = L, "lo" = -L, "0"), as :meth:`Clamp.apply` does."""
    out: list[tuple[str, str]] = []
    if clamp.side != "lower":
        out += [("up", "hi")] + ([("up_inf", "hi")] if clamp.inf == "L" else [])
    if clamp.side != "upper":
        out += [("down", "lo")] + ([("down_inf", "lo")] if clamp.inf == "L" else [])
    if clamp.nan != "kept":
        out.append(("nan", {"0": "0", "+L": "hi", "-L": "lo"}[clamp.nan]))
    return tuple(out)


class Outcomes:
    """Every clamp at one limit judged on the elements ``affected`` (beyond the limit or NaN
    under the base, ``values`` there) at once: each clamp writes one of three values into
    some of five groups, so where writing a value changes the prediction and whether the
    output shows it is computed once per value, and a clamp's explained and contradicted
    counts are sums over its groups (no clamped copy per candidate)."""

    def __init__(self, actual: np.ndarray, values: np.ndarray, wrong: np.ndarray, *, limit: float) -> None:
        g = comparable(values)
        inf = np.isinf(g)
        up, down = g > limit, g < -limit
        self.groups = {"up": up & ~inf, "up_inf": up & inf, "down": down & ~inf, "down_inf": down & inf,
                       "nan": np.isnan(g)}
        self.values = {"hi": np.array(limit, values.dtype), "lo": np.array(-limit, values.dtype),
                       "0": np.zeros((), values.dtype)}
        self._actual, self._values, self._wrong = actual, values, wrong
        self._written: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._counts: dict[tuple[str, str], tuple[int, int]] = {}

    def _outcome(self, value: str) -> tuple[np.ndarray, np.ndarray]:
        """Where writing ``value`` explains a wrong element, and where it contradicts the output."""
        if value not in self._written:
            pred = np.full(self._values.shape, self.values[value])
            changes, follows = ~match_mask(pred, self._values), match_mask(self._actual, pred)
            self._written[value] = (changes & follows & self._wrong, changes & ~follows)
        return self._written[value]

    def counts(self, clamp: Clamp) -> tuple[int, int]:
        """How many wrong elements ``clamp`` reproduces, and how many it contradicts."""
        explained = contradicted = 0
        for group, value in writes(clamp):
            if (group, value) not in self._counts:
                hit, miss = self._outcome(value)
                member = self.groups[group]
                self._counts[group, value] = (int(np.count_nonzero(member & hit)),
                                              int(np.count_nonzero(member & miss)))
            e, c = self._counts[group, value]
            explained, contradicted = explained + e, contradicted + c
        return explained, contradicted

    def explained(self, clamp: Clamp) -> np.ndarray:
        """Which of the affected elements ``clamp`` reproduces (a mask over them)."""
        out = np.zeros(self._values.shape, dtype=bool)
        for group, value in writes(clamp):
            out |= self.groups[group] & self._outcome(value)[0]
        return out


def _candidates(limit: float, *, seen: tuple[bool, bool]) -> list[Clamp]:
    """Every side, and the NaN/inf behaviours worth telling apart (those the batch has)."""
    nans = _NAN if seen[0] else ("kept",)
    infs = _INF if seen[1] else ("L",)
    return [Clamp(limit, s, n, i) for s, n, i in product(_SIDES, nans, infs)]


def _open(state: State, size: int, *, on_rules: bool) -> np.ndarray:
    """The elements a clamp is judged on: those no earlier pass explained, and an earlier
    clamp's (the other side of an asymmetric clamp must not predict them); on a rule's
    variant, the rule's too (its values beyond L must be clamped)."""
    open_ = np.ones(size, dtype=bool)
    ruled = {id(c) for c in state.by_rules} if on_rules else set()
    for c in state.claims:
        if c.in_tensor and "limit" not in c.detail and id(c) not in ruled:
            open_[c.index] = False
    return open_


def _best(batch: Batch, state: State, limit: float, base: tuple = ()) -> Optional[_Proof]:
    """The clamp at ``limit`` on golden, or on golden under the rules ``base``, that
    explains most and contradicts nothing."""
    wrong = np.zeros(batch.x.size, dtype=bool)
    wrong[state.remaining] = True
    values = batch.recomputed(semantics=stack_semantics(base))
    g = comparable(values)
    affected = np.flatnonzero(_open(state, batch.x.size, on_rules=bool(base)) & ~(np.abs(g) <= limit))
    seen = (bool(np.isnan(g[affected]).any()), bool(np.isinf(g[affected]).any()))
    outcomes = Outcomes(batch.actual[affected], values[affected], wrong[affected], limit=limit)
    best, most = None, 0
    for c in _candidates(limit, seen=seen):
        explained, contradicted = outcomes.counts(c)
        if contradicted == 0 and explained > most:  # the first of the largest
            best, most = c, explained
    if best is None:
        return None
    return _Proof(best, affected[outcomes.explained(best)], 0, seen=seen, base=tuple(base))


def _most_explained(batch: Batch, rest: np.ndarray, limit: float, g: np.ndarray) -> int:
    """At most how many of the errors ``rest`` a clamp at ``limit`` can reproduce on the
    values ``g`` there: those beyond the limit (or NaN) whose actual value is one a clamp
    writes (L, -L or 0)."""
    a = batch.actual[rest]
    written = np.zeros(rest.size, dtype=bool)
    for v in (limit, -limit, 0.0):
        written |= match_mask(a, np.full(g.shape, np.array(v, g.dtype)))
    return int(np.count_nonzero(written & ~(np.abs(comparable(g)) <= limit)))


def _said(clamp: Clamp, *, seen_nan: bool, seen_inf: bool) -> tuple[str, str, str]:
    """The limit, NaN and ±inf behaviour in words."""
    text = f"{clamp.limit:g}"
    where = {"both": f"±{text}", "upper": f"at most {text}", "lower": f"at least -{text}"}[clamp.side]
    owner = limit_of(clamp.limit)
    whose = (" (the int8 code limit)" if owner == "int8" else f" ({owner}'s finite max)" if owner
             else " (a limit every clamped element shows)")
    nan = {"kept": "kept", "0": "became 0", "+L": f"became {text}", "-L": f"became -{text}"}[clamp.nan]
    became = {"both": f"±inf became ±{text}", "upper": f"+inf became {text}", "lower": f"-inf became -{text}"}
    inf = {"L": became[clamp.side], "kept": "±inf kept"}[clamp.inf]
    return where + whose, nan if seen_nan else "none seen", inf if seen_inf else "±inf none seen"


def _claim(batch: Batch, proof: _Proof) -> Claim:
    index, c = proof.explained, proof.clamp
    g = comparable(batch.recomputed(index, semantics=stack_semantics(proof.base)))
    nan, inf = np.isnan(g), np.isinf(g)
    seen_nan, seen_inf = proof.seen
    where, nan_text, inf_text = _said(c, seen_nan=seen_nan, seen_inf=seen_inf)
    detail = {"limit": c.limit, "limit_of": limit_of(c.limit), "side": c.side,
              "nan": c.nan if seen_nan else "none seen", "inf": c.inf if seen_inf else "none seen",
              "clamped": int((~nan & ~inf).sum()), "inf_to_limit": int(inf.sum()),
              "nan_to_zero": int(nan.sum()) if c.nan == "0" else 0,
              "nan_to_limit": int(nan.sum()) if c.nan in ("+L", "-L") else 0,
              "confirmed_by_inf": bool(inf.any()), "explained": int(index.size), "contradicted": 0}
    summary = f"results clamped to {where}; NaN {nan_text}, {inf_text}"
    named = [r.summary for r in proof.base if r.category is not None]
    if named:
        detail["clamped_after"] = named
        summary += ", after " + " and ".join(named)
    return Claim("saturation", index, int(index.size), summary, detail)


def _proved(batch: Batch, proof: _Proof) -> bool:
    """Two different values clamped, or one at a named limit: one odd value is no clamp."""
    values = batch.recomputed(proof.explained, semantics=stack_semantics(proof.base))
    distinct = np.unique(comparable(values).astype(np.float64)).size
    return distinct >= 2 or limit_of(proof.clamp.limit) is not None


def _on(batch: Batch, state: State, base: tuple, *, beat: int = 0) -> Optional[_Proof]:
    """The proved clamp at the limit the errors agree on, on golden under ``base``; None
    too when no clamp there could reproduce more than ``beat`` errors (it would not be kept)."""
    values = batch.recomputed(state.remaining, semantics=stack_semantics(base))
    limit = _limit_shared(batch.actual[state.remaining], values)
    if limit is None or _most_explained(batch, state.remaining, limit, values) <= beat:
        return None
    if not _may_hold(batch, state, limit, base, beat=beat):
        return None
    proof = _best(batch, state, limit, base)
    return proof if proof is not None and _proved(batch, proof) else None


def _may_hold(batch: Batch, state: State, limit: float, base: tuple, *, beat: int) -> bool:
    """The first look: some clamp at ``limit`` (of every side and NaN/inf behaviour)
    reproduces more than ``beat`` errors and contradicts none of them nor of a stride
    sample of the other elements (``SAMPLING.screening``).  When none does, no clamp
    :func:`_best` judges on every element is kept: its errors are these, and its
    contradictions include these."""
    n = batch.x.size
    step = n // sampling.SAMPLING.screening
    if step < 4:  # a small batch: judged on every element at once
        return True
    probe = np.union1d(state.remaining, np.arange(0, n, step))
    wrong = np.zeros(probe.size, dtype=bool)
    wrong[np.searchsorted(probe, state.remaining)] = True
    values = batch.recomputed(probe, semantics=stack_semantics(base))
    here = _open(state, n, on_rules=bool(base))[probe] & ~(np.abs(comparable(values)) <= limit)
    outcomes = Outcomes(batch.actual[probe[here]], values[here], wrong[here], limit=limit)
    for c in _candidates(limit, seen=(True, True)):  # every clamp a batch may be judged by
        explained, contradicted = outcomes.counts(c)
        if contradicted == 0 and explained > beat:
            return True
    return False


def _at_limit_left(batch: Batch, state: State, proof: Optional[_Proof]) -> bool:
    """Errors whose magnitude is a clamp's limit are left (or no clamp on golden was found)."""
    if proof is None:
        return True
    rest = np.setdiff1d(state.remaining, proof.explained, assume_unique=True)
    return bool((np.abs(comparable(batch.actual[rest]).astype(np.float64)) == proof.clamp.limit).any())


def _strongest(batch: Batch, state: State, bases: Sequence[Sequence[Rule]]) -> Optional[_Proof]:
    """The clamp on golden; when it leaves errors at a limit, the clamp on a rule stack
    ``bases`` (a wrong slope, then a clamp) that explains more, if one does; and when
    errors at a limit are still left, the clamp on one rule of the catalogue that no stack
    chose because the clamp overwrote every change it made (NaN made at NaN, then clamped)."""
    best = _on(batch, state, ())
    if not _at_limit_left(batch, state, best) or not _shared_magnitude(batch, state.remaining):
        return best
    for base in bases:
        best = _larger(best, _on(batch, state, tuple(base), beat=_size(best)))
    if not _at_limit_left(batch, state, best):
        return best
    for rule in candidates_for(batch, state.remaining):
        if rule.category is not None:
            best = _larger(best, _on(batch, state, (rule,), beat=_size(best)))
    return best


def _size(proof: Optional[_Proof]) -> int:
    return 0 if proof is None else int(proof.explained.size)


def _larger(best: Optional[_Proof], other: Optional[_Proof]) -> Optional[_Proof]:
    """The proof that explains more (``best`` on a tie)."""
    if other is None or (best is not None and other.explained.size <= best.explained.size):
        return best
    return other


def _shared_magnitude(batch: Batch, rest: np.ndarray) -> bool:
    """A few errors (at most ``_SEARCHED``) of which several beyond 1 ULP share one finite
    nonzero magnitude (``_SHARED`` of them, or two at a named limit): what a clamp leaves."""
    if rest.size > _SEARCHED:
        return False
    a = np.abs(comparable(batch.actual[beyond_rounding(batch, rest)]).astype(np.float64))
    a = a[np.isfinite(a) & (a != 0)]
    if a.size < 2:
        return False
    values, counts = np.unique(a, return_counts=True)
    top = int(np.argmax(counts))
    return counts[top] >= _SHARED or (counts[top] >= 2 and limit_of(float(values[top])) is not None)


def sole_clamp(batch: Batch, state: State) -> Optional[Claim]:
    """The proved clamp on golden when it reproduces every remaining mismatch (one cause for
    all of them, whatever rule stacks could also reach them), else None."""
    proof = _on(batch, state, ())
    if proof is None or proof.explained.size != state.remaining.size:
        return None
    return _claim(batch, proof)


def claim_clamps(batch: Batch, state: State, *, bases: Sequence[Sequence[Rule]] = ()) -> None:
    """Errors that golden clamped at one limit reproduces, with no contradiction, are
    ``saturation`` at that limit (one side, then the other, for an asymmetric clamp); a
    clamp on golden under one of the rule stacks ``bases`` the attribution chose (the
    rule's claim keeps the elements the clamp leaves) where that explains more."""
    for _ in range(_ROUNDS):
        if state.remaining.size == 0:
            return
        proof = _strongest(batch, state, bases)
        if proof is None:
            return
        state.claim(_claim(batch, proof), by_rule=True)
