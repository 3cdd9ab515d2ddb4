"""``grad_rule="max"``: MindSpore's gradient of ``maximum(a*x, x)``, which gives a tie
(``a*x == x`` in x's dtype) ``dy/2`` to each operand and a NaN product ``dy`` to each, then
adds ``a*d1 + d2`` with every step rounded (and flushed under FTZ).  Expected values by hand."""
from __future__ import annotations

import numpy as np

from conformance.dtypes import from_bits
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.helpers import assert_same_bits
from tests.reference.arrays import f32

MAX = Semantics(grad_rule="max")
MAX_FTZ = Semantics(grad_rule="max", ftz=True)


def test_a_subnormal_x_whose_product_rounds_back_to_x_is_a_tie() -> None:
    # 0.75 * 2**-149 rounds to 2**-149 in float32: a tie, so dx = 0.75 * (1/2) + 1/2 = 0.875
    # (dy itself, 1.0, were the product below x)
    assert_same_bits(golden.backward(f32(1.0), f32(2.0 ** -149), 0.75, semantics=MAX), f32(0.875))


def test_a_nan_product_gives_dy_to_both_operands() -> None:
    # 0 * -inf is NaN: dx = 0 * 3 + 3 = 3 (the select would give 0 * 3 = 0)
    assert_same_bits(golden.backward(f32(3.0), f32(-np.inf), 0.0, semantics=MAX), f32(3.0))


def test_ftz_flushes_the_halved_dy_when_it_is_tiny_at_24_bits() -> None:
    # x = 0 is a tie; dy/2 = -(2**-126 - 2**-150) is tiny -> -0, so dx = 0.2 * -0 + -0 = -0
    dy = from_bits([0x80FFFFFF], "float32")  # -(2**-125 - 2**-149)
    assert_same_bits(golden.backward(dy, f32(0.0), 0.2, semantics=MAX_FTZ), f32(-0.0))


def test_ftz_flushes_the_product_of_the_halved_dy() -> None:
    # x = 0 is a tie; dy/2 = 2**-120, times 2**-10 is 2**-130, tiny -> +0, so dx = 0 + 2**-120
    got = golden.backward(f32(2.0 ** -119), f32(0.0), 2.0 ** -10, semantics=MAX_FTZ)
    assert_same_bits(got, f32(2.0 ** -120))
