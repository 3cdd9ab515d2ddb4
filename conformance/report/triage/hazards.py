"""Hazards: what the emulator recorded (writes outside the tensor, write races), read as data."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from conformance.records import Hazard
from conformance.report.triage.claims import Batch, Claim, State


def claim_hazards(batch: Batch, state: State, hazards: Sequence[Hazard]) -> None:
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
