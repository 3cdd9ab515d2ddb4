"""Which stack of candidate rules describes a batch best: a description-length beam search.

A stack's description length is ``RULE_COST`` per rule plus every element it predicts
wrong (mismatches it does not reproduce, and contradictions: elements where it predicts
a change the actual output does not show).  Large batches are scored on a sample
(``sampling.SAMPLING``, the one table of every sampling size triage uses).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Optional

import numpy as np

import conformance.triage.sampling as sampling
from conformance.dtypes import info, is_nan, is_subnormal, to_bits
from conformance.metrics.exact import match_mask
from conformance.reference.semantics import EXACT, Semantics
from conformance.triage.claims import MEMO_WHOLE, PIECE, Batch, comparable, special_values
from conformance.triage.rules import Rule
from conformance.triage.sampling import Scope, scope_of

RULE_COST = 0.45  # description length of one rule, in elements: two rules may explain one
BEAM = 3  # stacks kept per depth: a pair of rules that only together explain is found
FEW = 4  # a trial on at most 1/FEW of a small batch is computed on those elements alone, not kept
#: Settings that narrow operands, products or results: stacked on them, a rule changes elements that
#: are zero, subnormal or infinite only once narrowed (a float32 x of 1e-9 is 0 in float16), outside its reach.
NARROWING = frozenset({"input_dtype", "opmath", "result_dtype"})


class _KindMasks(dict):
    """Per kind of element a rule can change ("nan", "zero", "special", "tiny"), which of
    the scope's mismatches are of that kind; each kind is computed when a rule first asks."""

    def __init__(self, batch: Batch, scope: Scope) -> None:
        super().__init__()
        self.batch, self.scope = batch, scope

    def __missing__(self, kind: str) -> np.ndarray:
        self[kind] = mask = _of_kind(self.batch, self.scope, kind)
        return mask


def _of_kind(batch: Batch, scope: Scope, kind: str) -> np.ndarray:
    """Which of the scope's mismatches are of ``kind``.  Without dy (forward) its stand-in
    is zero everywhere, so every element is a "zero" and a "special" one."""
    mis = slice(0, scope.n_mis)
    x = scope.take(batch.x, mis)
    if kind == "nan":
        return is_nan(x)
    if kind in ("zero", "special") and batch.dy is None:
        return np.ones(scope.n_mis, dtype=bool)
    g, a = scope.take(batch.golden, mis), scope.take(batch.actual, mis)
    dy = None if batch.dy is None else scope.take(batch.dy, mis)
    if kind == "tiny":  # |g| or |a| below the smallest normal: a zero exponent field
        tiny = is_subnormal(x) | _below_normal(g) | _below_normal(a)
        return tiny if dy is None else tiny | is_subnormal(dy)
    g, a = comparable(g), comparable(a)
    xw, dw = comparable(x), comparable(dy)
    zero = (xw == 0) | (dw == 0) | (g == 0) | (a == 0) | is_subnormal(x)
    if kind == "zero":
        return zero
    return zero | ~np.isfinite(xw) | ~np.isfinite(dw) | ~np.isfinite(g)


def _below_normal(v: np.ndarray) -> np.ndarray:
    """``|v|`` is below the smallest normal number of its dtype (zeros and subnormals)."""
    return (to_bits(v) & info(v.dtype).exp_mask) == 0


def stack_semantics(stack: Sequence[Rule]) -> Semantics:
    """The variant a stack of rules computes: each rule's settings on those below it."""
    if len(stack) < 2:  # what combining gives: the rule's record, or the exact one
        return stack[0].semantics if stack and stack[0].semantics.settings() else EXACT
    return _combined(tuple(r.semantics for r in stack))


@functools.lru_cache(maxsize=1 << 12)  # the search asks for each stack many times
def _combined(parts: tuple[Semantics, ...]) -> Semantics:
    out = EXACT
    for sem in parts:
        out = out.combined(sem)
    return out


