"""Hand-built defects: one table of cases, each a kernel's wrong output built by hand and
the category (and summary words) that must name every element it changes.  A case's name
is its pytest id."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

import ml_dtypes
import numpy as np

from conformance.dtypes import all_patterns, from_bits, info, is_nan, to_bits
from conformance.reference import golden as ref
from tests.helpers import F16, f32_specials

DY16 = np.random.default_rng(3).permutation(F16)
X32 = f32_specials()
Built = tuple[np.ndarray, np.ndarray, float, dict]  # x, the defect's output, alpha, judge keywords


@dataclass(frozen=True)
class Defect:
    """One hand-built defect.  ``category`` None: a value defect that must not be taken for
    a position; ``position``: a defect of position, or one that looks like one."""

    name: str
    build: Callable[[], Built] = field(repr=False)
    category: Optional[str]
    says: str = ""
    verdict: Optional[str] = None  # the row's verdict, when the case pins it
    position: bool = False

    def __str__(self) -> str:
        return self.name


def exact_result(x: np.ndarray, alpha: float, *, direction: str = "forward", dy: Optional[np.ndarray] = None,
          out_dtype: Optional[str] = None) -> np.ndarray:
    """The exact result of the inputs a case's ``build`` gives."""
    if direction == "forward":
        return ref.forward(x, alpha, out_dtype=out_dtype)
    return ref.backward(dy, x, alpha, out_dtype=out_dtype)


def f32_product(v: np.ndarray, alpha: float) -> np.ndarray:
    """torch's way: the product in float32 with a float32 slope."""
    with np.errstate(all="ignore"):
        return v.astype(np.float32) * np.float32(alpha)


def forward32(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x.astype(np.float32) > 0, x.astype(np.float32), f32_product(x, alpha))


