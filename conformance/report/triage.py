"""Why it is off: every mismatching element gets exactly one category, by proof.

Categories come from the registry (``conformance.categories``), in its order:

- hazards come from the emulator's records (``BackendResult.hazards``);
- semantic categories: candidate rules (``candidates.catalogue``, each a golden
  variant) compete.  A beam search over stacks of rules minimises a description
  length, ``RULE_COST`` per rule plus every element the stack predicts wrong
  (mismatches it does not reproduce, and contradictions: elements where it
  predicts a change the actual output does not show).  Each element the chosen
  stack reproduces goes to the rule it needs that moves its value most; findings
  carry ``explained`` and ``contradicted``, and equally good alternatives;
- ``tail-block`` is proved by confinement: the remaining errors lie in the tail
  regions of the tiling plan, or (with or without a plan) end the tensor;
- value classes (overflow, NaN, signed zero) and residue (``rounding`` within
  1 ULP, else ``unexplained``) take what is left.

This module reads tile layouts and hazards as data; it never imports the emulator.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Optional

import numpy as np

from conformance import categories
from conformance.dtypes import info, is_nan, is_subnormal, ordered, to_bits, ulp_distance
from conformance.records import Hazard, TileLayout
from conformance.reference import golden as ref
from conformance.report.candidates import Rule, catalogue, slope_dtypes
from conformance.report.metrics import match_mask

_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Batch:
    """One evaluated input batch, flattened: what went in, what came out, what is right.

    A batch may stand for a bigger tensor it was reduced from (``conformance compare`` on
    a large dump keeps every mismatch and a sample of the matching elements): ``where``
    holds each element's flat index in that tensor, ``numel`` its size, and ``weight`` how
    many of its elements each of the batch's last ``weight.size`` elements stands for; the
    elements before those stand for one each.  A reduced batch holds its mismatches first,
    then the sample, each in tensor order, so the mismatches need no weights and are the
    batch's leading positions.  None means the batch is the whole tensor."""

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

    @property
    def tensor_size(self) -> int:
        return int(self.x.size if self.numel is None else self.numel)

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

    def variant(self, index: Optional[np.ndarray] = None, **rule: Any) -> np.ndarray:
        """Golden recomputed under ``rule`` (golden keywords, plus ``alpha``)."""
        if not rule:
            return self.golden if index is None else self.golden[index]
        alpha = rule.pop("alpha", self.alpha)
        flush_output, sat_inputs = rule.pop("flush_output", False), rule.pop("saturate_inputs", False)
        x = self.x if index is None else self.x[index]
        dy = None if self.dy is None else (self.dy if index is None else self.dy[index])
        if sat_inputs:  # per-op saturation: operands saturate when widened to float32
            x, dy = _saturated32(x), None if dy is None else _saturated32(dy)
        if rule.pop("flush_inputs", False):  # DAZ on every read, selected values included
            x, dy = ref.flush_to_zero(x), None if dy is None else ref.flush_to_zero(dy)
        if self.direction == "forward":
            y = ref.leaky_relu(x, alpha, out_dtype=self.out_dtype, **rule)
        else:
            y = ref.leaky_relu_backward(dy, x, alpha, out_dtype=self.out_dtype, **rule)
        return ref.flush_to_zero(y) if flush_output else y

    @cached_property
    def dtypes(self) -> tuple[str, str]:
        return info(self.x.dtype).name, self.out_dtype


def _saturated32(v: np.ndarray) -> np.ndarray:
    """Operands as a saturating float32 unit reads them: NaN -> 0, ±inf -> ±max."""
    return ref.saturated(v.astype(np.float32), info("float32"))


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
class _State:
    """What is still unexplained, and the claims so far."""

    remaining: np.ndarray
    claims: list = field(default_factory=list)

    def claim(self, claim: Claim) -> None:
        self.claims.append(claim)
        if claim.in_tensor:
            self.remaining = _without(self.remaining, claim.index)


_MARKED = 8  # an index holding at least 1/8 of the places below its top is removed by marking


def _without(remaining: np.ndarray, index: np.ndarray) -> np.ndarray:
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


def triage(batch: Batch, *, mismatches: np.ndarray, hazards: Sequence[Hazard] = (),
           layout: Optional[TileLayout] = None) -> list[Claim]:
    """Explain every mismatching element (flat indices ``mismatches``) by one category."""
    state = _State(np.asarray(mismatches, dtype=np.int64))
    _hazards(batch, state, hazards)
    with np.errstate(all="ignore"):
        if state.remaining.size:  # a shift is proved element by element, before chance matches
            _shifted(batch, state, _beyond_rounding(batch, state.remaining))
        if state.remaining.size:
            _semantics(batch, state)
        _tail(batch, state, layout)
        _blocks(batch, state)
        _value_classes(batch, state)
    if len({c.category for c in state.claims}) < len(state.claims):  # a rule's rounding and the residue's
        return _merge_claims(state.claims)
    return state.claims


# ----------------------------------------------------------------------------- hazards

def _hazards(batch: Batch, state: _State, hazards: Sequence[Hazard]) -> None:
    n = batch.x.size
    oob = sorted({h.index for h in hazards if h.kind == "out-of-bounds-write"})
    if oob:
        cores = sorted({c for h in hazards if h.kind == "out-of-bounds-write" for c in h.cores})
        before = sum(1 for i in oob if i < 0)
        state.claim(Claim("out-of-bounds-write", np.array(oob, dtype=np.int64), len(oob),
                          "the kernel wrote outside the output tensor (red zones before or after it)",
                          {"before": before, "after": len(oob) - before, "cores": cores},
                          in_tensor=False))
    races = [h for h in hazards if h.kind == "write-race" and 0 <= h.index < n]
    if races:
        index = np.array(sorted({h.index for h in races}), dtype=np.int64)
        pairs = sorted({tuple(sorted(h.cores)) for h in races})
        wrong = int(np.isin(index, state.remaining).sum())
        state.claim(Claim("write-race", index, index.size,
                          "elements written by more than one core",
                          {"mismatching": wrong, "cores": [list(p) for p in pairs]}))


