"""The catalogue's hand-written kernel rules: rounding modes, formulas, widened or narrowed precision."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import ml_dtypes
import numpy as np
import pytest

from conformance.dtypes import all_patterns, from_bits, info, is_nan, to_bits
from conformance.reference import golden as ref
from tests.helpers import F16, counts, differs, judge_dump, run_cli

DY16 = np.random.default_rng(3).permutation(F16)


def _f32_specials() -> np.ndarray:
    bits = np.random.default_rng(7).integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    extra = np.float32([0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 7e4, -7e4, 1e5, 65519, -65520])
    return np.concatenate([bits.view(np.float32), extra])


X32 = _f32_specials()


def _f32(v: np.ndarray, alpha: float) -> np.ndarray:
    """torch's way: the product in float32 with a float32 slope."""
    with np.errstate(all="ignore"):
        return v.astype(np.float32) * np.float32(alpha)


def _forward32(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x.astype(np.float32) > 0, x.astype(np.float32), _f32(x, alpha))


def _toward_zero(exact: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values truncated to ``dtype``: nearest, then one step toward zero where that
    went up in magnitude (inf included: a truncating cast saturates)."""
    near = ref.round_float64(exact, info(dtype))
    bits = to_bits(near).astype(np.int64)
    up = (np.abs(near.astype(np.float64)) > np.abs(exact)) & ~np.isnan(exact)
    return from_bits((bits - up).astype(info(dtype).uint), dtype)


def _named(row, category: str, text: str) -> None:
    __tracebackhide__ = True
    (finding,) = [f for f in row.findings if f.category == category]
    assert text in finding.summary, finding.summary


Built = tuple[np.ndarray, np.ndarray, float, dict]  # x, the defect's output, alpha, judge keywords


@dataclass(frozen=True)
class Defect:
    """A hand-built kernel defect: its output, and the one category (and summary words) that
    must name every element it changes.  Its ``name`` is the pytest id."""

    name: str
    build: Callable[[], Built] = field(repr=False)
    category: str
    says: str
    verdict: Optional[str] = None  # the row's verdict, when the case pins it

    def __str__(self) -> str:
        return self.name


def _truncated_fp16() -> Built:
    """A conversion that truncates: every inexact result one step toward zero, and an overflow
    gives ±65504 (not saturation: an input ±inf stays ±inf)."""
    with np.errstate(all="ignore"):
        exact = np.where(X32 > 0, X32.astype(np.float64), X32.astype(np.float64) * 0.2)
    return X32, _toward_zero(exact, "float16"), 0.2, {"out_dtype": "float16"}


def _bf16_high_bits() -> Built:
    """A bf16 store that keeps the high 16 bits of the float32 result (no rounding)."""
    y32 = _forward32(X32, 0.2)
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
    once = np.where(F16 > 0, F16, _f32(F16, 0.2).astype(np.float16))
    return F16, np.where(once > 0, once, _f32(once, 0.2).astype(np.float16)), 0.2, {}


def _relu_for_alpha_zero() -> Built:
    """np.maximum(x, 0) for alpha 0: +0 where a*x is -0, and -inf gives 0 where -inf*0 is NaN."""
    return F16, np.maximum(F16, np.float16(0)), 0.0, {}


def _select_ge_negative_slope() -> Built:
    """x >= 0 differs from x > 0 only at ±0 (a*(±0) has the other sign for a < 0); max(x, a*x)
    gives the same bits there, so both are reported."""
    return F16, np.where(F16 >= 0, F16, _f32(F16, -0.5).astype(np.float16)), -0.5, {}


def _swapped_branches() -> Built:
    actual = np.where(F16 > 0, _f32(DY16, 0.2).astype(np.float16), DY16)
    return F16, actual, 0.2, {"direction": "backward", "dy": DY16}


def _dy_and_x_swapped() -> Built:
    """Errors on nearly every element are a value defect, never "the last k elements"."""
    actual = np.where(DY16 > 0, F16, _f32(F16, 0.2).astype(np.float16))
    return F16, actual, 0.2, {"direction": "backward", "dy": DY16}


def _selected_on_result(alpha: float) -> Built:
    """dx = dy where y > 0: the same as x > 0 unless alpha < 0 (then y > 0 for x < 0, and a
    tiny x whose product rounds to 0 keeps a*dy)."""
    y = np.where(F16 > 0, F16, _f32(F16, alpha).astype(np.float16))
    actual = np.where(y > 0, DY16, _f32(DY16, alpha).astype(np.float16))
    return F16, actual, alpha, {"direction": "backward", "dy": DY16}


def _nan_x_gives_nan() -> Built:
    """dx = dy * (y / x) style kernels propagate x's NaN into the gradient."""
    actual = np.where(is_nan(F16), np.float16(np.nan), ref.leaky_relu_backward(DY16, F16, 0.2))
    return F16, actual, 0.2, {"direction": "backward", "dy": DY16}


def _widened(src: str) -> Callable[[], Built]:
    """A 16-bit kernel (float32 math, rounded to T) whose result is then widened to float32."""
    def build() -> Built:
        x = all_patterns(src)
        actual = np.where(x.astype(np.float32) > 0, x.astype(np.float32),
                          _f32(x, 0.3).astype(x.dtype).astype(np.float32))
        return x, actual, 0.3, {"out_dtype": "float32"}

    return build


def _fp64_in_fp32() -> Built:
    """A float64 op served by a float32 kernel: x, slope and product rounded to float32."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(4000) * np.exp(rng.uniform(-80, 80, 4000))
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -1e-310]])
    return x, _forward32(x, 0.01).astype(np.float64), 0.01, {}


def _fp64_product_in_fp32() -> Built:
    """C's ``x > 0 ? x : (float)x * alpha_f``: the positive side stays float64, the negative
    side is a float32 product of the narrowed x."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal(4000) * np.exp(rng.uniform(-95, 80, 4000))
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, -1e-310]])
    with np.errstate(all="ignore"):
        actual = np.where(x > 0, x, (x.astype(np.float32) * np.float32(0.01)).astype(np.float64))
    return x, actual, 0.01, {}


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
    Defect("backward-selected-on-result-negative-slope", lambda: _selected_on_result(-0.5), "formulation",
           "forward result y > 0"),
    Defect("backward-nan-x-gives-nan", _nan_x_gives_nan, "nan-gradient", "gave NaN"),
    Defect("fp16-result-widened-to-fp32", _widened("float16"), "input-precision", "rounded to float16"),
    Defect("bf16-result-widened-to-fp32", _widened("bfloat16"), "input-precision", "rounded to bfloat16"),
    Defect("fp64-computed-in-fp32", _fp64_in_fp32, "input-precision", "float32"),
    Defect("fp64-product-in-fp32", _fp64_product_in_fp32, "input-precision", "product computed in float32"),
]


