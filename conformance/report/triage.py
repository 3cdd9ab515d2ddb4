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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Optional

import numpy as np

from conformance import categories
from conformance.dtypes import info, is_nan, is_subnormal, to_bits, ulp_distance
from conformance.records import Hazard, TileLayout
from conformance.reference import golden as ref
from conformance.report.candidates import Rule, catalogue
from conformance.report.metrics import match_mask

_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Batch:
    """One evaluated input batch, flattened: what went in, what came out, what is right.

    A batch may stand for a bigger tensor it was reduced from (``conformance compare`` on
    a large dump keeps every mismatch and a sample of the matching elements): ``where``
    holds each element's flat index in that tensor (ascending), ``numel`` its size, and
    ``weight`` how many of its elements each batch element stands for.  None means the
    batch is the whole tensor."""

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


def _without(remaining: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``np.setdiff1d(remaining, index, assume_unique=True)``: ascending ``remaining`` is
    searched (binary) instead of compared with every element of ``index``."""
    if remaining.size < 2 or index.size == 0 or not (remaining[1:] > remaining[:-1]).all():
        return np.setdiff1d(remaining, index, assume_unique=True)
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
        if state.remaining.size:
            _semantics(batch, state)
        _tail(batch, state, layout)
        _value_classes(batch, state)
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
    """The elements a selection is scored on, and what each stands for (sampling weight)."""

    index: np.ndarray  # mismatches first
    n_mis: int
    weight: np.ndarray


def special_values(*arrays: Optional[np.ndarray]) -> np.ndarray:
    """Zeros, subnormals, infinities and NaN of any of ``arrays`` (x, dy, golden): rare, and
    where rules differ."""
    present = [a for a in arrays if a is not None]
    out = np.zeros(present[0].shape, dtype=bool)
    for v in present:
        w = _comparable(v)
        out |= (w == 0) | ~np.isfinite(w) | is_subnormal(v)
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
    keep = np.ones(n, dtype=bool)
    keep[mismatches] = False
    others = np.flatnonzero(keep)
    if batch.weight is not None:  # a reduced batch: its matching elements are already a sample
        index = np.concatenate([mismatches, others])
        weight = np.ones(index.size)
        weight[mismatches.size:] = batch.weight[others]
        return _Scope(index, mismatches.size, weight)
    if n <= _FULL_SCOPE:
        index = np.concatenate([mismatches, others])
        return _Scope(index, mismatches.size, np.ones(index.size))
    special = others[_special(batch, others)]
    plain = np.setdiff1d(others, special, assume_unique=True)
    pick = np.sort(np.random.default_rng(0).choice(plain, min(_SAMPLE, plain.size), replace=False))
    index = np.concatenate([mismatches, special, pick])
    weight = np.ones(index.size)
    weight[mismatches.size + special.size:] = plain.size / max(pick.size, 1)
    return _Scope(index, mismatches.size, weight)


class _Reach(dict):
    """Per kind of element a rule can change ("nan", "zero", "special", "tiny"), which of
    ``index`` are of that kind; each kind is computed when a rule first asks for it."""

    def __init__(self, batch: Batch, index: np.ndarray) -> None:
        super().__init__()
        self.batch, self.index = batch, index

    def __missing__(self, kind: str) -> np.ndarray:
        self[kind] = mask = _reach(self.batch, self.index, kind)
        return mask


def _reach(batch: Batch, index: np.ndarray, kind: str) -> np.ndarray:
    """Which of ``index`` are of ``kind``.  Without dy (forward) its stand-in is zero
    everywhere, so every element is a "zero" and a "special" one."""
    x = batch.x[index]
    if kind == "nan":
        return is_nan(x)
    if kind in ("zero", "special") and batch.dy is None:
        return np.ones(index.size, dtype=bool)
    g, a = _comparable(batch.golden[index]), _comparable(batch.actual[index])
    dy = None if batch.dy is None else batch.dy[index]
    if kind == "tiny":
        small = info(batch.out_dtype).smallest_normal
        tiny = is_subnormal(x) | (np.abs(g) < small) | (np.abs(a) < small)
        return tiny if dy is None else tiny | is_subnormal(dy)
    xw, dw = _comparable(x), _comparable(dy)
    zero = (xw == 0) | (dw == 0) | (g == 0) | (a == 0) | is_subnormal(x)
    if kind == "zero":
        return zero
    return zero | ~np.isfinite(xw) | ~np.isfinite(dw) | ~np.isfinite(g)


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


class _Selector:
    """Scores stacks of rules on a scope: description length = rules + wrong elements."""

    def __init__(self, batch: Batch, scope: _Scope) -> None:
        self.batch, self.scope = batch, scope
        self.actual = batch.actual[scope.index]
        self._cache: dict = {}
        self.reach = _Reach(batch, scope.index[:scope.n_mis])

    def predict(self, stack: Sequence[Rule]) -> np.ndarray:
        """The stack's prediction on the whole scope."""
        kw = _merged(stack)
        key = tuple(sorted(kw.items(), key=lambda i: i[0]))
        if key not in self._cache:
            index = self.scope.index
            self._cache[key] = self.batch.variant(index, **kw) if kw else self.batch.golden[index]
        return self._cache[key]

    def on_mismatches(self, stack: Sequence[Rule]) -> np.ndarray:
        """The stack's prediction on the mismatches (the scope's first elements)."""
        return self.predict(stack)[:self.scope.n_mis]

    def whole(self, stack: Sequence[Rule]) -> np.ndarray:
        """The stack's prediction on the whole batch: the scope's, put in place when the
        scope is every element."""
        if self.scope.index.size != self.batch.x.size:
            return self.batch.variant(**_merged(stack))
        out = np.empty_like(self.batch.golden)
        out[self.scope.index] = self.predict(stack)
        return out

    @cached_property
    def special_mismatches(self) -> np.ndarray:
        """Which mismatches (scope positions) are special values, found a piece at a time."""
        return _in_pieces(_special, self.batch, self.scope.index[:self.scope.n_mis])

    def glance(self, wrong: np.ndarray) -> Optional[np.ndarray]:
        """For many wrong mismatches, a sample of them: every special value, and 4,096
        others.  None when there are few."""
        if wrong.size <= _GLANCE:
            return None
        special = self.special_mismatches[wrong]
        others = wrong[~special]
        pick = np.random.default_rng(1).choice(others, min(_GLANCE, others.size), replace=False)
        return np.sort(np.concatenate([wrong[special], pick]))

    def newly(self, trial: Sequence[Rule], wrong: np.ndarray) -> np.ndarray:
        """Which of the mismatches ``wrong`` (scope positions) ``trial`` reproduces: the
        cheap first look, on the elements the stack below still gets wrong.  When they are
        most of the scope, the prediction on the whole scope (kept for scoring) serves."""
        if 2 * wrong.size >= self.scope.index.size:
            pred = self.predict(trial)[wrong]
        else:
            pred = self.batch.variant(self.scope.index[wrong], **_merged(trial))
        out = np.zeros(self.scope.n_mis, dtype=bool)
        out[wrong] = match_mask(pred, self.actual[wrong])
        return out

    def right(self, pred: np.ndarray) -> np.ndarray:
        return match_mask(pred, self.actual[:pred.size])

    def length(self, pred: np.ndarray, stack: Sequence[Rule]) -> float:
        wrong = ~self.right(pred)
        return float((self.scope.weight * wrong).sum()) + RULE_COST * sum(r.complexity for r in stack)

    def beyond_zero_signs(self, newly: np.ndarray, right_now: np.ndarray) -> bool:
        """A rule that explains only zero signs must explain most of the wrong zero signs:
        flipped zeros are few, and a formula that matches some of them by chance is no cause."""
        n = self.scope.n_mis
        g, a = self.batch.golden[self.scope.index[:n]], self.actual[:n]
        zeros = (_comparable(g) == 0) & (_comparable(a) == 0)
        if (newly & ~zeros).any():
            return True
        return 2 * int(newly.sum()) > int((zeros & ~right_now).sum())

    def groups_gain(self, rule: Rule, pred: np.ndarray, before: np.ndarray) -> bool:
        """Every value group the rule changes gains from it (saturation: NaN and ±inf apart)."""
        if rule.groups is None:
            return True
        changed = ~match_mask(pred, before)
        gain = self.right(pred).astype(np.int64) - self.right(before)
        for g in rule.groups(self.batch.golden[self.scope.index]):
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
    right_now = sel.right(current[:sel.scope.n_mis])
    wrong = np.flatnonzero(~right_now)
    glance = sel.glance(wrong)
    out = []
    for order, r in enumerate(cands):
        if r in stack or r.keys & used or wrong.size == 0:
            continue
        if r.reach is not None and not sel.reach[r.reach][wrong].any():
            continue  # none of the wrong elements is of the kind the rule changes
        trial = stack + [r]
        if glance is not None and not sel.newly(trial, glance).any():
            continue  # reproduces none of the sample (every special value is in it)
        newly = sel.newly(trial, wrong)
        if int(newly.sum()) <= RULE_COST * r.complexity or not sel.beyond_zero_signs(newly, right_now):
            continue  # cannot pay for itself even with no contradiction
        pred = sel.predict(trial)
        if sel.groups_gain(r, pred, current):
            right = int(sel.right(pred[:sel.scope.n_mis]).sum())
            out.append(_Choice(sel.length(pred, trial), order, r, pred, right))
    return out


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
    out: dict[bytes, _Stack] = {}  # one child per distinct prediction; equal ones are its ties
    for c in choices:
        key = _prediction_key(c.pred)
        if key in out:
            if c.length == out[key].length:
                out[key].alternatives[out[key].rules[-1]].append(c.rule)
            continue
        out[key] = _Stack(c.length, node.rules + [c.rule], c.pred, {**node.alternatives, c.rule: []}, c.right)
    return list(out.values())


def _prediction_key(pred: np.ndarray) -> bytes:
    """The prediction's bits with every NaN one pattern: two rules that differ only in NaN
    payloads (``max(x, a*x)`` and a select, at x = NaN) predict the same, so they tie."""
    nan = is_nan(pred)
    if not nan.any():
        return pred.tobytes()
    bits = to_bits(pred).copy()
    bits[nan] = np.iinfo(bits.dtype).max  # all ones: a NaN in every float format
    return bits.tobytes()


def _bound(stack: _Stack) -> float:
    """No stack grown from this one is shorter than its rules alone."""
    return RULE_COST * sum(r.complexity for r in stack.rules)


def _keep(grown: list[_Stack]) -> list[_Stack]:
    """The beam: the shortest descriptions, and the stacks reproducing most mismatches."""
    short = sorted(grown, key=lambda s: s.length)[:BEAM]
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
    best = _Stack(sel.length(pred, []), [], pred, {})
    beam = [best]
    while beam:
        grown: dict = {}
        for node in beam:
            for child in _grow(sel, node, cands):
                grown.setdefault(_prediction_key(child.pred), child)
        beam = _keep(list(grown.values()))
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


def _semantics(batch: Batch, state: _State) -> None:
    cands = _candidates(batch, state.remaining)
    sel = _Selector(batch, _scope(batch, state.remaining))
    stack, alternatives = _beam(sel, cands)
    if stack:
        for claim in _attribute(sel, state.remaining, stack, alternatives):
            state.claim(claim)


def _candidates(batch: Batch, mis: np.ndarray) -> list[Rule]:
    """The catalogue for the slopes the mismatches ``mis`` show, without the slopes no
    element shows (the ratios are dropped on return: on a large dump they are big)."""
    cands = catalogue(alpha=batch.alpha, direction=batch.direction, dtypes=batch.dtypes,
                      estimates=_estimates(*_informative_slopes(batch, mis)))
    observed = np.sort(_observed_slopes(batch, mis))  # no NaN: both sides finite
    return [r for r in cands if _plausible(r, observed)]


def _attribute(sel: _Selector, mis: np.ndarray, stack: list[Rule], alternatives: dict) -> list[Claim]:
    """Each explained mismatch goes to the rule it needs that moves its value most (the
    dominant cause: a flush or narrowed input beats a 1-ULP slope rounding; ties go to the
    later category in registry order).  An element that only neutral context explains
    stays for ``rounding``.  ``mis`` are the mismatches ``sel`` was scoped on."""
    batch = sel.batch
    full = sel.on_mismatches(stack)
    explained = match_mask(full, batch.actual[mis])
    moves = [_moved(full, sel.on_mismatches([s for s in stack if s is not r])) * explained
             for r in stack] if len(stack) > 1 else []
    named = sorted((i for i, r in enumerate(stack) if r.category is not None),
                   key=lambda i: (-categories.order(stack[i].category), i))
    owner = np.full(mis.size, -1, dtype=np.int16)  # stack positions
    if len(stack) == 1:  # its explained elements are its own (as below, without the moves)
        owner[explained & bool(named)] = 0
    elif named:
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
    return int(round(float(batch.weight[wrong][changed].sum())))  # a reduced batch: what the sample stands for


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


def _in_pieces(f: Callable[..., Any], batch: Batch, index: np.ndarray) -> Any:
    """``f(batch, index)`` on pieces of ``index``, joined (``f`` is element-wise)."""
    if index.size <= _PIECE:
        return f(batch, index)
    pieces = [f(batch, index[lo:lo + _PIECE]) for lo in range(0, index.size, _PIECE)]
    if isinstance(pieces[0], tuple):
        return tuple(np.concatenate(p) for p in zip(*pieces))
    return np.concatenate(pieces)


def _informative_slopes(batch: Batch, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """actual / input where the exact result is a normal number, and which of those
    ratios lie on the negative side (x < 0 forward; x <= 0 or NaN backward)."""
    return _in_pieces(_informative_piece, batch, index)


def _informative_piece(batch: Batch, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g, a = _comparable(batch.golden[index]), _comparable(batch.actual[index])
    xs = _comparable(batch.x[index])
    if batch.direction == "forward":
        v, negative, positive = xs, xs < 0, xs > 0
    else:
        v = _comparable(batch.dy[index])
        negative = (xs <= 0) | np.isnan(xs)
        positive = ~negative
    ok = (np.abs(g) >= info(batch.out_dtype).smallest_normal) & np.isfinite(a) & np.isfinite(v) \
        & (v != 0) & np.isfinite(g) & (negative | positive)
    return _ratio(a, v, ok), negative[ok]


def _ratio(a: np.ndarray, v: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """``a / v`` in float64 where ``ok``."""
    return a[ok].astype(np.float64) / v[ok].astype(np.float64)


def _observed_slopes(batch: Batch, index: np.ndarray) -> np.ndarray:
    """actual / input (x forward, dy backward) wherever both are finite and the input is
    not zero, and a zero actual counts as slope 0: every slope the output shows."""
    return _in_pieces(_observed_piece, batch, index)


def _observed_piece(batch: Batch, index: np.ndarray) -> np.ndarray:
    a = _comparable(batch.actual[index])
    v = _comparable((batch.x if batch.direction == "forward" else batch.dy)[index])
    ok = np.isfinite(a) & np.isfinite(v) & (v != 0)
    return _ratio(a, v, ok)


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
        _claim_end(batch, state, state.remaining[state.remaining >= int(rest.min())], n, proved=True)
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
    lo = int(rest.min())
    return lo > 0 and 2 * rest.size >= n - lo


def _run_start(remaining: np.ndarray, lo: int) -> int:
    """Start of the run of consecutive wrong elements (ascending flat indices) that ends at ``lo``."""
    p = int(np.searchsorted(remaining, lo))
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
    kinds = _kinds(batch.x)
    seen = np.isin(kinds[rest], kinds[:int(rest.min())])
    return 2 * int(seen.sum()) >= rest.size


def _value_class(batch: Batch, index: np.ndarray) -> np.ndarray:
    """Elements a value class (overflow, NaN, signed zero) names."""
    masks = _classes(batch.actual[index], batch.golden[index])[:4]
    return np.logical_or.reduce([m for _, m, _ in masks])


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
