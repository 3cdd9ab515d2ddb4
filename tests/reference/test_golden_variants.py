"""Each semantic variant of golden, checked on values whose answer is known by hand."""
from __future__ import annotations

import numpy as np

from conformance.dtypes import info
from conformance.reference import golden
from conformance.reference.semantics import Semantics


def test_slope_rounded_to_fp16_uses_0_199951171875() -> None:
    x = np.array([-1.0], dtype=np.float16)
    assert float(golden.forward(x, 0.2, semantics=Semantics(slope_dtype="float16"))[0]) == -0.199951171875
    assert float(golden.forward(x, 0.2)[0]) == float(np.float16(-0.2))


def test_opmath_rounds_through_float32_first() -> None:
    x = np.array([-2.98e-7], dtype=np.float16)  # bits 0x8005, the half-way case
    assert golden.forward(x, 0.3).view(np.uint16)[0] == 0x8001
    assert golden.forward(x, 0.3, semantics=Semantics(opmath="float32")).view(np.uint16)[0] == 0x8002


def test_daz_and_ftz_flush_inputs_and_outputs_keeping_sign() -> None:
    tiny = info("float32").smallest_subnormal
    x = np.array([tiny, -tiny, -info("float32").smallest_normal], dtype=np.float32)
    y = golden.forward(x, 0.5, semantics=Semantics(daz=True, ftz=True))
    assert y.tolist() == [0.0, 0.0, 0.0] and np.signbit(y).tolist() == [False, True, True]
    assert golden.forward(x, 0.5)[2] != 0  # without the flag the subnormal output stays


def test_saturate_maps_nan_to_zero_and_inf_to_max() -> None:
    x = np.array([np.nan, np.inf, -np.inf, -65504.0], dtype=np.float16)
    y = golden.forward(x, 1.5, semantics=Semantics(saturate=True))
    assert y.tolist() == [0.0, 65504.0, -65504.0, -65504.0]


def test_grad_rule_ge_passes_dy_at_zero() -> None:
    x = np.array([0.0, -0.0, 1.0, -1.0], dtype=np.float32)
    dy = np.full(4, 2.0, dtype=np.float32)
    assert golden.backward(dy, x, 0.25).tolist() == [0.5, 0.5, 2.0, 0.5]
    assert golden.backward(dy, x, 0.25, semantics=Semantics(grad_rule="ge")).tolist() == [2.0, 2.0, 2.0, 0.5]


def test_nan_grad_variants() -> None:
    x = np.array([np.nan], dtype=np.float32)
    dy = np.array([4.0], dtype=np.float32)
    assert golden.backward(dy, x, 0.25).tolist() == [1.0]
    assert golden.backward(dy, x, 0.25, semantics=Semantics(nan_grad="dy")).tolist() == [4.0]
    assert golden.backward(dy, x, 0.25, semantics=Semantics(nan_grad="zero")).tolist() == [0.0]


def test_bad_alpha_and_pairs_say_what_to_fix() -> None:
    import pytest

    with pytest.raises(ValueError, match="finite"):
        golden.forward(np.zeros(1, np.float32), float("nan"))
    with pytest.raises(ValueError, match="supported"):
        golden.forward(np.zeros(1, np.float16), 0.2, out_dtype="bfloat16")


# ----------------------------------------------------------------------------- real-world behaviours

def test_daz_reads_inputs_as_zero_while_ftz_flushes_products() -> None:
    tiny = info("float32").smallest_subnormal
    x = np.array([-tiny, -info("float32").smallest_normal], dtype=np.float32)
    daz = golden.forward(x, 0.5, semantics=Semantics(daz=True, predicate="ge"))  # JAX: -0 >= 0 selects x itself
    assert daz.view(np.uint32).tolist() == x.view(np.uint32).tolist()[:1] + [daz.view(np.uint32)[1]]
    assert daz[1] != 0  # DAZ alone keeps a subnormal product
    ftz = golden.forward(x, 0.5, semantics=Semantics(ftz=True))
    assert ftz[1] == 0 and np.signbit(ftz[1]) and ftz[0] == 0  # FTZ flushes the products


