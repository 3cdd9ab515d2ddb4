"""Why it is off: every mismatching element gets exactly one category, by proof.

Categories come from the registry (``conformance.categories``); the passes run in its order:

- ``hazards``: the emulator's records (``BackendResult.hazards``);
- ``location``: an output shifted by k elements is proved element by element first,
  before a rule could match some of its elements by chance;
- ``layout``: golden permuted or packed (NC1HWC0) reproduces the output, alone or with
  the value passes below run on golden moved (every later pass then runs on it too);
- ``attribution``: candidate rules (``rules.catalogue``, each a golden variant) compete in
  a description-length beam search (``search``, on the scope ``sampling`` gives it); each
  element the chosen stack reproduces goes to the rule it needs that moves its value most;
- ``clamps``: golden, or golden under a chosen rule stack, clamped at one limit L
  reproduces what is left (``saturation`` at L);
- ``location``: regions holding another region's data (another tile, core, row or
  channel, at an offset the plan or the shape gives) are ``stale-block``, the mapping stated;
- ``attribution``: a rule confined to a region (``regions``: a core, a tile, tile k of every
  core, the head of every tile, an axis slice, a span, a stride) where the errors the
  whole-batch rules left are dense, by the same description length plus the region's cost;
  the claim keeps the rule's category and names the region;
- ``location``: ``tail-block`` by confinement to the tail regions of the tiling plan or
  the end of the tensor, then ``stale-block`` for a block or a stride; a rule's claim
  whose every element lies where a location claim explains them is withdrawn and its
  elements go to the location (``location.absorb_contained``: the rule explains nothing more);
- ``value_classes``: overflow, NaN and signed zero, and the residue (``rounding`` within
  1 ULP, else ``unexplained``) take what is left.

The package reads tile plans and hazards as data; it never imports the emulator.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from conformance.records import Hazard, TilePlan
from conformance.triage.attribution import claim_regional_semantics, claim_semantics
from conformance.triage.claims import Batch, Claim, State, beyond_rounding, merge_claims, special_values
from conformance.triage.clamps import claim_clamps, sole_clamp
from conformance.triage.hazards import claim_hazards
from conformance.triage.layout import claim_layout
from conformance.triage.location import claim_blocks, claim_mapped, claim_shift, claim_tail, tail_regions
from conformance.triage.value_classes import claim_value_classes

__all__ = ["Batch", "Claim", "special_values", "tail_regions", "triage"]


def _values(batch: Batch, state: State) -> None:
    """The value passes: rules over the whole batch, then clamps at a limit on golden or on
    the rule stacks chosen.  When one clamp on golden alone reproduces every remaining
    mismatch, it is the shorter description of any account that needs two categories
    (rule stacks can reach a clamp's values through several rules: inputs narrowed to fp16,
    then saturated, then a gradient rule at the zeros the narrowing made)."""
    trial = State(state.remaining, list(state.claims), list(state.by_rules))
    stacks = claim_semantics(batch, trial) if trial.remaining.size else []
    claim_clamps(batch, trial, bases=stacks)
    if len({c.category for c in trial.claims[len(state.claims):]}) > 1:
        alone = sole_clamp(batch, state)
        if alone is not None:
            state.claim(alone, by_rule=True)
            return
    state.remaining, state.claims, state.by_rules = trial.remaining, trial.claims, trial.by_rules


def triage(batch: Batch, *, mismatches: np.ndarray, hazards: Sequence[Hazard] = (),
           tile_plan: Optional[TilePlan] = None) -> list[Claim]:
    """Explain every mismatching element (flat indices ``mismatches``) by one category."""
    state = State(np.asarray(mismatches, dtype=np.int64))
    claim_hazards(batch, state, hazards)
    with np.errstate(all="ignore"):
        if state.remaining.size and batch.where is None:  # a shift is proved on a whole batch only
            claim_shift(batch, state, beyond_rounding(batch, state.remaining))
        moved = claim_layout(batch, state, values=_values)  # the value passes ran on golden moved
        if moved is None:
            _values(batch, state)
        else:
            batch = moved  # the passes below run on golden moved too
        if state.remaining.size:
            claim_mapped(batch, state, tile_plan)
        if state.remaining.size:
            claim_regional_semantics(batch, state, tile_plan)
        claim_tail(batch, state, tile_plan)
        claim_blocks(batch, state)
        claim_value_classes(batch, state)
    if len({c.category for c in state.claims}) < len(state.claims):  # a rule's rounding and the residue's
        return merge_claims(state.claims)
    return state.claims
