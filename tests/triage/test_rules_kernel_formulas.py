"""The catalogue's hand-written kernel rules: rounding modes, formulas, widened or narrowed precision."""
from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from conformance.reference import golden as ref
from tests.helpers import F16, assert_named, counts, differs, judge_dump, run_cli
from tests.triage.defects import DEFECTS, X32, Defect, exact_result, selected_on_result, toward_zero


@pytest.mark.parametrize("defect", [d for d in DEFECTS if not d.position], ids=str)
def test_a_hand_built_defect_is_named_with_its_exact_count(defect: Defect) -> None:
    x, actual, alpha, keywords = defect.build()
    row = judge_dump(x, actual, alpha, **keywords)
    assert counts(row) == {defect.category: differs(actual, exact_result(x, alpha, **keywords))}
    assert_named(row, defect.category, defect.says)
    if defect.verdict is not None:
        assert row.verdict == defect.verdict


def test_a_gradient_selected_on_the_result_is_right_for_a_positive_slope() -> None:
    """With alpha > 0, y > 0 exactly where x > 0: no element differs, nothing is found."""
    x, actual, alpha, keywords = selected_on_result(0.2)
    row = judge_dump(x, actual, alpha, **keywords)
    assert differs(actual, exact_result(x, alpha, **keywords)) == 0 and row.findings == ()


@pytest.mark.parametrize("src,out,alpha,direction", [
    ("float32", "float16", 0.2, "forward"), ("float32", "bfloat16", 0.01, "backward"),
    ("float16", "float16", 1.5, "forward"), ("float16", "float32", 0.3, "forward"),
    ("float64", "float64", 0.0, "forward"), ("float16", "float16", -0.5, "backward")])
def test_exact_outputs_give_no_finding(src: str, out: str, alpha: float, direction: str) -> None:
    x = X32.astype(src) if src != "float16" else F16
    dy = np.random.default_rng(5).permutation(x) if direction == "backward" else None
    expected = (ref.forward(x, alpha, out_dtype=out) if dy is None
             else ref.backward(dy, x, alpha, out_dtype=out))
    row = judge_dump(x, expected, alpha, direction=direction, dy=dy, out_dtype=out)
    assert row.findings == () and row.verdict == "pass"


def test_compare_names_a_truncating_store_from_dumps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same through `conformance compare` on .npy dumps."""
    with np.errstate(all="ignore"):
        wide = np.where(X32 > 0, X32.astype(np.float64), X32.astype(np.float64) * 0.2)
    np.save(tmp_path / "x.npy", X32)
    np.save(tmp_path / "y.npy", toward_zero(wide, "float16"))
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
    expected = ref.forward(F16, 0.2)
    row = judge_dump(F16, actual, 0.2)
    found = counts(row)
    assert found.pop("input-precision") + found.pop("overflow", 0) == differs(actual, expected)
    assert found == {}, found  # overflow: 65504 rounded up to bf16 65536, an fp16 inf
    assert_named(row, "input-precision", "bfloat16")
