"""Vector ops of the emulated chip: cast round modes, saturation, flushing, NaN rules, data movement."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.dtypes import all_patterns, info, is_nan, to_bits
from conformance.npu_impl.memory import GmTensor
from conformance.npu_impl.vector import (
    MissingInstruction,
    RoundMode,
    VectorUnit,
    copy_in,
    copy_out,
    moved_elements,
    step,
)
from conformance.reference import golden
from tests.helpers import assert_same_bits

NARROW = ("float16", "bfloat16")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # overflow is emulated on purpose


def _grid(dtype: str) -> np.ndarray:
    """Every finite value of a 16-bit dtype, ascending, as float64 (-0 dropped, +0 kept)."""
    with np.errstate(invalid="ignore"):
        v = all_patterns(dtype).astype(np.float64)
    v = v[np.isfinite(v)]
    return np.unique(v)


def _oracle(src: np.ndarray, dtype: str, mode: RoundMode) -> np.ndarray:
    """Directed rounding by search in the sorted value grid (independent of round_cast)."""
    grid = _grid(dtype)
    w = src.astype(np.float64)
    hi_i = np.clip(np.searchsorted(grid, w, side="left"), 0, grid.size - 1)
    lo_i = np.clip(np.searchsorted(grid, w, side="right") - 1, 0, grid.size - 1)
    lo, hi = grid[lo_i], grid[hi_i]
    pick = {
        RoundMode.FLOOR: lo,
        RoundMode.CEIL: hi,
        RoundMode.TRUNC: np.where(w < 0, hi, lo),
        RoundMode.ROUND: np.where(np.abs(w - lo) < np.abs(hi - w), lo,
                                  np.where(np.abs(w - lo) > np.abs(hi - w), hi, np.where(w < 0, lo, hi))),
    }
    if mode is RoundMode.ODD:
        odd_lo = (to_bits(lo.astype(info(dtype).dtype)) & 1).astype(bool)
        pick[mode] = np.where(lo == hi, lo, np.where(odd_lo, lo, hi))
    return np.copysign(pick[mode], w).astype(info(dtype).dtype)  # keeps the sign of zero results


def _inside(dtype: str, n: int = 20000) -> np.ndarray:
    """float32 values inside the target's finite range, many of them inexact, some exact ties."""
    rng = np.random.default_rng(7)
    top = info(dtype).max if dtype == "float16" else 3e38
    raw = rng.uniform(-1, 1, n) * np.float64(top) * rng.choice([1e-9, 1e-5, 1e-2, 1.0], n)
    with np.errstate(invalid="ignore"):
        wide = all_patterns(dtype).astype(np.float64)
    base = wide[np.isfinite(wide)][:4000].astype(np.float32)
    ties = (base.astype(np.float64) + np.float64(info(dtype).smallest_subnormal) / 2).astype(np.float32)
    return np.concatenate([raw.astype(np.float32), base, ties])


@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("mode", [RoundMode.FLOOR, RoundMode.CEIL, RoundMode.TRUNC, RoundMode.ROUND,
                                  RoundMode.ODD], ids=str)
def test_cast_round_modes_match_grid_search(dtype: str, mode: RoundMode) -> None:
    src = _inside(dtype)
    dst = np.empty(src.size, dtype=info(dtype).dtype)
    VectorUnit().cast(dst, src, mode=mode, count=src.size)
    assert_same_bits(dst, _oracle(src, dtype, mode), what=f"cast {mode.value} to {dtype}")


@pytest.mark.parametrize("dtype", NARROW)
def test_cast_rint_is_correctly_rounded_half_to_even(dtype: str) -> None:
    src = _inside(dtype)
    dst = np.empty(src.size, dtype=info(dtype).dtype)
    VectorUnit().cast(dst, src, mode=RoundMode.RINT, count=src.size)
    expected = golden.round_float64(src.astype(np.float64), info(dtype))
    assert_same_bits(dst, expected, what=f"RINT to {dtype}")


def test_cast_overflow_is_inf_without_saturation_and_max_with_it() -> None:
    src = np.array([70000.0, -70000.0, np.inf, np.nan, 65519.0], dtype=np.float32)
    plain, sat = np.empty(5, np.float16), np.empty(5, np.float16)
    VectorUnit().cast(plain, src, mode=RoundMode.RINT, count=5)
    VectorUnit().cast(sat, src, mode=RoundMode.RINT, count=5, saturating=True)
    assert plain[0] == np.inf and plain[1] == -np.inf and np.isnan(plain[3])
    assert sat.tolist() == [65504.0, -65504.0, 65504.0, 0.0, 65504.0]


def test_floor_of_huge_positive_is_max_not_inf() -> None:
    dst = np.empty(1, np.float16)
    VectorUnit().cast(dst, np.array([1e6], np.float32), mode=RoundMode.FLOOR, count=1)
    assert dst[0] == np.float16(65504.0)