def toward_zero(exact: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values truncated to ``dtype``: nearest, then one step toward zero where that
    went up in magnitude (inf included: a truncating cast saturates)."""
    near = ref.round_float64(exact, info(dtype))
    bits = to_bits(near).astype(np.int64)
    up = (np.abs(near.astype(np.float64)) > np.abs(exact)) & ~np.isnan(exact)
    return from_bits((bits - up).astype(info(dtype).uint), dtype)


def _truncated_fp16() -> Built:
    """A conversion that truncates: every inexact result one step toward zero, and an overflow
    gives ±65504 (not saturation: an input ±inf stays ±inf)."""
    with np.errstate(all="ignore"):
        exact = np.where(X32 > 0, X32.astype(np.float64), X32.astype(np.float64) * 0.2)
    return X32, toward_zero(exact, "float16"), 0.2, {"out_dtype": "float16"}


def _bf16_high_bits() -> Built:
    """A bf16 store that keeps the high 16 bits of the float32 result (no rounding)."""
    y32 = forward32(X32, 0.2)
    return X32, (y32.view(np.uint32) >> 16).astype(np.uint16).view(ml_dtypes.bfloat16), 0.2, \
        {"out_dtype": "bfloat16"}


def _bf16_gradient_high_bits() -> Built:
    """Backward, the same store: not a slope of 0.00996."""
    dy = np.random.default_rng(5).permutation(X32)
    with np.errstate(all="ignore"):
        d32 = np.where(X32 > 0, dy, dy * np.float32(0.01))
    actual = (d32.view(np.uint32) >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)
    return X32, actual, 0.01, {"direction": "backward", "dy": dy, "out_dtype": "bfloat16"}


def _ties_away() -> Built:
    """alpha 1.5 makes many fp16 products exact ties; a round-half-away conversion moves
    each one step away from zero."""
    with np.errstate(all="ignore"):
        exact = np.where(F16 > 0, F16.astype(np.float64), F16.astype(np.float64) * 1.5)
    near = ref.round_float64(exact, info("float16"))
    away = from_bits((to_bits(near).astype(np.int64) + 1).astype(np.uint16), "float16").astype(np.float64)
    with np.errstate(invalid="ignore"):
        tie = np.isfinite(away) & (np.abs(exact) == (np.abs(near.astype(np.float64)) + np.abs(away)) / 2)
    return F16, np.where(tie, from_bits(to_bits(near) + 1, "float16"), near), 1.5, {}


def _applied_twice() -> Built:
    """f(f(x)): slope a*a on the negative side, rounded twice (a slope of 0.04 explains only
    most of it)."""
    once = np.where(F16 > 0, F16, f32_product(F16, 0.2).astype(np.float16))
    return F16, np.where(once > 0, once, f32_product(once, 0.2).astype(np.float16)), 0.2, {}


def _relu_for_alpha_zero() -> Built:
    """np.maximum(x, 0) for alpha 0: +0 where a*x is -0, and -inf gives 0 where -inf*0 is NaN."""
    return F16, np.maximum(F16, np.float16(0)), 0.0, {}


def _select_ge_negative_slope() -> Built:
    """x >= 0 differs from x > 0 only at ±0 (a*(±0) has the other sign for a < 0); max(x, a*x)
    gives the same bits there, so both are reported."""
    return F16, np.where(F16 >= 0, F16, f32_product(F16, -0.5).astype(np.float16)), -0.5, {}


def _swapped_branches() -> Built:
    actual = np.where(F16 > 0, f32_product(DY16, 0.2).astype(np.float16), DY16)
    return F16, actual, 0.2, {"direction": "backward", "dy": DY16}


def _dy_and_x_swapped() -> Built:
    """Errors on nearly every element are a value defect, never "the last k elements"."""
    actual = np.where(DY16 > 0, F16, f32_product(F16, 0.2).astype(np.float16))
    return F16, actual, 0.2, {"direction": "backward", "dy": DY16}


def selected_on_result(alpha: float) -> Built:
    """dx = dy where y > 0: the same as x > 0 unless alpha < 0 (then y > 0 for x < 0, and a
    tiny x whose product rounds to 0 keeps a*dy)."""
    y = np.where(F16 > 0, F16, f32_product(F16, alpha).astype(np.float16))
    actual = np.where(y > 0, DY16, f32_product(DY16, alpha).astype(np.float16))
    return F16, actual, alpha, {"direction": "backward", "dy": DY16}


def _nan_x_gives_nan() -> Built:
    """dx = dy * (y / x) style kernels propagate x's NaN into the gradient."""
    actual = np.where(is_nan(F16), np.float16(np.nan), ref.backward(DY16, F16, 0.2))
    return F16, actual, 0.2, {"direction": "backward", "dy": DY16}


def _step_backward() -> Built:
    """The TBE pre-v200 LeakyReluGrad, instruction by instruction in float32: r = vmins(x, 2^-126),
    vmaxs(r, 0), vmuls by 2^38, 2^44, 2^44; t = vabs(r - 1) * alpha + r; dx = dy * t."""
    x = np.concatenate([np.arange(1, 1 << 14, dtype=np.uint32).view(np.float32),
                        np.float32([-2.5, -1e-40, -0.0, 0.0, 1.0, 3e38, np.inf, -np.inf])])
    dy = np.linspace(-3, 3, x.size, dtype=np.float32)
    r = np.maximum(np.minimum(x, np.float32(2.0 ** -126)), np.float32(0))
    for lift in (2.0 ** 38, 2.0 ** 44, 2.0 ** 44):
        r = r * np.float32(lift)
    t = np.abs(r - np.float32(1)) * np.float32(0.2) + r
    exact = ref.backward(dy, x, 0.2)
    sub = (x > 0) & (x < np.float32(2.0 ** -126))
    return x, np.where(sub, dy * t, exact).astype(np.float32), 0.2, {"direction": "backward", "dy": dy}


def _widened(src: str) -> Callable[[], Built]:
    """A 16-bit kernel (float32 math, rounded to T) whose result is then widened to float32."""
    def build() -> Built:
        x = all_patterns(src)
        actual = np.where(x.astype(np.float32) > 0, x.astype(np.float32),
                          f32_product(x, 0.3).astype(x.dtype).astype(np.float32))
        return x, actual, 0.3, {"out_dtype": "float32"}

    return build


def _fp64_in_fp32() -> Built:
    """A float64 op served by a float32 kernel: x, slope and product rounded to float32."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(4000) * np.exp(rng.uniform(-80, 80, 4000))
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -1e-310]])
    return x, forward32(x, 0.01).astype(np.float64), 0.01, {}


def _fp64_product_in_fp32() -> Built:
    """C's ``x > 0 ? x : (float)x * alpha_f``: the positive side stays float64, the negative
    side is a float32 product of the narrowed x."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal(4000) * np.exp(rng.uniform(-95, 80, 4000))
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, -1e-310]])
    with np.errstate(all="ignore"):
        actual = np.where(x > 0, x, (x.astype(np.float32) * np.float32(0.01)).astype(np.float64))
    return x, actual, 0.01, {}


