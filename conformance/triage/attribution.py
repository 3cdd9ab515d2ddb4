"""The semantic pass: select a stack of rules, then give each mismatch it explains to one rule.

Each explained mismatch goes to the rule it needs that moves its value most; a claim
carries ``explained``, ``contradicted`` and the equally good alternatives.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

import conformance.triage.sampling as sampling
from conformance import categories, jit
from conformance.dtypes import is_nan, is_subnormal, ulp_distance
from conformance.metrics.exact import match_mask
from conformance.records import TilePlan
from conformance.triage.candidates import candidates_for
from conformance.triage.claims import PIECE, Batch, Claim, State, comparable, max_ulp, merge_claims
from conformance.triage.regions import Region, ranked, sorted_by_position
from conformance.triage.rules import Rule
from conformance.triage.sampling import Scope, mismatch_scope, scope_of, thinned_scope
from conformance.triage.search import RULE_COST, Selector, beam_search, stack_semantics

REGION_ROUNDS = 4  # regions with a rule of their own, claimed one after another
DOMINANT = 0.75  # share of a region's errors its rule must reproduce: a rule that holds there
MAX_REGIONAL_RULES = 2  # a region's own cause is one rule, perhaps stacked on one more


def claim_semantics(batch: Batch, state: State) -> list[list[Rule]]:
    """The stack of rules that describes the remaining mismatches best, attributed to them;
    many mismatches go in sampled rounds first (``SAMPLING.select_sample``).  Returns the
    stacks that claimed elements (a clamp may sit on top of one)."""
    base: list[Rule] = []
    chosen: list[list[Rule]] = []
    while state.remaining.size > sampling.SAMPLING.select_sample:
        base = sampled_round(batch, state)
        if not base or state.remaining.size == 0:
            return chosen + ([base] if base else [])
        chosen.append(base)
    cands = candidates_for(batch, state.remaining)
    sel = Selector(batch, scope_of(batch, state.remaining))
    stack, alternatives = beam_search(sel, cands, base=base) if base else ([], {})
    if len(stack) <= len(base):  # the stack chosen on a sample, completed by what only all elements show
        stack, alternatives = beam_search(sel, cands)
    if stack:
        sel.keep([stack] + [stack[:i] + stack[i + 1:] for i in range(len(stack))])
        for claim in attribute(sel, state.remaining, stack, alternatives):
            state.claim(claim, by_rule=True)
        chosen.append(stack)
    return chosen


def sampled_round(batch: Batch, state: State) -> list[Rule]:
    """One round for many mismatches: select the stack on a stride sample of them, attribute
    it on all of them (on the mismatches alone: attribution reads nothing else of a scope).
    The stack, or none when it claims nothing."""
    mis = state.remaining
    leading = jit.enabled() and sampling.leading_mismatches(batch, mis)  # the candidates and the attribution read it
    cands = candidates_for(batch, mis, leading=leading)
    full_scope = scope_of(batch, mis)
    sizes = sampling.SAMPLING
    sample = thinned_scope(full_scope, mis, min(sizes.sampled_mismatches, sizes.select_sample))
    stack, alternatives = beam_search(Selector(batch, sample), cands)
    if not stack:
        return []
    claims = attribute(_mismatch_selector(batch, mis, leading=leading), mis, stack, alternatives, whole=batch)
    for claim in claims:
        state.claim(claim, by_rule=True)
    return stack if state.remaining.size < mis.size else []


def _mismatch_selector(batch: Batch, mis: np.ndarray, *, leading: bool) -> Selector:
    """A selector on the mismatches ``mis`` alone.  A reduced batch's mismatches are its
    leading positions (``leading``, with the compiled paths): the selector is then on a batch
    of views of them (nothing is gathered), whose positions are the batch's."""
    if not leading:
        return Selector(batch, mismatch_scope(mis))
    at = slice(0, mis.size)
    lead = Batch(batch.x[at], None if batch.dy is None else batch.dy[at], batch.alpha, batch.direction,
                 batch.out_dtype, batch.golden[at], batch.actual[at], where=None if batch.where is None
                 else batch.where[at], numel=batch.tensor_size, shape=batch.shape)
    return Selector(lead, Scope(None, mis.size, np.ones(0)))