def _exact(x: np.ndarray, alpha: float, *, direction: str = "forward", dy: Optional[np.ndarray] = None,
           out_dtype: Optional[str] = None) -> np.ndarray:
    if direction == "forward":
        return ref.leaky_relu(x, alpha, out_dtype=out_dtype)
    return ref.leaky_relu_backward(dy, x, alpha, out_dtype=out_dtype)


@pytest.mark.parametrize("defect", DEFECTS, ids=str)
def test_a_hand_built_defect_is_named_with_its_exact_count(defect: Defect) -> None:
    x, actual, alpha, keywords = defect.build()
    row = judge_dump(x, actual, alpha, **keywords)
    assert counts(row) == {defect.category: differs(actual, _exact(x, alpha, **keywords))}
    _named(row, defect.category, defect.says)
    if defect.verdict is not None:
        assert row.verdict == defect.verdict


def test_a_gradient_selected_on_the_result_is_right_for_a_positive_slope() -> None:
    """With alpha > 0, y > 0 exactly where x > 0: no element differs, nothing is found."""
    x, actual, alpha, keywords = _selected_on_result(0.2)
    row = judge_dump(x, actual, alpha, **keywords)
    assert differs(actual, _exact(x, alpha, **keywords)) == 0 and row.findings == ()


@pytest.mark.parametrize("src,out,alpha,direction", [
    ("float32", "float16", 0.2, "forward"), ("float32", "bfloat16", 0.01, "backward"),
    ("float16", "float16", 1.5, "forward"), ("float16", "float32", 0.3, "forward"),
    ("float64", "float64", 0.0, "forward"), ("float16", "float16", -0.5, "backward")])
def test_exact_outputs_give_no_finding(src: str, out: str, alpha: float, direction: str) -> None:
    x = X32.astype(src) if src != "float16" else F16
    dy = np.random.default_rng(5).permutation(x) if direction == "backward" else None
    exact = (ref.leaky_relu(x, alpha, out_dtype=out) if dy is None
             else ref.leaky_relu_backward(dy, x, alpha, out_dtype=out))
    row = judge_dump(x, exact, alpha, direction=direction, dy=dy, out_dtype=out)
    assert row.findings == () and row.verdict == "pass"


def test_compare_names_a_truncating_store_from_dumps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same through `conformance compare` on .npy dumps."""
    with np.errstate(all="ignore"):
        exact = np.where(X32 > 0, X32.astype(np.float64), X32.astype(np.float64) * 0.2)
    np.save(tmp_path / "x.npy", X32)
    np.save(tmp_path / "y.npy", _toward_zero(exact, "float16"))
    result = run_cli(["compare", "--x", "x.npy", "--y", "y.npy", "--alpha", "0.2",
                      "--json", "r.json", "-q"], capsys, cwd=tmp_path)
    assert result.code == 1, result.text
    text = (tmp_path / "r.json").read_text()
    assert '"rounding"' in text and "toward zero" in text and '"unexplained"' not in text


def test_the_generator_plants_the_unlisted_classes() -> None:
    """selftest --generated covers these classes too (the aggregate test scores them)."""
    from conformance.cases.defects import generate

    names = {str(d) for s in range(600) for d in generate(s).defects}
    for wanted in ("results truncated", "ties away from zero", "applied twice", "branches swapped",
                   "dy and x swapped", "NaN at NaN", "computed in fp32", "stale block", "th element from",
                   "output shifted"):
        assert any(wanted in n for n in names), wanted


def test_an_fp16_kernel_computing_in_bf16_is_input_precision() -> None:
    """Hardware without fp16 arithmetic: x converted to bf16 (8 bits kept, the range kept too:
    -65472 becomes -65536), the float32 product rounded to fp16."""
    with np.errstate(all="ignore"):
        xb = F16.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
        actual = np.where(xb > 0, xb, xb * np.float32(0.2)).astype(np.float16)
    exact = ref.leaky_relu(F16, 0.2)
    row = judge_dump(F16, actual, 0.2)
    found = counts(row)
    assert found.pop("input-precision") + found.pop("overflow", 0) == differs(actual, exact)
    assert found == {}, found  # overflow: 65504 rounded up to bf16 65536, an fp16 inf
    _named(row, "input-precision", "bfloat16")
