"""``grad_rule="step"``: the TBE pre-v200 backward, which gives a positive subnormal x the
fraction ``dy * (|r - 1| * a + r)`` of dy, ``r = min(x, tiny) / tiny``, every operation rounded
in x's dtype; every other x takes the select's dx.  The expected fractions are computed here
step by step in exact rationals, each step rounded by ``tests/exact_oracle.py``."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from conformance.dtypes import bfloat16, from_bits, info, to_bits
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.exact_oracle import exact_round, exact_scale
from tests.helpers import assert_same_bits

STEP = Semantics(grad_rule="step")
F32 = info("float32")
TINY = 2.0 ** -126


def stepped(dy: float, x: float, alpha: float, *, out: str = "float32") -> float:
    """dy * (|r - 1| * a + r) for a positive subnormal float32 x, each operation rounded to float32."""
    r = float(Fraction(x) / Fraction(TINY))  # a power-of-two lift: exact
    a = exact_round(alpha, F32)
    scaled = exact_round(float(abs(Fraction(r) - 1) * Fraction(a)), F32)
    frac = exact_round(float(Fraction(scaled) + Fraction(r)), F32)
    return exact_round(exact_round(float(Fraction(dy) * Fraction(frac)), F32), info(out))


def test_a_positive_subnormal_x_takes_the_step_fraction_of_dy() -> None:
    x = np.array([2.0 ** -127, 2.0 ** -149, 3 * 2.0 ** -140, TINY - 2.0 ** -149], dtype=np.float32)
    dy = np.array([3.0, -7.0, 1.0e30, 5.0], dtype=np.float32)
    expected = np.array([stepped(float(d), float(v), 0.2) for d, v in zip(dy, x)], dtype=np.float32)
    assert_same_bits(golden.backward(dy, x, 0.2, semantics=STEP), expected)


def test_the_step_fraction_is_rounded_to_the_output_dtype() -> None:
    x = np.array([2.0 ** -127, 2.0 ** -130], dtype=np.float32)
    dy = np.array([1.0e5, 0.3], dtype=np.float32)
    expected = np.array([stepped(float(d), float(v), 0.3, out="float16") for d, v in zip(dy, x)], dtype=np.float16)
    assert_same_bits(golden.backward(dy, x, 0.3, out_dtype="float16", semantics=STEP), expected)


def test_x_that_is_not_a_positive_subnormal_takes_the_select() -> None:
    # zeros take a*dy rounded once: 13 * 0.2 -> float32 2.6 (through a float32 slope it would be 2.6000001)
    x = np.array([0.0, -0.0, TINY, 1.0, -2.0 ** -140], dtype=np.float32)
    dy = np.array([13.0, 13.0, 5.0, 2.0, 13.0], dtype=np.float32)
    product = exact_scale(13.0, 0.2, F32)
    expected = np.array([product, product, 5.0, 2.0, product], dtype=np.float32)
    assert_same_bits(golden.backward(dy, x, 0.2, semantics=STEP), expected)


def test_dy_at_the_smallest_normal_x_keeps_its_bits() -> None:
    dy = from_bits([0x7F800001], "float32")  # a signalling NaN: any product would make it quiet
    got = golden.backward(dy, np.array([TINY], dtype=np.float32), 0.2, semantics=STEP)
    assert to_bits(got).tolist() == [0x7F800001]


def test_a_dtype_without_a_step_takes_the_select() -> None:
    x = np.array([2.0 ** -130, -1.0], dtype=bfloat16)
    dy = np.array([3.0, 4.0], dtype=bfloat16)
    assert_same_bits(golden.backward(dy, x, 0.25, semantics=STEP), np.array([3.0, 1.0], dtype=bfloat16))