# ----------------------------------------------------------------------------- semantics

RULE_COST = 0.45  # description length of one rule, in elements: two rules may explain one
_FULL_SCOPE = 1 << 14  # batches up to this size are scored on every element
_SAMPLE = 1 << 13  # larger ones on every mismatch and special value plus this many others
_GLANCE = 1 << 12  # a rule's first look: every special mismatch and this many others


@dataclass(frozen=True)
class _Scope:
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


def _comparable(v: np.ndarray) -> np.ndarray:
    """``v`` in a dtype numpy compares, tests and takes ``abs`` of exactly: its own when
    numpy's (no float64 copy), else float64 (bfloat16)."""
    if v.dtype.kind == "f":
        return v
    with np.errstate(invalid="ignore"):  # NaN payloads of bfloat16 warn when widened
        return v.astype(np.float64)


def _special(batch: Batch, index: np.ndarray) -> np.ndarray:
    return special_values(batch.x[index], batch.golden[index], None if batch.dy is None else batch.dy[index])


def _scope(batch: Batch, mismatches: np.ndarray) -> _Scope:
    n = batch.x.size
    if batch.weight is not None:  # a reduced batch: its matching elements are already a sample
        if _leading(mismatches):  # the batch's own order: mismatches first
            return _Scope(None, mismatches.size, batch.weight_of(np.arange(mismatches.size, n)))
        keep = np.ones(n, dtype=bool)
        keep[mismatches] = False
        others = np.flatnonzero(keep)
        return _Scope(np.concatenate([mismatches, others]), mismatches.size, batch.weight_of(others))
    keep = np.ones(n, dtype=bool)
    keep[mismatches] = False
    others = np.flatnonzero(keep)
    if n <= _FULL_SCOPE:
        return _Scope(np.concatenate([mismatches, others]), mismatches.size, np.ones(others.size))
    is_special = _special(batch, others)
    special, plain = others[is_special], others[~is_special]
    pick = np.sort(np.random.default_rng(0).choice(plain, min(_SAMPLE, plain.size), replace=False))
    weight = np.ones(special.size + pick.size)
    weight[special.size:] = plain.size / max(pick.size, 1)
    return _Scope(np.concatenate([mismatches, special, pick]), mismatches.size, weight)


def _leading(index: np.ndarray) -> bool:
    """``index`` is 0, 1, ..., k-1 (the batch's first k positions, in order)."""
    return index.size == 0 or (int(index[0]) == 0 and int(index[-1]) == index.size - 1
                               and bool((index[1:] > index[:-1]).all()))


class _Reach(dict):
    """Per kind of element a rule can change ("nan", "zero", "special", "tiny"), which of
    the scope's mismatches are of that kind; each kind is computed when a rule first asks."""

    def __init__(self, batch: Batch, scope: _Scope) -> None:
        super().__init__()
        self.batch, self.scope = batch, scope

    def __missing__(self, kind: str) -> np.ndarray:
        self[kind] = mask = _reach(self.batch, self.scope, kind)
        return mask


def _reach(batch: Batch, scope: _Scope, kind: str) -> np.ndarray:
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
    g, a = _comparable(g), _comparable(a)
    xw, dw = _comparable(x), _comparable(dy)
    zero = (xw == 0) | (dw == 0) | (g == 0) | (a == 0) | is_subnormal(x)
    if kind == "zero":
        return zero
    return zero | ~np.isfinite(xw) | ~np.isfinite(dw) | ~np.isfinite(g)


def _below_normal(v: np.ndarray) -> np.ndarray:
    """``|v|`` is below the smallest normal number of its dtype (zeros and subnormals)."""
    return (to_bits(v) & info(v.dtype).exp_mask) == 0


def _plausible(rule: Rule, ratios: np.ndarray) -> bool:
    """A slope is worth trying only if some element shows it (actual/input within 1.6%
    of it: a slope or inputs rounded to a 16-bit dtype stay closer); with no
    informative element every slope is.  ``ratios`` are sorted, without NaN: the
    nearest ratio below the slope and the nearest above are the closest (a rounded
    difference is monotone), so only they are tested."""
    kw = rule.kw
    if rule.category != "alpha-mismatch" or "alpha" not in kw or ratios.size == 0:
        return True
    slope = ref.effective_slope(kw["alpha"], slope_dtype=kw.get("slope_dtype"))
    at = int(np.searchsorted(ratios, slope))
    near = ratios[max(at - 1, 0):at + 1]
    return bool((np.abs(near - slope) <= abs(slope) * 2.0 ** -6).any())  # inputs may be narrowed


def _merged(stack: Sequence[Rule]) -> dict:
    out: dict = {}
    for r in stack:
        out.update(r.kw)
    return out


def _key(stack: Sequence[Rule]) -> tuple:
    return tuple(sorted(_merged(stack).items(), key=lambda i: i[0]))


