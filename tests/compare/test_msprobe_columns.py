"""msprobe's compare columns, computed here (``conformance.metrics.msprobe_columns``), equal what
mindstudio-probe's own compare path gives (``ValidateTensor`` then ``compare_ops_apply``, the
steps its two-dump compare takes after reading a tensor), on the fixture pair's tensors and on
the special cases its validators treat apart."""
from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from conformance.metrics.msprobe_columns import HEADERS, cells, msprobe_columns
from tests.helpers import keep_tensorflow_across_msprobe

FIXTURES = Path(__file__).parents[1] / "fixtures" / "msprobe"


@pytest.fixture
def msprobe_compare(monkeypatch: pytest.MonkeyPatch):
    """msprobe's own columns of (device, benchmark) arrays as its CSV writes them; skipped without msprobe."""
    keep_tensorflow_across_msprobe(monkeypatch)
    npy_compare = pytest.importorskip("msprobe.core.compare.npy_compare")
    const = pytest.importorskip("msprobe.core.common.const")
    assert tuple(const.CompareConst.BUILTIN_COMPARE_COLUMNS) == HEADERS

    def columns(n: np.ndarray, b: np.ndarray) -> tuple[str, ...]:
        n, b = (np.squeeze(v.astype(np.float32) if v.dtype.name == "bfloat16" else v).copy() for v in (n, b))
        checked = npy_compare.ValidateTensor().check_tensor(npy_compare.CompareResult(n, b))
        values, _ = npy_compare.compare_ops_apply(checked.n_value, checked.b_value, checked.error_flag,
                                                  checked.err_msg, column_names=list(HEADERS))
        return tuple(str(v) for v in values)

    return columns


def _fixture_outputs() -> list[tuple[str, np.ndarray, np.ndarray]]:
    torch = pytest.importorskip("torch")
    (device,) = (FIXTURES / "leaky3").glob("step*/proc*/dump_tensor_data")
    (bench,) = (FIXTURES / "leaky3_fp32").glob("step*/proc*/dump_tensor_data")
    return [(f.name, torch.load(f, weights_only=True).numpy(), torch.load(bench / f.name, weights_only=True).numpy())
            for f in sorted(device.iterdir())]


def test_the_fixture_pairs_columns_are_msprobes(msprobe_compare) -> None:
    for name, device, bench in _fixture_outputs():
        assert cells(msprobe_columns(device, bench)) == msprobe_compare(device, bench), name


_RNG = np.random.default_rng(7)
_X = _RNG.standard_normal(64).astype(np.float32)
_SPECIAL = np.array([1.0, np.nan, -np.inf, 2.0, 0.0, -3.5], dtype=np.float32)
CASES = {
    "fp32 near": (_X, _X * np.float32(1.0004)),
    "fp16 against fp32": (_X.astype(np.float16), _X),
    "zeros in the benchmark": (np.where(_X > 0, _X, 1e-9).astype(np.float32),
                               np.where(_X > 0, _X, 0).astype(np.float32)),
    "both all zero": (np.zeros(8, np.float32), np.zeros(8, np.float32)),
    "device all zero": (np.zeros(8, np.float32), np.ones(8, np.float32)),
    "NaN and inf at the same places": (_SPECIAL, _SPECIAL * np.float32(1.001)),
    "NaN at different places": (_SPECIAL, _SPECIAL[::-1].copy()),
    "one element": (np.array([0.5], np.float32), np.array([0.25], np.float32)),
    "a 0-d tensor": (np.array(0.5, np.float32), np.array(1.0, np.float32)),
    "two elements": (np.array([0.5, 0.0], np.float32), np.array([0.25, 0.0], np.float32)),
    "bfloat16": (_X.astype(ml_dtypes.bfloat16), (_X * 1.01).astype(ml_dtypes.bfloat16)),
    "shapes differ": (np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)),
    "a leading axis of 1 is squeezed": (_X.reshape(1, 64), _X.reshape(64) * np.float32(0.99)),
}


@pytest.mark.parametrize("case", CASES)
def test_special_cases_give_msprobes_values_or_words(msprobe_compare, case: str) -> None:
    device, bench = CASES[case]
    assert cells(msprobe_columns(device, bench)) == msprobe_compare(device, bench)


def test_a_wrong_slope_keeps_a_cosine_of_one_where_the_thousandth_ratio_drops() -> None:
    """Why the console shows both: msprobe's cosine rounds to 1.0 over small negatives."""
    x = np.linspace(-0.05, 4.0, 200, dtype=np.float32)
    found = msprobe_columns(np.where(x > 0, x, x * np.float32(0.3)), np.where(x > 0, x, x * np.float32(0.2)))
    assert found.cosine == 1.0 and found.one_thousandth_err_ratio < 1.0
