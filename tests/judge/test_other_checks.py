"""What other tools' default checks would say: torch.assert_close, msprobe, the ONNX backend tests,
tf.test and jax.test, restated on numpy, each checked against the tool's own arithmetic where the
tool is installed, and the console's mark on rows they all pass but whose bits differ."""
from __future__ import annotations

import numpy as np
import pytest
from rich.console import Console

from conformance.dtypes import all_patterns, bfloat16, from_bits, is_nan
from conformance.judge import other_checks as oc
from conformance.judge.chunked import evaluate_chunks
from conformance.judge.evaluate import evaluate, merge_rows
from conformance.judge.gate import GateConfig
from conformance.records import BackendResult, Chunk, Row
from conformance.reference import golden as ref
from conformance.render import console as show
from conformance.render.export import SCHEMA, report_dict, validate
from conformance.render.other_checks import MARK, is_marked
from conformance.sweep.store import row_from_text, row_text

CONFIG = GateConfig()
NEGATIVE16 = all_patterns("float16")[0x8001:0xFC00]  # every negative finite fp16 but -0


def _row(x: np.ndarray, actual: np.ndarray, *, alpha: float, dy: np.ndarray | None = None) -> Row:
    direction = "forward" if dy is None else "backward"
    return evaluate(x, alpha, BackendResult(actual), direction=direction, dy=dy, backend="kernel", config=CONFIG)


def _verdicts(row: Row) -> dict[str, bool]:
    return {c.name: c.passes for c in row.other_checks}


def _slope_rounded_first(x: np.ndarray, alpha: float) -> np.ndarray:
    """JAX's and TF's fp16 kernel: the slope rounded to fp16, then one product rounded (exact in float64)."""
    slope = float(np.float16(alpha))
    with np.errstate(invalid="ignore"):  # NaN inputs
        return np.where(x > 0, x, (x.astype(np.float64) * slope).astype(np.float16))


def test_a_one_ulp_slope_rounding_passes_every_other_check_and_is_marked() -> None:
    row = _row(NEGATIVE16, _slope_rounded_first(NEGATIVE16, 0.01), alpha=0.01)
    assert row.metrics.mismatches > 7000 and row.metrics.max_ulp == 1
    assert _verdicts(row) == dict.fromkeys(oc.NAMES, True)
    assert is_marked(row)
    console = Console(record=True, width=120)
    show.render_rows([row], console=console, view=show.View())
    text = console.export_text()
    assert f"warn {MARK}" in text
    assert f"{MARK} passes torch.assert_close, msprobe, onnx, tf and jax at their defaults" in text


def test_every_pattern_with_its_nans_fails_torch_and_msprobe_literally_yet_is_marked() -> None:
    """The suite feeds every fp16 pattern: 2,046 NaN (3%) fail torch's equal_nan=False and make
    msprobe's errors NaN; counted equal, both pass the slope rounding, so the row is marked."""
    x = all_patterns("float16")
    row = _row(x, _slope_rounded_first(x, 0.01), alpha=0.01)
    checks = {c.name: c for c in row.other_checks}
    assert not checks[oc.TORCH].passes and not checks[oc.MSPROBE].passes
    assert "NaN/inf on both sides count as errors" in checks[oc.MSPROBE].detail
    assert checks[oc.ONNX].passes and checks[oc.TF].passes and checks[oc.JAX].passes
    assert all(c.passes_if_shared_equal for c in row.other_checks) and is_marked(row)


def test_a_wrong_slope_on_small_inputs_passes_msprobe_and_fails_torch() -> None:
    x = np.linspace(-0.005, 0, 10_001, dtype=np.float32)[:-1]
    row = _row(x, (x * np.float32(0.01)).astype(np.float32), alpha=0.2)
    verdicts = _verdicts(row)
    assert verdicts[oc.MSPROBE] and not verdicts[oc.TORCH]
    msprobe = next(c for c in row.other_checks if c.name == oc.MSPROBE)
    assert msprobe.detail.startswith("pass: max abs error 0.00095")
    assert row.verdict == "fail" and not is_marked(row)