class _Selector:
    """Scores stacks of rules on a scope: description length = rules + wrong elements."""

    def __init__(self, batch: Batch, scope: _Scope) -> None:
        self.batch, self.scope = batch, scope
        self.actual = scope.take(batch.actual)
        self._cache: dict = {}
        self._right: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(prediction) -> it, where right
        self.reach = _Reach(batch, scope)

    def predict(self, stack: Sequence[Rule]) -> np.ndarray:
        """The stack's prediction on the whole scope."""
        key = _key(stack)
        if key not in self._cache:
            kw, index = dict(key), self.scope.index
            if index is None:  # the scope is the batch in order
                self._cache[key] = self.batch.variant(**kw)
            else:
                self._cache[key] = self.batch.variant(index, **kw) if kw else self.batch.golden[index]
        return self._cache[key]

    def keep(self, stacks: Sequence[Sequence[Rule]]) -> None:
        """Forget every prediction but those of ``stacks`` (a large batch's are big)."""
        keys = {_key(s) for s in stacks}
        self._cache = {k: v for k, v in self._cache.items() if k in keys}
        self._right.clear()

    def on_mismatches(self, stack: Sequence[Rule]) -> np.ndarray:
        """The stack's prediction on the mismatches (the scope's first elements)."""
        return self.predict(stack)[:self.scope.n_mis]

    def whole(self, stack: Sequence[Rule]) -> np.ndarray:
        """The stack's prediction on the whole batch: the scope's, put in place when the
        scope is every element."""
        if self.scope.size != self.batch.x.size:
            return self.batch.variant(**_merged(stack))
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
        for lo in range(0, n, _PIECE):
            part = slice(lo, min(lo + _PIECE, n))
            out[part] = special_values(take(batch.x, part), take(batch.golden, part),
                                       None if batch.dy is None else take(batch.dy, part))
        return out

    @cached_property
    def zero_pairs(self) -> np.ndarray:
        """Which mismatches (scope positions) have a zero on both sides."""
        n = self.scope.n_mis
        g = self.scope.take(self.batch.golden, slice(0, n))
        return (_comparable(g) == 0) & (_comparable(self.actual[:n]) == 0)

    def glance(self, wrong: np.ndarray) -> Optional[np.ndarray]:
        """For many wrong mismatches, a sample of them: every special value, and 4,096
        others.  None when there are few."""
        if wrong.size <= _GLANCE:
            return None
        rng = np.random.default_rng(1)
        if wrong.size == self.scope.n_mis:  # every mismatch: ``wrong`` is 0, 1, ..., n_mis - 1
            special = self.special_mismatches
            if not special.any():  # the others are every position: pick positions alone
                return np.sort(rng.choice(wrong.size, _GLANCE, replace=False))
            specials, others = np.flatnonzero(special), np.flatnonzero(~special)
        else:
            special = self.special_mismatches[wrong]
            specials, others = wrong[special], wrong[~special]
        pick = rng.choice(others, min(_GLANCE, others.size), replace=False)
        return np.sort(np.concatenate([specials, pick]))

    def reproduced(self, trial: Sequence[Rule], some: np.ndarray) -> np.ndarray:
        """Which of the mismatches ``some`` (scope positions) ``trial`` reproduces, computed
        on them alone."""
        pred = self.batch.variant(self.scope.positions(some), **_merged(trial))
        return match_mask(pred, self.actual[some])

    def newly(self, trial: Sequence[Rule], wrong: np.ndarray) -> np.ndarray:
        """Which of the mismatches ``wrong`` (scope positions) ``trial`` reproduces: the
        cheap first look, on the elements the stack below still gets wrong.  When they are
        most of the scope, the prediction on the whole scope (kept for scoring) serves."""
        n = self.scope.n_mis
        if 2 * wrong.size >= self.scope.size:
            right = self.right_of(self.predict(trial))[:n]
            if wrong.size == n:  # every mismatch
                return right
            out = np.zeros(n, dtype=bool)
            out[wrong] = right[wrong]
            return out
        out = np.zeros(n, dtype=bool)
        out[wrong] = self.reproduced(trial, wrong)
        return out

    def right(self, pred: np.ndarray) -> np.ndarray:
        return match_mask(pred, self.actual[:pred.size])

    def right_of(self, pred: np.ndarray) -> np.ndarray:
        """Where a prediction on the whole scope (from :meth:`predict`) is right, computed
        once per prediction."""
        hit = self._right.get(id(pred))
        if hit is None or hit[0] is not pred:
            hit = self._right[id(pred)] = (pred, self.right(pred))
        return hit[1]

    def length(self, right: np.ndarray, stack: Sequence[Rule]) -> float:
        """Description length of ``stack`` whose prediction is right where ``right``: the
        mismatches it gets wrong, the (weighted) other elements it contradicts, its rules."""
        n = self.scope.n_mis
        contradicted = float((self.scope.weight * ~right[n:]).sum())
        return (n - int(np.count_nonzero(right[:n]))) + contradicted + RULE_COST * sum(r.complexity for r in stack)

    def beyond_zero_signs(self, newly: np.ndarray, right_now: np.ndarray) -> bool:
        """A rule that explains only zero signs must explain most of the wrong zero signs:
        flipped zeros are few, and a formula that matches some of them by chance is no cause."""
        zeros = self.zero_pairs
        if (newly & ~zeros).any():
            return True
        return 2 * int(np.count_nonzero(newly)) > int(np.count_nonzero(zeros & ~right_now))

    def groups_gain(self, rule: Rule, pred: np.ndarray, before: np.ndarray) -> bool:
        """Every value group the rule changes gains from it (saturation: NaN and ±inf apart)."""
        if rule.groups is None:
            return True
        changed = ~match_mask(pred, before)
        gain = self.right_of(pred).astype(np.int64) - self.right_of(before)
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


