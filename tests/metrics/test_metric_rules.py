"""The metrics' conventions one at a time, on hand-built pairs: where each extreme is, what a
zero-sign or NaN or opposite-infinity pair measures, what an identical or empty comparison holds,
and merging parts of different magnitudes or with tied extremes as the concatenation does."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from conformance.dtypes import from_bits
from conformance.metrics.exact import compare, empty, match_mask, merge
from conformance.records import Metrics, Tolerance

TOL = Tolerance(1.3e-6, 1e-5)
COUNTS = ("mismatches", "violations", "nan_positions", "inf_positions", "zero_signs", "within_1e3",
          "within_5e3", "above", "below")


def f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_empty_metrics_count_nothing_but_their_elements() -> None:
    for n in (0, 7):
        m = empty(elements=n)
        assert m == Metrics(n, 0, 0, 0.0, None, 0.0, None, 0, None, 0, 0, 0, 0, 0, 0, 0)
    assert empty().elements == 0 and empty().mismatch_ratio == 0.0


def test_an_identical_pair_matches_everywhere_within_every_ratio() -> None:
    g = f32(1.0, -2.5, 0.0, 3.0)
    c = compare(g.copy(), g, tolerance=TOL)
    m = c.metrics
    assert (m.elements, m.mismatches, m.violations, m.within_1e3, m.within_5e3) == (4, 0, 0, 4, 4)
    assert (m.max_abs, m.max_abs_at, m.max_rel_at, m.max_ulp_at) == (0.0, None, None, None)
    assert c.violating.dtype == np.bool_ and c.violating.size == 0 and c.mismatch_index.size == 0
    assert m.cosine == pytest.approx(1.0) and m.cos_exp == 2  # the largest magnitude, 3.0 = 0.75 * 2**2


def test_each_extreme_is_placed_in_the_whole_tensor() -> None:
    g = f32(1.0, 1.25, 2.0, 4.0)
    a = f32(1.0, 1.5, 2.0, 4.5)  # errors 0.25 (rel 0.2) at 1 and 0.5 (rel 0.125) at 3
    m = compare(a, g, tolerance=TOL, part="y", offset=10).metrics
    assert (m.max_abs, m.max_abs_at) == (0.5, ("y", 13))
    assert (m.max_rel, m.max_rel_at) == (0.2, ("y", 11))
    assert m.max_ulp_at in {("y", 11), ("y", 13)} and m.max_ulp > 0


def test_a_zero_sign_pair_has_no_error_and_no_extreme_position() -> None:
    m = compare(f32(-0.0), f32(0.0), tolerance=TOL).metrics
    assert (m.mismatches, m.zero_signs, m.above, m.below) == (1, 1, 0, 0)
    assert (m.max_abs, m.max_abs_at, m.max_rel, m.max_rel_at) == (0.0, None, 0.0, None)


def test_a_zero_against_a_nonzero_is_not_a_zero_sign_pair() -> None:
    m = compare(f32(0.0, 1.0), f32(1.0, 0.0), tolerance=TOL).metrics
    assert m.zero_signs == 0 and m.mismatches == 2


def test_nan_against_a_number_is_an_infinite_error() -> None:
    m = compare(f32(np.nan, 1.0), f32(1.0, 1.0), tolerance=TOL).metrics
    assert (m.max_abs, m.max_abs_at, m.max_rel, m.nan_positions) == (np.inf, ("", 0), np.inf, 1)


def test_opposite_infinities_are_an_infinite_relative_error() -> None:
    m = compare(f32(-np.inf), f32(np.inf), tolerance=TOL).metrics
    assert (m.max_abs, m.max_rel, m.inf_positions, m.violations) == (np.inf, np.inf, 1, 1)


def test_a_comparison_of_special_values_warns_nothing() -> None:
    bf_nan = from_bits([0x7FC1, 0xFFA0, 0x3F80], "bfloat16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compare(f32(np.nan, np.inf, -np.inf, 0.0, 1.0), f32(1.0, -np.inf, 0.0, 0.0, np.nan), tolerance=TOL)
        compare(bf_nan, from_bits([0x3F80, 0x3F80, 0x4000], "bfloat16"), tolerance=TOL)


def test_match_mask_matches_equal_bits_and_any_two_nans_only() -> None:
    qnan, snan = from_bits([0x7FC00000], "float32"), from_bits([0x7F800001], "float32")
    a = np.concatenate([qnan, qnan, f32(1.0, -0.0)])
    g = np.concatenate([snan, f32(1.0), f32(1.0, 0.0)])
    assert match_mask(a, g).tolist() == [True, False, True, False]
    assert match_mask(g, g).all()


def test_merge_of_tied_extremes_keeps_the_first_as_the_concatenation_does() -> None:
    g = f32(1.0, 2.0, 1.0, 2.0)
    a = f32(1.5, 2.0, 1.5, 2.0)
    whole = compare(a, g, tolerance=TOL).metrics
    parts = merge(compare(a[:2], g[:2], tolerance=TOL).metrics, compare(a[2:], g[2:], tolerance=TOL, offset=2).metrics)
    for name in ("max_abs_at", "max_rel_at", "max_ulp_at"):
        assert getattr(parts, name) == getattr(whole, name) == ("", 0), name


def test_merge_keeps_where_each_extreme_of_either_part_is() -> None:
    g = f32(1.0, 1.0, 4.0, 8.0)
    a = f32(1.0, 1.25, 4.5, 8.0)  # rel 0.25 in the first part, abs 0.5 in the second
    parts = merge(compare(a[:2], g[:2], tolerance=TOL).metrics, compare(a[2:], g[2:], tolerance=TOL, offset=2).metrics)
    whole = compare(a, g, tolerance=TOL).metrics
    assert parts == whole and (parts.max_abs_at, parts.max_rel_at) == (("", 2), ("", 1))


@pytest.mark.parametrize("scales", [(2.0 ** 300, 2.0 ** -300), (1.0, 2.0 ** 40), (2.0 ** -40, 2.0 ** 500),
                                    (2.0 ** 475, 2.0 ** 485)])
def test_merging_parts_of_different_magnitudes_gives_the_concatenations_cosine(scales: tuple[float, float]) -> None:
    rng = np.random.default_rng(7)
    g = np.concatenate([rng.standard_normal(50) * scales[0], rng.standard_normal(50) * scales[1]])
    a = g * (1 + rng.standard_normal(100) * 1e-3)
    whole = compare(a, g, tolerance=TOL).metrics
    parts = merge(compare(a[:50], g[:50], tolerance=TOL).metrics, compare(a[50:], g[50:], tolerance=TOL).metrics)
    assert parts.cos_exp == whole.cos_exp
    for name in ("cos_dot", "cos_aa", "cos_gg"):
        assert getattr(parts, name) == pytest.approx(getattr(whole, name), rel=1e-12), name
    assert {name: getattr(parts, name) for name in COUNTS} == {name: getattr(whole, name) for name in COUNTS}


@pytest.mark.parametrize("values", [[0.75, -0.5], [3.0, -2.5]], ids=["exponent-0", "exponent-2"])
def test_merging_a_part_with_no_finite_pair_keeps_the_others_sums(values: list[float]) -> None:
    """Exponent 0: the other part's sums would add at full weight; exponent 2: its exponent is
    kept, not the empty part's 0."""
    g = np.array(values)
    a = g * 1.001
    some = compare(a, g, tolerance=TOL).metrics
    none = compare(np.array([np.nan]), np.array([1.0]), tolerance=TOL).metrics
    for merged in (merge(some, none), merge(none, some)):
        assert (merged.cos_dot, merged.cos_aa, merged.cos_gg, merged.cos_exp) == (
            some.cos_dot, some.cos_aa, some.cos_gg, some.cos_exp)


