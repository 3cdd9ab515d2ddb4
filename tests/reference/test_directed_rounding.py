"""The final conversion in a directed mode (``rounding``): ``rtz`` truncates (so an overflow
gives ±max), ``rna`` rounds half away from zero, ``rne`` is the default.  Expected float16
values by hand: between 1 and 2 float16 steps by 2**-10, so 1 + 2**-11 is a tie."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.dtypes import info
from conformance.reference import golden
from conformance.reference.exact import round_directed
from conformance.reference.semantics import Semantics
from tests.helpers import assert_same_bits
from tests.reference.arrays import f16

F16_STEP = 2.0 ** -10
ABOVE_TIE = 1 + 2.0 ** -11 + 2.0 ** -12
TIE = 1 + 2.0 ** -11
SPECIMENS = np.array([ABOVE_TIE, -ABOVE_TIE, TIE, -TIE, 1e5, -1e5, np.inf])
ROUNDED = {
    "rtz": [1.0, -1.0, 1.0, -1.0, 65504.0, -65504.0, np.inf],
    "rna": [1 + F16_STEP, -1 - F16_STEP, 1 + F16_STEP, -1 - F16_STEP, np.inf, -np.inf, np.inf],
    "rne": [1 + F16_STEP, -1 - F16_STEP, 1.0, -1.0, np.inf, -np.inf, np.inf],
}


@pytest.mark.parametrize("rounding", sorted(ROUNDED))
def test_round_directed_rounds_float64_to_float16(rounding: str) -> None:
    with np.errstate(invalid="ignore"):  # rna looks one step past inf (a NaN) and leaves inf as it is
        got = round_directed(SPECIMENS, info("float16"), rounding)
    assert_same_bits(got, np.array(ROUNDED[rounding], dtype=np.float16))


@pytest.mark.parametrize(("rounding", "expected"), [("rtz", -2.998046875), ("rna", -3.0), ("rne", -3.0)])
def test_the_product_is_rounded_once_in_the_mode(rounding: str, expected: float) -> None:
    # -10 * 0.3 = -2.99999999999999988898 (0.3 is below 3/10): toward zero it is the float16
    # below 3 in magnitude, 3 - 2**-9
    got = golden.forward(f16(-10.0), 0.3, semantics=Semantics(rounding=rounding))
    assert_same_bits(got, f16(expected))


def test_an_opmath_product_is_rounded_in_opmath_then_truncated() -> None:
    # -10 * float32(0.3) = -3.00000011920928955078125, a float32 tie that rounds to -3.0, which
    # float16 holds: truncating it leaves -3.0
    got = golden.forward(f16(-10.0), 0.3, semantics=Semantics(opmath="float32", rounding="rtz"))
    assert_same_bits(got, f16(-3.0))


def test_maxmin_of_a_wider_input_is_truncated_to_the_output_dtype() -> None:
    x = np.array([ABOVE_TIE, -2.0], dtype=np.float32)
    got = golden.forward(x, 0.5, out_dtype="float16", semantics=Semantics(formulation="maxmin", rounding="rtz"))
    assert got.dtype == np.float16
    assert_same_bits(got, f16(1.0, -1.0))


def test_an_opmath_product_is_truncated_from_its_own_rounding() -> None:
    # x = -95 * 2**-24; times float32(0.3) = 10066330 * 2**-25 it rounds in float32 to
    # -14942209 * 2**-43 = -28.5000019 float16 steps (2**-24), which truncates to -28 steps
    # (by the float64 slope the float32 product would be the tie -28.5 steps)
    x = np.array([-95 * 2.0 ** -24], dtype=np.float16)
    got = golden.forward(x, 0.3, semantics=Semantics(opmath="float32", rounding="rtz"))
    assert_same_bits(got, f16(-28 * 2.0 ** -24))


@pytest.mark.parametrize("dtype, x", [("float16", -65504.0), ("float16", -1.0), ("float32", -3e38), ("float32", -1.0)])
@pytest.mark.parametrize("rounding, largest", [("rtz", True), ("rna", False), ("rne", False)])
def test_a_product_beyond_float64s_range_rounds_as_the_exact_one(dtype: str, x: float, rounding: str,
                                                                   largest: bool) -> None:
    """x * 1e305 is finite and exact but beyond float64's range (for x = -3e38) or beyond the output's
    (every x here): truncation gives the output's -max, a rounding to nearest -inf."""
    v = np.array([x], dtype=dtype)
    got = golden.forward(v, 1e305, semantics=Semantics(rounding=rounding))
    expected = -np.finfo(np.dtype(dtype)).max if largest else -np.inf
    assert_same_bits(got, np.array([expected], dtype=dtype))
