"""Each chip's own kernel (TBE on 910B/910A/310P, Ascend C on ascend950) and the aclnn host contract."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.dtypes import all_patterns, info
from conformance.errors import Unsupported
from conformance.npu_impl import PROFILES, leaky_relu, leaky_relu_backward
from conformance.npu_impl.backend import CannBackend
from conformance.npu_impl.variants import expected_on, not_applicable
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.helpers import assert_same_bits

FP16_SLOPE = Semantics(slope_dtype="float16")


def shuffled(x: np.ndarray) -> np.ndarray:
    return x[np.random.default_rng(4).permutation(x.size)]


@pytest.mark.parametrize("alpha", [0.01, 0.2, 1 / 3, 1.5])
def test_910b_fp16_rounds_the_slope_to_fp16_both_ways(alpha: float) -> None:
    """TBE leaky_relu.py: tbe.vlrelu(x, fp16(slope)); leaky_relu_grad.py: vmuls(g, fp16(slope)), vsel."""
    x = all_patterns("float16")
    dy = shuffled(x)
    assert_same_bits(leaky_relu(x, alpha).y, golden.forward(x, alpha, semantics=FP16_SLOPE), what="fwd")
    assert_same_bits(leaky_relu_backward(dy, x, alpha).dx, golden.backward(dy, x, alpha, semantics=FP16_SLOPE),
                     what="bwd")


def test_ascend950_fp16_keeps_the_fp32_slope() -> None:
    x = all_patterns("float16")
    expected = golden.forward(x, 0.2, semantics=Semantics(opmath="float32"))
    assert_same_bits(leaky_relu(x, 0.2, profile="ascend950").y, expected, what="950 fp16")
    assert not np.array_equal(leaky_relu(x, 0.2).y.view(np.uint16), expected.view(np.uint16))


def test_910a_step_backward_gives_a_positive_subnormal_a_fractional_gradient() -> None:
    """r = max(min(x, 2**-126), 0) * 2**126 in fp32; dx = g * (|r - 1| * slope + r), each op rounded."""
    f = np.float32
    x = np.array([2.0 ** -127, 2.0 ** -149, 2.0 ** -126, 1.0, -2.0 ** -127, 0.0, -3.0], f)
    g = np.full(x.size, 3.0, f)
    slope = f(0.2)
    r = np.array([0.5, 2.0 ** -23, 1.0, 1.0, 0.0, 0.0, 0.0], f)
    expected = g * (np.abs(r - f(1)) * slope + r)
    dx = leaky_relu_backward(g, x, 0.2, profile="ascend910a").dx
    assert_same_bits(dx, expected, what="910A step backward")
    assert 0.2 * 3 < dx[0] < 3 and dx[1] != dx[4]


def test_910a_step_backward_on_fp16_is_the_select_with_an_fp16_slope() -> None:
    """In fp16 the clamp is 2**-24, the smallest subnormal, so no x gets a fraction."""
    x = all_patterns("float16")
    x = x[np.isfinite(x)]
    dy = shuffled(x)
    dx = leaky_relu_backward(dy, x, 0.2, profile="ascend910a").dx
    expected = golden.backward(dy, x, 0.2, semantics=Semantics(slope_dtype="float16", saturate=True))
    same = dx.astype(np.float64) == expected.astype(np.float64)  # saturation mode: zero signs not compared
    assert same.all(), np.flatnonzero(~same)[:5]


def test_bf16_on_910b_computes_in_fp32_as_support_bfp16_does() -> None:
    x = all_patterns("bfloat16")
    expected = golden.forward(x, 0.2, semantics=Semantics(opmath="float32"))
    assert_same_bits(leaky_relu(x, 0.2).y, expected, what="910B bf16")


def test_fp16_slope_is_a_defect_only_where_it_is_not_the_kernel() -> None:
    assert "vlrelu" in not_applicable("fp16-slope", PROFILES["ascend910b1"])
    assert not not_applicable("fp16-slope", PROFILES["ascend950"])
    assert expected_on("fp16-slope", PROFILES["ascend950"]) == ("alpha-precision",)
    assert expected_on("tail-dropped", PROFILES["ascend910b1"]) == ("tail-block",)


def test_the_cann_policy_allows_what_the_modelled_chip_does() -> None:
    assert "alpha-precision" in CannBackend.allowed_on("ascend910b1")
    assert CannBackend.allowed_on("ascend950") == frozenset()
    for name, prof in PROFILES.items():
        assert prof.source("allowed") != "unknown", name


def test_310p_says_aclnn_does_not_support_it_on_stderr_and_in_the_row(capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.npu_impl import backend

    backend._ANNOUNCED.discard("ascend310p3")
    result = CannBackend(profile="ascend310p3").forward(np.ones(4, np.float16), 0.2)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "aclnnLeakyRelu does not support" in err
    assert result.notes and "Atlas inference" in result.notes[0]
    assert CannBackend(profile="ascend910b1").forward(np.ones(4, np.float16), 0.2).notes == ()


def test_backward_promotes_mixed_dtypes_through_a_cast() -> None:
    """PromoteType(gradOutput, self) then l0op::Cast: fp16 dy with fp32 x runs the fp32 kernel."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(3000).astype(np.float32)
    dy = rng.standard_normal(3000).astype(np.float16)
    r = leaky_relu_backward(dy, x, 0.2)
    assert r.dx.dtype == np.float32
    assert_same_bits(r.dx, leaky_relu_backward(dy.astype(np.float32), x, 0.2).dx, what="promoted")
    mixed16 = leaky_relu_backward(dy, x.astype(info("bfloat16").dtype), 0.2).dx
    assert mixed16.dtype == np.float32  # float16 with bfloat16 promotes to float32