@pytest.mark.parametrize("g, a", [
    ([3e-310, -5e-310, 7e-311], [3e-310, -4e-310, 9e-311]),
    ([1.5 * 2.0 ** -1025, 2.0 ** -1030], [1.25 * 2.0 ** -1025, 2.0 ** -1030]),  # largest: 0.75 * 2**-1024
])
def test_the_cosine_of_float64_subnormals_is_their_scaled_copies_cosine(g: list[float], a: list[float]) -> None:
    g, a = np.array(g), np.array(a)
    scale = 2.0 ** 1000  # exact: every value becomes a normal float64
    tiny = compare(a, g, tolerance=TOL).metrics
    big = compare(a * scale, g * scale, tolerance=TOL).metrics
    assert tiny.cosine == pytest.approx(big.cosine, rel=1e-12) and 0 < tiny.cosine < 1


def test_the_ratios_count_relative_errors_strictly_below_their_bound() -> None:
    g = f32(1000.0, 1000.0, 1000.0, 1000.0, 1000.0)
    a = f32(1000.0, 1000.5, 1001.0, 1004.0, 1005.0)  # rel 0, 5e-4, 1e-3, 4e-3, 5e-3
    m = compare(a, g, tolerance=TOL).metrics
    assert (m.within_1e3, m.within_5e3) == (2, 4)


