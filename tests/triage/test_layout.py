"""Layout mix-ups: golden permuted or packed (NC1HWC0) and read back flat is ``layout``.

The defects are built here with numpy's own transpose and padding, independently of the
triage's index arithmetic, on several shapes, dtypes, permutations and C0 values.
"""
from __future__ import annotations

import json
from itertools import permutations

import numpy as np
import pytest

from conformance.dtypes import bfloat16
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.render.messages import failure_message
from tests.helpers import F16, bits_differ, counts, differs, judge, judge_dump, run_cli


def _inputs(shape: tuple[int, ...], dtype: object, *, seed: int = 0) -> np.ndarray:
    """Random values of both signs over several binades (no two alike, by chance)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    v = rng.standard_normal(n) * 10.0 ** rng.uniform(-2, 2, n)
    return v.astype(dtype).reshape(shape)


def _transposed(y: np.ndarray, shape: tuple[int, ...], perm: tuple[int, ...]) -> np.ndarray:
    """The result written transposed by ``perm`` and read back flat in ``shape``."""
    return np.ascontiguousarray(y.reshape(shape).transpose(perm)).reshape(shape)


def _packed(y: np.ndarray, shape: tuple[int, ...], c0: int) -> np.ndarray:
    """NCHW result packed to NC1HWC0 with zero padded channels, read back flat as NCHW."""
    n, c, h, w = shape
    c1 = -(-c // c0)
    padded = np.zeros((n, c1 * c0, h, w), y.dtype)
    padded[:, :c] = y.reshape(shape)
    return padded.reshape(n, c1, c0, h, w).transpose(0, 1, 3, 4, 2).reshape(-1)[:y.size].reshape(shape)


def _unpacked(y: np.ndarray, shape: tuple[int, ...], c0: int) -> np.ndarray:
    """NCHW result's memory read as NC1HWC0 (zeros past its end) and unpacked to NCHW."""
    n, c, h, w = shape
    c1 = -(-c // c0)
    memory = np.zeros(n * c1 * h * w * c0, y.dtype)
    memory[:y.size] = y.reshape(-1)
    nchw = memory.reshape(n, c1, h, w, c0).transpose(0, 1, 4, 2, 3).reshape(n, c1 * c0, h, w)
    return np.ascontiguousarray(nchw[:, :c])


def _layout_finding(row):
    (finding,) = [f for f in row.findings if f.category == "layout"]
    return finding


@pytest.mark.parametrize("dtype", [np.float16, bfloat16, np.float32, np.float64])
@pytest.mark.parametrize(("shape", "perm", "named"), [
    ((2, 3, 4, 5), (0, 2, 3, 1), "written NHWC, read as NCHW"),
    ((3, 4, 5, 6), (0, 3, 1, 2), "written NCHW, read as NHWC"),
])
def test_nchw_read_as_nhwc_and_back_is_layout(dtype, shape, perm, named: str) -> None:
    x = _inputs(shape, dtype)
    exact = ref.forward(x, 0.2).reshape(-1)
    actual = _transposed(exact, shape, perm)
    row = judge(x, actual.reshape(-1), 0.2)
    assert counts(row) == {"layout": differs(actual.reshape(-1), exact)}
    finding = _layout_finding(row)
    assert finding.detail["transform"] == named and named in finding.summary
    assert finding.detail["permutation"] == list(perm) and finding.detail["contradicted"] == 0


@pytest.mark.parametrize(("shape", "seed"), [((7, 9), 1), ((4, 5, 6), 2), ((2, 3, 4, 5), 3), ((2, 3, 2, 4, 3), 4)])
def test_every_axis_permutation_of_ranks_2_to_5_is_layout(shape: tuple[int, ...], seed: int) -> None:
    x = _inputs(shape, np.float32, seed=seed)
    exact = ref.forward(x, 0.3).reshape(-1)
    rng = np.random.default_rng(seed)
    perms = [p for p in permutations(range(len(shape))) if p != tuple(range(len(shape)))]
    for i in rng.choice(len(perms), size=min(len(perms), 6), replace=False):
        perm = perms[int(i)]
        actual = _transposed(exact, shape, perm).reshape(-1)
        row = judge(x, actual, 0.3)
        assert counts(row) == {"layout": differs(actual, exact)}, (perm, failure_message(row))
        found = tuple(_layout_finding(row).detail["permutation"])
        assert np.array_equal(_transposed(exact, shape, found).reshape(-1), actual), (perm, found)


def test_an_axis_of_size_one_names_a_permutation_with_the_same_memory_order() -> None:
    shape, perm = (3, 1, 5), (2, 1, 0)
    x = _inputs(shape, np.float16)
    exact = ref.forward(x, 0.2).reshape(-1)
    actual = _transposed(exact, shape, perm).reshape(-1)
    found = tuple(_layout_finding(judge(x, actual, 0.2)).detail["permutation"])
    assert np.array_equal(_transposed(exact, shape, found).reshape(-1), actual)


@pytest.mark.parametrize(("dtype", "c0", "shape"), [
    (np.float16, 16, (2, 3, 4, 5)), (bfloat16, 16, (1, 20, 3, 3)),
    (np.float32, 8, (2, 5, 3, 4)), (np.float32, 16, (3, 17, 2, 2)), (np.float64, 4, (2, 6, 3, 3)),
])
@pytest.mark.parametrize("packed", [True, False])
def test_nchw_and_nc1hwc0_mixed_up_is_layout_with_c0(dtype, c0: int, shape, packed: bool) -> None:
    x = _inputs(shape, dtype, seed=c0)
    exact = ref.forward(x, 0.2).reshape(-1)
    actual = (_packed if packed else _unpacked)(exact, shape, c0).reshape(-1)
    row = judge(x, actual, 0.2)
    assert counts(row) == {"layout": differs(actual, exact)}, failure_message(row)
    finding = _layout_finding(row)
    named = f"written NC1HWC0 with C0={c0}, read as NCHW" if packed else f"written NCHW, read as NC1HWC0 with C0={c0}"
    assert finding.detail["transform"] == named and finding.detail["c0"] == c0


def test_sixteen_channels_packed_with_c0_16_are_nhwc_too() -> None:
    """C == C0: the packed memory is NHWC's, and the finding says both."""
    shape = (2, 16, 3, 3)
    x = _inputs(shape, np.float16, seed=12)
    exact = ref.forward(x, 0.2).reshape(-1)
    actual = _packed(exact, shape, 16).reshape(-1)
    finding = _layout_finding(judge(x, actual, 0.2))
    assert finding.detail["transform"] == "written NHWC, read as NCHW"
    assert "written NC1HWC0 with C0=16, read as NCHW" in finding.detail["alternatives"]


def test_nhwc_packed_to_nc1hwc0_is_layout() -> None:
    """The channel axis last: NHWC golden packed to NC1HWC0 and read back flat as NHWC."""
    shape, c0 = (2, 3, 4, 5), 16
    x = _inputs(shape, np.float16, seed=11)
    exact = ref.forward(x, 0.2).reshape(-1)
    as_nchw = np.ascontiguousarray(exact.reshape(shape).transpose(0, 3, 1, 2))
    actual = _packed(as_nchw.reshape(-1), as_nchw.shape, c0).reshape(-1)
    row = judge(x, actual, 0.2)
    assert counts(row) == {"layout": differs(actual, exact)}
    assert _layout_finding(row).detail["transform"] == "written NC1HWC0 with C0=16, read as NHWC"


def test_a_transposed_gradient_is_layout() -> None:
    shape = (4, 6, 5)
    x, dy = _inputs(shape, np.float32, seed=5), _inputs(shape, np.float32, seed=6)
    exact = ref.backward(dy, x, 0.2).reshape(-1)
    actual = _transposed(exact, shape, (2, 0, 1)).reshape(-1)
    row = judge(x, actual, 0.2, direction="backward", dy=dy)
    assert counts(row) == {"layout": differs(actual, exact)}


def test_every_fp16_pattern_transposed_is_layout() -> None:
    """Sorted inputs, where a shift cannot be told from a value: a transpose still is proved."""
    x = F16.reshape(256, 256)
    exact = ref.forward(x, 0.2).reshape(-1)
    actual = np.ascontiguousarray(exact.reshape(256, 256).T).reshape(-1)
    row = judge(x, actual, 0.2)
    assert counts(row) == {"layout": differs(actual, exact)}


def test_a_correct_output_and_a_wrong_slope_are_not_layout() -> None:
    x = _inputs((2, 3, 4, 5), np.float32)
    assert judge(x, ref.forward(x, 0.2).reshape(-1), 0.2).findings == ()
    row = judge(x, ref.forward(x, 0.01).reshape(-1), 0.2)
    assert "layout" not in counts(row) and "alpha-mismatch" in counts(row)


def test_a_flat_tensor_is_never_tried() -> None:
    """Without a shape there is no layout to prove."""
    shape = (6, 7)
    x = _inputs(shape, np.float32)
    exact = ref.forward(x, 0.2).reshape(-1)
    actual = _transposed(exact, shape, (1, 0)).reshape(-1)
    assert "layout" not in counts(judge(x.reshape(-1), actual, 0.2))


def test_a_layout_fails_the_gate_by_default() -> None:
    shape = (2, 4, 3, 3)
    x = _inputs(shape, np.float16)
    actual = _transposed(ref.forward(x, 0.2), shape, (0, 2, 3, 1)).reshape(-1)
    row = judge_dump(x, actual, 0.2)
    assert row.verdict == "fail" and _layout_finding(row).gated


def test_compare_names_a_dump_written_nhwc_and_read_as_nchw(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    shape = (2, 3, 8, 8)
    x = _inputs(shape, np.float32, seed=9)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", _transposed(ref.forward(x, 0.2), shape, (0, 2, 3, 1)))
    result = run_cli(["compare", "--x", "x.npy", "--y", "y.npy", "--alpha", "0.2", "--json", "r.json", "-q"],
                     capsys, cwd=tmp_path)
    assert result.code == 1, result.text
    (row,) = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert [f["category"] for f in row["findings"]] == ["layout"]
    assert row["findings"][0]["detail"]["transform"] == "written NHWC, read as NCHW"
    assert row["findings"][0]["count"] == row["mismatches"]


# ----------------------------------------------------------------------------- a layout and a value rule at once

def _moved_exact(x: np.ndarray, alpha: float, move) -> np.ndarray:
    """The exact result moved as the framework's output was: what the output holds where
    the layout alone is the defect."""
    return move(ref.forward(x, alpha)).reshape(-1)


def _split(actual: np.ndarray, exact: np.ndarray, moved: np.ndarray) -> tuple[int, int]:
    """Errors the move alone explains, and errors that need a value rule on top of it."""
    value = bits_differ(actual, moved)
    return int((bits_differ(actual, exact) & ~value).sum()), int(value.sum())


def _value_finding(row, category: str):
    (finding,) = [f for f in row.findings if f.category == category]
    return finding


def test_a_jax_fp32_output_written_nhwc_and_read_as_nchw_is_layout_and_its_fp32_slope() -> None:
    """jax.nn.leaky_relu holds the slope in float32: about a tenth of its results differ from
    the exact ones anyway; moved, they are ``alpha-precision`` on golden moved, the rest ``layout``."""
    jax = pytest.importorskip("jax")
    shape = (2, 8, 16, 16)
    x = _inputs(shape, np.float32, seed=21)
    out = np.asarray(jax.nn.leaky_relu(jax.numpy.asarray(x), 0.2))
    move = lambda y: _transposed(y, shape, (0, 2, 3, 1))  # noqa: E731
    actual = move(out).reshape(-1)
    alone, value = _split(actual, ref.forward(x, 0.2).reshape(-1), _moved_exact(x, 0.2, move))
    assert value > 100
    row = judge(x, actual, 0.2, backend="jax")
    assert counts(row) == {"layout": alone, "alpha-precision": value}, failure_message(row)
    assert _layout_finding(row).detail["transform"] == "written NHWC, read as NCHW"
    finding = _value_finding(row, "alpha-precision")
    assert finding.detail["layout"] == "written NHWC, read as NCHW" and finding.detail["contradicted"] == 0


def test_a_torch_fp16_output_with_the_torch_default_slope_packed_to_nc1hwc0_is_layout_and_alpha_mismatch() -> None:
    torch = pytest.importorskip("torch")
    from tests.helpers import from_torch, to_torch

    shape = (2, 20, 5, 6)
    x = _inputs(shape, np.float16, seed=22)
    out = from_torch(torch.nn.functional.leaky_relu(to_torch(x)), "float16")  # slope 0.01, judged at 0.2
    move = lambda y: _packed(y.reshape(-1), shape, 16)  # noqa: E731
    actual = move(out).reshape(-1)
    alone, value = _split(actual, ref.forward(x, 0.2).reshape(-1), _moved_exact(x, 0.2, move))
    row = judge(x, actual, 0.2, backend="torch")
    assert counts(row) == {"layout": alone, "alpha-mismatch": value}, failure_message(row)
    layout = _layout_finding(row)
    assert layout.detail["transform"] == "written NC1HWC0 with C0=16, read as NCHW" and layout.detail["c0"] == 16
    assert "0.01" in _value_finding(row, "alpha-mismatch").summary


def test_a_tensorflow_fp32_output_that_flushes_subnormals_transposed_is_layout_and_the_flush() -> None:
    """tf.nn.leaky_relu on CPU flushes subnormal inputs and results and holds the slope in
    float32: on golden moved, the flushed elements are ``subnormal-flush``, the others that
    differ ``alpha-precision``."""
    tf = pytest.importorskip("tensorflow")
    shape = (3, 8, 7, 5)
    x = _inputs(shape, np.float32, seed=23).reshape(-1)
    x[::9] = (np.random.default_rng(3).uniform(-1, 1, x[::9].size) * 1e-39).astype(np.float32)  # subnormals
    x = x.reshape(shape)
    out = tf.nn.leaky_relu(tf.constant(x), 0.2).numpy()
    move = lambda y: _transposed(y, shape, (0, 2, 3, 1))  # noqa: E731
    actual = move(out).reshape(-1)
    moved = _moved_exact(x, 0.2, move)
    alone, value = _split(actual, ref.forward(x, 0.2).reshape(-1), moved)
    tiny = np.abs(move(x).reshape(-1).astype(np.float64)) < np.finfo(np.float32).tiny
    tiny |= np.abs(moved.astype(np.float64)) < np.finfo(np.float32).tiny
    flushed = int((bits_differ(actual, moved) & tiny).sum())
    row = judge(x, actual.reshape(-1), 0.2, backend="tensorflow")
    assert counts(row) == {"layout": alone, "subnormal-flush": flushed, "alpha-precision": value - flushed}, \
        failure_message(row)


def test_narrowed_inputs_on_a_transposed_output_are_found_with_no_error_golden_moved_reproduces() -> None:
    """Every element changed: fp32 inputs narrowed to fp16 before computing, transposed.
    The move alone reproduces no error; ``layout`` takes every moved element and names
    the rule it needs too."""
    shape = (6, 9, 7)
    x = _inputs(shape, np.float32, seed=24)
    narrowed = ref.compute("forward", x, 0.2, out_dtype="float32", semantics=Semantics(input_dtype="float16"))
    actual = _transposed(narrowed.reshape(-1), shape, (2, 0, 1)).reshape(-1)
    exact = ref.forward(x, 0.2).reshape(-1)
    row = judge(x, actual, 0.2)
    assert "unexplained" not in counts(row) and sum(counts(row).values()) == differs(actual, exact)
    finding = _layout_finding(row)
    assert finding.detail["permutation"] == [2, 0, 1]
    assert any(c.startswith("input-precision") for c in finding.detail["composed_with"])


def test_a_value_rule_alone_on_a_4d_output_is_no_layout() -> None:
    """Every element off by the fp16 slope (TF's rounding), no move: the rule, never a layout."""
    x = _inputs((2, 6, 5, 4), np.float16, seed=25)
    actual = ref.forward(x, 0.3, semantics=Semantics(slope_dtype="float16")).reshape(-1)
    row = judge(x, actual, 0.3)
    assert set(counts(row)) == {"alpha-precision"}, failure_message(row)


def test_a_clamp_at_fp16_max_on_a_transposed_fp32_output_is_layout_and_saturation() -> None:
    shape = (3, 6, 10, 10)
    rng = np.random.default_rng(26)
    n = int(np.prod(shape))
    x = (rng.standard_normal(n) * 10.0 ** rng.uniform(0, 5.5, n)).astype(np.float32).reshape(shape)
    move = lambda y: _transposed(np.clip(y, -65504, 65504), shape, (0, 2, 3, 1))  # noqa: E731
    actual = move(ref.forward(x, 0.2)).reshape(-1)
    exact = ref.forward(x, 0.2).reshape(-1)
    alone, value = _split(actual, exact, _transposed(exact, shape, (0, 2, 3, 1)).reshape(-1))
    row = judge(x, actual, 0.2)
    assert counts(row) == {"layout": alone, "saturation": value}, failure_message(row)
    assert _value_finding(row, "saturation").detail["limit_of"] == "float16"