def _exact32(alpha: float = 0.2) -> np.ndarray:
    return ref.forward(X32, alpha)


def _lane_never_written() -> Built:
    """One lane of a vector never written back: every 7th result is 0."""
    exact = _exact32()
    actual = exact.copy()
    actual[3::7] = 0
    return X32, actual, 0.2, {}


def _tile_from_previous_tile() -> Built:
    """A ping-pong buffer reused too early: tile 2 holds tile 1's results."""
    exact = _exact32()
    actual = exact.copy()
    actual[4096:6144] = exact[2048:4096]
    return X32, actual, 0.2, {}


def _zeroed_row() -> Built:
    x = X32[:20000].reshape(100, 200)
    exact = ref.forward(x, 0.01)
    actual = exact.copy()
    actual[37] = 0
    return x, actual, 0.01, {}


def _one_element_late() -> Built:
    exact = _exact32()
    return X32, np.concatenate([np.zeros(1, np.float32), exact[:-1]]), 0.2, {}


def _fp16_eight_elements_early() -> Built:
    """The 8 elements at the edge, with no source, are claimed too."""
    x = np.random.default_rng(9).standard_normal(5000).astype(np.float16)
    exact = ref.forward(x, 0.01)
    return x, np.concatenate([exact[8:], np.zeros(8, np.float16)]), 0.01, {}


def _row_with_its_own_slope() -> Built:
    """A per-channel parameter read from the wrong place: one row's negative side has slope 0.3."""
    x = np.random.default_rng(10).standard_normal((64, 128)).astype(np.float32)
    exact = ref.forward(x, 0.2)
    actual = exact.copy()
    actual[5] = np.where(x[5] > 0, x[5], x[5] * np.float32(0.3))
    return x, actual, 0.2, {}


def _tail_holding_the_block_before() -> Built:
    exact = ref.forward(X32[:1000], 0.2)
    actual = exact.copy()
    actual[-8:] = exact[-16:-8]
    return X32[:1000], actual, 0.2, {}


def _relu_over_many_zeros() -> Built:
    """Zeros match some neighbour's result by chance; a shift is proved by other values."""
    rng = np.random.default_rng(13)
    x = np.where(rng.random(3000) < 0.6, np.float32(0), rng.standard_normal(3000).astype(np.float32))
    return x, np.maximum(x, np.float32(0)), 0.2, {}


def _clamp_over_sorted_patterns() -> Built:
    """All fp16 patterns are sorted by bits, so x > 6 is one contiguous range; a clamp at 6
    changes inputs of kinds found nowhere else, so no position is proved."""
    exact = ref.forward(F16, 0.2)
    return F16, np.minimum(exact, np.float16(6)), 0.2, {}