def test_ulp_error_is_a_distance_whichever_side_is_larger_and_nan_pairs_have_none() -> None:
    g = f32(1.0, 2.0)
    below = np.nextafter(np.nextafter(np.nextafter(g[:1], np.float32(0)), np.float32(0)), np.float32(0))
    m = compare(np.concatenate([below, g[1:]]), g, tolerance=Tolerance(1.0, 1.0, max_ulp=1)).metrics
    assert (m.max_ulp, m.max_ulp_at, m.violations) == (3, ("", 0), 1)
    nan_only = compare(f32(np.nan, 2.0), g, tolerance=TOL).metrics
    assert (nan_only.max_ulp, nan_only.max_ulp_at) == (0, None)


def test_merge_takes_each_extreme_from_the_part_that_has_it() -> None:
    g = f32(1.0, 4.0, 1.0, 8.0)
    a = f32(1.0, 4.5, 1.25, 8.0)  # abs 0.5 in the first part; rel 0.25 and more ULPs in the second
    first, second = compare(a[:2], g[:2], tolerance=TOL).metrics, compare(a[2:], g[2:], tolerance=TOL, offset=2).metrics
    whole = compare(a, g, tolerance=TOL).metrics
    assert merge(first, second) == whole
    assert (whole.max_abs_at, whole.max_rel_at, whole.max_ulp_at) == (("", 1), ("", 2), ("", 2))


def test_the_cosine_is_taken_over_the_pairs_where_both_sides_are_finite() -> None:
    m = compare(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, np.inf]), tolerance=TOL).metrics
    assert m.cosine == pytest.approx(1.0)


@pytest.mark.parametrize("a, g", [
    ([2.0 ** 400, 2.0 ** 401], [2.0 ** 520, 2.0 ** 521]),  # parallel: the largest magnitude is golden's
    ([-(2.0 ** 600), 2.0], [-(2.0 ** 600), 1.0]),  # the largest magnitude is a negative value
])
def test_the_cosine_of_far_apart_magnitudes_neither_overflows_nor_underflows(a: list[float], g: list[float]) -> None:
    m = compare(np.array(a), np.array(g), tolerance=TOL).metrics
    assert m.cosine == pytest.approx(1.0)


def test_the_cosine_sums_every_piece_of_a_long_tensor() -> None:
    g = np.ones(150_000)
    a = g.copy()
    a[-10:] = -1.0  # in the last piece of 65,536
    m = compare(a, g, tolerance=TOL).metrics
    assert m.cosine == pytest.approx((150_000 - 20) / 150_000, rel=1e-12)


def test_an_error_equal_to_the_tolerance_does_not_violate_it() -> None:
    loose_ulp = Tolerance(0.0, 0.5, max_ulp=10 ** 9)
    assert compare(f32(1.5), f32(1.0), tolerance=loose_ulp).metrics.violations == 0
    assert compare(f32(1.5625), f32(1.0), tolerance=loose_ulp).metrics.violations == 1


def test_strict_zeros_makes_a_zero_sign_pair_a_violation() -> None:
    for strict, violations in ((False, 0), (True, 1)):
        tol = Tolerance(1.3e-6, 1e-5, strict_zeros=strict)
        assert compare(f32(-0.0, 1.0), f32(0.0, 1.0), tolerance=tol).metrics.violations == violations


def test_above_and_below_count_only_pairs_finite_on_both_sides() -> None:
    m = compare(f32(np.inf, 2.0, -np.inf), f32(1.0, 1.0, 1.0), tolerance=TOL).metrics
    assert (m.above, m.below) == (1, 0)


def test_a_comparison_keeps_the_values_at_its_mismatches() -> None:
    c = compare(f32(1.0, 3.0, 5.0, 7.0), f32(1.0, 2.0, 5.0, 6.0), tolerance=TOL)
    assert c.mismatch_index.tolist() == [1, 3]
    assert c.actual.tolist() == [3.0, 7.0] and c.golden.tolist() == [2.0, 6.0]


def test_a_zero_tolerance_against_an_infinite_golden_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = compare(f32(1.0, np.inf), f32(np.inf, 1.0), tolerance=Tolerance(0.0, 0.0)).metrics
    assert m.violations == 2