def test_formulations_max_and_min_are_wrong_beyond_the_unit_slope() -> None:
    x = np.array([2.0, -2.0, np.nan], dtype=np.float32)
    assert golden.forward(x, 1.5, semantics=Semantics(formulation="max"))[:2].tolist() == [3.0, -2.0]
    assert golden.forward(x, 1.5, semantics=Semantics(formulation="min"))[:2].tolist() == [2.0, -3.0]
    assert golden.forward(x, 0.5, semantics=Semantics(formulation="max"))[:2].tolist() == [2.0, -1.0]


def test_maxmin_and_mask_multiply_formulations() -> None:
    x = np.array([-np.inf, np.inf, -2.0, -0.0], dtype=np.float32)
    mm = golden.forward(x, 0.0, semantics=Semantics(formulation="maxmin"))
    assert np.isnan(mm[0]) and mm[2] == 0 and not np.signbit(mm[2])  # +0 + 0*(-2)
    mask = golden.forward(x, 0.2, semantics=Semantics(formulation="mask-multiply"))
    assert np.isnan(mask[:2]).all() and mask[2] == np.float32(-0.4)


def test_plain_relu_gives_positive_zeros() -> None:
    x = np.array([-2.0, 3.0], dtype=np.float16)
    y = golden.forward(x, 0.2, semantics=Semantics(formulation="relu"))
    assert y.tolist() == [0.0, 3.0] and not np.signbit(y[0])


def test_gradient_of_maximum_splits_ties_and_doubles_at_nan() -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0], dtype=np.float32)
    dy = np.full(7, 2.0, dtype=np.float32)
    dx = golden.backward(dy, x, 0.5, semantics=Semantics(grad_rule="max"))
    assert dx.tolist()[:4] == [1.5] * 4 and dx[4] == 3.0 and dx[5:].tolist() == [2.0, 1.0]


def test_paddle_nan_gradient_is_dy_times_zero() -> None:
    x = np.array([np.nan] * 3, dtype=np.float32)
    dy = np.array([-3.0, 3.0, np.inf], dtype=np.float32)
    dx = golden.backward(dy, x, 0.2, semantics=Semantics(nan_grad="dy*0"))
    assert dx[:2].tolist() == [0.0, 0.0] and np.signbit(dx[0]) and not np.signbit(dx[1])
    assert np.isnan(dx[2])


def test_branch_sum_gradient_changes_only_zero_signs() -> None:
    x = np.array([1.0, -1.0], dtype=np.float32)
    dy = np.array([-0.0, -0.0], dtype=np.float32)
    dx = golden.backward(dy, x, 0.2, semantics=Semantics(grad_rule="ge", grad_form="sum"))
    assert dx.tolist() == [0.0, 0.0] and not np.signbit(dx).any()


def test_rounding_to_float16_is_numpys_cast_at_the_range_limits() -> None:
    """The values that round to ±inf or ±0 are set before the cast; the cast gives the rest."""
    from conformance.reference.exact import round_float64

    limits = np.array([65520.0, 65504.0, 2.0 ** -25, 2.0 ** -24, 2.0 ** -14, 1e300, 5e-324, 0.0, np.inf])
    near = np.concatenate([limits, np.nextafter(limits, 0.0), np.nextafter(limits, np.inf), [np.nan]])
    rng = np.random.default_rng(3)
    v = np.concatenate([near, -near, rng.integers(0, 1 << 64, 1 << 14, dtype=np.uint64).view(np.float64)])
    with np.errstate(all="ignore"):
        expected = v.astype(np.float16)
    got = round_float64(v, info("float16"))
    assert np.array_equal(got.view(np.uint16), expected.view(np.uint16))
    assert (got[:3] == [np.inf, 65504.0, 0.0]).all() and got[3] == 2.0 ** -24
    assert isinstance(round_float64(np.float64(1e6), info("float16")), np.float16)
