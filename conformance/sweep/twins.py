"""Backends of one chunk that returned the same bits: one judged, the others' rows derived.

``evaluate`` reads a backend's name only for the policy (``allowed``, the verdict) and the
row's head; everything else comes from the inputs, golden and the output's bits, and from
the result's hazards and tile plan.  Triage reads the tile plan only in the passes that run
after the whole-batch value passes (mapped and regional regions, tail and block
confinement; the sweep gives ``evaluate`` no tile plan of its own to fall back on, so a result
without a tile plan is judged without one), and those do nothing once the value passes have named every mismatch.  So
when two results have the same bits and no hazards, and the judged row's findings are all
whole-batch semantic claims (registry group ``semantics``, no ``region`` in their detail:
nothing was left for a later pass), the other's row is the judged one with its own head
and policy, and with the judged tile plan's traces (the examples' core and tile, the plan
grid of the plots) dropped when it has no tile plan of its own.  Anything else is judged on its own.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import numpy as np

from conformance import categories
from conformance.dtypes import to_bits
from conformance.judge import plots as plotting
from conformance.judge.gate import GateConfig, finding_gated, verdict
from conformance.records import BackendResult, Finding, Row


def same_bits(a: BackendResult, b: BackendResult) -> bool:
    """Both returned values of one dtype and shape with identical bits (NaN payloads included)."""
    if a.value is None or b.value is None:
        return False
    va, vb = np.asarray(a.value), np.asarray(b.value)
    return va.dtype == vb.dtype and va.shape == vb.shape and np.array_equal(to_bits(va), to_bits(vb))


def _whole_batch(finding: Finding) -> bool:
    return categories.check(finding.category).group == "semantics" and "region" not in finding.detail


def derivable(row: Row, judged: BackendResult, other: BackendResult) -> bool:
    """``other``'s row follows from ``row`` (judged on ``judged``) without judging it again."""
    if judged.hazards or other.hazards or not same_bits(judged, other):
        return False
    if other.tile_plan is not None and other.tile_plan != judged.tile_plan:
        return False
    return all(_whole_batch(f) for f in row.findings)


def _without_plan(found: Optional[plotting.Plots]) -> Optional[plotting.Plots]:
    if found is None:
        return None
    return replace(found, grids=tuple(g for g in found.grids if g.kind != "plan"))


def derived(row: Row, other: BackendResult, *, backend: str, profile: Optional[str], variant: Optional[str],
            config: GateConfig) -> Row:
    """The row of ``other`` (see :func:`derivable`): ``row`` with the other backend's head,
    policy and, without a tile plan of its own, no plan traces."""
    placed = other.tile_plan is not None
    findings = tuple(replace(f, gated=finding_gated(f.category, violations=f.violations, backend=backend,
                                                        config=config, profile=profile),
                             examples=f.examples if placed else tuple(replace(e, core=None, tile=None)
                                                                      for e in f.examples))
                     for f in row.findings)
    return replace(row, backend=backend, profile=profile, variant=variant, notes=tuple(other.notes),
                   findings=findings, plots=row.plots if placed else _without_plan(row.plots),
                   verdict=verdict([f.gated for f in findings]))
