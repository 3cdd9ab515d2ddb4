"""The emulated kernel's formulations compute what their variant says and nothing else: the
number-preferring max/min formulation (``nan-swallowing-max``, ``max(x,0) + alpha*min(x,0)``)
gives the reference kernel's bits on every input but NaN, which it turns into +0, and -0, whose
two zero halves add to +0; the mask-multiply formulation gives them on every finite input."""
from __future__ import annotations

import numpy as np

from conformance.dtypes import all_patterns, is_nan, to_bits
from conformance.npu_impl import leaky_relu

X = all_patterns("float16").astype(np.float32)


def _bits(variant: str) -> np.ndarray:
    return to_bits(leaky_relu(X, 0.2, variant=variant).y)


def test_the_number_preferring_max_min_is_the_reference_but_on_nan_and_minus_zero() -> None:
    y, reference = _bits("nan-swallowing-max"), _bits("reference")
    plus_zero = is_nan(X) | (to_bits(X) == 0x80000000)
    assert np.array_equal(y[~plus_zero], reference[~plus_zero])
    assert not y[plus_zero].any()


def test_mask_multiply_is_the_reference_on_every_finite_input() -> None:
    finite = np.isfinite(X)
    assert np.array_equal(_bits("mask-multiply")[finite], _bits("reference")[finite])
