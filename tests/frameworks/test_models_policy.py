"""Each framework model's behaviours pass its backend's declared policy, but for its known bugs.

A model (``frameworks/models.py``) reproduces a framework's bits, bugs included; the backend's
``allowed`` set says which of them a user accepts.  Golden computed under the model, judged as
that backend's row under the built-in policy, must not fail, except where the model computes
a known bug the policy fails on purpose.
"""
from __future__ import annotations

import numpy as np
import pytest

from conformance.config import default_config
from conformance.dtypes import info
from conformance.frameworks.models import MODELS
from conformance.judge.evaluate import evaluate
from conformance.records import BackendResult
from conformance.reference import golden as ref
from tests.helpers import bare_backend

#: model key -> the category the policy fails on purpose: Keras's numpy backend computes
#: max(x, a*x), which is min's job for alpha > 1.
KNOWN_BUGS = {"keras[numpy]": "formulation"}
ALPHAS = (0.01, 0.2, 1.5)


def _inputs(dtype: str) -> np.ndarray:
    rec = info(dtype)
    if rec.bits == 16:
        return np.arange(1 << 16, dtype=np.uint16).view(rec.dtype)
    return np.random.default_rng(0).integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32).view(rec.dtype)


def _rows(key: str):
    backend, _, profile = key.partition("[")
    profile = profile.rstrip("]") or None
    declared = bare_backend(backend, profile=profile, variant="ops") if backend == "keras" else bare_backend(backend)
    config = default_config()
    for dtype in ("float16", "bfloat16", "float32"):
        x = _inputs(dtype)
        for direction in ("forward", "backward"):
            if not declared.supports(dtype, dtype, direction):
                continue
            dy = np.full_like(x, 1.5) if direction == "backward" else None
            for alpha in ALPHAS:
                actual = ref.compute(direction, x, alpha, dy=dy, semantics=MODELS[key](dtype, direction))
                yield evaluate(x, alpha, BackendResult(actual), direction=direction, dy=dy, backend=backend,
                               profile=profile, config=config)


@pytest.mark.parametrize("key", sorted(MODELS))
def test_a_models_behaviours_pass_its_policy_but_its_known_bugs(key: str) -> None:
    failing = {f.category for row in _rows(key) for f in row.findings if f.gated}
    assert failing == ({KNOWN_BUGS[key]} if key in KNOWN_BUGS else set())


def test_a_known_bug_is_a_model_and_fails_only_at_its_slopes() -> None:
    assert set(KNOWN_BUGS) <= set(MODELS)
    rows = [r for r in _rows("keras[numpy]") if r.verdict == "fail"]
    assert rows and {r.alpha for r in rows} == {1.5}