def test_a_lost_nan_fails_torch_and_a_kept_nan_fails_only_torch_s_equal_nan() -> None:
    x = np.linspace(-4, 4, 20_001, dtype=np.float32)
    x[2] = np.nan  # msprobe counts a NaN's error as not small: 1 in 20,001 stays within its 0.01%
    golden = ref.compute("forward", x, 0.2, out_dtype="float32")
    lost = golden.copy()
    lost[2] = 0.0
    # msprobe: a NaN makes its cosine NaN (let through) and its max error NaN; one error in
    # 20,001 is within the 0.01% its ratios leave, so msprobe passes a lost NaN in a large tensor
    assert _verdicts(_row(x, lost, alpha=0.2)) == {**dict.fromkeys(oc.NAMES, False), oc.MSPROBE: True}
    kept = _verdicts(_row(x, golden, alpha=0.2))
    assert kept == {**dict.fromkeys(oc.NAMES, True), oc.TORCH: False}
    torch_check = next(c for c in _row(x, golden, alpha=0.2).other_checks if c.name == oc.TORCH)
    assert "1 of them NaN on both sides (equal_nan=False)" in torch_check.detail
    assert torch_check.passes_if_shared_equal


def test_a_clean_row_passes_every_check_and_has_no_mark() -> None:
    x = np.linspace(-4, 4, 4096, dtype=np.float16)
    row = _row(x, ref.compute("forward", x, 0.2, out_dtype="float16"), alpha=0.2)
    assert row.verdict == "pass" and _verdicts(row) == dict.fromkeys(oc.NAMES, True)
    assert not is_marked(row)
    console = Console(record=True, width=120)
    show.render_rows([row], console=console, view=show.View())
    assert MARK not in console.export_text()


def test_msprobe_errors_on_a_low_cosine_and_warns_on_a_small_share() -> None:
    x = np.linspace(-4, 4, 2000, dtype=np.float32)
    flipped = -ref.compute("forward", x, 0.2, out_dtype="float32")
    (msprobe,) = [c for c in _row(x, flipped, alpha=0.2).other_checks if c.name == oc.MSPROBE]
    assert not msprobe.passes and msprobe.detail.startswith("error: cosine")
    few = ref.compute("forward", x, 0.2, out_dtype="float32")
    few[:1] *= np.float32(1.01)  # one element in 2000 off by 1%: above 99.9% below 0.001, not 99.99% below 1e-4
    (msprobe,) = [c for c in _row(x, few, alpha=0.2).other_checks if c.name == oc.MSPROBE]
    assert not msprobe.passes and msprobe.detail.startswith("warning:")


def test_batches_merged_are_judged_as_the_whole_row() -> None:
    x = np.concatenate([NEGATIVE16, np.array([np.nan, 1.0], dtype=np.float16)])
    actual = _slope_rounded_first(x, 0.3)
    actual[-2] = np.float16(0)  # a lost NaN, in the second batch only
    whole = _row(x, actual, alpha=0.3)
    parts = [_row(x[:20_000], actual[:20_000], alpha=0.3), _row(x[20_000:], actual[20_000:], alpha=0.3)]
    merged = merge_rows(parts, config=CONFIG)
    assert [(c.name, c.passes, c.detail) for c in merged.other_checks] == \
        [(c.name, c.passes, c.detail) for c in whole.other_checks]


def test_a_tensor_judged_in_chunks_gets_the_same_checks() -> None:
    x = np.concatenate([NEGATIVE16, np.array([np.nan, np.inf, 2.0], dtype=np.float16)])
    actual = _slope_rounded_first(x, 0.3)
    whole = _row(x, actual, alpha=0.3)

    def chunks() -> list[Chunk]:
        return [Chunk(lo, x[lo:lo + 7000], None, actual[lo:lo + 7000]) for lo in range(0, x.size, 7000)]

    chunked = evaluate_chunks(chunks, numel=x.size, dtype=x.dtype, alpha=0.3, direction="forward",
                              out_dtype="float16", backend="kernel", config=CONFIG)
    assert [(c.name, c.passes, c.detail) for c in chunked.other_checks] == \
        [(c.name, c.passes, c.detail) for c in whole.other_checks]


