"""The compare-select formulations ``max(x, a*x)``, ``min(x, a*x)`` and ``max_or_min`` (max for
a <= 1, min above): what DAZ makes of x, and what a NaN product gives (``nan_operand``).
Expected values by hand: IEEE ``inf * 0`` is NaN, DAZ reads a subnormal as a zero of its sign."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.dtypes import from_bits, to_bits
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.helpers import assert_same_bits
from tests.reference.arrays import f32

TINY = 2.0 ** -149  # float32's smallest subnormal


def test_max_under_daz_reads_a_subnormal_x_as_zero() -> None:
    # max(+0, 0.2 * +0) = +0, not the subnormal x
    got = golden.forward(f32(TINY), 0.2, semantics=Semantics(formulation="max", daz=True))
    assert_same_bits(got, f32(0.0))


def test_min_under_daz_reads_a_subnormal_x_as_zero() -> None:
    # min(-0, 2 * -0) = -0, not the subnormal x
    got = golden.forward(f32(-TINY), 2.0, semantics=Semantics(formulation="min", daz=True))
    assert_same_bits(got, f32(-0.0))


@pytest.mark.parametrize("formulation", ["max", "min", "max_or_min"])
def test_a_compare_select_returns_x_where_the_product_is_nan(formulation: str) -> None:
    x = f32(np.inf, -np.inf)  # 0 * inf is NaN
    s = Semantics(formulation=formulation, nan_operand="x")
    assert_same_bits(golden.forward(x, 0.0, semantics=s), x)
    assert np.isnan(golden.forward(x, 0.0, semantics=Semantics(formulation=formulation))).all()


def test_max_or_min_above_one_is_min_which_returns_x_own_nan() -> None:
    # min(x, 2x) returns its first NaN operand, x, bit for bit; the select returns the product,
    # in which the signalling NaN has been made quiet
    x = from_bits([0x7F800001], "float32")
    assert to_bits(golden.forward(x, 2.0, semantics=Semantics(formulation="max_or_min"))).tolist() == [0x7F800001]
    assert to_bits(golden.forward(x, 2.0)).tolist() == [0x7FC00001]
