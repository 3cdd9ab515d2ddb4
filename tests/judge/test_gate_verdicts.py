"""The gate's own rules, each stated by its docstring: the report's overall verdict, the policy
keys of a backend's profiles, ``--strict`` over a policy, and zero-sign strictness reaching the
comparison."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.dtypes import all_patterns
from conformance.judge.evaluate import evaluate
from conformance.judge.gate import GateConfig, overall, policy_key, split_key
from conformance.records import BackendResult
from conformance.reference import golden as ref

F16 = all_patterns("float16")


@pytest.mark.parametrize("verdicts, expected", [
    ([], "pass"), (["pass"], "pass"), (["warn"], "pass"), (["pass", "warn"], "pass"),
    (["fail"], "fail"), (["pass", "fail"], "fail"), (["warn", "fail", "pass"], "fail"),
])
def test_the_report_fails_when_any_row_fails_and_passes_otherwise(verdicts: list[str], expected: str) -> None:
    assert overall(iter(verdicts)) == expected


@pytest.mark.parametrize("backend, profile, key", [
    ("keras", "numpy", "keras[numpy]"), ("torch", None, "torch"), ("cann", "", "cann"),
    ("cann", "ascend910b3", "cann[ascend910b3]"),
])
def test_a_policy_key_names_the_profile_only_when_there_is_one(backend: str, profile, key: str) -> None:
    assert policy_key(backend, profile) == key


@pytest.mark.parametrize("key, parts", [
    ("keras[numpy]", ("keras", "numpy")), ("torch", ("torch", None)),
    ("odd]", ("odd]", None)), ("odd[", ("odd[", None)),
])
def test_split_key_reads_a_key_back(key: str, parts: tuple) -> None:
    assert split_key(key) == parts


@pytest.mark.parametrize("profile", ["numpy", "ascend910b1", "tflite[xnnpack]"])
def test_split_key_inverts_policy_key(profile: str) -> None:
    assert split_key(policy_key("keras", profile)) == ("keras", profile)


def test_strict_allows_nothing_the_policy_or_allow_would() -> None:
    config = GateConfig(policy={"tensorflow": frozenset({"subnormal-flush"})}, allowed=frozenset({"rounding"}))
    assert config.allows("tensorflow", "subnormal-flush") and config.allows("torch", "rounding")
    strict = GateConfig(policy=config.policy, allowed=config.allowed, strict=True)
    assert not strict.allows("tensorflow", "subnormal-flush") and not strict.allows("torch", "rounding")


def test_a_profile_entry_overrides_the_backends_own() -> None:
    config = GateConfig(policy={"keras": frozenset(), "keras[numpy]": frozenset({"formulation"})})
    assert config.allows("keras", "formulation", profile="numpy")
    assert not config.allows("keras", "formulation", profile="jax") and not config.allows("keras", "formulation")


def test_each_dtype_gets_its_tolerance_with_the_configs_ulp_and_zero_strictness() -> None:
    config = GateConfig(max_ulp=3, strict_zeros=True)
    tol = config.tolerance("bfloat16")
    assert (tol.rtol, tol.atol, tol.max_ulp, tol.strict_zeros) == (1.6e-2, 1e-5, 3, True)
    assert GateConfig().tolerance("float32").strict_zeros is False


def test_strict_zeros_fails_a_row_whose_only_difference_is_a_zeros_sign() -> None:
    golden = ref.forward(F16, 0.2)
    flipped = golden.copy()
    zero = int(np.flatnonzero(golden == 0)[0])
    flipped[zero] = -flipped[zero]

    def judged(config: GateConfig) -> str:
        return evaluate(F16, 0.2, BackendResult(flipped), direction="forward", backend="torch", config=config).verdict

    assert judged(GateConfig()) != "fail"
    assert judged(GateConfig(strict_zeros=True)) == "fail"