def _round(sel: _Selector, stack: list[Rule], cands: list[Rule], current: np.ndarray) -> list[_Choice]:
    """Every candidate that, stacked on ``stack``, could shorten the description."""
    used = frozenset().union(*(r.keys for r in stack)) if stack else frozenset()
    n = sel.scope.n_mis
    right_now = sel.right_of(current)[:n]
    wrong = np.flatnonzero(~right_now) if right_now.any() else np.arange(n)
    glance = sel.glance(wrong)
    reached: dict[str, bool] = {}  # per kind: is some wrong element of it
    out = []
    for order, r in enumerate(cands):
        if r in stack or r.keys & used or wrong.size == 0:
            continue
        if r.reach is not None and not _reaches(sel, r.reach, wrong, reached):
            continue  # none of the wrong elements is of the kind the rule changes
        trial = stack + [r]
        if glance is not None and not sel.reproduced(trial, glance).any():
            continue  # reproduces none of the sample (every special value is in it)
        newly = sel.newly(trial, wrong)
        if np.count_nonzero(newly) <= RULE_COST * r.complexity or not sel.beyond_zero_signs(newly, right_now):
            continue  # cannot pay for itself even with no contradiction
        pred = sel.predict(trial)
        if sel.groups_gain(r, pred, current):
            right = sel.right_of(pred)
            out.append(_Choice(sel.length(right, trial), order, r, pred, int(np.count_nonzero(right[:n]))))
    return out


def _reaches(sel: _Selector, kind: str, wrong: np.ndarray, reached: dict[str, bool]) -> bool:
    """Some of the mismatches ``wrong`` is of ``kind`` (remembered in ``reached``)."""
    if kind not in reached:
        mask = sel.reach[kind]
        reached[kind] = bool(mask.any() if wrong.size == mask.size else mask[wrong].any())
    return reached[kind]


BEAM = 3  # stacks kept per depth: a pair of rules that only together explain is found


@dataclass
class _Stack:
    length: float
    rules: list
    pred: np.ndarray
    alternatives: dict
    right: int = 0


def _grow(sel: _Selector, node: _Stack, cands: list[Rule]) -> list[_Stack]:
    """The stacks one rule longer that describe the batch in fewer bits than ``node``, or
    that reproduce more mismatches (a rule that only with a second one is right)."""
    choices = sorted((c for c in _round(sel, node.rules, cands, node.pred)
                      if c.length < node.length or c.right > node.right),
                     key=lambda c: (c.length, c.order))
    out = _ByPrediction()  # one child per distinct prediction; equal ones are its ties
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

    def __init__(self) -> None:
        self._by: dict[tuple, list[_Stack]] = {}
        self._order: list[_Stack] = []

    @staticmethod
    def _fingerprint(pred: np.ndarray) -> tuple:
        bits = _tie_bits(pred)
        step = max(1, bits.size >> 13)
        return pred.dtype.str, bits.size, bits[::step].tobytes()

    def get(self, pred: np.ndarray) -> Optional[_Stack]:
        bits = _tie_bits(pred)
        for stack in self._by.get(self._fingerprint(pred), ()):
            if stack.pred is pred or np.array_equal(_tie_bits(stack.pred), bits):
                return stack
        return None

    def add(self, pred: np.ndarray, stack: _Stack) -> None:
        self._by.setdefault(self._fingerprint(pred), []).append(stack)
        self._order.append(stack)

    def items(self) -> list[_Stack]:
        return list(self._order)


def _bound(stack: _Stack) -> float:
    """No stack grown from this one is shorter than its rules alone."""
    return RULE_COST * sum(r.complexity for r in stack.rules)


def _keep(grown: list[_Stack]) -> list[_Stack]:
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
    return _beam(_Selector(batch, _scope(batch, mismatches)), cands)


def _beam(sel: _Selector, cands: list[Rule]) -> tuple[list[Rule], dict]:
    """:func:`select` on the scope of ``sel``."""
    pred = sel.predict([])
    best = _Stack(sel.length(sel.right_of(pred), []), [], pred, {})
    beam = [best]
    while beam:
        grown = _ByPrediction()
        for node in beam:
            for child in _grow(sel, node, cands):
                if grown.get(child.pred) is None:
                    grown.add(child.pred, child)
        beam = _keep(grown.items())
        shortest = min(beam, key=lambda s: s.length, default=None)
        if shortest is not None and shortest.length < best.length:
            best = shortest
        floor = RULE_COST * min((r.complexity for r in cands), default=1.0)
        beam = [s for s in beam if _bound(s) + floor < best.length]  # branch and bound
    return best.rules, best.alternatives


def _estimates(ratio: np.ndarray, negative: np.ndarray) -> list[float]:
    """The median slope actual/input on each side of zero (a formula like min(x, a*x)
    shows its slope on the positive side)."""
    return [float(np.median(ratio[side], overwrite_input=True))  # the selection is a copy
            for side in (negative, ~negative) if side.any()]


# More remaining mismatches than this: the stack is selected on a stride sample of about
# _SAMPLED of them (every candidate rule is computed on the sample alone) and of at most
# _EVIDENCE times as many other elements, then attributed, and so proved element by
# element, on all of them; the leftovers go round again.  Up to it, nothing is sampled.
SELECT_SAMPLE = 1 << 16
_SAMPLED = 1 << 14
_EVIDENCE = 4


