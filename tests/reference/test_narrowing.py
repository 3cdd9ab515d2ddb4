"""Operands narrowed to an input dtype before computing (``input_dtype``), with and without
saturation mode (``saturate_inputs``): values checked by hand against float16's limits
(max 65504; 1e5 overflows; NaN kept, or made 0 by saturation)."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.dtypes import bfloat16
from conformance.reference import golden
from conformance.reference.exact import narrowed, narrowed_by_formula
from conformance.reference.semantics import Semantics
from tests.helpers import assert_same_bits

F16_MAX = 65504.0


@pytest.mark.parametrize("narrow", [narrowed, narrowed_by_formula], ids=lambda f: f.__name__)
def test_narrowing_overflows_to_inf_unless_asked_to_saturate(narrow) -> None:
    v = np.array([1e5, -1e5, np.nan, 0.1], dtype=np.float32)
    assert_same_bits(narrow(v, "float16"), np.array([np.inf, -np.inf, np.nan, np.float16(0.1)], np.float32))
    assert_same_bits(narrow(v, "float16", saturating=True),
                     np.array([F16_MAX, -F16_MAX, 0.0, np.float16(0.1)], np.float32))


def test_a_16bit_operand_saturates_through_its_pattern_table() -> None:
    v = np.array([1e5, -3e38, np.nan, 1.0], dtype=bfloat16)
    assert_same_bits(narrowed(v, "float16", saturating=True), np.array([F16_MAX, -F16_MAX, 0.0, 1.0], np.float32))
    assert_same_bits(narrowed(v, "float16"), np.array([np.inf, -np.inf, np.nan, 1.0], np.float32))


def test_a_float64_operand_comes_back_as_float64() -> None:
    v = np.array([0.1, -1e5], dtype=np.float64)
    got = narrowed(v, "float16")
    assert got.dtype == np.float64
    assert got.tolist() == [float(np.float16(0.1)), -np.inf]


def test_forward_narrows_a_saturating_input_to_the_input_dtype_max() -> None:
    x = np.array([1e5, -1e5], dtype=np.float32)
    s = Semantics(input_dtype="float16", saturate_inputs=True)
    assert_same_bits(golden.forward(x, 0.5, semantics=s), np.array([F16_MAX, -F16_MAX / 2], np.float32))
    assert_same_bits(golden.forward(x, 0.5, semantics=Semantics(input_dtype="float16")),
                     np.array([np.inf, -np.inf], np.float32))


def test_backward_narrows_a_saturating_dy_to_the_input_dtype_max() -> None:
    x = np.array([1.0, -1.0], dtype=np.float32)
    dy = np.array([1e5, 1e5], dtype=np.float32)
    s = Semantics(input_dtype="float16", saturate_inputs=True)
    assert_same_bits(golden.backward(dy, x, 0.25, semantics=s), np.array([F16_MAX, F16_MAX / 4], np.float32))
