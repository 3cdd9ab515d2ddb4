"""The ``twice`` formulation: LeakyReLU applied to its own result, each pass with the
variant's flags, slope and rounding.  Expected values follow the two passes by hand."""
from __future__ import annotations

import numpy as np

from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.helpers import assert_same_bits
from tests.reference.arrays import f32


def test_twice_with_ftz_flushes_the_first_pass() -> None:
    # pass 1: -2**-149 * 2**20 = -2**-129, tiny -> -0; pass 2: -0 * 2**20 = -0
    # (unflushed, pass 2 would give -2**-109)
    got = golden.forward(f32(-2.0 ** -149), 2.0 ** 20, semantics=Semantics(formulation="twice", ftz=True))
    assert_same_bits(got, f32(-0.0))


def test_twice_with_daz_reads_the_subnormal_input_as_zero_in_the_first_product() -> None:
    # pass 1 reads -2**-149 as -0: -0 * 2**30 = -0; pass 2 keeps -0 (not -2**-89)
    got = golden.forward(f32(-2.0 ** -149), 2.0 ** 30, semantics=Semantics(formulation="twice", daz=True))
    assert_same_bits(got, f32(-0.0))


def test_twice_with_daz_reads_a_subnormal_first_result_as_zero() -> None:
    # pass 1: -2**-126 * -0.5 = +2**-127 (subnormal, no FTZ); pass 2 compares and multiplies it
    # as +0: not > 0, so -0.5 * +0 = -0
    got = golden.forward(f32(-2.0 ** -126), -0.5, semantics=Semantics(formulation="twice", daz=True))
    assert_same_bits(got, f32(-0.0))


def test_twice_computes_both_passes_in_opmath() -> None:
    # float16 opmath: -1e5 overflows to -inf, and -inf * 0.5 stays -inf through both passes
    got = golden.forward(f32(-1e5), 0.5, semantics=Semantics(formulation="twice", opmath="float16"))
    assert_same_bits(got, f32(-np.inf))


def test_twice_with_ge_keeps_negative_zero_in_both_passes() -> None:
    # -0 >= 0, so each pass selects x itself: -0 (a * -0 would be +0 for a = -0.5)
    got = golden.forward(f32(-0.0), -0.5, semantics=Semantics(formulation="twice", predicate="ge"))
    assert_same_bits(got, f32(-0.0))


def test_twice_truncates_the_first_pass_to_the_output_dtype() -> None:
    # float32 1 + 2**-11 + 2**-12 rounds toward zero to float16 1.0 (to nearest it is 1 + 2**-10)
    x = f32(1 + 2.0 ** -11 + 2.0 ** -12)
    got = golden.forward(x, 0.2, out_dtype="float16", semantics=Semantics(formulation="twice", rounding="rtz"))
    assert_same_bits(got, np.array([1.0], dtype=np.float16))


def test_twice_rounds_each_opmath_product_toward_zero() -> None:
    # pass 1: -10 * float32(0.3) = -3.00000011920928955078125, a float32 tie -> -3.0, which
    # float16 holds (the exact -10 * 0.3 = -2.99999999999999988898 would truncate to -2.998046875);
    # pass 2: -3.0 * float32(0.3) = -0.900000035762786865234375 (a float32), truncated to the
    # float16 step 2**-11: -1843 * 2**-11 = -0.89990234375
    x = np.array([-10.0], dtype=np.float16)
    got = golden.forward(x, 0.3, semantics=Semantics(formulation="twice", opmath="float32", rounding="rtz"))
    assert_same_bits(got, np.array([-0.89990234375], dtype=np.float16))
