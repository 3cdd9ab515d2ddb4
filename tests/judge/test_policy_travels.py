"""The gate travels with the package: each backend declares its allowed behaviours, so a run gives
the same verdict in any directory and says which configuration judged it; ``--strict`` and
``--allow`` on top."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from conformance.api import check
from conformance.backends import builtin_policy, names
from conformance.config import default_config, load_config
from tests.helpers import assert_usage_error, run_cli

# The verdicts and the configuration that judged them, not the inputs' size: the suite's small batches
# (every edge value, subnormals included, and drawn examples).
pytestmark = pytest.mark.usefixtures("small_batches")

REPO = Path(__file__).resolve().parents[2]
BUILTIN_LINE = "no [tool.conformance] found; built-in policy"
# jax flushes float32 subnormals (XLA:CPU DAZ/FTZ): a documented behaviour, so the row warns.
JAX = ["run", "--backend", "jax", "--dtype", "fp32", "--direction", "forward", "--alpha", "0.2",
       "--max-examples", "5"]
# torch rounds fp16 twice (float32 opmath, then fp16): 1-ULP differences within tolerance.
TORCH = ["run", "--backend", "torch", "--dtype", "fp16", "--direction", "forward", "--alpha", "0.1,0.3",
         "--max-examples", "5"]


def _reports(tmp_path: Path, name: str) -> list[str]:
    return ["--json", str(tmp_path / f"{name}.json"), "--junit", str(tmp_path / f"{name}.xml"),
            "--results-dir", str(tmp_path / "results")]


def _config_property(xml: Path) -> str:
    suite = ET.parse(xml).getroot().find("testsuite")
    return {p.get("name"): p.get("value") for p in suite.find("properties")}["config"]


def test_every_framework_with_known_behaviours_declares_them() -> None:
    policy = builtin_policy()
    assert {"alpha-precision", "subnormal-flush"} <= policy["tensorflow"]
    assert "grad-at-zero" in policy["jax"] and "grad-at-zero" not in policy["torch"]
    assert "formulation" not in policy["keras[numpy]"] and policy["keras[torch]"] == frozenset()
    assert policy["cann[ascend950]"] == policy["golden"] == policy["dump"] == frozenset()
    assert policy["cann"] == frozenset({"alpha-precision"})  # the 910B TBE kernel's fp16 slope
    assert set(names()) <= set(policy)


def test_the_repository_has_no_policy_of_its_own() -> None:
    """Nothing repository-specific: the repository judges with the package's built-in policy."""
    config = load_config(pyproject=str(REPO / "pyproject.toml"))
    assert config.sources == () and config.policy == default_config().policy


def test_a_run_gives_the_same_verdict_in_an_empty_directory_and_in_the_repository(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    away = run_cli([*JAX, *_reports(tmp_path, "away")], capsys, cwd=empty)
    home = run_cli([*JAX, *_reports(tmp_path, "home")], capsys, cwd=REPO)
    for result, name in ((away, "away"), (home, "home")):
        doc = json.loads((tmp_path / f"{name}.json").read_text())
        assert result.code == 0 and result.err.splitlines()[-1] == BUILTIN_LINE, result.text
        assert BUILTIN_LINE not in result.out  # stdout is the report
        assert result.out.splitlines()[-1].endswith("0 failed: PASS")
        assert doc["verdict"] == "pass" and doc["config"]["sources"] == []
        assert {r["verdict"] for r in doc["rows"]} == {"warn"}
        assert _config_property(tmp_path / f"{name}.xml") == BUILTIN_LINE


def test_a_project_config_overrides_the_declared_policy_and_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.conformance.policy]\njax = []\n")
    result = run_cli([*JAX, *_reports(tmp_path, "own")], capsys, cwd=tmp_path)
    doc = json.loads((tmp_path / "own.json").read_text())
    assert result.code == 1 and result.err.splitlines()[-1] == "config: pyproject.toml", result.text
    assert doc["verdict"] == "fail" and doc["config"]["sources"] == ["pyproject.toml"]
    assert _config_property(tmp_path / "own.xml") == "config: pyproject.toml"
    allowed = run_cli([*JAX, "--allow", "subnormal-flush", "--results-dir", str(tmp_path)], capsys, cwd=tmp_path)
    assert allowed.code == 0 and "--allow subnormal-flush" in allowed.err.splitlines()[-1], allowed.text


def test_strict_fails_the_1_ulp_rows_the_default_gate_warns(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    default = run_cli([*TORCH, *_reports(tmp_path, "default")], capsys, cwd=tmp_path)
    strict = run_cli([*TORCH, "--strict", *_reports(tmp_path, "strict")], capsys, cwd=tmp_path)
    warned = json.loads((tmp_path / "default.json").read_text())["rows"]
    judged = json.loads((tmp_path / "strict.json").read_text())
    assert default.code == 0 and {r["verdict"] for r in warned} == {"warn"}, default.text
    assert all(f["category"] == "rounding" and f["violations"] == 0 for r in warned for f in r["findings"])
    assert strict.code == 1 and judged["verdict"] == "fail" and judged["config"]["strict"] is True
    assert [r["verdict"] for r in judged["rows"]] == ["fail"] * len(warned)
    assert "--strict" in strict.err.splitlines()[-1]  # the policy line, once the reports are written


def test_strict_and_allow_are_options_of_check() -> None:
    def truncating(x, alpha):  # fp16 in float32 opmath, one rounding short of exact
        with np.errstate(invalid="ignore", over="ignore"):
            return np.where(x > 0, x, (x.astype(np.float32) * np.float32(alpha)).astype(x.dtype))

    opts = dict(dtypes=["float16"], alphas=[0.1], directions=["forward"], max_examples=5)
    assert check(truncating, **opts).verdict == "pass"
    assert check(truncating, strict=True, **opts).verdict == "fail"
    assert check(truncating, strict=True, allow=["rounding"], **opts).verdict == "fail"  # strict wins


@pytest.mark.parametrize("argv", [["--allow", "no-such-thing"], ["--allow", "rounding,bogus"]],
                         ids=["unknown", "one-of-two-unknown"])
def test_an_unknown_allow_category_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    assert_usage_error(run_cli([*JAX, *argv], capsys, cwd=tmp_path), mentions="unknown category")