def test_the_json_row_lists_each_check_and_a_stored_row_keeps_them() -> None:
    row = _row(NEGATIVE16, _slope_rounded_first(NEGATIVE16, 0.01), alpha=0.01)
    doc = report_dict([row], seed=0, versions={})
    assert validate(doc, SCHEMA) == []
    assert [c["name"] for c in doc["rows"][0]["other_checks"]] == list(oc.NAMES)
    assert set(doc["rows"][0]["other_checks"][0]) == {"name", "passes", "detail", "passes_if_shared_equal"}
    assert row_from_text(row_text(row)).other_checks == row.other_checks


def test_a_refused_batch_has_no_checks() -> None:
    x = np.ones(4, dtype=np.float32)
    row = evaluate(x, 0.2, BackendResult(None, rejected="no"), direction="forward", backend="k", config=CONFIG)
    assert row.other_checks == () and not is_marked(row)


# ----------------------------------------------------------------------------- against the tools themselves

def _near(dtype: str, *, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Goldens and actual values a few ULPs off (ties of the tolerances' boundaries included)."""
    rng = np.random.default_rng(seed)
    golden = all_patterns(dtype) if dtype in ("float16", "bfloat16") else \
        from_bits(rng.integers(0, 1 << 31, 200_000, dtype=np.uint32), dtype)
    shift = rng.integers(-3, 4, golden.size)
    bits = golden.view(np.uint16 if golden.itemsize == 2 else np.uint32).astype(np.int64) + shift
    actual = from_bits(np.clip(bits, 0, (1 << (8 * golden.itemsize)) - 1), dtype)
    return actual, golden


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_torch_close_is_torch_isclose(dtype: str) -> None:
    torch = pytest.importorskip("torch")
    actual, golden = _near(dtype)
    tdt = getattr(torch, dtype)
    as_torch = (lambda v: torch.from_numpy(v.view(np.int16)).view(tdt)) if golden.itemsize == 2 else torch.from_numpy
    tol = oc.TOLERANCES[oc.TORCH][dtype]
    real = torch.isclose(as_torch(actual), as_torch(golden), rtol=tol.rtol, atol=tol.atol).numpy()
    assert np.array_equal(oc._torch_close(actual, golden, tol), real)


@pytest.mark.parametrize("name", [oc.ONNX, oc.TF, oc.JAX])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_numpy_checks_are_assert_allclose(name: str, dtype: str) -> None:
    """Each element's verdict is np.testing.assert_allclose's on that element alone."""
    actual, golden = _near(dtype, seed=11)
    pick = np.random.default_rng(3).choice(golden.size, 300, replace=False)
    failing = oc._numpy_failing(*oc._ORDER[name](actual[pick], golden[pick]), oc.TOLERANCES[name][dtype])
    for i, fails in zip(pick, failing):
        x, y = oc._ORDER[name](actual[i:i + 1], golden[i:i + 1])
        if x.dtype == bfloat16:
            x, y = x.astype(np.float32), y.astype(np.float32)
        try:
            np.testing.assert_allclose(x, y, rtol=oc.TOLERANCES[name][dtype].rtol, atol=oc.TOLERANCES[name][dtype].atol)
            passed = True
        except AssertionError:
            passed = False
        assert passed == (not fails), (name, dtype, x, y)


def test_the_table_has_every_dtype_of_every_check() -> None:
    assert all(set(table) == {"float16", "bfloat16", "float32", "float64"} for table in oc.TOLERANCES.values())
    assert not is_nan(np.array([oc.TOLERANCES[oc.JAX]["float64"].rtol])).any()
