"""Gate: configuration loading and the pass/warn/fail rule."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance.config import default_config, load_config
from conformance.dtypes import all_patterns
from conformance.errors import UsageError
from conformance.judge.evaluate import evaluate
from conformance.judge.gate import GateConfig
from conformance.records import BackendResult
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics

REPO = Path(__file__).resolve().parents[2]
F16 = all_patterns("float16")


def test_defaults_are_torch_testing_tolerances(tmp_path: Path) -> None:
    config = load_config(pyproject=str(tmp_path / "none.toml"))
    assert config.tolerances["float16"] == (1e-3, 1e-5)
    assert config.tolerances["bfloat16"] == (1.6e-2, 1e-5)
    assert config.tolerances["float32"] == (1.3e-6, 1e-5)
    assert config.tolerances["float64"] == (1e-7, 1e-7)
    assert config.max_ulp == 1 and not config.strict_zeros
    assert config.allows("tensorflow", "alpha-precision") and config.allows("tensorflow", "subnormal-flush")
    assert not config.allows("torch", "alpha-precision")


def test_repository_pyproject_table_is_read() -> None:
    config = load_config(pyproject=str(REPO / "pyproject.toml"))
    assert config.policy["cann"] == frozenset({"alpha-precision"}) and "dump" in config.policy  # the 910B fp16 slope


@pytest.mark.parametrize("text", [
    "max_ulp = 3\n[policy]\ntorch = [\"rounding\"]\n",
    "[tool.conformance]\nmax_ulp = 3\n[tool.conformance.policy]\ntorch = [\"rounding\"]\n",
], ids=["top-level", "tool-table"])
def test_config_file_overrides(tmp_path: Path, text: str) -> None:
    path = tmp_path / "gate.toml"
    path.write_text(text)
    config = load_config(str(path), pyproject=str(REPO / "pyproject.toml"))
    assert config.max_ulp == 3 and config.allows("torch", "rounding")


@pytest.mark.parametrize("text, says", [
    ("max_ulp = -1\n", "max_ulp must be an integer >= 0"),
    ("max_ulp = [\n", "is not valid TOML"),
    ("colour = 'red'\n", r"unknown keys \['colour'\]"),
    ("[policy]\ntorch = ['no-such-category']\n", r"unknown categories \['no-such-category'\]"),
    ("[tolerances]\nfloat16 = { rtol = 'big' }\n", "tolerances.float16.rtol must be a finite number"),
    ("[tolerances]\nint8 = { rtol = 1.0 }\n", "tolerances.int8: use a dtype of"),
    ("[policy]\nmxnet = ['rounding']\n", "policy.mxnet: unknown backend"),
    ("[policy]\ntorch = 'rounding'\n", "policy.torch must be a list of category names"),
], ids=["negative-ulp", "bad-toml", "unknown-key", "unknown-category", "rtol-not-number", "bad-dtype",
        "unknown-backend", "policy-not-a-list"])
def test_bad_config_is_a_usage_error(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "gate.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=says):
        load_config(str(path), pyproject=str(tmp_path / "none.toml"))


def test_missing_config_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        load_config(str(tmp_path / "missing.toml"))


def _verdict(actual: np.ndarray, *, backend: str, config: GateConfig = default_config()) -> str:
    return evaluate(F16, 0.2, BackendResult(actual), direction="forward", backend=backend,
                    config=config).verdict


def test_policy_turns_an_allowed_category_into_a_warning() -> None:
    flushed = ref.forward(F16, 0.2, semantics=Semantics(daz=True, ftz=True))  # violates max ULP 1
    assert _verdict(flushed, backend="tensorflow") == "warn"
    assert _verdict(flushed, backend="torch") == "fail"


def test_clean_row_passes_and_rounding_within_tolerance_warns() -> None:
    assert _verdict(ref.forward(F16, 0.2), backend="cann") == "pass"
    x = all_patterns("float16")
    torch_like = ref.forward(x, 0.01, semantics=Semantics(opmath="float32"))
    row = evaluate(x, 0.01, BackendResult(torch_like), direction="forward", backend="torch",
                   config=default_config())
    assert row.verdict == "warn" and all(f.category == "rounding" for f in row.findings)


def test_max_ulp_zero_makes_rounding_fail() -> None:
    torch_like = ref.forward(F16, 0.01, semantics=Semantics(opmath="float32"))
    row = evaluate(F16, 0.01, BackendResult(torch_like), direction="forward", backend="torch",
                   config=GateConfig(max_ulp=0))
    assert row.verdict == "fail"


def test_a_row_fails_on_any_gated_finding_warns_on_any_other_and_passes_on_none() -> None:
    from conformance.judge.gate import verdict

    assert verdict([]) == "pass"
    assert verdict([False]) == verdict([False, False]) == "warn"
    assert verdict([True]) == verdict([False, True]) == verdict([True, False]) == "fail"


def test_a_finding_is_gated_by_one_violation_unless_allowed_and_always_when_strict() -> None:
    from conformance.judge.gate import finding_gated

    config = GateConfig(policy={"tensorflow": frozenset({"alpha-precision"})})
    gated = lambda category, n, backend="torch", c=config: finding_gated(  # noqa: E731
        category, violations=n, backend=backend, config=c)
    assert gated("alpha-mismatch", 1) and gated("alpha-mismatch", 10**6)
    assert not gated("alpha-mismatch", 0)
    assert not gated("alpha-precision", 5, backend="tensorflow") and gated("alpha-precision", 5)
    strict = GateConfig(strict=True, policy=config.policy)
    assert gated("rounding", 0, c=strict) and gated("alpha-precision", 5, backend="tensorflow", c=strict)


def test_one_element_outside_tolerance_fails_its_row() -> None:
    actual = ref.forward(F16, 0.2)
    wrong = actual.copy()
    positive = int(np.flatnonzero(np.isfinite(F16) & (F16 > 1))[0])
    wrong[positive] = -wrong[positive]
    assert _verdict(wrong, backend="torch") == "fail"
    assert _verdict(actual, backend="torch") == "pass"