def test_saturation_mode_saturates_every_op() -> None:
    vec = VectorUnit(float_mode="saturation")
    src = np.array([np.nan, np.inf, -np.inf, 3e38, 1.0], dtype=np.float32)
    out = np.empty(5, np.float32)
    vec.muls(out, src, 2.0, 5)
    top = np.float32(info("float32").max)
    assert out.tolist() == [0.0, top, -top, top, 2.0]


def test_inf_nan_mode_keeps_ieee_results() -> None:
    out = np.empty(3, np.float32)
    VectorUnit().muls(out, np.array([np.nan, np.inf, 3e38], np.float32), 2.0, 3)
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == np.inf


def test_flush_reads_and_writes_subnormals_as_zero() -> None:
    tiny = np.float32(info("float32").smallest_normal)
    src = np.array([tiny / 4, -tiny / 4, tiny, 1.0], dtype=np.float32)
    out = np.empty(4, np.float32)
    VectorUnit(subnormals="flush").muls(out, src, 1.0, 4)
    assert to_bits(out).tolist() == [0, 0x80000000, to_bits(src)[2], to_bits(src)[3]]
    VectorUnit(subnormals="flush").muls(out, np.array([tiny] * 4, np.float32), 0.5, 4)
    assert (out == 0).all(), "a subnormal result is flushed"


@pytest.mark.parametrize("rule,expect_nan", [("propagate", True), ("number", False)])
def test_max_min_nan_rule(rule: str, expect_nan: bool) -> None:
    vec = VectorUnit(maxmin_nan=rule)
    src = np.array([np.nan, -1.0, 2.0], np.float32)
    hi, lo = np.empty(3, np.float32), np.empty(3, np.float32)
    vec.maxs(hi, src, 0.0, 3)
    vec.mins(lo, src, 0.0, 3)
    assert bool(np.isnan(hi[0])) is expect_nan and bool(np.isnan(lo[0])) is expect_nan
    assert hi[1:].tolist() == [0.0, 2.0] and lo[1:].tolist() == [-1.0, 0.0]


def test_leaky_relu_instruction_uses_scalar_of_type_t() -> None:
    x = np.array([-1.0, -0.0, 2.0, np.nan, -np.inf], np.float16)
    out = np.empty(5, np.float16)
    VectorUnit().leaky_relu(out, x, 0.2, 5)
    assert out[0] == np.float16(0.2) * np.float16(-1.0) == np.float16(-0.199951171875)
    assert to_bits(out[1:3]).tolist() == [0x8000, to_bits(x[2:3])[0]]
    assert np.isnan(out[3]) and out[4] == -np.inf


def test_select_is_bitwise_and_keeps_nan_payloads() -> None:
    a = np.array([np.nan, 1.0, -0.0, 5.0], np.float32)
    b = np.array([7.0, 8.0, 9.0, -np.inf], np.float32)
    mask = np.array([True, False, True, False])
    out = np.empty(4, np.float32)
    VectorUnit().select(out, mask, a, b, 4)
    expected = np.where(mask, a, b)
    assert to_bits(out).tolist() == to_bits(expected).tolist()


def test_step_walks_the_ordered_line() -> None:
    x = np.array([0.0, -0.0, 1.0, -1.0], np.float16)
    assert to_bits(step(x, +1)).tolist() == [0x0001, 0x0001, 0x3C01, 0xBBFF]
    assert to_bits(step(x, -1)).tolist() == [0x8001, 0x8001, 0x3BFF, 0xBC01]


@pytest.mark.parametrize("count,itemsize,moved", [(11, 2, 16), (16, 2, 16), (1, 4, 8), (9, 4, 16), (0, 4, 0)])
def test_datacopy_moves_whole_32_byte_blocks(count: int, itemsize: int, moved: int) -> None:
    assert moved_elements(count, itemsize, how="block", has_pad=False) == moved
    assert moved_elements(count, itemsize, how="pad", has_pad=True) == count


def test_datacopy_of_11_halves_writes_16_into_gm() -> None:
    gm = GmTensor(32, np.float16, red_zone=16)
    ub = np.arange(16, dtype=np.float16)
    copy_out(gm, 0, ub, 11, core=0, how="block", has_pad=False)
    assert gm.body[:16].tolist() == ub.tolist() and (gm.writers[16:32] == 0).all()


def test_datacopy_pad_exists_only_where_the_profile_has_it() -> None:
    gm = GmTensor(8, np.float32, red_zone=8)
    with pytest.raises(MissingInstruction, match="DataCopyPad is not available"):
        copy_in(np.empty(8, np.float32), gm, 0, 3, how="pad", has_pad=False)


def test_is_nan_sanity_for_saturated_nan_outputs() -> None:
    out = np.empty(2, info("bfloat16").dtype)
    VectorUnit(float_mode="saturation").duplicate(out, float("nan"), 2)
    assert not is_nan(out).any() and (out.astype(np.float32) == 0).all()
