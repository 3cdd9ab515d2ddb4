"""The exact primitives beneath the golden, called directly: a product rounded once to
float64, and conversions that overflow or meet NaN without a floating-point warning.
Expected values from exact rationals (Python's ``float(Fraction)`` rounds correctly)."""
from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

from conformance.dtypes import info
from conformance.reference.exact import round_float64, scale_exact
from tests.helpers import assert_same_bits


def test_scale_exact_rounds_a_float32_product_once_to_float64() -> None:
    v = np.array([3.0, 0.1, -7.0e-30, 1.0e38], dtype=np.float32)
    expected = np.array([float(Fraction(float(e)) * Fraction(0.1)) for e in v])
    assert_same_bits(scale_exact(v, 0.1, info("float64")), expected)


@pytest.mark.parametrize("out", ["float16", "bfloat16", "float32"])
def test_round_float64_overflows_to_inf_and_keeps_nan_without_a_warning(out: str) -> None:
    v = np.array([1e300, -1e300, np.nan, 1e-300])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = round_float64(v, info(out))
    assert_same_bits(got, np.array([np.inf, -np.inf, np.nan, 0.0], dtype=info(out).dtype))
