"""The exact reference of the suite's shared batches, computed once per process.

Every backend of a (dtype, out_dtype, direction, alpha) runs copies of the same batch masters
(``cases.batches``), so their golden is computed for the first backend judged and kept for the
others (and for later runs in the same process), bounded as the batches are (``cases.memo``).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from conformance.cases.batches import InputBatch
from conformance.cases.memo import Memo, read_only, slopes_key
from conformance.dtypes import to_bits
from conformance.reference import golden as ref

RowSpec = Any  # conformance.suite.RowSpec: its direction, alpha and out_dtype are read


def _golden_bytes(kept: tuple[InputBatch, np.ndarray]) -> int:
    batch, golden = kept
    return golden.nbytes + batch.x.nbytes + (0 if batch.dy is None else batch.dy.nbytes)


#: The golden of each batch master (``cases.batches``), by the master's identity (the entry keeps
#: the master alive, so its id names it while kept) and the row's direction, slope and output dtype.
GOLDENS: Memo[tuple[InputBatch, np.ndarray]] = Memo(entries=4096, budget=128 << 20, weight=_golden_bytes)


def golden_of(spec: RowSpec, batch: InputBatch) -> Optional[np.ndarray]:
    """The exact reference of ``batch`` for ``spec``'s row (a copy of it, computed once per process
    for every backend of the same direction, alpha and output dtype), when ``batch`` is an unchanged
    copy of a memo's master; else None (``evaluate`` computes it, and says why a pair or slope is invalid)."""
    master = batch.source
    if master is None or not (_same(batch.x, master.x) and _same(batch.dy, master.dy)):
        return None

    def build() -> tuple[InputBatch, np.ndarray]:
        dy = None if master.dy is None else master.dy.reshape(-1)
        value = ref.compute(spec.direction, master.x.reshape(-1), ref.check_alpha(spec.alpha), dy=dy,
                            out_dtype=spec.out_dtype)
        return master, read_only(value)
    try:
        key = (id(master), spec.direction, slopes_key([spec.alpha]), spec.out_dtype)
        return GOLDENS.get(key, build)[1].copy()
    except (TypeError, ValueError):
        return None


def _same(a: Optional[np.ndarray], b: Optional[np.ndarray]) -> bool:
    """Both absent, or the same shape, dtype and bits."""
    if a is None or b is None:
        return a is b
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(to_bits(a), to_bits(b)))
