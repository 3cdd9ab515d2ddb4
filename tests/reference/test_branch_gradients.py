"""The backward as autodiff builds it: ``where(c, dy, 0) + a*where(c, 0, dy)`` (``grad_form="sum"``)
and that sum fused into one multiply-add (``"fma"``).  One term is a zero, so only zero signs
change; expected values by IEEE's signed-zero rules (``-0 + -0 = -0``, ``-0 + +0 = +0``)."""
from __future__ import annotations

import pytest

from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.helpers import assert_same_bits
from tests.reference.arrays import f32


@pytest.mark.parametrize("form", ["sum", "fma"])
def test_a_selected_negative_zero_dy_gets_the_sign_of_a_times_plus_zero(form: str) -> None:
    # x > 0: -0 + a * (+0), which is -0 for a < 0 and +0 for a > 0
    s = Semantics(grad_form=form)
    assert_same_bits(golden.backward(f32(-0.0), f32(1.0), -0.5, semantics=s), f32(-0.0))
    assert_same_bits(golden.backward(f32(-0.0), f32(1.0), 0.5, semantics=s), f32(0.0))


def test_fma_keeps_a_selected_subnormal_dy() -> None:
    # fma(a, +0, dy) = dy exactly
    assert_same_bits(golden.backward(f32(2.0 ** -149), f32(1.0), 0.2, semantics=Semantics(grad_form="fma")),
                     f32(2.0 ** -149))


def test_fma_keeps_the_sign_of_a_nonzero_product_that_rounds_to_zero() -> None:
    # fma(0.25, -2**-149, +0) = round(-2**-151) = -0; the unfused sum gives -0 + +0 = +0
    dy, x = f32(-2.0 ** -149), f32(-1.0)
    assert_same_bits(golden.backward(dy, x, 0.25, semantics=Semantics(grad_form="fma")), f32(-0.0))
    assert_same_bits(golden.backward(dy, x, 0.25, semantics=Semantics(grad_form="sum")), f32(0.0))


def test_fma_of_a_zero_slope_is_plus_zero() -> None:
    # fma(0, -3, +0) = -0 + +0 = +0
    assert_same_bits(golden.backward(f32(-3.0), f32(-1.0), 0.0, semantics=Semantics(grad_form="fma")), f32(0.0))
