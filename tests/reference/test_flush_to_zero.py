"""FTZ of products near the smallest normal: x86 flushes a result that is tiny after rounding
to the format's significand with an unbounded exponent, so the bits at 2**-126 depend on the
exact product, not on the subnormal rounding.  Each expected value is derived in its comment:
in [2**-127, 2**-126) a 24-bit significand steps by 2**-150, an 8-bit one by 2**-134."""
from __future__ import annotations

import numpy as np

from conformance.dtypes import bfloat16, from_bits, info
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.exact_oracle import exact_scale
from tests.helpers import assert_same_bits
from tests.reference.arrays import f32

FTZ = Semantics(ftz=True)
LARGEST_F32_SUBNORMAL_BELOW_2 = float(from_bits([0x00FFFFFF], "float32")[0])  # 2**-125 - 2**-149


def test_a_float32_product_tiny_at_24_bits_is_flushed_though_it_rounds_to_the_smallest_normal() -> None:
    # -(2**-125 - 2**-149) * 0.5 = -(2**-126 - 2**-150): 24 bits hold it below 2**-126, so it is
    # tiny, though the subnormal rounding (a tie, to even) gives -2**-126
    assert_same_bits(golden.forward(f32(-LARGEST_F32_SUBNORMAL_BELOW_2), 0.5, semantics=FTZ), f32(-0.0))


def test_a_float32_product_that_rounds_to_the_smallest_normal_at_24_bits_is_kept() -> None:
    # (2**-126 - 2**-150) * (1 + 2**-24) = 2**-126 - 2**-174, which 24 bits round to 2**-126: not tiny
    alpha = 0.5 * (1 + 2.0 ** -24)
    assert_same_bits(golden.forward(f32(-LARGEST_F32_SUBNORMAL_BELOW_2), alpha, semantics=FTZ), f32(-2.0 ** -126))


def test_a_bfloat16_product_is_flushed_when_tiny_in_float32() -> None:
    # -(2**-125 - 2**-133) * 0.5 = -(2**-126 - 2**-134): a bfloat16 tie that rounds (to even) to
    # -2**-126, but computed in float32 it is exact and subnormal, so FTZ makes it -0
    x = np.array([-(2.0 ** -125 - 2.0 ** -133)], dtype=bfloat16)
    assert_same_bits(golden.forward(x, 0.5, semantics=FTZ), np.array([-0.0], dtype=bfloat16))


def test_a_bfloat16_opmath_product_tiny_in_float32_is_flushed() -> None:
    # the same product of a float32 x computed in bfloat16 (x and 0.5 are bfloat16 values)
    x = f32(-(2.0 ** -125 - 2.0 ** -133))
    assert_same_bits(golden.forward(x, 0.5, semantics=Semantics(ftz=True, opmath="bfloat16")), f32(-0.0))


def test_a_bfloat16_opmath_flushes_by_the_bfloat16_slope() -> None:
    # 0.99999 rounds to the bfloat16 slope 1.0, so x * slope = -2**-126 is normal and kept
    # (by the float64 slope it would be tiny)
    x = f32(-2.0 ** -126)
    assert_same_bits(golden.forward(x, 0.99999, semantics=Semantics(ftz=True, opmath="bfloat16")), x)


def test_a_float32_opmath_flushes_by_the_float32_product() -> None:
    # the largest subnormal times float32(1.00001) is a normal float32: not flushed (by a
    # bfloat16 slope, 1.0, the product would stay subnormal and be flushed)
    x, slope = -(2.0 ** -126 - 2.0 ** -149), float(np.float32(1.00001))
    expected = f32(exact_scale(x, slope, info("float32")))
    assert abs(expected[0]) >= 2.0 ** -126
    assert_same_bits(golden.forward(f32(x), 1.00001, semantics=Semantics(ftz=True, opmath="float32")), expected)
