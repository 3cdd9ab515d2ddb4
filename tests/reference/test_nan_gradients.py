"""dx at x = NaN (``nan_grad``): ``dy`` passes dy whatever the formulation selects elsewhere,
``nan`` writes a NaN in the output dtype; elsewhere dx keeps the select's bits, a signalling
NaN dy included (a select moves bits, it does no arithmetic)."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.dtypes import bfloat16, from_bits, to_bits
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.helpers import assert_same_bits


@pytest.mark.parametrize(("formulation", "expected"), [("scale", [2.0, 0.5, 0.5]), ("swap_branches", [2.0, 0.5, 2.0])])
def test_nan_grad_dy_passes_dy_where_x_is_nan(formulation: str, expected: list[float]) -> None:
    # scale: a*dy on both sides; swap_branches: a*dy where x > 0, dy elsewhere; NaN x: dy
    x = np.array([np.nan, 3.0, -3.0], dtype=np.float32)
    dy = np.full(3, 2.0, dtype=np.float32)
    got = golden.backward(dy, x, 0.25, semantics=Semantics(formulation=formulation, nan_grad="dy"))
    assert_same_bits(got, np.array(expected, dtype=np.float32))


@pytest.mark.parametrize("dtype", [np.float16, bfloat16, np.float32], ids=str)
def test_nan_grad_nan_writes_nan_in_the_output_dtype(dtype) -> None:
    x = np.array([np.nan, 3.0, -3.0], dtype=dtype)
    got = golden.backward(np.full(3, 2.0, dtype=dtype), x, 0.25, semantics=Semantics(nan_grad="nan"))
    assert got.dtype == dtype
    assert_same_bits(got, np.array([np.nan, 2.0, 0.5], dtype=dtype))


@pytest.mark.parametrize("nan_grad", ["alpha", "dy", "zero", "dy*0", "nan"])
def test_a_selected_signalling_nan_dy_keeps_its_bits(nan_grad: str) -> None:
    dy = from_bits([0x7F800001], "float32")
    got = golden.backward(dy, np.array([1.0], dtype=np.float32), 0.25, semantics=Semantics(nan_grad=nan_grad))
    assert to_bits(got).tolist() == [0x7F800001]
