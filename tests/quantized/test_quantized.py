"""The exact quantized golden against an independent oracle; each framework model against its
real framework, bit for bit on all 256 codes; where the frameworks leave the exact result."""
from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from conformance.cases.quantized import quant_grid
from conformance.config import default_config
from conformance.frameworks import quantized_models as models
from conformance.judge.quantized import evaluate_codes
from conformance.records import MAX_EXAMPLES
from conformance.reference.quantized import QuantParams, all_codes, exact_table, leaky_relu_quantized, round_half_even
from conformance.triage.quantized import QuantBatch, triage_quantized
from tests.helpers import sampled

TIE_PRONE = (0.01, 0.04, 0.05, 1 / 255, 0.1, 0.5, 0.25)
ALPHAS = (0.01, 0.1, 0.2, 0.3, 0.02, 1.5, -0.5)


def _grid(count: int, *, seed: int) -> list[tuple[QuantParams, float]]:
    """``count`` settings: tie-prone scales, random zero points, both dtypes, the suite's slopes."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        dtype = ("qint8", "quint8")[i % 2]
        lo, hi = (-128, 127) if dtype == "qint8" else (0, 255)
        s_in, s_out = (TIE_PRONE[int(k)] for k in rng.integers(0, len(TIE_PRONE), 2))
        z_in, z_out = (int(z) for z in rng.integers(lo, hi + 1, 2))
        out.append((QuantParams(s_in, z_in, s_out, z_out, dtype), ALPHAS[i % len(ALPHAS)]))
    return out


SETTINGS = _grid(48, seed=22) + [(QuantParams(0.05, 0, 0.04, -28, "qint8"), 0.2),
                                 (QuantParams(0.04, 0, 0.05, 0, "qint8"), 0.2),
                                 (QuantParams(1 / 255, 0, 1 / 255, 0, "quint8"), 0.1)]


def oracle(q: int, alpha: float, params: QuantParams) -> int:
    """The exact rule written directly in Fractions (Python's round of a Fraction is half-even)."""
    real = Fraction(params.s_in) * (q - params.z_in)
    y = real if real >= 0 else Fraction(alpha) * real
    lo, hi = params.code_range
    return min(hi, max(lo, round(y / Fraction(params.s_out)) + params.z_out))


@pytest.mark.parametrize(("params", "alpha"), SETTINGS, ids=str)
def test_golden_equals_the_fraction_oracle_on_every_code(params: QuantParams, alpha: float) -> None:
    expected = [oracle(q, alpha, params) for q in range(params.code_range[0], params.code_range[1] + 1)]
    np.testing.assert_array_equal(exact_table(alpha, params=params), expected)


def test_the_torch_example_is_a_tie_missed_in_float32() -> None:
    params = QuantParams(0.05, 0, 0.04, -28, "qint8")
    codes = np.array([-122], np.int8)
    assert leaky_relu_quantized(codes, 0.2, params=params)[0] == -59  # t = -30.500000000000004
    assert models.torch(codes, 0.2, params=params)[0] == -58          # float32 lands on -30.5


def test_exact_ties_round_to_even_and_saturate() -> None:
    params = QuantParams(0.5, 0, 1.0, 0, "qint8")
    out = leaky_relu_quantized(np.array([1, 3, 5, -1, -3, 127], np.int8), 1.0, params=params)
    assert out.tolist() == [0, 2, 2, 0, -2, 64]
    wide = QuantParams(1.0, 0, 0.25, 10, "quint8")
    assert leaky_relu_quantized(np.array([0, 100, 255], np.uint8), 0.2, params=wide).tolist() == [10, 255, 255]


@pytest.mark.parametrize(("num", "den", "expected"), [(5, 2, 2), (7, 2, 4), (-5, 2, -2), (-7, 2, -4),
                                                      (7, 3, 2), (-7, 3, -2), (8, 3, 3)])
def test_round_half_even(num: int, den: int, expected: int) -> None:
    assert round_half_even(num, den) == expected


@pytest.mark.parametrize("kwargs", [dict(s_in=0.0), dict(s_in=-0.1), dict(s_out=float("nan")),
                                    dict(s_out=float("inf")), dict(z_in=128), dict(z_out=-129),
                                    dict(dtype="int8"), dict(z_in=1.5), dict(z_out=True)])
def test_quant_params_reject_bad_settings(kwargs: dict) -> None:
    base = dict(s_in=0.1, z_in=0, s_out=0.1, z_out=0, dtype="qint8")
    with pytest.raises(ValueError, match=next(iter(kwargs)) if "dtype" not in kwargs else "dtype"):
        QuantParams(**{**base, **kwargs})


def test_codes_of_the_wrong_dtype_are_refused() -> None:
    with pytest.raises(ValueError, match="uint8"):
        leaky_relu_quantized(np.zeros(3, np.int8), 0.1, params=QuantParams(0.1, 0, 0.1, 0, "quint8"))


def _code_distance(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.max(np.abs(a.astype(np.int64) - b.astype(np.int64))))


# --- PyTorch -------------------------------------------------------------------------------

@pytest.mark.parametrize(("params", "alpha"), SETTINGS, ids=str)
def test_torch_model_equals_torch(params: QuantParams, alpha: float) -> None:
    pytest.importorskip("torch")
    from conformance.frameworks import quantized_backends as backends

    codes = all_codes(params)
    real = {"vector": backends.torch(codes, alpha, params=params),
            "scalar": np.concatenate([backends.torch(codes[i:i + 16], alpha, params=params)
                                      for i in range(0, 256, 16)]),
            "mixed": backends.torch(codes[:200], alpha, params=params)}
    modelled = {"vector": models.torch_vector(codes, alpha, params=params),
                "scalar": models.torch_scalar(codes, alpha, params=params),
                "mixed": models.torch(codes[:200], alpha, params=params)}
    for layout in real:
        np.testing.assert_array_equal(modelled[layout], real[layout], err_msg=layout)


def test_torch_vector_and_scalar_split_at_64_elements() -> None:
    """A setting where the two paths disagree: in a 100-element tensor the first 64 codes
    follow the vector body and the last 36 the scalar op."""
    pytest.importorskip("torch")
    from conformance.frameworks import quantized_backends as backends

    params, alpha = QuantParams(0.05, 0, 0.04, -28, "qint8"), 0.2
    codes = all_codes(params)
    differ = np.flatnonzero(models.torch_vector(codes, alpha, params=params)
                            != models.torch_scalar(codes, alpha, params=params))
    assert differ.size > 0
    for position, path in ((10, models.torch_vector), (70, models.torch_scalar)):
        window = np.roll(codes, position - int(differ[0]))[:100]
        real = backends.torch(window, alpha, params=params)
        assert real[position] == path(window, alpha, params=params)[position]
        np.testing.assert_array_equal(real, models.torch(window, alpha, params=params))


# --- ONNX Runtime ----------------------------------------------------------------------------

@pytest.mark.parametrize(("params", "alpha"), SETTINGS, ids=str)
def test_onnxruntime_model_equals_onnxruntime(params: QuantParams, alpha: float) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from conformance.frameworks import quantized_backends as backends

    codes = all_codes(params)
    expected = models.onnxruntime(codes, alpha, params=params)
    for graph, level in (("qlinear", "all"), ("qlinear", "off"), ("qdq", "off"), ("qdq", "all")):
        np.testing.assert_array_equal(backends.onnxruntime(codes, alpha, params=params, graph=graph,
                                                           optimization=level), expected,
                                      err_msg=f"{graph} optimization {level}")


# --- TensorFlow Lite -------------------------------------------------------------------------

#: (alpha, calibration low, high, dtype): the interpreter picks the scales and zero points.
HAND_PICKED = [
    (0.2, -6.4, 6.35, "qint8"), (0.003, -3.0, 5.0, "qint8"), (0.01, -1.0, 1.0, "quint8"),
    (0.3, -2.55, 0.0, "qint8"), (0.001, -10.0, 2.0, "qint8"), (0.0005, -4.0, 4.0, "qint8"),
    (0.1, -1.28, 1.27, "quint8"), (0.2, -0.5, 12.25, "quint8"), (0.01, -5.1, 7.65, "qint8"),
    (1.5, -2.0, 3.0, "qint8"), (0.05, -0.02, 2.53, "quint8"), (0.25, -12.8, 0.5, "qint8"),
    (1 / 3, -2.55, 2.55, "quint8"), (0.0, -1.0, 3.0, "qint8"), (0.02, -0.51, 0.0, "quint8"),
    (0.3, -25.5, 25.5, "qint8"), (0.1, -0.3, 0.2, "qint8"), (0.01, -100.0, 27.5, "quint8"),
    (0.001, -10.0, 0.01, "qint8"), (300.0, -1.0, 0.0, "qint8"),
]


def _tflite_grid(count: int, *, seed: int) -> list[tuple[float, float, float, str]]:
    """``count`` more calibrations: seeded ranges across zero, both dtypes, the suite's slopes."""
    rng = np.random.default_rng(seed)
    slopes = (0.2, 0.01, 0.1, 0.3, 1 / 3, 1.5, 0.003, 0.0005, 0.05)
    return [(slopes[i % len(slopes)], -round(float(rng.uniform(0.05, 20.0)), 3),
             round(float(rng.uniform(0.05, 20.0)), 3), ("qint8", "quint8")[i % 2]) for i in range(count)]


SEEDED = _tflite_grid(20, seed=22)
TFLITE_SETTINGS = HAND_PICKED + SEEDED
#: Each calibration is a model TFLite converts, the slow part of the test.  The hand-picked ones
#: hold every case the models tell apart (both dtypes, ranges on one side of zero, the slopes
#: XNNPACK declines, slope 0 and 300, ties); the seeded ones repeat those kinds at random
#: ranges, so the default run keeps the first four (both dtypes, four slopes) and
#: ``make test-exhaustive`` the other sixteen.
TFLITE_CASES = sampled([(s,) for s in TFLITE_SETTINGS], default=lambda s: s not in SEEDED[4:])


@functools.cache
def _tflite(alpha: float, low: float, high: float, dtype: str):  # type: ignore[no-untyped-def]
    from conformance.frameworks import quantized_backends as backends

    model = backends.tflite_model(alpha, low=low, high=high, dtype=dtype)
    codes = all_codes(model.params)
    return model, backends.tflite(codes, model=model, xnnpack=False), backends.tflite(codes, model=model, xnnpack=True)


@pytest.mark.parametrize("setting", TFLITE_CASES, ids=str)
def test_tflite_models_equal_tflite(setting: tuple[float, float, float, str]) -> None:
    pytest.importorskip("tensorflow")
    model, builtin, xnnpack = _tflite(*setting)
    codes = all_codes(model.params)
    np.testing.assert_array_equal(models.tflite_builtin(codes, model.alpha, params=model.params), builtin)
    np.testing.assert_array_equal(models.tflite_xnnpack(codes, model.alpha, params=model.params), xnnpack)
    golden = exact_table(model.alpha, params=model.params)
    for out in (builtin, xnnpack):  # every difference named by a rule, none unexplained
        claims = triage_quantized(QuantBatch(codes, model.alpha, model.params, golden, out))
        assert all(c.category in {"requantization", "rounding"} for c in claims), [c.detail for c in claims]


@pytest.mark.parametrize("setting", [(0.0005, -4.0, 4.0, "qint8"), (0.0, -1.0, 3.0, "qint8"),
                                     (0.001, -10.0, 0.01, "qint8"), (300.0, -1.0, 0.0, "qint8")],
                         ids=["negative-scale-below-2^-8", "zero-slope", "positive-scale-above-2^7",
                              "positive-scale-below-2^-8"])
def test_xnnpack_declines_scales_outside_its_range(setting: tuple[float, float, float, str]) -> None:
    pytest.importorskip("tensorflow")
    model, builtin, xnnpack = _tflite(*setting)
    assert models.xnnpack_multipliers(model.alpha, params=model.params) is None
    np.testing.assert_array_equal(xnnpack, builtin)


def test_xnnpack_rounds_the_slope_to_steps_of_1_256() -> None:
    pytest.importorskip("tensorflow")
    model, builtin, xnnpack = _tflite(0.003, -3.0, 5.0, "qint8")
    positive, negative = models.xnnpack_multipliers(model.alpha, params=model.params)
    assert negative == 1  # 256 * 0.003 * s_in/s_out rounds to 1: an effective slope of 1/256 * s_out/s_in
    assert not np.array_equal(xnnpack, builtin)


# --- Where the frameworks leave the exact result ---------------------------------------------

def test_tflite_example_is_one_code_below_exact() -> None:
    """The interpreter's parameters for a calibration on [-6.4, 6.35] with alpha 0.2."""
    params = QuantParams(0.05000000074505806, 0, 0.02992156893014908, -85, "qint8")
    codes = np.array([-127], np.int8)
    assert leaky_relu_quantized(codes, 0.2, params=params)[0] == -127
    assert models.tflite_builtin(codes, 0.2, params=params)[0] == -128


@pytest.mark.parametrize("model", [models.torch_vector, models.torch_scalar, models.tflite_builtin,
                                   models.tflite_xnnpack, models.onnxruntime], ids=lambda m: m.__name__)
def test_framework_models_are_within_one_code_of_exact(model: models.QuantModelFn) -> None:
    distances = [_code_distance(model(all_codes(p), a, params=p), exact_table(a, params=p)) for p, a in SETTINGS]
    assert max(distances) == 1  # some setting differs, none by more than one code (a Q8
    # multiplier is off by at most 1/512, under half a code over |q - z_in| <= 255)


def test_every_model_cites_its_sources() -> None:
    assert set(models.MODELS) == {"torch", "tflite[builtin]", "tflite[xnnpack]", "onnxruntime"}
    assert all(m.sources and all(":" in s for s in m.sources) for m in models.MODELS.values())


# --- The command -----------------------------------------------------------------------------

def _quantized_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from conformance.cli import main

    code = main(["quantized", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_quantized_command_reports_code_differences_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnxruntime")
    code, out, _ = _quantized_cli(capsys, "--framework", "onnxruntime[qlinear]", "--settings", "2", "--json")
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "pass" and data["tolerance"] == 1
    first = data["rows"][0]
    params = QuantParams(first["s_in"], first["z_in"], first["s_out"], first["z_out"], first["dtype"])
    expected = models.onnxruntime(all_codes(params), first["alpha"], params=params) != exact_table(
        first["alpha"], params=params)
    assert first["differing"] == int(expected.sum()) > 0 and first["max_code_diff"] == 1
    assert first["rules"] == ["requantization: float32 scales, division by s_out (ONNX Runtime)"]


def test_quantized_command_fails_past_the_tolerance(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    code, out, _ = _quantized_cli(capsys, "--framework", "torch[tail]", "--settings", "1", "--tolerance", "0")
    assert code == 1 and "torch[tail]" in out and "fail" in out


@pytest.mark.parametrize(("argv", "message"), [
    (("--tolerance", "-1"), "--tolerance must be >= 0"),
    (("--framework", "tflite[gpu]"), "is not one of"),
    (("--settings", "0"), "--settings must be in"),
])
def test_quantized_command_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                                               message: str) -> None:
    code, out, err = _quantized_cli(capsys, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_the_grid_covers_both_dtypes_ties_and_xnnpack_declining() -> None:
    from conformance.cases.quantized import quant_grid

    grid = quant_grid(12)
    assert grid[0] == (QuantParams(0.05, 0, 0.04, -28, "qint8"), 0.2)
    assert {p.dtype for p, _ in grid} == {"qint8", "quint8"}
    assert any(models.xnnpack_multipliers(a, params=p) is None for p, a in grid)
    assert quant_grid(12) == grid and len(quant_grid(40)) == 40


# --- Judged a chunk at a time ----------------------------------------------------------------

def _defects() -> dict[str, Callable[[np.ndarray, float, QuantParams], np.ndarray]]:
    """Kernels whose codes differ from exact in every way triage names: the frameworks' rules,
    a position split, a wrong slope, zero point or scale, wrapped codes, and noise."""
    def noisy(codes: np.ndarray, alpha: float, p: QuantParams) -> np.ndarray:
        out = leaky_relu_quantized(codes, alpha, params=p).astype(np.int64)
        out[::37] += 3
        return np.clip(out, *p.code_range).astype(p.storage)

    found = {name: (lambda c, a, p, fn=m.compute: fn(c, a, params=p)) for name, m in models.MODELS.items()}
    return {**found,
            "torch, block 96": lambda c, a, p: models.torch(c, a, params=p, block=96),
            "slope 0.01": lambda c, a, p: leaky_relu_quantized(c, 0.01, params=p),
            "z_out + 1": lambda c, a, p: leaky_relu_quantized(c, a, params=replace(p, z_out=p.z_out + 1)),
            "s_out * 1.5": lambda c, a, p: leaky_relu_quantized(c, a, params=replace(p, s_out=p.s_out * 1.5)),
            "noise": noisy}


def _whole_tensor_findings(codes: np.ndarray, out: np.ndarray, alpha: float, p: QuantParams) -> list[tuple]:
    """Triage of every element as one batch (the reference the kept batch must equal)."""
    golden = leaky_relu_quantized(codes, alpha, params=p)
    return [(c.category, int(c.index.size), c.summary, c.detail, c.index[:MAX_EXAMPLES].tolist())
            for c in triage_quantized(QuantBatch(codes, alpha, p, golden, out))]


@pytest.mark.parametrize(("params", "alpha"), quant_grid(6), ids=str)
def test_the_kept_batch_finds_what_the_whole_tensor_shows(params: QuantParams, alpha: float) -> None:
    """Findings, counts, details and example indices of the kept batch (differing codes, and
    per input code the first and last matching place and a count) equal whole-tensor triage."""
    codes = np.random.default_rng(5).choice(all_codes(params), 5_003)
    for name, make in _defects().items():
        out = make(codes, alpha, params)
        row = evaluate_codes(codes, out, alpha, params=params, backend="dump", config=default_config())
        kept = [(f.category, f.count, f.summary, f.detail, [e.index for e in f.examples]) for f in row.findings]
        assert kept == _whole_tensor_findings(codes, out, alpha, params), name


def _compare_quant(tmp_path: Path, capsys: pytest.CaptureFixture[str], *, chunk: int) -> tuple[int, dict]:
    """``compare --quant`` of x.npy and y.npy read ``chunk`` codes at a time: the exit code and
    the JSON report but its timings; no read of the dumps returns more than ``chunk`` codes."""
    from conformance.cli import main
    from conformance.ingest import dumps
    from conformance.ingest.arrays import Dump

    report, largest = tmp_path / f"chunk{chunk}.json", [0]
    saved, dumps.CHUNK_ELEMENTS = (dumps.CHUNK_ELEMENTS, Dump.chunk, Dump.mapped), chunk

    def spy(read):  # a read of the dump (a copy or a view of the mapping), its size kept
        def spied(self: Dump, start: int, stop: int) -> np.ndarray:
            part = read(self, start, stop)
            largest[0] = max(largest[0], part.size)
            return part
        return spied

    Dump.chunk, Dump.mapped = spy(saved[1]), spy(saved[2])  # type: ignore[method-assign]
    try:
        code = main(["compare", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"), "--alpha", "0.2",
                     "--quant", "0.05:0:0.04:-28", "--json", str(report), "-q"])
    finally:
        dumps.CHUNK_ELEMENTS, Dump.chunk, Dump.mapped = saved  # type: ignore[method-assign]
    capsys.readouterr()
    assert 0 < largest[0] <= chunk, f"the dumps were read {largest[0]} codes at a time, not {chunk}"
    doc = json.loads(report.read_text())
    doc["summary"].pop("durations", None)
    for row in doc["rows"]:
        row.pop("seconds", None)
    doc["summary"]["command"] = doc["summary"].get("command", [])[:-1]  # the report path differs
    return code, doc


def test_compare_quant_in_chunks_writes_the_json_of_one_chunk(tmp_path: Path, capsys) -> None:
    """A torch-like dump whose vector body ends at element 640, read 64 codes at a time (the
    split on a chunk boundary) and 97 at a time, against the dump read as one chunk."""
    params = QuantParams(0.05, 0, 0.04, -28, "qint8")
    codes = np.random.default_rng(1).choice(all_codes(params), (10, 70))
    np.save(tmp_path / "x.npy", codes)
    np.save(tmp_path / "y.npy", models.torch(codes, 0.2, params=params).reshape(codes.shape))
    whole = _compare_quant(tmp_path, capsys, chunk=1 << 30)
    assert whole[0] == 1 and [f["category"] for f in whole[1]["rows"][0]["findings"]] == ["position-split"]
    assert whole[1]["rows"][0]["findings"][0]["detail"]["boundary"] == 640
    for chunk in (64, 97):
        assert _compare_quant(tmp_path, capsys, chunk=chunk) == whole, chunk