class Selector:
    """Scores stacks of rules on a scope: description length = rules + wrong elements."""

    def __init__(self, batch: Batch, scope: Scope) -> None:
        self.batch, self.scope = batch, scope
        self.actual = scope.take(batch.actual)
        self._cache: dict = {}
        self._right: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(prediction) -> it, where right
        self._tie_bits: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(prediction) -> it, its tie bits
        self.kind_masks = _KindMasks(batch, scope)

    def predict(self, stack: Sequence[Rule]) -> np.ndarray:
        """The stack's prediction on the whole scope."""
        key = stack_semantics(stack)
        if key not in self._cache:  # a scope without index is the batch in order
            self._cache[key] = self.batch.recomputed(self.scope.index, semantics=key)
        return self._cache[key]

    def keep(self, stacks: Sequence[Sequence[Rule]]) -> None:
        """Forget every prediction but those of ``stacks`` (a large batch's are big)."""
        keys = {stack_semantics(s) for s in stacks}
        self._cache = {k: v for k, v in self._cache.items() if k in keys}
        self._right.clear()
        self._tie_bits.clear()

    def on_mismatches(self, stack: Sequence[Rule]) -> np.ndarray:
        """The stack's prediction on the mismatches (the scope's first elements)."""
        return self.predict(stack)[:self.scope.n_mis]

    def predict_batch(self, stack: Sequence[Rule]) -> np.ndarray:
        """The stack's prediction on the whole batch: the scope's, put in place when the
        scope is every element."""
        if self.scope.size != self.batch.x.size:
            return self.batch.recomputed(semantics=stack_semantics(stack))
        if self.scope.index is None:
            return self.predict(stack)
        out = np.empty_like(self.batch.golden)
        out[self.scope.index] = self.predict(stack)
        return out

    @cached_property
    def special_mismatches(self) -> np.ndarray:
        """Which mismatches (scope positions) are special values, found a piece at a time."""
        n, take, batch = self.scope.n_mis, self.scope.take, self.batch
        out = np.empty(n, dtype=bool)
        for lo in range(0, n, PIECE):
            part = slice(lo, min(lo + PIECE, n))
            out[part] = special_values(take(batch.x, part), take(batch.golden, part),
                                       None if batch.dy is None else take(batch.dy, part))
        return out

    @cached_property
    def zero_pairs(self) -> np.ndarray:
        """Which mismatches (scope positions) have a zero on both sides."""
        n = self.scope.n_mis
        g = self.scope.take(self.batch.golden, slice(0, n))
        return (comparable(g) == 0) & (comparable(self.actual[:n]) == 0)

    def screening_sample(self, wrong: np.ndarray) -> Optional[np.ndarray]:
        """For many wrong mismatches, the sample a rule is first tried on: every special
        value, and ``SAMPLING.screening`` others.  None when there are few."""
        size = sampling.SAMPLING.screening
        if wrong.size <= size:
            return None
        rng = np.random.default_rng(1)
        if wrong.size == self.scope.n_mis:  # every mismatch: ``wrong`` is 0, 1, ..., n_mis - 1
            special = self.special_mismatches
            if not special.any():  # the others are every position: pick positions alone
                return np.sort(rng.choice(wrong.size, size, replace=False))
            specials, others = np.flatnonzero(special), np.flatnonzero(~special)
        else:
            special = self.special_mismatches[wrong]
            specials, others = wrong[special], wrong[~special]
        pick = rng.choice(others, min(size, others.size), replace=False)
        return np.sort(np.concatenate([specials, pick]))

    def reproduced(self, trial: Sequence[Rule], some: np.ndarray) -> np.ndarray:
        """Which of the mismatches ``some`` (scope positions) ``trial`` reproduces: read from
        its prediction on the whole scope when that is kept, else computed on them alone."""
        key = stack_semantics(trial)
        whole = self._cache.get(key)
        if whole is not None:
            return self.where_right(whole)[some]
        positions, batch = self.scope.positions(some), self.batch
        if batch.x.size <= MEMO_WHOLE and FEW * some.size <= batch.x.size:
            pred = batch.trial(positions, semantics=key)  # most stop here: their whole prediction is never asked
        else:
            pred = batch.recomputed(positions, semantics=key)
        return match_mask(pred, self.actual[some])

    def fixes(self, trial: Sequence[Rule], wrong: np.ndarray) -> np.ndarray:
        """Which of the mismatches ``wrong`` (scope positions) ``trial`` reproduces: the
        cheap first look, on the elements the stack below still gets wrong.  When they are
        most of the scope, the prediction on the whole scope (kept for scoring) serves."""
        n = self.scope.n_mis
        if 2 * wrong.size >= self.scope.size:
            right = self.where_right(self.predict(trial))[:n]
            if wrong.size == n:  # every mismatch
                return right
            out = np.zeros(n, dtype=bool)
            out[wrong] = right[wrong]
            return out
        out = np.zeros(n, dtype=bool)
        out[wrong] = self.reproduced(trial, wrong)
        return out

    def where_right(self, pred: np.ndarray) -> np.ndarray:
        """Where a prediction on the whole scope (from :meth:`predict`) is right, computed
        once per prediction."""
        hit = self._right.get(id(pred))
        if hit is None or hit[0] is not pred:
            hit = self._right[id(pred)] = (pred, match_mask(pred, self.actual[:pred.size]))
        return hit[1]

    def tie_bits(self, pred: np.ndarray) -> np.ndarray:
        """:func:`_tie_bits` of a prediction, computed once per prediction."""
        hit = self._tie_bits.get(id(pred))
        if hit is None or hit[0] is not pred:
            hit = self._tie_bits[id(pred)] = (pred, _tie_bits(pred))
        return hit[1]

    def length(self, right: np.ndarray, stack: Sequence[Rule]) -> float:
        """Description length of ``stack`` whose prediction is right where ``right``: the
        mismatches it gets wrong, the (weighted) other elements it contradicts, its rules."""
        n = self.scope.n_mis
        contradicted = float((self.scope.weight * ~right[n:]).sum())
        return (n - int(np.count_nonzero(right[:n]))) + contradicted + RULE_COST * sum(r.complexity for r in stack)

    def beyond_zero_signs(self, fixed: np.ndarray, right_now: np.ndarray) -> bool:
        """A rule that explains only zero signs must explain most of the wrong zero signs:
        flipped zeros are few, and a formula that matches some of them by chance is no cause."""
        zeros = self.zero_pairs
        if (fixed & ~zeros).any():
            return True
        return 2 * int(np.count_nonzero(fixed)) > int(np.count_nonzero(zeros & ~right_now))

    def groups_gain(self, rule: Rule, pred: np.ndarray, before: np.ndarray) -> bool:
        """Every value group the rule changes gains from it (saturation: NaN and ±inf apart)."""
        if rule.groups is None:
            return True
        changed = ~match_mask(pred, before)
        gain = self.where_right(pred).astype(np.int64) - self.where_right(before)
        for g in rule.groups(self.scope.take(self.batch.golden)):
            if (changed & g).any() and int(gain[g].sum()) <= 0:
                return False
        return True