def attribute(sel: Selector, mis: np.ndarray, stack: list[Rule], alternatives: dict, *,
              whole: Optional[Batch] = None) -> list[Claim]:
    """Each explained mismatch goes to the rule it needs that moves its value most (the
    dominant cause: a flush or narrowed input beats a 1-ULP slope rounding; ties go to the
    later category in registry order).  An element that only neutral context explains
    stays for ``rounding``.  ``mis`` are the mismatches ``sel`` was scoped on, positions of
    ``whole`` too (default: the selector's batch), on which contradictions are counted."""
    explained = _explained(sel, mis, stack)
    judged = _Judged(sel.batch if whole is None else whole, mis, explained)
    full = sel.on_mismatches(stack) if len(stack) > 1 else None
    moves = [_moved(full, sel.on_mismatches([s for s in stack if s is not r])) * explained
             for r in stack] if full is not None else []
    named = sorted((i for i, r in enumerate(stack) if r.category is not None),
                   key=lambda i: (-categories.order(stack[i].category), i))
    if len(stack) == 1:  # its explained elements are its own (as below, without the moves)
        hits = mis if explained.all() else mis[explained]  # all of them: no copy
        claims = [_rule_claim(sel, hits, stack, 0, alternatives.get(stack[0], []), judged=judged)
                  ] if named and hits.size else []
        return merge_claims([c for c in claims if c.count])
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
    claims = [_rule_claim(sel, mis[owner == i], stack, i, alternatives.get(stack[i], []), judged=judged)
              for i in named if (owner == i).any()]
    return merge_claims([c for c in claims if c.count])


def _explained(sel: Selector, mis: np.ndarray, stack: list[Rule]) -> np.ndarray:
    """Which of the mismatches ``mis`` the stack reproduces.  One rule on a selector of a
    batch of the mismatches alone, in order (``_mismatch_selector``), is predicted a piece
    at a time, a range of the pieces per thread (:func:`conformance.jit.ranges`; each writes
    its own part of the answer): only the answer is as long as the mismatches (every rule is
    elementwise)."""
    batch, n = sel.batch, mis.size
    if len(stack) != 1 or sel.scope.index is not None or batch.x.size != n:
        return match_mask(sel.on_mismatches(stack), sel.actual[:n])
    semantics, out = stack_semantics(stack), np.empty(n, dtype=bool)

    def pieces(lo: int, hi: int) -> None:
        for start in range(lo, hi, PIECE):
            at = slice(start, min(start + PIECE, hi))
            part = Batch(batch.x[at], None if batch.dy is None else batch.dy[at], batch.alpha, batch.direction,
                         batch.out_dtype, batch.golden[at], batch.actual[at])
            out[at] = match_mask(part.recomputed(semantics=semantics), batch.actual[at])

    jit.in_parallel([functools.partial(pieces, lo, hi) for lo, hi in jit.ranges(0, n, least=PIECE)])
    return out


def _moved(full: np.ndarray, without: np.ndarray) -> np.ndarray:
    """How far removing a rule moves each value: ULPs, NaN against a number the farthest."""
    dist = ulp_distance(full, without)
    differ = ~match_mask(full, without)
    moved = np.maximum(dist.ulps.astype(np.float64), 0.5) * differ  # a zero's sign moves it too
    return np.where(dist.nan & differ, np.inf, moved)


@dataclass(frozen=True)
class _Judged:
    """What a stack's claims are counted on: the whole batch, the mismatches the selector
    was scoped on (positions of it), and which of them the stack reproduces."""

    batch: Batch
    mis: np.ndarray
    explained: np.ndarray


def _predicted_whole(sel: Selector, judged: _Judged, stack: list[Rule]) -> np.ndarray:
    """A stack's prediction on the whole batch."""
    if sel.batch is judged.batch:
        return sel.predict_batch(stack)
    return judged.batch.recomputed(semantics=stack_semantics(stack))


