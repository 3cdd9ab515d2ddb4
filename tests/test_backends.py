"""The framework backends against golden and its semantic variants (counts computed, never hard-coded).

Where a backend differs from exact golden, the differing elements are checked
against an independent model: plain numpy arithmetic in the backend's compute
dtype (``numpy_model``), not the golden code that the backends are compared with.
"""
from __future__ import annotations

import numpy as np
import pytest

from conformance.backends import get_backend
from conformance.dtypes import all_patterns, info, is_subnormal
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.helpers import differing


def scaled(v: np.ndarray, alpha: float, *, compute: str) -> np.ndarray:
    """``alpha*v`` with the slope and the product rounded to ``compute``, cast back to v's dtype (numpy only)."""
    ct = info(compute).dtype
    with np.errstate(all="ignore"):
        return (v.astype(ct) * ct.type(alpha)).astype(v.dtype)


def numpy_model(x: np.ndarray, alpha: float, *, compute: str, dy: np.ndarray | None = None) -> np.ndarray:
    """Forward ``x > 0 ? x : alpha*x``, or backward ``x > 0 ? dy : alpha*dy``, in ``compute`` arithmetic."""
    v = x if dy is None else dy
    with np.errstate(invalid="ignore"):
        return np.where(x > 0, v, scaled(v, alpha, compute=compute))


def reverse_dy(x: np.ndarray) -> np.ndarray:
    """A dy for backward: the same patterns, reversed (so dy and x differ elementwise)."""
    return np.ascontiguousarray(x[::-1])


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_torch_is_bit_identical_to_golden_at_alpha_0_2(dtype: str) -> None:
    torch_backend, x = get_backend("torch"), all_patterns(dtype)
    assert differing(torch_backend.forward(x, 0.2).value, golden.forward(x, 0.2)).size == 0
    dy = reverse_dy(x)
    dx = torch_backend.backward(dy, x, 0.2).value
    assert differing(dx, golden.backward(dy, x, 0.2)).size == 0


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_torch_follows_float32_opmath_where_it_differs_from_exact(dtype: str) -> None:
    x = all_patterns(dtype)
    y = get_backend("torch").forward(x, 0.01).value
    exact = golden.forward(x, 0.01)
    exact_diff = differing(y, exact)
    assert differing(y, golden.forward(x, 0.01, semantics=Semantics(opmath="float32"))).size == 0
    # the differences are exactly where float32 arithmetic (slope fp32(0.01), one fp32 rounding,
    # then a cast) rounds twice: an independent numpy model finds the same elements
    model = numpy_model(x, 0.01, compute="float32")
    assert np.array_equal(exact_diff, differing(model, exact))
    if dtype == "float16":
        assert exact_diff.size > 0  # double rounding through fp32(0.01) is real


def test_tensorflow_fp16_differences_are_all_the_fp16_slope() -> None:
    x = all_patterns("float16")
    y = get_backend("tensorflow").forward(x, 0.2).value
    exact = golden.forward(x, 0.2)
    diff = differing(y, exact)
    assert diff.size > 0
    # numpy's fp16 product with fp16(0.2) is an independent model of the same slope
    assert np.array_equal(diff, differing(numpy_model(x, 0.2, compute="float16"), exact))
    variant = golden.forward(x, 0.2, semantics=Semantics(slope_dtype="float16"))
    assert differing(y[diff], variant[diff]).size == 0
    assert differing(y, variant).size == 0


def test_tensorflow_bf16_alpha_1_differences_are_flushed_subnormals() -> None:
    x = all_patterns("bfloat16")
    y = get_backend("tensorflow").forward(x, 1.0).value
    diff = differing(y, golden.forward(x, 1.0))
    assert np.array_equal(diff, np.flatnonzero(is_subnormal(x)))  # alpha 1: only the flush changes bits
    assert differing(y, golden.forward(x, 1.0, semantics=Semantics(daz=True, ftz=True))).size == 0


def test_tensorflow_backward_uses_the_rounded_slope() -> None:
    x = all_patterns("float16")
    dy = reverse_dy(x)
    dx = get_backend("tensorflow").backward(dy, x, 0.2).value
    exact = golden.backward(dy, x, 0.2)
    model = numpy_model(x, 0.2, compute="float16", dy=dy)
    assert differing(dx, exact).size > 0
    assert np.array_equal(differing(dx, exact), differing(model, exact))
    assert differing(dx, golden.backward(dy, x, 0.2, semantics=Semantics(slope_dtype="float16"))).size == 0


@pytest.mark.parametrize("name", ("torch", "tensorflow", "golden"))
def test_backends_declare_their_pairs(name: str) -> None:
    backend = get_backend(name)
    assert backend.supports("float16", "float16", "forward")
    assert not backend.supports("float32", "float16", "forward") or name == "golden"
    assert not backend.supports("float64", "float16", "backward")


def random_bits(dtype: str, n: int, *, seed: int) -> np.ndarray:
    """``n`` random float32 bit patterns, widened to ``dtype`` (exact for float64)."""
    bits = np.random.default_rng(seed).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    return bits.view(np.float32).astype(dtype)


TF_MODEL_DTYPES = ("float16", "bfloat16", "float32", "float64")


@pytest.mark.parametrize("dtype", TF_MODEL_DTYPES)
@pytest.mark.parametrize("alpha", (0.01, 0.3, -0.7), ids=lambda a: f"alpha={a:g}")
def test_tensorflow_is_fully_modelled_by_golden_variants(dtype: str, alpha: float) -> None:
    """TF = slope stored as a float32 attribute then converted to T; FTZ/DAZ where T computes in float32."""
    x = all_patterns(dtype) if dtype in ("float16", "bfloat16") else random_bits(dtype, 200_000, seed=5)
    dy = reverse_dy(x)
    flush = dtype in ("bfloat16", "float32")
    model = Semantics(slope_dtype=("float32", dtype), daz=flush, ftz=flush)
    tf_backend = get_backend("tensorflow")
    assert differing(tf_backend.forward(x, alpha).value, golden.forward(x, alpha, semantics=model)).size == 0
    dx = tf_backend.backward(dy, x, alpha).value
    assert differing(dx, golden.backward(dy, x, alpha, semantics=model)).size == 0
