"""Triage on defects no issue lists, built by hand the way a user's kernel would make them.

Each defect is made with plain numpy/ml_dtypes (not with the golden variant that
names it), and the expected count is the number of elements the defect changed.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from conformance.dtypes import all_patterns
from conformance.reference import golden as ref
from tests.test_triage import counts, differs, judge

F16 = all_patterns("float16")


def test_a_bfloat16_slope_in_an_fp16_kernel_is_alpha_precision() -> None:
    """A kernel templated on a bfloat16 scalar: fp16 data, the slope held as bf16, float32 math."""
    slope = np.float32(ml_dtypes.bfloat16(0.2))
    with np.errstate(all="ignore"):
        actual = np.where(F16 > 0, F16, (F16.astype(np.float32) * slope).astype(np.float16))
    row = judge(F16, actual, 0.2)
    assert counts(row) == {"alpha-precision": differs(actual, ref.leaky_relu(F16, 0.2))}
    assert "bfloat16" in row.findings[0].summary


def test_infinities_clamped_while_nan_is_kept_is_saturation_of_the_infinities() -> None:
    """A saturating cast or clamp: ±inf become ±65504, NaN stays NaN."""
    exact = ref.leaky_relu(F16, 0.2)
    actual = np.clip(exact, np.float16(-65504), np.float16(65504))
    row = judge(F16, actual, 0.2)
    assert counts(row) == {"saturation": differs(actual, exact)}
    assert "NaN kept" in row.findings[0].summary


def test_gradients_read_with_subnormal_dy_flushed_on_both_sides_are_subnormal_flush() -> None:
    """A backward kernel that flushes subnormal dy as it loads it (the pass-through side too),
    and keeps its results."""
    dy = np.random.default_rng(3).permutation(F16)
    w = dy.astype(np.float64)
    read = np.where((np.abs(w) < 2.0 ** -14) & (w != 0), np.copysign(np.float16(0), dy), dy)
    with np.errstate(all="ignore"):
        actual = np.where(F16 > 0, read, (read.astype(np.float32) * np.float32(0.2)).astype(np.float16))
    row = judge(F16, actual, 0.2, direction="backward", dy=dy)
    assert counts(row) == {"subnormal-flush": differs(actual, ref.leaky_relu_backward(dy, F16, 0.2))}
