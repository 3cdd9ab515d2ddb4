"""Hazards the emulator records: writes outside the tensor and write races."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from conformance.dtypes import from_bits, to_bits
from conformance.records import Hazard
from conformance.reference import golden as ref
from tests.helpers import F16, counts, differs, judge


def _edit(exact: np.ndarray, index: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    out = exact.copy()
    out[index] = fn(out[index])
    return out


def test_out_of_bounds_write_is_found_even_when_values_match() -> None:
    exact = ref.forward(F16, 0.2)
    written = [-2, -1, F16.size, F16.size + 5]
    hazards = tuple(Hazard("out-of-bounds-write", i, (3,)) for i in written)
    row = judge(F16, exact, 0.2, hazards=hazards)
    assert counts(row) == {"out-of-bounds-write": len(written)}
    assert row.verdict == "fail" and row.findings[0].detail["before"] == 2


def test_write_race_counts_raced_elements_and_explains_their_mismatches() -> None:
    exact = ref.forward(F16, 0.2)
    raced = np.arange(1000, 1016)
    wrong = raced[::2]
    actual = _edit(exact, wrong, lambda v: from_bits(to_bits(v) ^ 0x0300, v.dtype))
    hazards = tuple(Hazard("write-race", int(i), (0, 1)) for i in raced)
    row = judge(F16, actual, 0.2, hazards=hazards)
    assert counts(row) == {"write-race": raced.size}
    assert row.findings[0].detail["mismatching"] == differs(actual, exact)
