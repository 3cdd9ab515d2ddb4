"""The dtype table and the ordered-integer ULP distance."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from conformance.dtypes import DTYPES, all_patterns, from_bits, info, is_nan, is_subnormal, ulp_distance


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_table_agrees_with_finfo(name: str) -> None:
    rec = info(name)
    fi = ml_dtypes.finfo(rec.dtype) if name == "bfloat16" else np.finfo(rec.dtype)
    assert rec.bits == fi.bits
    assert rec.max == float(fi.max)
    assert rec.smallest_normal == float(fi.smallest_normal)
    assert rec.smallest_subnormal == float(fi.smallest_subnormal)
    assert rec.eps == float(fi.eps)
    assert rec.uint.itemsize * 8 == rec.bits


def test_aliases_resolve_and_unknown_dtype_says_what_to_use() -> None:
    assert info("bf16") is info(ml_dtypes.bfloat16) is info("bfloat16")
    assert info("half").name == "float16"
    with pytest.raises(ValueError, match="use one of"):
        info("int8")


def test_ulp_distance_does_not_wrap_across_zero() -> None:
    a, b = np.float16([60000]), np.float16([-60000])
    assert ulp_distance(a, b).ulps[0] == 63142
    from numpy.testing._private.utils import nulp_diff

    assert int(np.ravel(nulp_diff(a, b))[0]) != 63142  # numpy's int16 subtraction wraps (2394)


def test_signed_zeros_are_zero_apart_and_nan_is_reported_separately() -> None:
    a = np.array([0.0, 1.0, np.nan, np.nan], dtype=np.float32)
    b = np.array([-0.0, np.nextafter(np.float32(1), np.float32(2)), 1.0, np.nan], dtype=np.float32)
    d = ulp_distance(a, b)
    assert d.ulps.tolist() == [0, 1, 0, 0]
    assert d.nan.tolist() == [False, False, True, True]


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_is_nan_of_every_16_bit_pattern_is_nan_of_its_float32_value(name: str) -> None:
    x = all_patterns(name)
    expected = np.isnan(x.astype(np.float32))
    assert int(expected.sum()) == 2 * (2 ** info(name).mant_bits - 1)
    assert np.array_equal(is_nan(x), expected)
    if name == "float16":  # in the other byte order too
        assert np.array_equal(is_nan(x.astype(x.dtype.newbyteorder())), expected)


def test_bfloat16_masks_count_every_class() -> None:
    x = all_patterns("bfloat16")
    assert int(is_nan(x).sum()) == 2 * (2 ** 7 - 1)  # both signs, every nonzero mantissa at max exponent
    assert int(is_subnormal(x).sum()) == 2 * (2 ** 7 - 1)
    assert float(from_bits([0x3F80], "bfloat16")[0]) == 1.0