def test_backward_with_a_double_self_runs_on_aicpu() -> None:
    """ops-nn's case_different_dtype: fp16 gradOutput, DOUBLE self -> DOUBLE, an AICPU kernel."""
    with pytest.raises(Unsupported, match="AICPU"):
        leaky_relu_backward(np.ones(4, np.float16), np.ones(4, np.float64), 0.2)


def test_backward_broadcasts_the_shapes() -> None:
    rng = np.random.default_rng(6)
    dy = rng.standard_normal((3, 1)).astype(np.float32)
    x = rng.standard_normal((1, 5)).astype(np.float32)
    r = leaky_relu_backward(dy, x, 0.3)
    assert r.dx.shape == (3, 5)
    full = leaky_relu_backward(np.broadcast_to(dy, (3, 5)).copy(), np.broadcast_to(x, (3, 5)).copy(), 0.3).dx
    assert_same_bits(r.dx, full, what="broadcast")


@pytest.mark.parametrize("src,out", [("float16", "float32"), ("bfloat16", "float32"), ("float32", "float16"),
                                     ("float16", "bfloat16")])
def test_the_output_dtype_is_a_separate_cast_after_the_kernel(src: str, out: str) -> None:
    """The kernel writes the input dtype; l0op::Cast (assumed RINT) converts it, and the plan is the kernel's."""
    x = np.random.default_rng(7).standard_normal(5000).astype(info(src).dtype) * 100
    r = leaky_relu(x, 0.2, out_dtype=out)
    same = leaky_relu(x, 0.2)
    assert_same_bits(r.y, same.y.astype(info(out).dtype), what=f"{src}->{out}")
    assert r.plan == same.plan


def test_shapes_that_cannot_broadcast_are_a_rejected_input_on_the_backend() -> None:
    result = CannBackend().backward(np.ones(4, np.float32), np.ones(5, np.float32), 0.2)
    assert result.value is None and "cannot broadcast" in result.rejected


def test_fp16_slope_on_910b_computes_the_reference_bits() -> None:
    x = all_patterns("float16")
    assert_same_bits(leaky_relu(x, 0.2, variant="fp16-slope").y, leaky_relu(x, 0.2).y, what="fp16-slope on 910B")
