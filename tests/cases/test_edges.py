"""Edge pools: every class present, values in their class, labels aligned with values."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.cases.edges import DEFAULT_EDGE_ALPHAS, EDGE_CLASSES, edge_pool, exponent_significand_patterns
from conformance.dtypes import DTYPES, info, is_nan, is_subnormal, to_bits

DTYPE_NAMES = tuple(DTYPES)


def _f64(a: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return a.astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_every_class_is_present(dtype: str) -> None:
    pool = edge_pool(dtype, out_dtype="float16" if dtype == "float32" else None)
    expected = set(EDGE_CLASSES) - ({"beyond-fp16"} if dtype == "float16" else set())
    assert pool.classes() == expected
    assert len(pool.labels) == pool.values.size


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_fixed_classes_hold_what_they_say(dtype: str) -> None:
    rec, pool = info(dtype), edge_pool(dtype)
    assert set(_f64(pool.of("zero"))) == {0.0} and np.signbit(_f64(pool.of("zero"))).sum() == 1
    assert set(np.abs(_f64(pool.of("min-subnormal")))) == {rec.smallest_subnormal}
    assert is_subnormal(pool.of("max-subnormal")).all()
    assert set(np.abs(_f64(pool.of("min-normal")))) == {rec.smallest_normal}
    assert set(np.abs(_f64(pool.of("max")))) == {rec.max}
    assert np.isinf(_f64(pool.of("inf"))).all() and pool.of("inf").size == 2
    assert set(_f64(pool.of("one"))) == {1.0, -1.0}


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_nans_are_quiet_or_signalling_with_both_signs(dtype: str) -> None:
    rec, pool = info(dtype), edge_pool(dtype)
    quiet_bit = 1 << (rec.mant_bits - 1)
    for label, want_quiet in (("quiet-nan", True), ("signalling-nan", False)):
        values = pool.of(label)
        bits = to_bits(values).astype(np.uint64)
        assert is_nan(values).all()
        assert (((bits & quiet_bit) != 0) == want_quiet).all()
        assert {bool(b & rec.sign_mask) for b in bits} == {True, False}
        assert len({int(b & (quiet_bit - 1)) for b in bits}) > 2  # several payloads


@pytest.mark.parametrize("alpha", [1.5, 2.0, 4.0])
def test_around_max_over_alpha_overflows_for_large_slopes(alpha: float) -> None:
    values = edge_pool("float16", alphas=(alpha,)).of("around-max-over-alpha")
    with np.errstate(over="ignore"):
        products = (_f64(values[values < 0]) * alpha).astype(np.float16)
    assert np.isinf(products).any() and np.isfinite(products).any()


@pytest.mark.parametrize("pair", [("float16", "float16"), ("float32", "float32"),
                                  ("float64", "float64"), ("float32", "float16"), ("bfloat16", "bfloat16")])
def test_exact_midpoints_exist_for_a_short_slope(pair: tuple[str, str]) -> None:
    """With alpha = 1.5 some pool members multiply exactly onto a midpoint (checked in rationals)."""
    import math
    from fractions import Fraction

    dtype, out = pair
    o = info(out)
    values = edge_pool(dtype, out_dtype=out, alphas=(1.5,)).of("rounding-midpoint")

    def on_midpoint(v: float) -> bool:
        p = abs(Fraction(v) * Fraction(1.5))
        exp = max(math.frexp(float(p))[1] - 1, o.emin) if p else o.emin
        return p != 0 and (p / Fraction(2) ** (exp - o.mant_bits)).denominator == 2

    assert sum(on_midpoint(float(v)) for v in _f64(values)) > 0


def test_double_rounding_trap_from_domain_is_in_the_fp16_pool() -> None:
    """docs/domain.md: fp16 0x8005 with alpha 0.3 lands on a midpoint in float64."""
    bits = set(to_bits(edge_pool("float16", alphas=(0.3,)).of("rounding-midpoint")).tolist())
    assert 0x8005 in bits


@pytest.mark.parametrize("pair", [("float16", "float16"), ("float32", "float16"), ("float64", "float64")])
def test_underflow_products_are_subnormal_or_zero(pair: tuple[str, str]) -> None:
    dtype, out = pair
    for alpha in DEFAULT_EDGE_ALPHAS:
        values = _f64(edge_pool(dtype, out_dtype=out, alphas=(alpha,)).of("underflow"))
        assert values.size and (values < 0).all()
        assert (np.abs(values * alpha) < info(out).smallest_normal).all()


def test_beyond_fp16_only_where_the_dtype_reaches_past_fp16() -> None:
    assert edge_pool("float16").of("beyond-fp16").size == 0
    wide = _f64(edge_pool("float32").of("beyond-fp16"))
    assert wide.size and (np.abs(wide) > info("float16").max).all() and (wide < 0).any()


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_exponent_significand_patterns_cover_significand_shapes(dtype: str) -> None:
    rec = info(dtype)
    mants = {int(b) & rec.mant_mask for b in to_bits(exponent_significand_patterns(dtype)).astype(np.uint64)}
    wanted = {0, 1, rec.mant_mask, rec.mant_mask - 1} | {1 << i for i in range(rec.mant_bits)}
    assert mants == wanted


def test_huge_negatives() -> None:
    assert set(_f64(edge_pool("float16").of("huge-negative"))) == {-6000.0, -65504.0}
