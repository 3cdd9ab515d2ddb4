"""Each PReLU defect built outside the triage and named by it: a slope per channel with whose default
it is, a learnable slope clipped to bounds, a weight on the wrong axis, a sum in another order,
aclnnPrelu's formulation; a bit edit no rule reproduces stays ``unexplained``."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from conformance.dtypes import info, to_bits
from conformance.reference import prelu
from conformance.reference.exact import cast_exact
from conformance.reference.reductions import Reduction, reduce_dweight
from conformance.triage.prelu import Operands, triage_dweight, triage_elementwise

SHAPE = (2, 4, 3, 5)


def data(dtype: str, *, seed: int = 0, shape: tuple[int, ...] = SHAPE) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(size=shape).astype(info(dtype).dtype) for _ in range(2))  # type: ignore[return-value]


def named(claims) -> dict[str, int]:
    return {c.category: int(c.mask.sum()) for c in claims}


@dataclass(frozen=True)
class SlopeCase:
    """A declared weight and the slope one channel really used, and the words that must name it."""

    dtype: str
    declared: float
    used: float
    channel: int
    words: str

    def __str__(self) -> str:
        return f"{self.dtype} channel {self.channel} used {self.used} for {self.declared}"


SLOPES = [SlopeCase("float16", 0.2, 0.25, 2, "torch's PReLU initial value"),
          SlopeCase("float32", 0.2, 0.0, 1, "Keras's PReLU initial value"),
          SlopeCase("bfloat16", 0.2, 11 / 48, 3, "torch's RReLU eval slope"),
          SlopeCase("float32", 0.25, 0.01, 0, "0.009999999776482582 (the torch LeakyReLU default")]


@pytest.mark.parametrize("case", SLOPES, ids=str)
def test_a_slope_per_channel_is_alpha_mismatch_with_the_channel_and_whose_it_is(case: SlopeCase):
    x, _ = data(case.dtype)
    declared = np.full(4, case.declared).astype(info(case.dtype).dtype)
    used = declared.astype(np.float64).copy()
    used[case.channel] = case.used
    actual = prelu.forward(x, used.astype(info(case.dtype).dtype) if case.used != 11 / 48 else used)
    claims = triage_elementwise(Operands(x, x, declared), prelu.forward(x, declared), actual, forward=True)
    assert [c.category for c in claims] == ["alpha-mismatch"]
    assert claims[0].detail["channels"] == [case.channel]
    assert f"channel {case.channel} used" in claims[0].summary and case.words in claims[0].summary


def test_a_weight_on_the_wrong_axis_is_named_with_the_axis():
    x, _ = data("float32", shape=(2, 4, 3, 4))
    weight = np.array([0.25, 0.1, 0.3, 0.05], np.float32)
    channels_last = prelu.forward(x, weight, channel_axis=3)  # a (C,) slope broadcast from the trailing axis
    claims = triage_elementwise(Operands(x, x, weight), prelu.forward(x, weight), channels_last, forward=True)
    assert [c.category for c in claims] == ["alpha-mismatch"]
    assert claims[0].detail["axis"] == 3 and "axis 3" in claims[0].summary


def test_the_dx_of_a_wrong_axis_is_named_too():
    x, dy = data("float16", shape=(3, 4, 4))
    weight = np.array([0.25, 0.1, 0.3, 0.05], np.float16)
    wrong = prelu.backward(dy, x, weight, channel_axis=2)
    claims = triage_elementwise(Operands(x, dy, weight), prelu.backward(dy, x, weight), wrong, forward=False)
    assert [c.category for c in claims] == ["alpha-mismatch"] and claims[0].detail["axis"] == 2


def test_a_float32_sequential_dweight_is_reduction_order():
    x, dy = data("float32", shape=(8, 3, 16, 16))
    weight = np.array([0.25, 0.1, 0.3], np.float32)
    sequential = Reduction("float32", "sequential", "input")
    actual = reduce_dweight(dy, x, weight, sequential)
    expected = prelu.dweight(dy, x, weight)
    assert not np.array_equal(to_bits(actual), to_bits(expected))  # the order shows in the bits
    claims = triage_dweight(dy, x, weight, expected, actual)
    assert named(claims) == {"reduction-order": int(np.count_nonzero(to_bits(actual) != to_bits(expected)))}
    assert claims[0].detail["reduction"] == str(sequential)


def test_a_dweight_summed_per_tile_of_a_plan_is_named_with_the_tile():
    x, dy = data("float32", shape=(4, 3, 32, 32), seed=3)
    weight = np.array([0.25, 0.1, 0.3], np.float32)
    per_tile = Reduction("float32", "sequential", "input", tile=1000)
    actual = reduce_dweight(dy, x, weight, per_tile)
    expected = prelu.dweight(dy, x, weight)
    claims = triage_dweight(dy, x, weight, expected, actual, tile=1000)
    assert [c.category for c in claims] == ["reduction-order"] and "per tile of 1000" in claims[0].summary


def test_aclnn_prelu_formulation_at_minus_zero_is_named():
    x = np.array([[-0.0, 1.0, -2.0, -0.0]], np.float16)
    weight = np.array([0.25], np.float16)
    maxmin = prelu.forward(x, weight, formulation="maxmin")
    claims = triage_elementwise(Operands(x, x, weight), prelu.forward(x, weight), maxmin, forward=True)
    assert named(claims) == {"formulation": 2}


def test_a_bit_edit_no_rule_reproduces_stays_unexplained():
    x, _ = data("float32")
    weight = np.array([0.25, 0.1, 0.3, 0.05], np.float32)
    expected = prelu.forward(x, weight)
    edited = expected.copy()
    negative = np.flatnonzero(x.reshape(-1) < 0)[:3]
    edited.reshape(-1).view(np.uint32)[negative] ^= np.uint32(1 << 12)
    claims = triage_elementwise(Operands(x, x, weight), expected, edited, forward=True)
    assert named(claims) == {"unexplained": 3}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_learnable_slope_clipped_to_bounds_is_named_with_the_bounds_the_data_shows(dtype: str):
    # seed 000 §8: an adaptive LeakyReLU, maximum(x, alpha*x) with alpha a parameter clipped to [0.01, 0.5]
    x, _ = data(dtype, shape=(2, 5, 4, 4))
    t = info(dtype).dtype
    weight = np.array([0.004, 0.2, 0.3, 0.75, 0.1]).astype(t)
    lo, hi = np.array([0.01, 0.5]).astype(t)
    used = np.clip(weight, lo, hi)
    wide = x.astype(np.float64)
    actual = np.maximum(wide, wide * used.astype(np.float64).reshape(1, 5, 1, 1))
    actual = cast_exact(actual, info(dtype))
    claims = triage_elementwise(Operands(x, x, weight), prelu.forward(x, weight), actual, forward=True)
    assert [c.category for c in claims] == ["alpha-mismatch"]
    assert claims[0].detail["channels"] == [0, 3]
    assert claims[0].detail["clip"] == [float(lo), float(hi)]
    assert ", 0.5]: channels 0, 3 (the weight held " in claims[0].summary
    assert dtype == "bfloat16" or claims[0].summary.startswith("slope clipped to [0.01, 0.5]: channels 0, 3")


def test_one_wrong_slope_on_one_channel_is_not_called_a_clip():
    x, _ = data("float32")
    weight = np.array([0.3, 0.1, 0.4, 0.35], np.float32)
    used = weight.copy()
    used[1] = 0.25
    claims = triage_elementwise(Operands(x, x, weight), prelu.forward(x, weight), prelu.forward(x, used),
                                forward=True)
    assert [c.category for c in claims] == ["alpha-mismatch"] and "clip" not in claims[0].detail
    assert "channel 1 used 0.25 (torch's PReLU initial value" in claims[0].summary
