"""Triage of XLA:CPU's LeakyReLU (JAX, Keras on JAX) from its golden model, no framework needed:
DAZ/FTZ, the select x >= 0 and autodiff's branch sum fused into one multiply-add are all named,
with nothing ``unexplained``, and x == 0 stays ``grad-at-zero``."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.config import default_config
from conformance.judge.evaluate import evaluate
from conformance.records import BackendResult
from conformance.reference import golden
from conformance.reference.semantics import Semantics


def _inputs(dtype: str, n: int, *, seed: int, zeros: bool) -> tuple[np.ndarray, np.ndarray]:
    """Random bit patterns, a quarter of them subnormal, some x exactly ±0 (when ``zeros``)."""
    rng = np.random.default_rng(seed)
    uint = {"float32": np.uint32, "float64": np.uint64}[dtype]
    bits = rng.integers(0, np.iinfo(uint).max, n, dtype=uint, endpoint=True)
    tiny = rng.random(n) < 0.25
    mant = uint((1 << (23 if dtype == "float32" else 52)) - 1)
    sign = uint(1 << (31 if dtype == "float32" else 63))
    bits = np.where(tiny, bits & (mant | sign), bits)
    x, dy = bits.view(dtype), rng.permutation(bits).view(dtype)
    if zeros:
        x[: n // 20] = np.where(rng.random(n // 20) < 0.5, 0.0, -0.0)
    return x, dy


def _xla_backward(dtype: str) -> Semantics:
    return Semantics(slope_dtype=dtype, grad_rule="ge", grad_form="fma", daz=True, ftz=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.5])
@pytest.mark.parametrize("zeros", [True, False], ids=["with-zeros", "no-zeros"])
def test_xla_backward_is_named_with_nothing_unexplained(dtype: str, alpha: float, zeros: bool) -> None:
    x, dy = _inputs(dtype, 400, seed=int(alpha * 10) + zeros, zeros=zeros)
    dx = golden.backward(dy, x, alpha, semantics=_xla_backward(dtype))
    row = evaluate(x, alpha, BackendResult(dx), direction="backward", dy=dy, backend="jax",
                   config=default_config())
    found = {f.category: f for f in row.findings}
    assert "unexplained" not in found and "rounding" not in found, {c: f.summary for c, f in found.items()}
    assert "subnormal-flush" in found
    if zeros and alpha != 1.0:
        assert "grad-at-zero" in found


def test_the_fused_form_is_what_names_a_flushed_product_with_its_sign() -> None:
    """A negative x whose product a*dy is subnormal: the fused gradient gives -0, the plain sum +0;
    triage names the fused one subnormal-flush, not unexplained (ordinary elements alongside
    refute narrower explanations such as computing in float16)."""
    x = np.concatenate([np.full(64, -1.0, np.float32), np.linspace(-9.87, 9.87, 200, dtype=np.float32)])
    dy = np.concatenate([-np.linspace(1.2e-38, 3.9e-38, 64, dtype=np.float32),  # 0.3*dy subnormal
                         np.linspace(1.2345, 7.777, 200, dtype=np.float32)])
    dx = golden.backward(dy, x, 0.3, semantics=_xla_backward("float32"))
    assert np.signbit(dx[:64]).all() and (dx[:64] == 0).all()
    row = evaluate(x, 0.3, BackendResult(dx), direction="backward", dy=dy, backend="jax", config=default_config())
    named = {f.category: f.count for f in row.findings}
    assert set(named) == {"subnormal-flush", "alpha-precision"} and named["subnormal-flush"] >= 64, named
