"""Attribution: every mismatch gets exactly one category; a refused input is one finding."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from conformance.dtypes import from_bits, info, to_bits
from conformance.records import BackendResult
from conformance.reference import golden as ref
from conformance.report.evaluate import evaluate
from tests.helpers import CONFIG, F16, counts, judge


def _edit(exact: np.ndarray, index: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    out = exact.copy()
    out[index] = fn(out[index])
    return out


def _finite_normal(a: np.ndarray) -> np.ndarray:
    w = a.astype(np.float64)
    return np.flatnonzero(np.isfinite(w) & (np.abs(w) >= info(a.dtype).smallest_normal) & (w != 0))


def test_rejected_input_is_one_finding_over_every_element() -> None:
    result = BackendResult(None, rejected="alpha must be >= 0 when the result is reused")
    row = evaluate(F16, -0.5, result, direction="forward", backend="cann", config=CONFIG)
    assert counts(row) == {"rejected-input": F16.size}
    assert row.verdict == "fail"


def test_each_mismatch_gets_exactly_one_category_when_defects_mix() -> None:
    exact = ref.leaky_relu(F16, 0.2, slope_dtype="float16")
    normal = _finite_normal(exact)
    actual = _edit(exact, normal[::53], lambda v: from_bits(to_bits(v) ^ 0x0100, v.dtype))
    actual = _edit(actual, normal[7::211], lambda v: np.full_like(v, np.nan))
    row = judge(F16, actual, 0.2)
    assert sum(counts(row).values()) == row.metrics.mismatches
    assert set(counts(row)) == {"alpha-precision", "spurious-nan", "unexplained"}
