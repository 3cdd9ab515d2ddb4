"""``conformance.testing.assert_prelu`` and ``assert_rrelu``: PReLU and RReLU outputs already in memory,
judged against the exact golden and every difference named.

The outputs judged here are torch's own (``nn.PReLU``, ``nn.RReLU``) or computed in the test by a
plain numpy formula; what torch's kernels show is in docs/reference/prelu.md with its source.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from conformance.errors import UsageError
from conformance.testing import assert_prelu, assert_rrelu, judge_prelu

torch = pytest.importorskip("torch")

WEIGHT = (0.1, -0.3, 0.2)


def _prelu(channels: int = 3, *, dtype=None) -> torch.nn.PReLU:
    module = torch.nn.PReLU(channels)
    with torch.no_grad():
        module.weight[:] = torch.tensor(WEIGHT[:channels])
    return module if dtype is None else module.to(dtype)


def _x(shape: tuple[int, ...], *, seed: int = 0, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def test_torchs_prelu_forward_and_dx_pass() -> None:
    module, x = _prelu(), _x((4, 3, 8, 8)).requires_grad_()
    y = module(x)
    dy = _x((4, 3, 8, 8), seed=1)
    y.backward(dy)
    assert_prelu(y, x, module.weight, strict=True)
    assert_prelu(x.grad, x, module.weight, dy=dy, strict=True)
    assert judge_prelu(y, x, module.weight).findings == ()


def test_a_channel_with_another_slope_fails_naming_the_channel_and_whose_slope_it_is() -> None:
    module, x = _prelu(), _x((4, 3, 8, 8))
    planted = module.weight.detach().clone()
    planted[2] = 0.25  # torch's nn.PReLU initial value, where the weight holds 0.2
    y = torch.nn.functional.prelu(x, planted)
    right = module(x).detach()
    differing = int((y.view(torch.int32) != right.view(torch.int32)).sum())
    with pytest.raises(AssertionError) as caught:
        assert_prelu(y, x, module.weight, msg="block 2 PReLU")
    text = str(caught.value)
    assert text.startswith(f"block 2 PReLU\n\nMismatched elements: {differing} / {x.numel()} ")
    assert re.search(rf"alpha-mismatch [x×]{differing}: channel 2 used 0\.25 \(torch's PReLU initial value", text)
    assert "where the weight held 0.2" in text and "of y: x=" in text


def test_the_weight_on_another_axis_is_named_by_axis() -> None:
    x = _x((2, 5, 5, 3)).numpy()  # N, C, H, W with H as long as C
    weight = np.array([0.1, -0.3, 0.2, 0.05, 0.4], dtype=np.float32)
    applied_on_h = np.where(x > 0, x, (x.astype(np.float64) * weight.reshape(5, 1)).astype(np.float32))
    assert_prelu(applied_on_h, x, weight, channel_axis=2)
    with pytest.raises(AssertionError, match="the weight was applied on axis 2, not on axis 1"):
        assert_prelu(applied_on_h, x, weight)


def _sequential_fp16(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """dweight per channel of NCHW float16 inputs, each share rounded to float16 and added left to right in
    float16: an order and accumulator no framework in the docs uses for this shape."""
    shares = np.where(x > 0, 0, x.astype(np.float32) * dy.astype(np.float32)).astype(np.float16)
    per_channel = shares.transpose(1, 0, 2, 3).reshape(x.shape[1], -1)
    total = np.zeros(x.shape[1], dtype=np.float16)
    for column in per_channel.T:
        total = (total.astype(np.float32) + column.astype(np.float32)).astype(np.float16)
    return total


def test_a_dweight_summed_in_another_order_names_reduction_order() -> None:
    x, dy = _x((2, 3, 64, 64)).half(), _x((2, 3, 64, 64), seed=1).half()
    module = _prelu(dtype=torch.float16)
    dx = torch.where(x > 0, dy, module.weight.detach()[None, :, None, None] * dy)
    summed = _sequential_fp16(x.numpy(), dy.numpy())
    with pytest.raises(AssertionError) as caught:
        assert_prelu(dx, x, module.weight, dy=dy, dweight=summed)
    text = str(caught.value)
    assert re.search(r"reduction-order [x×]\d+: dweight summed as a sequential sum in the input dtype", text), text
    assert re.search(r"index \[\d\] of dweight: expected ", text) and "written outside" not in text
    assert_prelu(dx, x, module.weight, dy=dy, dweight=summed, allow=["reduction-order"])


def test_torchs_rrelu_in_eval_mode_passes_and_strict_names_its_float32_slope() -> None:
    x = _x((4, 3, 16), dtype=torch.float16)
    y = torch.nn.RReLU().eval()(x)
    assert_rrelu(y, x)  # 11/48 held in float32: at most one ULP off in float16
    with pytest.raises(AssertionError, match=r"alpha-precision [x×]\d+: the one slope used 0\.229166671633"):
        assert_rrelu(y, x, strict=True)
    with pytest.raises(AssertionError, match="alpha-mismatch"):
        assert_rrelu(torch.nn.RReLU(0.1, 0.3).eval()(x), x)


@pytest.mark.parametrize(("weight", "options", "mentions"), [
    (np.ones(4, np.float32), {}, "fits no PReLU weight rule"),
    (np.ones(3, np.float32), {"dweight": np.zeros(3, np.float32)}, "dweight is given without dy"),
    (np.ones(3, np.float32), {"channel_axis": 4}, "channel_axis=4"),
])
def test_arguments_that_cannot_be_judged_are_usage_errors(weight: np.ndarray, options: dict,
                                                          mentions: str) -> None:
    x = _x((2, 3, 4)).numpy()
    with pytest.raises(UsageError, match=re.escape(mentions)):
        assert_prelu(x, x, weight, **options)