@dataclass
class _Choice:
    length: float
    order: int
    rule: Rule
    pred: np.ndarray
    right: int  # mismatches the stack reproduces


def _choices(sel: Selector, stack: list[Rule], cands: list[Rule], current: np.ndarray) -> list[_Choice]:
    """Every candidate that, stacked on ``stack``, could shorten the description."""
    used = frozenset().union(*(r.keys for r in stack)) if stack else frozenset()
    narrowed = bool(used & NARROWING)  # the kinds are of the operands as given, not as the stack narrows them
    n = sel.scope.n_mis
    right_now = sel.where_right(current)[:n]
    wrong = np.flatnonzero(~right_now) if right_now.any() else np.arange(n)
    screen = sel.screening_sample(wrong)
    reached: dict[str, bool] = {}  # per kind: is some wrong element of it
    out = []
    for order, r in enumerate(cands):
        if r in stack or r.keys & used or wrong.size == 0:
            continue
        if r.reach is not None and not narrowed and not _reaches(sel, r.reach, wrong, reached):
            continue  # none of the wrong elements is of the kind the rule changes
        trial = stack + [r]
        if screen is not None and not sel.reproduced(trial, screen).any():
            continue  # reproduces none of the sample (every special value is in it)
        fixed = sel.fixes(trial, wrong)
        if np.count_nonzero(fixed) <= RULE_COST * r.complexity or not sel.beyond_zero_signs(fixed, right_now):
            continue  # cannot pay for itself even with no contradiction
        pred = sel.predict(trial)
        if sel.groups_gain(r, pred, current):
            right = sel.where_right(pred)
            out.append(_Choice(sel.length(right, trial), order, r, pred, int(np.count_nonzero(right[:n]))))
    return out


def _reaches(sel: Selector, kind: str, wrong: np.ndarray, reached: dict[str, bool]) -> bool:
    """Some of the mismatches ``wrong`` is of ``kind`` (remembered in ``reached``)."""
    if kind not in reached:
        mask = sel.kind_masks[kind]
        reached[kind] = bool(mask.any() if wrong.size == mask.size else mask[wrong].any())
    return reached[kind]


@dataclass
class _Stack:
    length: float
    rules: list
    pred: np.ndarray
    alternatives: dict
    right: int = 0


