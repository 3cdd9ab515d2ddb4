"""``mask-multiply`` (``x*m + (a*x)*(1-m)``) of an input wider than the output: ``inf * 0`` is
NaN only where the operands, in the input dtype (or opmath), are infinite; where only the
narrowed result overflows, the element is the select's.  Expected values by hand."""
from __future__ import annotations

import numpy as np

from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.helpers import assert_same_bits
from tests.reference.arrays import f16, f32

MASK = Semantics(formulation="mask-multiply")


def test_an_infinite_operand_in_the_input_dtype_gives_nan() -> None:
    # 2 * 3e38 overflows float32: 3e38*1 + inf*0 = NaN; -inf*0 + a*(-inf)*1 = NaN
    got = golden.forward(f32(3e38, -np.inf), 2.0, out_dtype="float16", semantics=MASK)
    assert np.isnan(got).all()


def test_an_overflow_of_the_narrowed_result_alone_gives_the_selected_value() -> None:
    # in float32: 6e4*1 + 1.2e5*0 = 6e4 (float16 60000); -1e5*0 + (-25000)*1 = -25000, which
    # rounds to nearest even float16 -24992 (-1562.5 steps of 16)
    assert_same_bits(golden.forward(f32(6e4), 2.0, out_dtype="float16", semantics=MASK), f16(60000.0))
    got = golden.forward(f32(-1e5), 0.25, out_dtype="float16", semantics=MASK)
    assert_same_bits(got, f16(-24992.0))


def test_a_bfloat16_opmath_gives_nan_where_x_overflows_bfloat16() -> None:
    # 3.4e38 is above bfloat16's max (3.39e38 + half a step), so x becomes inf: x*1 + inf*0 = NaN
    s = Semantics(formulation="mask-multiply", opmath="bfloat16")
    assert np.isnan(golden.forward(f32(3.4e38), 0.2, out_dtype="float16", semantics=s)).all()


def test_a_bfloat16_opmath_product_is_selected_where_the_narrowed_x_overflows() -> None:
    # bfloat16(-1e5) = -99840, times 0.25 = -24960 (a bfloat16 and a float16)
    s = Semantics(formulation="mask-multiply", opmath="bfloat16")
    assert_same_bits(golden.forward(f32(-1e5), 0.25, out_dtype="float16", semantics=s), f16(-24960.0))


def test_rounding_toward_zero_applies_to_the_narrowed_result() -> None:
    # -25000 truncates to -24992; 1 + 2**-11 + 2**-12 truncates to 1.0 (to nearest: 1 + 2**-10)
    s = Semantics(formulation="mask-multiply", rounding="rtz")
    got = golden.forward(f32(-1e5, 1 + 2.0 ** -11 + 2.0 ** -12), 0.25, out_dtype="float16", semantics=s)
    assert got.dtype == np.float16
    assert_same_bits(got, f16(-24992.0, 1.0))