def _every_16th_pattern() -> Built:
    """Over an enumeration of bit patterns a stride is a mantissa bit, not a position: inputs
    sorted along the stride prove nothing about the position."""
    exact = ref.forward(F16, 0.2)
    actual = exact.copy()
    actual[5::16] = np.float16(1.0)
    return F16, actual, 0.2, {}


def _two_ulp_low_over_sorted_patterns() -> Built:
    """Over an enumeration of patterns a neighbour's result is the value 1 ULP away."""
    exact = ref.forward(F16, 0.2)
    actual = exact.copy()
    pos = np.flatnonzero((F16 > 1) & (F16 < 1000))
    actual[pos] = exact[pos - 2]
    return F16, actual, 0.2, {}


DEFECTS = [
    # an overflow that gives 65504 is outside every tolerance
    Defect("fp32-results-truncated-to-fp16", _truncated_fp16, "rounding", "toward zero", verdict="fail"),
    Defect("fp32-results-stored-as-bf16-high-bits", _bf16_high_bits, "rounding", "toward zero"),
    Defect("backward-gradients-truncated-to-bf16", _bf16_gradient_high_bits, "rounding", "toward zero"),
    Defect("ties-rounded-away-from-zero", _ties_away, "rounding", "ties away from zero"),
    Defect("leaky-relu-applied-twice", _applied_twice, "formulation", "applied twice"),
    Defect("plain-relu-for-alpha-zero", _relu_for_alpha_zero, "formulation", "max(x, 0)"),
    Defect("select-x-ge-0-negative-slope", _select_ge_negative_slope, "formulation", "x >= 0"),
    Defect("backward-branches-swapped", _swapped_branches, "formulation", "branches swapped"),
    Defect("backward-dy-and-x-swapped", _dy_and_x_swapped, "formulation", "dy and x"),
    Defect("backward-selected-on-result-negative-slope", lambda: selected_on_result(-0.5), "formulation",
           "forward result y > 0"),
    Defect("backward-nan-x-gives-nan", _nan_x_gives_nan, "nan-gradient", "gave NaN"),
    Defect("backward-step-function-at-subnormals", _step_backward, "grad-step", "step function"),
    Defect("fp16-result-widened-to-fp32", _widened("float16"), "input-precision", "rounded to float16"),
    Defect("bf16-result-widened-to-fp32", _widened("bfloat16"), "input-precision", "rounded to bfloat16"),
    Defect("fp64-computed-in-fp32", _fp64_in_fp32, "input-precision", "float32"),
    Defect("fp64-product-in-fp32", _fp64_product_in_fp32, "input-precision", "product computed in float32"),
    Defect("every-7th-element-zero", _lane_never_written, "stale-block", "every 7th element", position=True),
    Defect("middle-tile-holds-previous-tile", _tile_from_previous_tile, "stale-block",
           "the results of the elements 2048 before", position=True),
    Defect("zeroed-row-of-a-matrix", _zeroed_row, "stale-block", "zeros", position=True),
    Defect("output-one-element-late", _one_element_late, "stale-block", "holds the result of element i-1",
           position=True),
    Defect("fp16-output-8-elements-early", _fp16_eight_elements_early, "stale-block",
           "written 8 elements early", position=True),
    Defect("row-with-its-own-slope", _row_with_its_own_slope, "alpha-mismatch", "in row 5 on axis 0 of 64x128 only",
           position=True),
    Defect("tail-holds-the-block-before", _tail_holding_the_block_before, "tail-block", position=True),
    Defect("plain-relu-over-many-zeros", _relu_over_many_zeros, "alpha-mismatch", position=True),
    Defect("clamp-over-sorted-patterns", _clamp_over_sorted_patterns, None, position=True),
    Defect("every-16th-bit-pattern", _every_16th_pattern, None, position=True),
    Defect("two-ulp-low-over-sorted-patterns", _two_ulp_low_over_sorted_patterns, None, position=True),
]
