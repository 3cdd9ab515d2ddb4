"""Metrics: conventions for NaN, zero, inf; ULP widening; exact merging."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conformance.dtypes import all_patterns, from_bits
from conformance.metrics.exact import compare, merge
from conformance.records import Tolerance
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics

TOL16 = Tolerance(1e-3, 1e-5)


def f16(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float16)


def test_any_nan_equals_any_nan_and_signed_zero_is_a_mismatch() -> None:
    qnan, snan = from_bits([0x7E00], "float16"), from_bits([0xFC01], "float16")
    m = compare(np.concatenate([qnan, f16(-0.0)]), np.concatenate([snan, f16(0.0)]), tolerance=TOL16).metrics
    assert (m.mismatches, m.zero_signs, m.violations, m.max_abs, m.max_rel) == (1, 1, 0, 0.0, 0.0)


def test_relative_error_against_golden_zero_is_inf_unless_actual_is_zero() -> None:
    m = compare(f16(1.0, 0.0), f16(0.0, 0.0), tolerance=TOL16).metrics
    assert m.max_rel == math.inf and m.max_rel_at == ("", 0)


def test_nan_and_inf_positions_are_violations_even_with_loose_tolerance() -> None:
    loose = Tolerance(1e9, 1e9, max_ulp=10 ** 9)
    m = compare(f16(np.nan, 65504.0, 1.0), f16(1.0, np.inf, 1.0), tolerance=loose).metrics
    assert (m.nan_positions, m.inf_positions, m.violations) == (1, 1, 2)


def test_ulp_distance_is_widened_before_subtracting() -> None:
    """docs/domain.md: numpy's nulp_diff(60000, -60000) wraps to 2394; the truth is 63142."""
    m = compare(f16(60000.0), f16(-60000.0), tolerance=TOL16).metrics
    assert m.max_ulp == 63142


@pytest.mark.parametrize("rtol_ok", [True, False], ids=["within-rtol", "beyond-rtol"])
def test_tolerance_rule(rtol_ok: bool) -> None:
    g = f16(1000.0)
    a = f16(1000.5 if rtol_ok else 1002.0)  # 1 ULP (0.5) vs 4 ULP at 1000
    m = compare(a, g, tolerance=Tolerance(1e-3, 1e-5, max_ulp=8)).metrics
    assert m.violations == (0 if rtol_ok else 1)


def test_merge_equals_metrics_of_the_concatenation() -> None:
    x = all_patterns("float16")
    actual = ref.forward(x, 0.2, semantics=Semantics(slope_dtype="float16", daz=True, ftz=True))
    exact = ref.forward(x, 0.2)
    whole = compare(actual, exact, tolerance=TOL16).metrics
    cut = 40000
    halves = merge(compare(actual[:cut], exact[:cut], tolerance=TOL16).metrics,
                   compare(actual[cut:], exact[cut:], tolerance=TOL16).metrics)
    for name in ("elements", "mismatches", "violations", "max_abs", "max_rel", "max_ulp",
                 "within_1e3", "within_5e3", "above", "below", "zero_signs"):
        assert getattr(halves, name) == getattr(whole, name), name
    assert halves.cosine == pytest.approx(whole.cosine, rel=1e-12)
    assert halves.error_balance == whole.error_balance


def test_msprobe_indicators() -> None:
    golden = np.ones(1000, dtype=np.float32)
    actual = golden.copy()
    actual[:10] = 1.002  # relative error 0.002: inside 5/1000, outside 1/1000
    actual[10:15] = 0.99  # 0.01: outside both
    m = compare(actual, golden, tolerance=Tolerance(1.3e-6, 1e-5)).metrics
    assert m.one_thousandth_ratio == (1000 - 15) / 1000
    assert m.five_thousandths_ratio == (1000 - 5) / 1000
    assert m.error_balance == (10 - 5) / 1000
    expected_cos = float(actual.astype(np.float64) @ golden) / (
        np.linalg.norm(actual.astype(np.float64)) * np.linalg.norm(golden.astype(np.float64)))
    assert m.cosine == pytest.approx(expected_cos, rel=1e-12)


def test_merging_an_empty_part_keeps_the_cosine_of_tiny_values() -> None:
    tiny = np.array([2.0 ** -600, 3 * 2.0 ** -600])
    alone = compare(tiny, tiny, tolerance=TOL16).metrics
    empty = compare(np.zeros(0), np.zeros(0), tolerance=TOL16).metrics
    assert alone.cosine == pytest.approx(1.0)
    assert merge(empty, alone).cosine == pytest.approx(1.0)
    assert merge(alone, empty).cosine == pytest.approx(1.0)