def _wrong(sel: Selector, judged: _Judged, stack: list[Rule]) -> tuple[np.ndarray, np.ndarray]:
    """Where the stack's prediction on the whole batch is wrong (ascending), and it there.  On
    a scope of mismatches alone, the mismatches' are known: where they are most of the batch,
    only the others are predicted (with the compiled paths; the numpy path predicts every
    element, the reference).  Where they are not, the whole batch is predicted in place: its
    others gathered would cost more than the mismatches computed again."""
    batch, mis = judged.batch, judged.mis
    if sel.scope.size != sel.scope.n_mis or not jit.enabled():
        full = sel.predict_batch(stack)
        wrong = np.flatnonzero(~match_mask(full, batch.actual))
        return wrong, full[wrong]
    semantics = stack_semantics(stack)
    if 2 * mis.size < batch.x.size:
        full = batch.recomputed(semantics=semantics)
        wrong = np.flatnonzero(~match_mask(full, batch.actual))
        return wrong, full[wrong]
    if sel.batch is not batch:  # a batch of the leading mismatches (``_mismatch_selector``)
        rest = np.arange(mis.size, batch.x.size)
    else:
        keep = np.ones(batch.x.size, dtype=bool)
        keep[mis] = False
        rest = np.flatnonzero(keep)
    rest = rest[~match_mask(batch.recomputed(rest, semantics=semantics), batch.actual[rest])]
    wrong = rest if judged.explained.all() else np.sort(np.concatenate([mis[~judged.explained], rest]))
    return wrong, batch.recomputed(wrong, semantics=semantics)


def _contradicted(sel: Selector, judged: _Judged, stack: list[Rule], i: int) -> int:
    """Elements where rule ``i`` changes the stack's prediction and the actual output
    does not follow (counted on the whole batch, where the stack is wrong)."""
    batch = judged.batch
    wrong, predicted = _wrong(sel, judged, stack)
    without = batch.recomputed(wrong, semantics=stack_semantics(stack[:i] + stack[i + 1:]))
    changed = ~match_mask(predicted, without)
    if batch.weight is None:
        return int(changed.sum())
    return int(round(float(batch.weight_of(wrong[changed]).sum())))  # a reduced batch: what the sample stands for


def _rule_claim(sel: Selector, hits: np.ndarray, stack: list[Rule], i: int, alts: list[Rule], *,
                judged: _Judged) -> Claim:
    batch, r = sel.batch, stack[i]
    if r.category == "input-precision":
        hits = hits[~_non_finite_symptom(batch, hits)]
    summary = r.summary + "".join(f"; or equally: {a.summary}" for a in alts)
    detail = {**r.detail, **_extra_detail(sel, r, hits, stack, i, judged=judged),
              "explained": int(hits.size), "contradicted": _contradicted(sel, judged, stack, i)}
    if alts:
        detail["alternatives"] = [a.summary for a in alts]
        detail["alternative_categories"] = list(dict.fromkeys(
            a.category for a in alts if a.category not in (None, r.category)))
    return Claim(r.category, hits, int(hits.size), summary, detail)


def _extra_detail(sel: Selector, r: Rule, hits: np.ndarray, stack: list[Rule], i: int, *, judged: _Judged) -> dict:
    batch = sel.batch
    if r.category == "subnormal-flush":
        tiny = is_subnormal(batch.x[hits])
        if batch.dy is not None:
            tiny = tiny | is_subnormal(batch.dy[hits])
        return {"subnormal_inputs": int(tiny.sum()),
                "subnormal_outputs": int(is_subnormal(batch.golden[hits]).sum())}
    if r.category == "rounding":
        return {"max_ulp": max_ulp(batch, hits) if hits.size else 0}
    if r.category == "saturation":
        g = batch.golden[hits]
        before = _predicted_whole(sel, judged, stack[:i] + stack[i + 1:])
        return {"nan_to_zero": int(is_nan(g).sum()), "inf_to_max": int(np.isinf(g.astype(np.float64)).sum()),
                "confirmed_by_inf": bool(np.isinf(before.astype(np.float64)).any())}
    return {}


def _non_finite_symptom(batch: Batch, index: np.ndarray) -> np.ndarray:
    """Where the actual value is inf or NaN but golden is finite: an operand overflowed
    when narrowed, and the value classes (``overflow``, ``spurious-nan``) name that."""
    a, g = batch.actual[index].astype(np.float64), batch.golden[index].astype(np.float64)
    return ~np.isfinite(a) & np.isfinite(g)


# ----------------------------------------------------------------------------- rules confined to a region

@dataclass
class _Trial:
    gain: float  # description length saved: the region's errors minus the stack, its rules and the region
    claims: list
    inside: list  # whole-batch rules' claims that lie inside the region


