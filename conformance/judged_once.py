"""A result another backend already returned on the same batch, judged once (see :class:`JudgedBatches`)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Optional

import numpy as np

from conformance.cases.batches import InputBatch
from conformance.dtypes import to_bits
from conformance.judge.gate import GateConfig, finding_gated, verdict
from conformance.records import BackendResult, Row, RowKey


def regated(row: Row, *, backend: str, profile: Optional[str], variant: Optional[str], notes: Sequence[str],
            config: GateConfig) -> Row:
    """``row`` as another backend's judgement of the same bits: its name, notes, and each finding
    gated (and the verdict given) by that backend's policy; everything else is the same."""
    findings = tuple(replace(f, gated=finding_gated(f.category, violations=f.violations, backend=backend,
                                                    config=config, profile=profile)) for f in row.findings)
    return replace(row, backend=backend, profile=profile, variant=variant, notes=tuple(notes),
                   findings=findings, verdict=verdict([f.gated for f in findings]))


def _same(a: Optional[np.ndarray], b: Optional[np.ndarray]) -> bool:
    """Both absent, or the same dtype, shape and bits (NaN payloads included)."""
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(to_bits(a), to_bits(b)))


class JudgedBatches:
    """The batches judged in this process for one (dtype, out_dtype, direction, alpha) at a time: a
    comparison runs every backend's row of such a group one after another (``suite.comparison_order``),
    and backends often return the same bits.  ``evaluate`` reads a backend's name only for the row's
    head and policy; everything else (metrics, triage, examples, plots, other checks) follows from the
    inputs, the output's bits, its hazards and its tile plan.  So a result with the bits of one judged
    before on the same batch, no hazards on either side and the same tile plan gets that row
    :func:`regated` for its own backend, which is what judging it again would give."""

    def __init__(self) -> None:
        self.group: Optional[tuple] = None
        self.kept: dict[str, list[tuple[InputBatch, BackendResult, Row]]] = {}

    def _batches(self, spec: RowKey) -> dict[str, list[tuple[InputBatch, BackendResult, Row]]]:
        group = (spec.dtype, spec.out_dtype, spec.direction, spec.alpha)
        if group != self.group:
            self.group, self.kept = group, {}
        return self.kept

    def reuse(self, spec: RowKey, batch: InputBatch, result: BackendResult, *, config: GateConfig) -> Optional[Row]:
        """The row judging ``result`` on ``batch`` would give, when a kept one says it; else None."""
        if not _reusable(result):
            return None
        for kept_batch, kept, row in self._batches(spec).get(batch.label, ()):
            if kept.tile_plan == result.tile_plan and _same(kept.value, result.value) \
                    and _same(kept_batch.x, batch.x) and _same(kept_batch.dy, batch.dy):
                return regated(row, backend=spec.backend, profile=spec.profile, variant=spec.variant,
                               notes=result.notes, config=config)
        return None

    def keep(self, spec: RowKey, batch: InputBatch, result: BackendResult, row: Row) -> None:
        """Keep a judged result for the later backends of its group."""
        if _reusable(result):
            self._batches(spec).setdefault(batch.label, []).append((batch, result, row))


def _reusable(result: BackendResult) -> bool:
    return result.rejected is None and not result.malformed and result.value is not None and not result.hazards
