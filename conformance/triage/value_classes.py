"""Value classes and residue: what no rule and no location explains.

Overflow, NaN and signed zero name the value; ``rounding`` (within 1 ULP) and
``unexplained`` take the rest.
"""
from __future__ import annotations

import numpy as np

from conformance.dtypes import is_nan, ulp_distance
from conformance.triage.claims import Batch, Claim, State, max_ulp


def value_classes_of(actual: np.ndarray, golden: np.ndarray) -> list[tuple[str, np.ndarray, str]]:
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


def claim_value_classes(batch: Batch, state: State) -> None:
    rest = state.remaining
    if rest.size == 0:
        return
    taken = np.zeros(rest.size, dtype=bool)
    for category, mask, summary in value_classes_of(batch.actual[rest], batch.golden[rest]):
        mine = mask & ~taken
        if mine.any():
            taken |= mine
            detail = {"max_ulp": max_ulp(batch, rest[mine])}
            state.claim(Claim(category, rest[mine], int(mine.sum()), summary, detail))