def claim_regional_semantics(batch: Batch, state: State, tile_plan: Optional[TilePlan]) -> None:
    """A rule that holds in one region (a core, a tile, an axis slice, a span) and nowhere
    else: the errors the whole-batch rules left, ranked by where they are dense, are tried
    region by region; the stack chosen on a region's elements alone competes by the same
    description length, the region's own cost added.  The region goes into each claim."""
    partial = not sorted_by_position(batch.x)
    for _ in range(REGION_ROUNDS):
        regions = ranked(batch.flat(state.remaining), numel=batch.tensor_size, shape=batch.tensor_shape,
                         tile_plan=tile_plan, partial=partial)
        trials = [t for t in (_regional_trial(batch, state, r) for r in regions) if t is not None]
        best = max(trials, key=lambda t: t.gain, default=None)
        if best is None or not best.claims:  # neutral context alone claims nothing: every later round finds it again
            return
        _settle(state, best)


def _regional_trial(batch: Batch, state: State, region: Region) -> Optional[_Trial]:
    """The shortest stack on the region's elements (leaving out those whole-batch rules
    claimed, unless their claim lies inside the region), when it pays for itself and for the
    region and reproduces most of the region's errors with one or two rules."""
    flat = batch.flat(np.arange(batch.x.size))
    inside = [c for c in state.by_rules if c.in_tensor and c.index.size and "region" not in c.detail
              and region.contains(flat[c.index]).all()]
    open_ = np.union1d(state.remaining, np.concatenate([c.index for c in inside])) if inside else state.remaining
    pos = np.flatnonzero(region.contains(flat))
    at = np.minimum(np.searchsorted(open_, pos), max(open_.size - 1, 0))
    held = open_[at] == pos if open_.size else np.zeros(pos.size, bool)
    pos = pos[held | match_mask(batch.actual[pos], batch.golden[pos])]
    sub = batch.subset(pos)
    mis = np.flatnonzero(~match_mask(sub.actual, sub.golden))
    if mis.size < 2:
        return None
    sel = Selector(sub, scope_of(sub, mis))
    stack, alternatives = beam_search(sel, candidates_for(sub, mis))
    if not stack or sum(r.category is not None for r in stack) > MAX_REGIONAL_RULES:
        return None
    right = sel.where_right(sel.predict(stack))
    gain = sel.length(sel.where_right(sel.predict([])), []) - sel.length(right, stack) - RULE_COST * region.cost
    if gain <= 0 or np.count_nonzero(right[:mis.size]) < DOMINANT * mis.size:
        return None
    if _filled(sub, mis) <= sel.length(right, stack):
        return None  # one value written over the region says it in fewer words: a location's
    sel.keep([stack] + [stack[:i] + stack[i + 1:] for i in range(len(stack))])
    claims = [_in_region(c, pos, region) for c in attribute(sel, mis, stack, alternatives)]
    return _Trial(gain, claims, inside)


def _filled(sub: Batch, wanted: np.ndarray) -> int:
    """Description length of "the region holds one value" (the commonest of the errors,
    zeros of either sign alike): the region's elements that hold another."""
    values = comparable(sub.actual).astype(np.float64)
    common, count = np.unique(values[wanted], return_counts=True)
    if not common.size or np.isnan(common[np.argmax(count)]):
        return int(sub.x.size)
    return int(np.count_nonzero(values != common[np.argmax(count)]))


def _settle(state: State, trial: _Trial) -> None:
    """Claim a trial's elements; a whole-batch rule's claim inside the region whose every
    element the region's rule explains too is withdrawn (it adds a rule, and explains nothing
    more); one that explains more keeps its elements."""
    taken = np.concatenate([c.index for c in trial.claims]) if trial.claims else np.zeros(0, np.int64)
    kept = [c for c in trial.inside if not np.isin(c.index, taken).all()]
    state.withdraw([c for c in trial.inside if not any(c is k for k in kept)])
    keep = np.concatenate([c.index for c in kept]) if kept else np.zeros(0, np.int64)
    for claim in trial.claims:
        index = np.setdiff1d(claim.index, keep) if keep.size else claim.index
        if index.size:
            state.claim(replace(claim, index=index, count=int(index.size)), by_rule=True)


def _in_region(claim: Claim, pos: np.ndarray, region: Region) -> Claim:
    """``claim`` on a region's elements, in batch positions, naming the region."""
    detail = {**claim.detail, "region": region.text, "region_kind": region.kind, **region.detail}
    return Claim(claim.category, pos[claim.index], claim.count, f"{claim.summary}, in {region.text} only",
                 detail)