def _children(sel: Selector, node: _Stack, cands: list[Rule]) -> list[_Stack]:
    """The stacks one rule longer that describe the batch in fewer bits than ``node``, or
    that reproduce more mismatches (a rule that only with a second one is right)."""
    choices = sorted((c for c in _choices(sel, node.rules, cands, node.pred)
                      if c.length < node.length or c.right > node.right),
                     key=lambda c: (c.length, c.order))
    out = _ByPrediction(sel.tie_bits)  # one child per distinct prediction; equal ones are its ties
    for c in choices:
        same = out.get(c.pred)
        if same is not None:
            if c.length == same.length:
                same.alternatives[same.rules[-1]].append(c.rule)
            continue
        out.add(c.pred, _Stack(c.length, node.rules + [c.rule], c.pred, {**node.alternatives, c.rule: []},
                               c.right))
    return out.items()


def _tie_bits(pred: np.ndarray) -> np.ndarray:
    """A prediction's bits with every NaN alike: two rules that differ only in NaN payloads
    (a select's NaN against max's) predict the same values, so they tie."""
    nan = is_nan(pred)
    return to_bits(np.where(nan, np.full((), np.nan, pred.dtype), pred) if nan.any() else pred)


class _ByPrediction:
    """Stacks keyed by their prediction's bits, in the order they were added.  A strided
    sample of the bits finds the candidates; the whole prediction decides (a large
    batch's predictions are too big to copy into a key)."""

    def __init__(self, tie_bits: Callable[[np.ndarray], np.ndarray] = _tie_bits) -> None:
        self._by: dict[tuple, list[_Stack]] = {}
        self._order: list[_Stack] = []
        self._bits = tie_bits  # a prediction's tie bits (the selector's remember them)

    def _fingerprint(self, pred: np.ndarray) -> tuple:
        bits = self._bits(pred)
        step = max(1, bits.size >> 13)
        return pred.dtype.str, bits.size, bits[::step].tobytes()

    def get(self, pred: np.ndarray) -> Optional[_Stack]:
        bits = self._bits(pred)
        for stack in self._by.get(self._fingerprint(pred), ()):
            if stack.pred is pred or np.array_equal(self._bits(stack.pred), bits):
                return stack
        return None

    def add(self, pred: np.ndarray, stack: _Stack) -> None:
        self._by.setdefault(self._fingerprint(pred), []).append(stack)
        self._order.append(stack)

    def items(self) -> list[_Stack]:
        return list(self._order)


def _lower_bound(stack: _Stack) -> float:
    """No stack grown from this one is shorter than its rules alone."""
    return RULE_COST * sum(r.complexity for r in stack.rules)


def _next_beam(grown: list[_Stack]) -> list[_Stack]:
    """The beam: the shortest descriptions, one per set of categories (ten slopes of one
    category must not crowd out a second cause that only with a third is right), and the
    stacks reproducing most mismatches."""
    by_kind: dict = {}
    for s in sorted(grown, key=lambda s: s.length):
        by_kind.setdefault(tuple(sorted(str(r.category) for r in s.rules)), s)
    short = list(by_kind.values())[:BEAM]
    wide = [s for s in sorted(grown, key=lambda s: (-s.right, s.length)) if s not in short][:BEAM - 1]
    return short + wide


def select(batch: Batch, mismatches: np.ndarray, cands: list[Rule]) -> tuple[list[Rule], dict]:
    """Description-length selection: a beam search over stacks of rules; each step adds a
    rule that shortens the description (rules + elements the stack gets wrong).  Returns
    the shortest stack and, per rule, the equally good alternatives (same length, same
    predictions)."""
    return beam_search(Selector(batch, scope_of(batch, mismatches)), cands)


def beam_search(sel: Selector, cands: list[Rule], *, base: Sequence[Rule] = ()) -> tuple[list[Rule], dict]:
    """:func:`select` on the scope of ``sel``, stacks grown from ``base`` (default: none)."""
    pred = sel.predict(list(base))
    best = _Stack(sel.length(sel.where_right(pred), list(base)), list(base), pred, {r: [] for r in base})
    beam = [best]
    while beam:
        grown = _ByPrediction(sel.tie_bits)
        for node in beam:
            for child in _children(sel, node, cands):
                if grown.get(child.pred) is None:
                    grown.add(child.pred, child)
        beam = _next_beam(grown.items())
        shortest = min(beam, key=lambda s: s.length, default=None)
        if shortest is not None and shortest.length < best.length:
            best = shortest
        floor = RULE_COST * min((r.complexity for r in cands), default=1.0)
        beam = [s for s in beam if _lower_bound(s) + floor < best.length]  # branch and bound
    return best.rules, best.alternatives
