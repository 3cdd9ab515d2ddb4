"""Held-out PReLU dumps, each computed by hand in numpy as an implementation would (not by the golden's
variants nor the defect generator), on shapes, dtypes, axes and reductions the other tests do not use,
and named by triage: a slope per channel, a Keras-shaped weight, a weight on the depth axis, a clipped
learnable slope, JAX's gradient at zero, aclnnPrelu's formula, dweight summed in another order, and a
correct output that must get no finding."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from conformance.dtypes import info
from conformance.reference import prelu
from conformance.triage.prelu import Operands, PreluClaim, triage_dweight, triage_elementwise

BF16 = info("bfloat16").dtype


def inputs(shape: tuple[int, ...], dtype: np.dtype, *, seed: int, zeros: bool = False) -> tuple[np.ndarray, ...]:
    """x and dy, normal; with ``zeros``, a tenth of x are ±0."""
    rng = np.random.default_rng(seed)
    x, dy = rng.normal(size=shape), rng.normal(size=shape)
    if zeros:
        x.reshape(-1)[::10] = 0.0
        x.reshape(-1)[5::20] = -0.0
    return x.astype(dtype), dy.astype(dtype)


@dataclass(frozen=True)
class Dump:
    """A held-out dump: how it was made, the claims triage makes on it, and the (category, words) expected
    (words: the parts, split at "|", the summary holds)."""

    name: str
    claims: Callable[[], list[PreluClaim]]
    expected: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        return self.name


def keras_zero_channel() -> list[PreluClaim]:
    # NHWC float16, a Keras weight (1, 1, C) shared along H and W; channel 2 still at Keras's initial zeros
    x, _ = inputs((2, 5, 6, 3), np.float16, seed=11)
    weight = np.array([[[0.3, 0.15, 0.3]]], np.float16)
    used = weight.astype(np.float32).copy()
    used[..., 2] = 0.0
    y = np.where(x > 0, x, (used * x.astype(np.float32)).astype(np.float16))
    return triage_elementwise(Operands(x, x, weight), prelu.forward(x, weight), y, forward=True)


def depth_axis() -> list[PreluClaim]:
    # float32 NCDHW with C = D = 4: the (C,) weight broadcast on D by a hand reshape
    x, _ = inputs((2, 4, 4, 3, 2), np.float32, seed=12)
    weight = np.array([0.05, -0.2, 0.4, 0.25], np.float32)
    y = np.where(x > 0, x, weight.reshape(1, 1, 4, 1, 1) * x)
    return triage_elementwise(Operands(x, x, weight), prelu.forward(x, weight), y, forward=True)


def adaptive_leaky_relu() -> list[PreluClaim]:
    # float16 (N, C) features: maximum(x, alpha*x), alpha a learnt per-feature parameter clipped to [0.01, 0.5]
    x, _ = inputs((64, 6), np.float16, seed=13)
    alpha = np.array([0.0025, 0.2, 0.62, 0.1, 0.9, 0.3], np.float16)
    clipped = np.clip(alpha, np.float16(0.01), np.float16(0.5))
    y = np.maximum(x, clipped * x)
    return triage_elementwise(Operands(x, x, alpha), prelu.forward(x, alpha), y, forward=True)


def rrelu_slope_in_one_channel() -> list[PreluClaim]:
    # float16 (N, C, L): channel 1 multiplied by RReLU's eval slope held in float32, the product rounded there
    x, _ = inputs((3, 3, 40), np.float16, seed=14)
    weight = np.full(3, 0.2, np.float16)
    slopes = np.array([weight[0], 11 / 48, weight[2]], np.float32).reshape(1, 3, 1)
    y = np.where(x > 0, x, (slopes * x.astype(np.float32)).astype(np.float16))
    return triage_elementwise(Operands(x, x, weight), prelu.forward(x, weight), y, forward=True)


def master_weight_in_float32() -> list[PreluClaim]:
    # float16 (N, C): the dumped weight is float16, the kernel multiplied by its float32 master copy 0.3
    x, _ = inputs((256, 2), np.float16, seed=21)
    weight = np.array([0.3, -0.05], np.float16)
    y = np.where(x > 0, x, (np.array([0.3, -0.05], np.float32) * x.astype(np.float32)).astype(np.float16))
    return triage_elementwise(Operands(x, x, weight), prelu.forward(x, weight), y, forward=True)


def jax_gradient_at_zero() -> list[PreluClaim]:
    # float32 (N, C, L) dx as where(x >= 0, dy, w*dy): the gradient at x = ±0 is dy
    x, dy = inputs((4, 3, 16), np.float32, seed=15, zeros=True)
    weight = np.array([0.25, 0.1, -0.3], np.float32)
    dx = np.where(x >= 0, dy, weight.reshape(1, 3, 1) * dy)
    return triage_elementwise(Operands(x, dy, weight), prelu.backward(dy, x, weight), dx, forward=False)


def aclnn_formula() -> list[PreluClaim]:
    # bfloat16 NCHW forward as max(0, x) + w*min(0, x) in float32, rounded to bfloat16
    x, _ = inputs((2, 3, 4, 4), BF16, seed=16, zeros=True)
    weight = np.array([0.25, 0.5, 0.125], BF16)
    wide = x.astype(np.float32)
    y = (np.where(wide > 0, wide, np.float32(0)) +
         weight.astype(np.float32).reshape(1, 3, 1, 1) * np.where(wide < 0, wide, np.float32(0))).astype(BF16)
    return triage_elementwise(Operands(x, x, weight), prelu.forward(x, weight), y, forward=True)


def dweight_bfloat16_sequential() -> list[PreluClaim]:
    # bfloat16 (N, C, L): each share rounded to bfloat16, added left to right in a float32 accumulator
    x, dy = inputs((16, 2, 128), BF16, seed=17)
    weight = np.array([0.25, 0.1], BF16)
    shares = np.where(x > 0, 0.0, x.astype(np.float32) * dy.astype(np.float32)).astype(BF16).astype(np.float32)
    sums = []
    for c in range(2):
        total = np.float32(0)
        for share in shares[:, c, :].reshape(-1):
            total = np.float32(total + share)
        sums.append(total)
    dw = np.array(sums, np.float32).astype(BF16)
    return triage_dweight(dy, x, weight, prelu.dweight(dy, x, weight), dw)


def dweight_channels_last_pairwise() -> list[PreluClaim]:
    # float32 (N, L, C), channel last: each channel's float32 shares in memory order, numpy's pairwise sum
    x, dy = inputs((64, 50, 3), np.float32, seed=18)
    weight = np.array([0.25, 0.1, 0.3], np.float32)
    shares = np.where(x > 0, np.float32(0), x * dy)
    dw = np.array([np.add.reduce(shares[..., c].ravel(), dtype=np.float32) for c in range(3)], np.float32)
    return triage_dweight(dy, x, weight, prelu.dweight(dy, x, weight, channel_axis=2), dw, channel_axis=2)


def correct_elementwise_weight() -> list[PreluClaim]:
    # float16 (N, C, H, W) with a Keras weight of the input's shape without the batch axis, computed right
    x, _ = inputs((2, 3, 4, 5), np.float16, seed=19, zeros=True)
    weight = np.random.default_rng(20).uniform(-0.5, 0.5, size=(3, 4, 5)).astype(np.float16)
    y = np.where(x > 0, x.astype(np.float64), weight.astype(np.float64) * x.astype(np.float64)).astype(np.float16)
    return triage_elementwise(Operands(x, x, weight), prelu.forward(x, weight), y, forward=True)


DUMPS = [
    Dump("float16 NHWC, Keras weight, channel 2 at Keras's zeros", keras_zero_channel,
         (("alpha-mismatch", "channel 2 used 0.0 (Keras's PReLU initial value"),)),
    Dump("float32 NCDHW, weight on the depth axis", depth_axis,
         (("alpha-mismatch", "the weight was applied on axis 2, not on axis 1"),)),
    Dump("float16 (N, C), adaptive LeakyReLU clipped to [0.01, 0.5]", adaptive_leaky_relu,
         (("alpha-mismatch", "slope clipped to [0.01, 0.5]: channels 0, 2, 4"),)),
    Dump("float16 (N, C, L), RReLU's eval slope in channel 1", rrelu_slope_in_one_channel,
         (("alpha-mismatch", "channel 1 used 0.22916|(torch's RReLU eval slope"),)),
    Dump("float16 (N, C), float32 master weights", master_weight_in_float32,
         (("alpha-precision", "channel 0 used 0.3 (the weight's decimal 0.3 held wider than its fp16"),
          ("alpha-precision", "channel 1 used -0.05 (the weight's decimal -0.05"))),
    Dump("float32 dx, where(x >= 0, dy, w*dy)", jax_gradient_at_zero,
         (("grad-at-zero", "x >= 0 selects dy"),)),
    Dump("bfloat16 NCHW, max(0,x) + w*min(0,x)", aclnn_formula,
         (("formulation", "max(0, x) + w*min(0, x)"),)),
    Dump("bfloat16 dweight, sequential float32, bf16 shares", dweight_bfloat16_sequential,
         (("reduction-order", "sum in float32, shares rounded to the input dtype"),)),  # the order does not show
    Dump("float32 dweight, channels last, numpy pairwise", dweight_channels_last_pairwise,
         (("reduction-order", "pairwise sum in float32"),)),
    Dump("float16 elementwise Keras weight, correct", correct_elementwise_weight, ()),
]


@pytest.mark.parametrize("dump", DUMPS, ids=str)
def test_a_held_out_dump_is_named(dump: Dump) -> None:
    claims = dump.claims()
    assert [c.category for c in claims] == [category for category, _ in dump.expected], \
        [(c.category, c.summary) for c in claims]
    for claim, (_, words) in zip(claims, dump.expected):
        assert all(part in claim.summary for part in words.split("|")), claim.summary
