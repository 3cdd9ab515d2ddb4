"""Value classes and residue: overflow, NaN, signed zero, and bit edits by count."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from conformance.dtypes import from_bits, info, is_nan, to_bits
from conformance.judge.gate import GateConfig
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from tests.helpers import F16, counts, differs, edit_at, finite_normal_indices, judge


def test_lost_nan_is_not_saturation_when_infinities_are_kept() -> None:
    """max/min that prefer numbers turn NaN into 0 but keep ±inf: lost-nan, not saturation."""
    exact = ref.forward(F16, 0.2)
    actual = np.where(is_nan(F16), np.float16(0), exact)
    row = judge(F16, actual, 0.2)
    assert counts(row) == {"lost-nan": int(is_nan(F16).sum())}


@dataclass(frozen=True)
class EditCase:
    """A defect made by editing the bits of chosen elements."""

    category: str
    pick: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    edit: Callable[[np.ndarray], np.ndarray] = field(repr=False)

    def __str__(self) -> str:
        return self.category


def _every(k: int) -> Callable[[np.ndarray], np.ndarray]:
    return lambda exact: finite_normal_indices(exact)[::k]


EDIT_CASES = [
    EditCase("overflow", _every(97), lambda v: np.copysign(np.inf, v.astype(np.float64)).astype(v.dtype)),
    EditCase("spurious-nan", _every(89), lambda v: np.full_like(v, np.nan)),
    EditCase("lost-nan", lambda e: np.flatnonzero(is_nan(e))[::3], lambda v: np.ones_like(v)),
    EditCase("signed-zero", lambda e: np.flatnonzero(e.astype(np.float64) == 0),
             lambda v: from_bits(to_bits(v) ^ info(v.dtype).sign_mask, v.dtype)),
    EditCase("rounding", _every(41), lambda v: from_bits(to_bits(v) + 1, v.dtype)),
    EditCase("unexplained", _every(37), lambda v: from_bits(to_bits(v) ^ 0x0100, v.dtype)),
]


@pytest.mark.parametrize("case", EDIT_CASES, ids=str)
def test_bit_edit_is_named_with_the_number_of_edited_elements(case: EditCase) -> None:
    exact = ref.forward(F16, 0.2)
    index = case.pick(exact)
    actual = edit_at(exact, index, case.edit)
    edited = differs(actual, exact)
    assert edited == index.size > 0
    row = judge(F16, actual, 0.2)
    assert counts(row) == {case.category: edited}


def test_signed_zero_warns_unless_strict() -> None:
    exact = ref.forward(F16, 0.2)
    zeros = np.flatnonzero(exact.astype(np.float64) == 0)
    actual = edit_at(exact, zeros, np.negative)
    assert judge(F16, actual, 0.2).verdict == "warn"
    strict = GateConfig(strict_zeros=True)
    assert judge(F16, actual, 0.2, config=strict).verdict == "fail"


def fp16_normal_float32(n: int, *, seed: int) -> np.ndarray:
    """float32 values of both signs whose magnitudes stay inside fp16's normal range."""
    rng = np.random.default_rng(seed)
    mags = np.ldexp(rng.uniform(1.0, 2.0, n), rng.integers(-14, 15, n))
    return (mags * rng.choice([-1.0, 1.0], n)).astype(np.float32)


def test_operands_that_overflow_when_narrowed_stay_overflow() -> None:
    x = np.concatenate([fp16_normal_float32(1_000, seed=12), np.float32([7e4, -9e4, 1e6])])
    actual = ref.forward(x, 1.0, semantics=Semantics(input_dtype="float16"))
    golden = ref.forward(x, 1.0)
    beyond = int((np.abs(x) > info("float16").max).sum())
    found = counts(judge(x, actual, 1.0))
    assert found["overflow"] == beyond
    assert found["input-precision"] == differs(actual, golden) - beyond
