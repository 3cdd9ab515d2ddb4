"""Hazards: what the emulator recorded (writes outside the tensor, write races), read as data."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from conformance.records import Hazard, Hazards
from conformance.triage.claims import Batch, Claim, State


def claim_hazards(batch: Batch, state: State, hazards: Sequence[Hazard]) -> None:
    cols = Hazards.of(hazards)
    owner = np.repeat(np.arange(len(cols)), np.diff(cols.starts))  # the record of each core entry
    outside = cols.of_kind("out-of-bounds-write")
    if outside.any():
        oob = np.unique(cols.index[outside])
        cores = np.unique(cols.cores[outside[owner]]).tolist()
        before = int(np.count_nonzero(oob < 0))
        state.claim(Claim("out-of-bounds-write", oob, oob.size,
                          "the kernel wrote outside the output tensor (red zones before or after it)",
                          {"before": before, "after": int(oob.size) - before, "cores": cores},
                          in_tensor=False))
    races = np.flatnonzero(cols.of_kind("write-race") & (cols.index >= 0) & (cols.index < batch.x.size))
    if races.size:
        index = np.unique(cols.index[races])
        starts = cols.starts.tolist()
        pairs = sorted({tuple(cols.cores[starts[i]:starts[i + 1]].tolist()) for i in races.tolist()})
        wrong = int(np.isin(index, state.remaining).sum())
        state.claim(Claim("write-race", index, index.size,
                          "elements written by more than one core",
                          {"mismatching": wrong, "cores": [list(p) for p in pairs]}))


def first_cores(hazards: Sequence[Hazard]) -> dict[int, int]:
    """Per element a hazard names, the first core of its last record (records are sorted by
    index, then kind)."""
    cols = Hazards.of(hazards)
    has = np.diff(cols.starts) > 0
    return dict(zip(cols.index[has].tolist(), cols.cores[cols.starts[:-1][has]].tolist()))
