"""Quantized triage names each rule by recomputation; compare --quant on defect dumps made here;
the gate allows one code from a named rule for the framework profiles only; the run's rows."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conformance.cases.quantized import quant_grid
from conformance.config import default_config
from conformance.frameworks import quantized_models as models
from conformance.judge.quantized import evaluate_codes
from conformance.reference.quantized import QuantParams, all_codes, exact_table, setting_text
from conformance.render.messages import failure_message
from conformance.triage.quantized import QuantBatch, triage_quantized

TIES = QuantParams(0.5, 3, 1.0, -5, "qint8")  # (q - 3)/2: every odd distance is an exact tie


def _claims(actual: np.ndarray, alpha: float, params: QuantParams, codes: np.ndarray | None = None):  # type: ignore[no-untyped-def]
    codes = all_codes(params) if codes is None else codes
    golden = exact_table(alpha, params=params)[codes.astype(np.int64) - params.code_range[0]]
    return triage_quantized(QuantBatch(codes, alpha, params, golden, actual))


# --- dumps made here, outside the package's models -------------------------------------------

def _half_away(codes: np.ndarray, alpha: float, p: QuantParams) -> np.ndarray:
    t = [(float(q - p.z_in) * (1 if q >= p.z_in else alpha)) * p.s_in / p.s_out for q in codes.astype(int)]
    return np.clip([int(np.sign(v) * np.floor(abs(v) + 0.5)) + p.z_out for v in t], *p.code_range).astype(p.storage)


def _q16_multiplier(codes: np.ndarray, alpha: float, p: QuantParams) -> np.ndarray:
    """A kernel with 16-bit fixed-point multipliers: ``(x*m + 2**15) >> 16``."""
    x = codes.astype(np.int64) - p.z_in
    m = np.where(x >= 0, round(65536 * p.s_in / p.s_out), round(65536 * alpha * p.s_in / p.s_out))
    return np.clip(p.z_out + ((x * m + 32768) >> 16), *p.code_range).astype(p.storage)


def _exact_with(params: QuantParams, alpha: float, **change: float) -> np.ndarray:
    """The exact codes of another setting, as a kernel given a wrong parameter computes them."""
    from dataclasses import replace

    wrong = replace(params, **change)
    return exact_table(alpha, params=wrong)


@pytest.mark.parametrize(("make", "category", "says"), [
    (lambda c, a, p: _half_away(c, a, p), "rounding", "half away"),
    (lambda c, a, p: _exact_with(p, a, z_out=p.z_out + 1), "quant-params", "z_out"),
    (lambda c, a, p: _exact_with(p, a, s_out=0.6), "quant-params", "s_out"),
    (lambda c, a, p: _exact_with(p, a, z_in=0), "quant-params", "z_in"),
], ids=["half-away", "zero-point", "scale", "defaulted-zero-point"])
def test_defects_made_outside_the_models_are_named(make, category: str, says: str) -> None:  # type: ignore[no-untyped-def]
    codes = all_codes(TIES)
    claims = _claims(make(codes, 0.2, TIES), 0.2, TIES)
    assert [c.category for c in claims] == [category]
    assert says in claims[0].detail["rule"] and claims[0].detail["contradicted"] == 0


def test_a_16_bit_multiplier_is_a_requantization_or_left_unexplained_but_never_misnamed() -> None:
    params = QuantParams(0.05, 0, 0.04, -28, "qint8")
    actual = _q16_multiplier(all_codes(params), 0.2, params)
    claims = _claims(actual, 0.2, params)
    assert claims and sum(c.index.size for c in claims) == int((actual != exact_table(0.2, params=params)).sum())
    assert all(c.category in {"requantization", "rounding", "unexplained"} for c in claims)


def test_a_wrong_slope_names_whose_default_it_is() -> None:
    params = QuantParams(0.05, 10, 0.04, -3, "qint8")
    claims = _claims(exact_table(0.01, params=params), 0.2, params)
    assert [c.category for c in claims] == ["alpha-mismatch"]
    assert claims[0].detail["effective_alpha"] == 0.01 and "torch" in claims[0].detail["rule"]


def test_wrapping_instead_of_saturating_is_code_saturation() -> None:
    params = QuantParams(1.0, 0, 0.5, 0, "qint8")  # y/s_out = 2q: most codes leave the range
    exact = exact_table(0.2, params=params).astype(np.int64)
    q = all_codes(params).astype(np.int64)
    wrapped = (np.where(q >= 0, 2 * q, np.rint(0.4 * q)) + 128) % 256 - 128
    claims = _claims(wrapped.astype(np.int8), 0.2, params)
    assert [c.category for c in claims] == ["code-saturation"]
    assert claims[0].index.size == int((wrapped != exact).sum())


def test_saturating_at_the_narrow_range_is_code_saturation() -> None:
    params = QuantParams(0.1, 0, 0.05, 0, "qint8")  # y/s_out = 2q: codes below -64 saturate
    narrow = np.maximum(exact_table(1.0, params=params), -127).astype(np.int8)
    claims = _claims(narrow, 1.0, params)
    assert [c.category for c in claims] == ["code-saturation"] and "narrow" in claims[0].detail["rule"]


def test_the_torch_split_is_named_with_its_boundary() -> None:
    params, alpha = QuantParams(0.01, 237, 0.01, 118, "quint8"), 0.3
    codes = np.roll(all_codes(params), 100)[:255]  # 192 codes in the vector body, 63 in the tail
    claims = _claims(models.torch(codes, alpha, params=params), alpha, params, codes)
    assert [c.category for c in claims] == ["position-split"]
    detail = claims[0].detail
    assert detail["boundary"] == 192 and detail["boundaries"][0] <= 192 <= detail["boundaries"][1]  # 3*64
    assert "PyTorch vector body" in detail["body"] and "PyTorch scalar tail" in detail["tail"]


@pytest.mark.parametrize(("params", "alpha"), quant_grid(40), ids=str)
@pytest.mark.parametrize("model", [models.torch_vector, models.torch_scalar, models.tflite_builtin,
                                   models.tflite_xnnpack, models.onnxruntime], ids=lambda m: m.__name__)
def test_every_framework_difference_is_named_by_a_rule(model, params: QuantParams, alpha: float) -> None:  # type: ignore[no-untyped-def]
    codes = all_codes(params)
    claims = _claims(model(codes, alpha, params=params), alpha, params)
    assert all(c.category in {"requantization", "rounding"} and c.detail["contradicted"] == 0 for c in claims)


# --- the gate --------------------------------------------------------------------------------

def test_gate_allows_one_code_from_a_named_rule_for_framework_profiles_only() -> None:
    params, alpha = QuantParams(0.05, 0, 0.04, -28, "qint8"), 0.2
    codes, config = all_codes(params), default_config()
    tflite = models.tflite_builtin(codes, alpha, params=params)
    assert evaluate_codes(codes, tflite, alpha, params=params, backend="tflite", profile="builtin",
                          config=config).verdict == "warn"
    assert evaluate_codes(codes, tflite, alpha, params=params, backend="dump", config=config).verdict == "fail"
    wrong = _exact_with(params, alpha, z_out=params.z_out + 1)
    assert evaluate_codes(codes, wrong, alpha, params=params, backend="tflite", profile="builtin",
                          config=config).verdict == "fail"


def test_gate_fails_a_named_rule_beyond_one_code() -> None:
    params, alpha = QuantParams(0.5, 0, 0.125, 0, "qint8"), 0.2  # y/s_out = 4 (q - z): a tie moves by 2
    codes = all_codes(params)
    wrong = _exact_with(params, alpha, s_out=0.25)
    row = evaluate_codes(codes, wrong, alpha, params=params, backend="torch", profile="vector", config=default_config())
    assert row.verdict == "fail" and row.metrics.max_ulp > 1


def test_the_row_carries_its_setting_and_the_code_distance() -> None:
    params, alpha = QuantParams(0.05, 0, 0.04, -28, "qint8"), 0.2
    codes = all_codes(params)
    row = evaluate_codes(codes, models.torch_scalar(codes, alpha, params=params), alpha, params=params,
                         backend="torch", profile="tail", config=default_config())
    assert row.variant == setting_text(params) == "0.05:0:0.04:-28"
    assert "Greatest code difference: 1" in failure_message(row) and "Mismatched elements: " in failure_message(row)


# --- compare --quant ---------------------------------------------------------------------------

def _compare(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from conformance.cli import main

    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def dumps(tmp_path: Path) -> Path:
    codes = all_codes(TIES)
    made = {"good": exact_table(0.2, params=TIES), "away": _half_away(codes, 0.2, TIES),
            "zp": _exact_with(TIES, 0.2, z_out=TIES.z_out + 1), "scale": _exact_with(TIES, 0.2, s_out=0.6),
            "q16": _q16_multiplier(codes, 0.2, TIES)}
    np.save(tmp_path / "x.npy", codes)
    for name, y in made.items():
        np.save(tmp_path / f"{name}.npy", y)
    np.save(tmp_path / "float.npy", codes.astype(np.float32))
    return tmp_path


QUANT = setting_text(TIES)


def test_compare_quant_passes_a_correct_dump(dumps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _compare(capsys, "--x", str(dumps / "x.npy"), "--y", str(dumps / "good.npy"), "--alpha", "0.2",
                            "--quant", QUANT, "--json", str(dumps / "r.json"), "--junit", str(dumps / "j.xml"))
    assert code == 0 and "PASS" in out
    assert json.loads((dumps / "r.json").read_text())["rows"][0]["variant"] == QUANT
    assert (dumps / "j.xml").read_text().count("<testcase") == 1


@pytest.mark.parametrize(("dump", "category"), [("away", "rounding"), ("zp", "quant-params"),
                                                ("scale", "quant-params"), ("q16", None)])
def test_compare_quant_names_defect_dumps(dumps: Path, capsys: pytest.CaptureFixture[str], dump: str,
                                          category: str | None) -> None:
    code, _, _ = _compare(capsys, "--x", str(dumps / "x.npy"), "--y", str(dumps / f"{dump}.npy"), "--alpha", "0.2",
                          "--quant", QUANT, "--json", str(dumps / "r.json"))
    row = json.loads((dumps / "r.json").read_text())["rows"][0]
    assert code == 1 and row["verdict"] == "fail" and row["mismatches"] > 0
    if category is not None:
        assert [f["category"] for f in row["findings"]] == [category]


@pytest.mark.parametrize(("argv", "message"), [
    (("--quant", "0:3:1.0:-5"), "s_in must be a finite scale > 0"),
    (("--quant", "0.5:3:-1:-5"), "s_out must be a finite scale > 0"),
    (("--quant", "0.5:300:1.0:-5"), "z_in must be an integer code in -128..127"),
    (("--quant", "0.5:3:1.0"), "S_IN:Z_IN:S_OUT:Z_OUT"),
    (("--quant", QUANT, "--dtype", "bf16"), "drop --dtype"),
])
def test_compare_quant_bad_settings_exit_2_in_one_line(dumps: Path, capsys: pytest.CaptureFixture[str],
                                                       argv: tuple[str, ...], message: str) -> None:
    code, _, err = _compare(capsys, "--x", str(dumps / "x.npy"), "--y", str(dumps / "good.npy"), "--alpha", "0.2",
                            *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_compare_quant_refuses_a_float_array(dumps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _compare(capsys, "--x", str(dumps / "float.npy"), "--y", str(dumps / "good.npy"),
                            "--alpha", "0.2", "--quant", QUANT)
    assert code == 2 and "int8 or uint8" in err and len(err.strip().splitlines()) == 1


# --- the run's quantized rows --------------------------------------------------------------------

def test_the_run_plans_every_quantized_profile_its_backends_bring() -> None:
    from conformance.quantized_suite import SUITE_SETTINGS, plan_quantized, wanted

    specs, skipped = plan_quantized(("torch", "tensorflow", "onnxruntime"))
    profiles = {(s.backend, s.profile) for s in specs} | {tuple(line.split(" ")[0][:-1].split("[")) for line in skipped}
    assert profiles == {("torch", "vector"), ("torch", "tail"), ("tflite", "builtin"), ("tflite", "xnnpack"),
                        ("onnxruntime", "qlinear"), ("onnxruntime", "qdq")}
    assert len(specs) % SUITE_SETTINGS == 0 and plan_quantized(("golden",)) == ([], [])
    assert wanted(dtypes=None, directions=("forward",)) and not wanted(dtypes=("float16",), directions=("forward",))
    grid = quant_grid(SUITE_SETTINGS)
    assert {p.dtype for p, _ in grid} == {"qint8", "quint8"}
    assert any(models.xnnpack_multipliers(a, params=p) is None for p, a in grid)


def test_quantized_run_rows_have_no_unexplained_difference() -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    from conformance.quantized_suite import plan_quantized, run_quantized_row

    specs, _ = plan_quantized(("torch", "onnxruntime"))
    rows = [run_quantized_row(s, config=default_config()) for s in specs]
    assert any(r.findings for r in rows)
    assert all(f.category != "unexplained" and not f.gated for r in rows for f in r.findings)


def test_run_reports_quantized_rows_in_its_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnxruntime")
    from conformance.cli import main
    from conformance.render.export import SCHEMA

    jsonschema = pytest.importorskip("jsonschema")
    report = tmp_path / "r.json"
    code = main(["run", "--backend", "onnxruntime", "--alpha", "0.2", "--direction", "forward",
                 "--max-examples", "5", "--json", str(report), "--results-dir", str(tmp_path)])
    out = capsys.readouterr().out
    doc = json.loads(report.read_text())
    jsonschema.validate(doc, SCHEMA)
    quantized = [r for r in doc["rows"] if r["dtype"] in ("qint8", "quint8")]
    assert code == 0 and {r["profile"] for r in quantized} == {"qlinear", "qdq"}
    first = quantized[0]
    assert first["variant"] == setting_text(quant_grid(1)[0][0]) and first["elements"] == 256
    assert "onnxruntime[qlinear] " in out  # the console's label; the setting is the JSON row's variant
    assert "0.05:0:0.04:-28" not in out and "--details all shows each row's setting" in " ".join(out.split())


def test_a_config_policy_overrides_a_quantized_profile(tmp_path: Path) -> None:
    from conformance.config import load_config

    path = tmp_path / "gate.toml"
    path.write_text('[tool.conformance.policy]\n"tflite[builtin]" = []\n')
    config = load_config(str(path), pyproject=str(tmp_path / "none.toml"))
    params, alpha = QuantParams(0.05, 0, 0.04, -28, "qint8"), 0.2
    codes = all_codes(params)
    row = evaluate_codes(codes, models.tflite_builtin(codes, alpha, params=params), alpha, params=params,
                         backend="tflite", profile="builtin", config=config)
    assert row.verdict == "fail" and config.policy["tflite[xnnpack]"] == {"rounding", "requantization"}


def _codes(n: int, *, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, n).astype(np.int8)


@pytest.mark.parametrize(("field", "value"), [("z_out", 0), ("s_out", 0.05)])
def test_a_span_requantized_with_other_parameters_is_named_with_its_span(field: str, value) -> None:
    from dataclasses import replace

    from conformance.reference.quantized import leaky_relu_quantized

    params = QuantParams(0.05, 3, 0.04, -5)
    codes = _codes(8192)
    actual = leaky_relu_quantized(codes, 0.2, params=params)
    actual[2048:6144] = leaky_relu_quantized(codes, 0.2, params=replace(params, **{field: value}))[2048:6144]
    row = evaluate_codes(codes, actual, 0.2, params=params, backend="dump", config=default_config())
    assert {f.category: f.count for f in row.findings} == {"quant-params": row.metrics.mismatches}, \
        failure_message(row)
    region = row.findings[0].detail["region"]
    assert region["start"] <= 2048 and region["stop"] >= 6144 and region["stop"] - region["start"] < 4200


def test_scattered_code_flips_stay_unexplained_not_absorbed_by_a_span() -> None:
    from conformance.reference.quantized import leaky_relu_quantized

    params = QuantParams(0.05, 3, 0.04, -5)
    codes = _codes(8192, seed=3)
    actual = leaky_relu_quantized(codes, 0.2, params=params)
    at = np.random.default_rng(4).choice(actual.size, 40, replace=False)
    actual[at] = (actual[at].astype(np.int16) + 37).clip(-128, 127).astype(np.int8)  # far from any rule's code
    row = evaluate_codes(codes, actual, 0.2, params=params, backend="dump", config=default_config())
    assert {f.category for f in row.findings} == {"unexplained"}, failure_message(row)