def _semantics(batch: Batch, state: _State) -> None:
    while state.remaining.size > SELECT_SAMPLE:
        if not _sampled_round(batch, state) or state.remaining.size == 0:
            return
    cands = _candidates(batch, state.remaining)
    sel = _Selector(batch, _scope(batch, state.remaining))
    stack, alternatives = _beam(sel, cands)
    if stack:
        sel.keep([stack] + [stack[:i] + stack[i + 1:] for i in range(len(stack))])
        for claim in _attribute(sel, state.remaining, stack, alternatives):
            state.claim(claim)


def _sampled_round(batch: Batch, state: _State) -> bool:
    """One round for many mismatches: select the stack on a stride sample of them, attribute
    it on all of them.  False when it claims nothing."""
    mis = state.remaining
    cands = _candidates(batch, mis)
    whole = _scope(batch, mis)
    sample = _sampled(whole, mis, min(_SAMPLED, SELECT_SAMPLE))
    stack, alternatives = _beam(_Selector(batch, sample), cands)
    if not stack:
        return False
    claims = _attribute(_Selector(batch, whole), mis, stack, alternatives)
    for claim in claims:
        state.claim(claim)
    return state.remaining.size < mis.size


def _sampled(scope: _Scope, mis: np.ndarray, size: int) -> _Scope:
    """``scope`` (scoped on the mismatches ``mis``) with every k-th mismatch alone, about
    ``size`` of them, and the other elements' weights divided by k: each kept mismatch
    stands for k, so the balance between mismatches explained and elements contradicted
    is the whole batch's.  More than ``_EVIDENCE * size`` other elements are thinned by a
    stride too, their total weight kept."""
    step = -(-mis.size // size)
    kept = np.arange(0, mis.size, step)
    evidence = scope.weight * (kept.size / mis.size)
    others = np.arange(scope.n_mis, scope.size)
    if others.size > _EVIDENCE * size:
        wide = -(-others.size // (_EVIDENCE * size))
        others, evidence = others[::wide], evidence[::wide] * (evidence.sum() / evidence[::wide].sum())
    index = np.concatenate([scope.positions(kept), scope.positions(others)])
    return _Scope(index, kept.size, evidence)


def _candidates(batch: Batch, mis: np.ndarray) -> list[Rule]:
    """The catalogue for the slopes the mismatches ``mis`` show, without the slopes no
    element shows (the ratios are dropped on return: on a large dump they are big)."""
    observed, normal, negative = _slopes(batch, mis)
    if observed.size and normal.all() and (negative.all() or not negative.any()):  # the median of all
        observed.sort()  # no NaN: both sides finite
        estimates = [_sorted_median(observed)]
    else:
        estimates = _estimates(observed[normal], negative[normal])
        observed.sort()
    del normal, negative
    cands = catalogue(alpha=batch.alpha, direction=batch.direction, dtypes=batch.dtypes,
                      estimates=estimates)
    return [r for r in cands if _plausible(r, observed)]


def _sorted_median(ratio: np.ndarray) -> float:
    """``np.median`` of sorted values, taken as it takes it: the mean of the middle one or two."""
    half = ratio.size // 2
    return float(np.mean(ratio[half - 1:half + 1] if ratio.size % 2 == 0 else ratio[half:half + 1]))


def _attribute(sel: _Selector, mis: np.ndarray, stack: list[Rule], alternatives: dict) -> list[Claim]:
    """Each explained mismatch goes to the rule it needs that moves its value most (the
    dominant cause: a flush or narrowed input beats a 1-ULP slope rounding; ties go to the
    later category in registry order).  An element that only neutral context explains
    stays for ``rounding``.  ``mis`` are the mismatches ``sel`` was scoped on."""
    full = sel.on_mismatches(stack)
    explained = match_mask(full, sel.actual[:mis.size])
    moves = [_moved(full, sel.on_mismatches([s for s in stack if s is not r])) * explained
             for r in stack] if len(stack) > 1 else []
    named = sorted((i for i, r in enumerate(stack) if r.category is not None),
                   key=lambda i: (-categories.order(stack[i].category), i))
    if len(stack) == 1:  # its explained elements are its own (as below, without the moves)
        hits = mis if explained.all() else mis[explained]  # all of them: no copy
        claims = [_rule_claim(sel, hits, stack, 0, alternatives.get(stack[0], []))] if named and hits.size else []
        return _merge_claims([c for c in claims if c.count])
    owner = np.full(mis.size, -1, dtype=np.int16)  # stack positions
    if named:
        best = np.stack([moves[i] for i in named])
        pick = np.argmax(best, axis=0)  # first of the largest: the later category on ties
        owner = np.where(best.max(axis=0) > 0, np.asarray(named)[pick], -1)
        neutral_only = np.zeros(mis.size, dtype=bool)
        for i, r in enumerate(stack):
            if r.category is None:
                neutral_only |= moves[i] > 0
        owner = np.where((owner < 0) & explained & ~neutral_only, named[0], owner)
    claims = [_rule_claim(sel, mis[owner == i], stack, i, alternatives.get(stack[i], []))
              for i in named if (owner == i).any()]
    return _merge_claims([c for c in claims if c.count])


def _moved(full: np.ndarray, without: np.ndarray) -> np.ndarray:
    """How far removing a rule moves each value: ULPs, NaN against a number the farthest."""
    dist = ulp_distance(full, without)
    differ = ~match_mask(full, without)
    moved = np.maximum(dist.ulps.astype(np.float64), 0.5) * differ  # a zero's sign moves it too
    return np.where(dist.nan & differ, np.inf, moved)


def _contradicted(sel: _Selector, stack: list[Rule], i: int) -> int:
    """Elements where rule ``i`` changes the stack's prediction and the actual output
    does not follow (counted on the whole batch, where the stack is wrong)."""
    batch = sel.batch
    full = sel.whole(stack)
    wrong = np.flatnonzero(~match_mask(full, batch.actual))
    without = batch.variant(wrong, **_merged(stack[:i] + stack[i + 1:]))
    changed = ~match_mask(full[wrong], without)
    if batch.weight is None:
        return int(changed.sum())
    return int(round(float(batch.weight_of(wrong[changed]).sum())))  # a reduced batch: what the sample stands for


def _rule_claim(sel: _Selector, hits: np.ndarray, stack: list[Rule], i: int, alts: list[Rule]) -> Claim:
    batch, r = sel.batch, stack[i]
    if r.category == "input-precision":
        hits = hits[~_non_finite_symptom(batch, hits)]
    summary = r.summary + "".join(f"; or equally: {a.summary}" for a in alts)
    detail = {**r.detail, **_extra_detail(sel, r, hits, stack, i),
              "explained": int(hits.size), "contradicted": _contradicted(sel, stack, i)}
    if alts:
        detail["alternatives"] = [a.summary for a in alts]
        detail["alternative_categories"] = list(dict.fromkeys(
            a.category for a in alts if a.category not in (None, r.category)))
    return Claim(r.category, hits, int(hits.size), summary, detail)


def _extra_detail(sel: _Selector, r: Rule, hits: np.ndarray, stack: list[Rule], i: int) -> dict:
    batch = sel.batch
    if r.category == "subnormal-flush":
        tiny = is_subnormal(batch.x[hits])
        if batch.dy is not None:
            tiny = tiny | is_subnormal(batch.dy[hits])
        return {"subnormal_inputs": int(tiny.sum()),
                "subnormal_outputs": int(is_subnormal(batch.golden[hits]).sum())}
    if r.category == "rounding":
        return {"max_ulp": _max_ulp(batch, hits) if hits.size else 0}
    if r.category == "saturation":
        g = batch.golden[hits]
        before = sel.whole(stack[:i] + stack[i + 1:])
        return {"nan_to_zero": int(is_nan(g).sum()), "inf_to_max": int(np.isinf(g.astype(np.float64)).sum()),
                "confirmed_by_inf": bool(np.isinf(before.astype(np.float64)).any())}
    return {}


_COUNTS = ("explained", "contradicted", "subnormal_inputs", "subnormal_outputs", "nan_to_zero", "inf_to_max")


def _merge_claims(claims: list[Claim]) -> list[Claim]:
    """One claim per category: indices joined, counts summed, summaries listed."""
    by: dict[str, Claim] = {}
    for c in claims:
        prev = by.get(c.category)
        if prev is None:
            by[c.category] = c
            continue
        detail = {**c.detail, **prev.detail}
        for key in _COUNTS:
            if key in prev.detail and key in c.detail:
                detail[key] = prev.detail[key] + c.detail[key]
        if isinstance(detail.get("confirmed_by_inf"), bool):
            detail["confirmed_by_inf"] = bool(prev.detail.get("confirmed_by_inf") or c.detail.get("confirmed_by_inf"))
        summary = prev.summary if c.summary == prev.summary else f"{prev.summary}; {c.summary}"
        index = np.union1d(prev.index, c.index)
        by[c.category] = Claim(c.category, index, int(index.size), summary, detail)
    return list(by.values())


_PIECE = 1 << 20  # elements per piece where a large batch's temporaries would be big


def _slopes(batch: Batch, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The slopes the elements ``index`` show, actual / input (x forward, dy backward),
    wherever both are finite and the input is not zero (a zero actual counts as slope 0):
    every slope the output shows.  With them, which are informative (the exact result is a
    normal number) and which lie on the negative side (x < 0 forward; x <= 0 or NaN backward).
    Computed a piece at a time into arrays as long as ``index`` (a view of their start is
    returned: the pages past it are never touched)."""
    slopes, normal, negative = np.empty(index.size), np.empty(index.size, bool), np.empty(index.size, bool)
    done = 0
    for lo in range(0, index.size, _PIECE):
        piece = _slopes_piece(batch, index[lo:lo + _PIECE])
        end = done + piece[0].size
        slopes[done:end], normal[done:end], negative[done:end] = piece
        done = end
    return slopes[:done], normal[:done], negative[:done]


def _span(index: np.ndarray) -> Any:
    """``index`` as a slice when it is consecutive and ascending (taking is then a view)."""
    if index.size and int(index[-1]) - int(index[0]) == index.size - 1 and bool((index[1:] > index[:-1]).all()):
        return slice(int(index[0]), int(index[-1]) + 1)
    return index


def _slopes_piece(batch: Batch, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    at = _span(index)
    a, xs = _comparable(batch.actual[at]), _comparable(batch.x[at])
    v = xs if batch.direction == "forward" else _comparable(batch.dy[at])
    ok = np.isfinite(a) & np.isfinite(v) & (v != 0)
    slopes = a[ok].astype(np.float64) / v[ok].astype(np.float64)
    g, xs = _comparable(batch.golden[at][ok]), xs[ok]
    normal = (np.abs(g) >= info(batch.out_dtype).smallest_normal) & np.isfinite(g)
    # forward, x = v is finite and not zero: on one side or the other
    negative = xs < 0 if batch.direction == "forward" else (xs <= 0) | np.isnan(xs)
    return slopes, normal, negative


def _non_finite_symptom(batch: Batch, index: np.ndarray) -> np.ndarray:
    """Where the actual value is inf or NaN but golden is finite: an operand overflowed
    when narrowed, and the value classes (``overflow``, ``spurious-nan``) name that."""
    a, g = batch.actual[index].astype(np.float64), batch.golden[index].astype(np.float64)
    return ~np.isfinite(a) & np.isfinite(g)


# ----------------------------------------------------------------------------- location

def tail_regions(layout: TileLayout, numel: int) -> list[tuple[int, int, dict]]:
    """(start, stop, description) of the tail regions: the tail tile of each core that has
    body tiles too, the tensor's last tile when it is shorter, the unaligned tail (last
    partial block plus the block before it, which a shifted-back copy overlaps) and
    anything past the last span."""
    tiles_per_core = Counter(s.core for s in layout.spans)
    last = max(layout.spans, key=lambda s: s.start, default=None)
    spans = [s for s in layout.spans if s.is_tail and (tiles_per_core[s.core] > 1 or s is last)]
    regions = [(s.start, s.stop, {"core": s.core, "tile": s.tile, "start": s.start, "stop": s.stop})
               for s in spans]
    align = max(layout.align_elements, 1)
    if numel % align:
        lo = max(0, numel - numel % align - align)
        regions.append((lo, numel, {"unaligned_tail": True, "start": lo, "stop": numel}))
        regions.append((numel - numel % align, numel,
                        {"last_partial_block": True, "start": numel - numel % align, "stop": numel}))
    covered = max((s.stop for s in layout.spans), default=0)
    if covered < numel:
        regions.append((covered, numel, {"uncovered": True, "start": covered, "stop": numel}))
    return regions


def _confined(rest: np.ndarray, regions: list[tuple[int, int, dict]], numel: int) -> list[dict]:
    """The regions holding the errors, if they hold all of them, are at least half wrong
    (a tail defect garbles its tail, not one value class) and leave elements outside.
    Each error counts against the smallest region that holds it, so a 1-element dropped
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
    return used if left.size == 0 and dense and not mask.all() else []


def _beyond_rounding(batch: Batch, index: np.ndarray) -> np.ndarray:
    """The elements of ``index`` that the 1-ULP residue rule would not take."""
    a, g = batch.actual[index], batch.golden[index]
    finite = np.isfinite(a.astype(np.float64)) & np.isfinite(g.astype(np.float64))
    return index[~(finite & (ulp_distance(a, g).ulps <= 1))]


def _tail(batch: Batch, state: _State, layout: Optional[TileLayout]) -> None:
    """Errors beyond 1-ULP residue, confined to the tail regions of the tiling plan or, with
    or without a plan, to the last k elements, are ``tail-block``."""
    rest = _beyond_rounding(batch, state.remaining)
    if rest.size == 0:
        return
    n = batch.tensor_size
    used = _confined(batch.flat(rest), tail_regions(layout, n), n) if layout is not None else []
    if used:
        lo, hi = int(batch.flat(rest).min()), int(batch.flat(rest).max()) + 1
        state.claim(Claim(
            "tail-block", rest, rest.size,
            "the remaining errors all lie in tail tiles or the unaligned tail; the rest is clean",
            {"start": lo, "stop": hi, "regions": used, "align_elements": layout.align_elements,
             "explained": int(rest.size), "contradicted": 0}))
    else:
        _last_elements(batch, state, rest)


def _last_elements(batch: Batch, state: _State, rest: np.ndarray) -> None:
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
    odd = rest[~_value_class(batch, rest)]
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


def _claim_end(batch: Batch, state: _State, index: np.ndarray, n: int, *, proved: bool) -> None:
    lo = int(batch.flat(index).min())
    why = "the same kinds of input before them are right" if proved else "the rest is clean"
    state.claim(Claim(
        "tail-block", index, index.size,
        f"the remaining errors are confined to the last {n - lo} elements [{lo}, {n}); {why}",
        {"start": lo, "stop": n, "last": n - lo, "explained": int(index.size), "contradicted": 0}))


def _kinds(v: np.ndarray) -> np.ndarray:
    """Sign and biased exponent of each value, NaN apart: what a value defect depends on."""
    bits = to_bits(v).astype(np.int64)
    rec = info(v.dtype)
    return np.where(is_nan(v), -1, bits >> rec.mant_bits)


def _position_proved(batch: Batch, rest: np.ndarray) -> bool:
    """For at least half of the errors the same kind of input occurs earlier, so the
    position, not the value, is what differs."""
    seen = np.isin(_kinds(batch.x[rest]), _kinds(batch.before(int(batch.flat(rest).min()))))
    return 2 * int(seen.sum()) >= rest.size


def _value_class(batch: Batch, index: np.ndarray) -> np.ndarray:
    """Elements a value class (overflow, NaN, signed zero) names."""
    masks = _classes(batch.actual[index], batch.golden[index])[:4]
    return np.logical_or.reduce([m for _, m, _ in masks])


def _blocks(batch: Batch, state: _State) -> None:
    """Errors beyond 1-ULP residue that fill one contiguous block, or every k-th element of
    a range, away from the tail, where the same kinds of input elsewhere are right, are
    ``stale-block``: the position, not the value, is what differs (a tile never written or
    written from the wrong buffer, a row, a stride of one lane)."""
    rest = _beyond_rounding(batch, state.remaining)
    if rest.size < 2:
        return
    flat, wrong = batch.flat(rest), batch.flat(state.remaining)
    step = int(np.gcd.reduce(np.diff(flat))) if rest.size >= 3 else 1
    step = step if step > 1 else 1
    lo, hi = _grown(wrong, int(flat.min()), int(flat.max()), step)  # its edges may be zero signs
    pos = batch.flat(np.arange(batch.x.size))
    inside = (pos >= lo) & (pos < hi) & ((pos - lo) % step == 0)
    slots, n = (hi - 1 - lo) // step + 1, batch.tensor_size
    hidden = int((inside & (_comparable(batch.golden) == 0) & (_comparable(batch.actual) == 0)).sum())
    if 2 * int(inside[state.remaining].sum()) < slots - hidden or 2 * slots > n:
        return  # (a zero result is invisible under a block of zeros)
    if rest.size < (_STRIDE_EVIDENCE if step > 1 else _BLOCK_EVIDENCE):
        return  # a few leftovers line up by chance
    kinds = _kinds(batch.x)
    if 2 * int(np.isin(kinds[rest], kinds[~inside]).sum()) < rest.size or _sorted_inputs(batch.x[rest]):
        return  # inputs of kinds seen nowhere else, or sorted: a value defect may explain it
    index = state.remaining[inside[state.remaining]]
    where = f"[{lo}, {hi})" if step == 1 else f"every {step}th element of [{lo}, {hi})"
    state.claim(Claim(
        "stale-block", index, index.size,
        f"the remaining errors fill {where} ({_stale_values(batch, index)}); the same kinds of "
        "input elsewhere are right",
        {"start": lo, "stop": hi, "step": step, "explained": int(index.size), "contradicted": 0}))


_SHIFTS = np.array([k for k in range(-64, 65) if k])  # an output offset by up to 64 elements


def _shifted(batch: Batch, state: _State, rest: np.ndarray) -> bool:
    """An output written k elements off: element i holds the exact result of element i - k
    (proved by the values themselves).  Claims those elements, and the k at the edge that
    have no source, as ``stale-block``."""
    n = batch.golden.size
    if batch.where is not None or rest.size < 4 or 2 * int(rest[-1] - rest[0] + 1) < n:
        return False  # a shift moves the whole output; a copied block is a block or a tail
    if _sorted_inputs(batch.x[rest]):
        return False  # over sorted inputs a neighbour's result is a value a few ULP away
    a = _comparable(batch.actual[rest])
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


def _sorted_inputs(x: np.ndarray) -> bool:
    """Inputs that rise or fall with the position (an enumeration of bit patterns, a
    linspace): there the position and the value cannot be told apart."""
    for key in (to_bits(x).astype(np.int64), ordered(x)):
        step = np.diff(key)
        if (step >= 0).all() or (step <= 0).all():
            return True
    return False


_BLOCK_EVIDENCE, _STRIDE_EVIDENCE = 4, 8  # errors a block / a stride needs before it is one
_GAP = 3  # slots a block's edge may skip (elements a stale value happens to get right)


def _grown(wrong: np.ndarray, first: int, last: int, step: int) -> tuple[int, int]:
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
    if (_comparable(a) == 0).all():
        return "zeros"
    if batch.where is None:
        span = int(index.max() - index.min()) + 1
        for shift in (span, -span):
            src = index - shift
            if src.min() >= 0 and src.max() < batch.golden.size and match_mask(a, batch.golden[src]).all():
                return f"the results of the elements {abs(shift)} {'before' if shift > 0 else 'after'}"
    slopes, normal, negative = _slopes(batch, index)
    ratio, negative = slopes[normal], negative[normal]
    if negative.any():  # a per-block parameter: this block's negative side has its own slope
        c = float(np.median(ratio[negative]))
        for digits in range(1, 8):
            slope = float(f"{c:.{digits}g}")
            for held in (None, *slope_dtypes(batch.dtypes)):  # exact, or held in a narrower dtype
                y = batch.variant(index, alpha=slope, slope_dtype=held)
                if 10 * int(match_mask(y, a).sum()) >= 9 * index.size:
                    return f"computed with slope {slope!r}" + (f" held as {held}" if held else "")
    return "other values"


# ----------------------------------------------------------------------------- value classes

def _classes(actual: np.ndarray, golden: np.ndarray) -> list[tuple[str, np.ndarray, str]]:
    a, g = actual.astype(np.float64), golden.astype(np.float64)
    nan_a, nan_g = is_nan(actual), is_nan(golden)
    both_zero = (a == 0) & (g == 0)
    finite = np.isfinite(a) & np.isfinite(g)
    return [
        ("overflow", np.isfinite(g) & np.isinf(a), "finite results became ±inf"),
        ("spurious-nan", nan_a & ~nan_g, "NaN where the exact result is a number"),
        ("lost-nan", nan_g & ~nan_a, "a NaN result became a number"),
        ("signed-zero", both_zero & (np.signbit(a) != np.signbit(g)), "zero with the wrong sign"),
        ("rounding", finite & (ulp_distance(actual, golden).ulps <= 1),
         "within 1 ULP of the exact result (double rounding or another compute precision)"),
        ("unexplained", np.ones(a.shape, bool), "differences no rule explains"),
    ]


def _value_classes(batch: Batch, state: _State) -> None:
    rest = state.remaining
    if rest.size == 0:
        return
    taken = np.zeros(rest.size, dtype=bool)
    for category, mask, summary in _classes(batch.actual[rest], batch.golden[rest]):
        mine = mask & ~taken
        if mine.any():
            taken |= mine
            detail = {"max_ulp": _max_ulp(batch, rest[mine])}
            state.claim(Claim(category, rest[mine], int(mine.sum()), summary, detail))


def _max_ulp(batch: Batch, index: np.ndarray) -> int:
    return ulp_distance(batch.actual[index], batch.golden[index]).max()
