"""Quantized outputs in another layout: ``layout`` with the transform, the quantized rules on the rest."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.config import default_config
from conformance.judge.quantized import evaluate_codes, judged_whole
from conformance.records import Row
from conformance.reference.quantized import QuantParams, leaky_relu_quantized
from conformance.triage.layout import packed_source

PARAMS = QuantParams(0.05, 0, 0.04, -28)
ALPHA = 0.2


def judged(codes: np.ndarray, actual: np.ndarray) -> tuple[dict[str, int], Row]:
    row = evaluate_codes(codes, actual, ALPHA, params=PARAMS, backend="dump", config=default_config())
    row = judged_whole(row, codes, actual, params=PARAMS, config=default_config())
    assert sum(f.count for f in row.findings) == row.metrics.mismatches
    return {f.category: f.count for f in row.findings}, row


def codes_of(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, size=shape).astype(np.int8)


def nhwc_read_as_nchw(y: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(y.transpose(0, 2, 3, 1)).reshape(y.shape)


def test_exact_codes_written_nhwc_and_read_as_nchw_are_layout():
    codes = codes_of((2, 8, 4, 5))
    found, row = judged(codes, nhwc_read_as_nchw(leaky_relu_quantized(codes, ALPHA, params=PARAMS)))
    assert set(found) == {"layout"}
    assert row.findings[0].detail["transform"] == "written NHWC, read as NCHW"


def test_exact_codes_packed_to_nc1hwc0_with_c0_32_are_layout():
    codes = codes_of((1, 40, 3, 4))  # 40 channels: C1 = 2, the second block padded with zero codes
    golden = leaky_relu_quantized(codes, ALPHA, params=PARAMS).reshape(-1)
    src = packed_source(codes.shape, channel=1, c0=32)(np.arange(golden.size))
    actual = np.where(src < 0, 0, golden[np.maximum(src, 0)]).astype(np.int8).reshape(codes.shape)
    found, row = judged(codes, actual)
    assert set(found) == {"layout"} and row.findings[0].detail["c0"] == 32


def test_a_real_torch_output_transposed_is_layout_and_torchs_own_rule():
    torch = pytest.importorskip("torch")
    codes = codes_of((2, 40, 3, 5))
    q = torch._make_per_tensor_quantized_tensor(torch.from_numpy(codes), PARAMS.s_in, PARAMS.z_in)
    y = torch.ao.nn.quantized.functional.leaky_relu(q, ALPHA, scale=PARAMS.s_out, zero_point=PARAMS.z_out)
    y = y.int_repr().numpy()
    assert (y != leaky_relu_quantized(codes, ALPHA, params=PARAMS)).any()  # torch's own rounding shows
    found, row = judged(codes, nhwc_read_as_nchw(y))
    assert set(found) == {"layout", "position-split"}
    assert all(f.detail.get("layout") == "written NHWC, read as NCHW" for f in row.findings if f.category != "layout")


def test_garbage_in_four_dimensions_is_not_a_layout():
    codes = codes_of((2, 8, 4, 5))
    found, _ = judged(codes, codes_of((2, 8, 4, 5), seed=9))
    assert "layout" not in found and "unexplained" in found
