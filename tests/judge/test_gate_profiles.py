"""Gate policy per backend profile: ``keras[numpy]`` overrides ``keras`` for that profile only."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance.config import load_config
from conformance.dtypes import all_patterns
from conformance.errors import UsageError
from conformance.judge.evaluate import evaluate
from conformance.records import BackendResult
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics

REPO = Path(__file__).resolve().parents[2]
POLICY = '[policy]\nkeras = ["alpha-precision", "formulation"]\n"keras[numpy]" = ["alpha-precision"]\n'


def _config(tmp_path: Path, text: str = POLICY):
    path = tmp_path / "gate.toml"
    path.write_text(text)
    return load_config(str(path), pyproject=str(tmp_path / "none.toml"))


def test_a_profile_entry_overrides_the_backend_entry_for_that_profile_only(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert config.allows("keras", "formulation", profile="jax")
    assert config.allows("keras", "formulation")
    assert not config.allows("keras", "formulation", profile="numpy")
    assert config.allows("keras", "alpha-precision", profile="numpy")


def test_keras_numpy_max_formulation_fails_only_its_own_profile(tmp_path: Path) -> None:
    """max(x, a*x) at alpha 1.5 (Keras's numpy backend) fails keras[numpy], not keras[jax]."""
    config, x = _config(tmp_path), all_patterns("float16")
    y = BackendResult(ref.forward(x, 1.5, semantics=Semantics(slope_dtype="float16", formulation="max")))
    rows = {p: evaluate(x, 1.5, y, direction="forward", backend="keras", profile=p, config=config)
            for p in ("numpy", "jax")}
    assert "formulation" in {f.category for f in rows["numpy"].findings}
    assert rows["numpy"].verdict == "fail" and rows["jax"].verdict == "warn"


def test_the_repository_policy_fails_keras_numpy_formulation() -> None:
    config = load_config(pyproject=str(REPO / "pyproject.toml"))
    assert not config.allows("keras", "formulation", profile="numpy")
    assert config.allows("jax", "grad-at-zero") and not config.allows("torch", "grad-at-zero")


@pytest.mark.parametrize("text, says", [
    ('[policy]\n"keras[cobol]" = ["rounding"]\n', r"policy.keras\[cobol\]: keras has no profile 'cobol'"),
    ('[policy]\n"torch[numpy]" = ["rounding"]\n', r"torch has no profile 'numpy'; choose from none"),
    ('[policy]\n"mxnet[gpu]" = ["rounding"]\n', r"policy.mxnet\[gpu\]: unknown backend"),
], ids=["unknown-profile", "backend-without-profiles", "unknown-backend"])
def test_a_bad_profile_key_is_a_usage_error(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        _config(tmp_path, text)


def test_profile_keys_leave_other_dtypes_alone(tmp_path: Path) -> None:
    """A float32 row of keras[numpy] at alpha 0.2: max(x, a*x) equals the select; nothing fails."""
    config = _config(tmp_path)
    x = np.linspace(-4, 4, 101, dtype=np.float32)
    y = BackendResult(ref.forward(x, 0.2, semantics=Semantics(slope_dtype="float32", formulation="max")))
    assert evaluate(x, 0.2, y, direction="forward", backend="keras", profile="numpy",
                    config=config).verdict in ("pass", "warn")
