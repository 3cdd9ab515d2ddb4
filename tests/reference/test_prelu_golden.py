"""The PReLU golden against an independent oracle: integer products (``tests/exact_oracle``) and
``Fraction`` sums, special values (±0, ±inf, NaN, subnormals, the limits) in fp32, fp16 and bf16."""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest

from conformance.dtypes import info, to_bits
from conformance.reference import prelu
from tests.exact_oracle import exact_round, exact_scale, round_ratio

DTYPES = ("float32", "float16", "bfloat16")


def specials(dtype: str) -> list[float]:
    """Every class of value a PReLU must get right in ``dtype``, both signs."""
    d = info(dtype)
    tiny = float(np.finfo(np.float32).smallest_subnormal) if dtype == "float32" else 2.0 ** (d.emin - d.mant_bits)
    values = [0.0, math.inf, math.nan, tiny, d.smallest_normal - tiny, d.smallest_normal, d.max, 1.0, 1.5, 3.0,
              1.0 + 2.0 ** -d.mant_bits]
    return [v for v in values for v in (v, -v)]


def as_dtype(values, dtype: str) -> np.ndarray:
    return np.array(values, dtype=np.float64).astype(info(dtype).dtype)


def oracle_product(v: float, w: float, dtype: str) -> float:
    return exact_scale(v, w, info(dtype))


def oracle_select(x: float, taken: float, w: float, dtype: str) -> float:
    return exact_round(taken, info(dtype)) if x > 0 else oracle_product(taken, w, dtype)


def oracle_sum(terms: list[float], dtype: str) -> float:
    """IEEE's sum of exact terms, rounded once: NaN, inf, the sign of an exact zero by hand."""
    if any(math.isnan(t) for t in terms) or (math.inf in terms and -math.inf in terms):
        return math.nan
    if math.inf in terms or -math.inf in terms:
        return math.inf if math.inf in terms else -math.inf
    total = sum((Fraction(t) for t in terms), Fraction(0))
    if total == 0:
        return -0.0 if terms and all(t == 0 and math.copysign(1, t) < 0 for t in terms) else 0.0
    return math.copysign(round_ratio(abs(total.numerator), total.denominator, info(dtype)), total)


def oracle_term(x: float, dy: float) -> float:
    """torch's share of one element: ``x > 0 ? 0 : x * dy`` (exact: at most 24 x 24 bits)."""
    return 0.0 if x > 0 else x * dy


@dataclass(frozen=True)
class Case:
    """A PReLU input: its dtype, shape, weight shape and channel axis."""

    dtype: str
    shape: tuple[int, ...]
    weight_shape: tuple[int, ...]
    channel_axis: int = 1

    def __str__(self) -> str:
        return f"{self.dtype} x{self.shape} w{self.weight_shape} axis={self.channel_axis}"

    def arrays(self, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """x and dy mixing the dtype's special values with random ones; the weight too."""
        rng = np.random.default_rng(seed)
        pool = np.array(specials(self.dtype) + list(rng.normal(size=32) * 2.0 ** rng.integers(-20, 20, 32)))
        n, wn = int(np.prod(self.shape)), int(np.prod(self.weight_shape))
        x, dy = rng.choice(pool, n), rng.choice(pool, n)
        weights = np.array([0.25, 0.0, -0.0, -0.5, 11 / 48, 0.2, 1e-3, 3.0, float(info(self.dtype).max), 2.0 ** -30])
        w = rng.choice(weights, wn)
        return (as_dtype(x, self.dtype).reshape(self.shape), as_dtype(dy, self.dtype).reshape(self.shape),
                as_dtype(w, self.dtype).reshape(self.weight_shape))


CASES = [Case(d, shape, wshape, axis) for d in DTYPES for shape, wshape, axis in (
    ((2, 3, 5), (3,), 1), ((2, 3, 5), (1,), 1), ((4, 6), (6,), 1), ((7,), (7,), 1), ((2, 3, 4), (3, 4), 1),
    ((2, 3, 4), (1, 4), 1), ((2, 2, 3, 3), (2, 3, 3), 1), ((3, 4, 2), (2,), 2))]


def weight_of(case: Case, w: np.ndarray) -> np.ndarray:
    return prelu.weight_per_element(w, case.shape, channel_axis=case.channel_axis).astype(np.float64).ravel()


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return bool(np.array_equal(np.where(nan, 0, to_bits(a)), np.where(nan, 0, to_bits(b))))


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forward_and_dx_match_the_oracle(case: Case, seed: int):
    x, dy, w = case.arrays(seed)
    ws, xs, dys = weight_of(case, w), x.astype(np.float64).ravel(), dy.astype(np.float64).ravel()
    want_y = as_dtype([oracle_select(a, a, b, case.dtype) for a, b in zip(xs, ws)], case.dtype)
    want_dx = as_dtype([oracle_select(a, g, b, case.dtype) for a, g, b in zip(xs, dys, ws)], case.dtype)
    assert same_bits(prelu.forward(x, w, channel_axis=case.channel_axis).ravel(), want_y)
    assert same_bits(prelu.backward(dy, x, w, channel_axis=case.channel_axis).ravel(), want_dx)


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_dweight_is_the_exact_sum_rounded_once(case: Case, seed: int):
    x, dy, w = case.arrays(seed)
    groups = prelu.groups_of(w, case.shape, channel_axis=case.channel_axis).ravel()
    xs, dys = x.astype(np.float64).ravel(), dy.astype(np.float64).ravel()
    want = [oracle_sum([oracle_term(a, b) for a, b, g in zip(xs, dys, groups) if g == k], case.dtype)
            for k in range(w.size)]
    got = prelu.dweight(dy, x, w, channel_axis=case.channel_axis)
    assert got.shape == w.shape and got.dtype == x.dtype
    assert same_bits(got.ravel(), as_dtype(want, case.dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dweight_cancels_exactly_where_a_float_sum_loses_the_small_term(dtype: str):
    big = float(info(dtype).max) / 4
    x = as_dtype([-big, -1.0, -2.0 ** -3, -big], dtype).reshape(1, 1, 4)
    dy = as_dtype([1.0, 2.0 ** -8, 1.0, -1.0], dtype).reshape(1, 1, 4)  # -big * -1 cancels -big * 1
    sequential = np.zeros((), x.dtype)
    for t in (x * dy).ravel():  # in the dtype itself, left to right: the small shares are lost
        sequential = (sequential + t).astype(x.dtype)
    assert float(sequential) != -(2.0 ** -8) - 2.0 ** -3
    got = prelu.dweight(dy, x, as_dtype([0.25], dtype))
    assert float(got[0]) == -(2.0 ** -8) - 2.0 ** -3


@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_shares_keep_ieee_signs(dtype: str):
    x = as_dtype([-0.0, -0.0, 2.0], dtype).reshape(1, 3)
    dy = as_dtype([1.0, 3.0, 1.0], dtype).reshape(1, 3)
    w = as_dtype([0.25, 0.25, 0.25], dtype)
    assert np.signbit(prelu.dweight(dy, x, w)).tolist() == [True, True, False]  # x > 0 gives +0
    assert np.signbit(prelu.dweight(dy, x, as_dtype([0.25], dtype)))[0] == np.False_  # -0 + -0 + +0
    assert np.isnan(prelu.dweight(as_dtype([[math.inf]], dtype), as_dtype([[-0.0]], dtype), as_dtype([1], dtype))[0])


def test_a_weight_on_no_rule_is_refused_with_the_shapes():
    with pytest.raises(ValueError, match=r"weight of shape \(4,\).*input of shape \(2, 3, 5\)"):
        prelu.forward(np.zeros((2, 3, 5), np.float32), np.zeros(4, np.float32))


def test_float64_inputs_sum_as_fractions():
    x = np.array([[-1e300, -3.0, 1e300]]).T.reshape(1, 3)
    dy = np.array([[1e-300, 1.0 / 3, 1.0]]).reshape(1, 3)
    got = prelu.dweight(dy, x, np.array([0.5]))
    want = Fraction(-1e300) * Fraction(1e-300) + Fraction(-3.0) * Fraction(1.0 / 3)
    assert float(got[0]) == float(want)
