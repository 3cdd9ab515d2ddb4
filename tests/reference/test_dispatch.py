"""The golden's entry points: shapes and output dtypes kept, bad calls refused with the fix,
the numpy path taken when the compiled paths are off, and no floating-point warnings from
the infinities and NaNs it computes on purpose.  Values against ``tests/exact_oracle.py``."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.exact_oracle import exact_backward, exact_leaky_relu
from tests.helpers import assert_same_bits

X = np.array([[-1.5, 2.0, -0.0], [0.1, -3.3, np.inf]], dtype=np.float32)
DY = np.array([[1e5, -0.1, 7.0], [-2.5, 3.0, -1e-3]], dtype=np.float32)


def test_a_two_dimensional_input_keeps_its_shape() -> None:
    assert_same_bits(golden.forward(X, 0.2), exact_leaky_relu(X, 0.2, out_dtype="float32"))
    assert_same_bits(golden.backward(DY, X, 0.2), exact_backward(DY, X, 0.2, out_dtype="float32"))


def test_backward_rounds_to_the_output_dtype_asked_for() -> None:
    got = golden.backward(DY, X, 0.2, out_dtype="float16")
    assert got.dtype == np.float16
    assert_same_bits(got, exact_backward(DY, X, 0.2, out_dtype="float16"))


def test_backward_without_dy_says_it_needs_dy() -> None:
    with pytest.raises(ValueError, match="backward needs dy"):
        golden.backward(None, X, 0.2)
    with pytest.raises(ValueError, match="backward needs dy"):
        golden.reference_compute("backward", X, 0.2)


@pytest.mark.parametrize("dy", [DY[0], DY.astype(np.float64)], ids=["shape", "dtype"])
def test_backward_refuses_a_dy_unlike_x(dy: np.ndarray) -> None:
    with pytest.raises(ValueError, match="dy and x must match"):
        golden.backward(dy, X, 0.2)


def test_with_the_compiled_paths_off_the_numpy_path_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = pytest.importorskip("conformance.reference.compiled", reason="numba (the fast extra) is not installed")

    def refuse(*args, **kwargs):
        raise AssertionError("the compiled path ran with CONFORMANCE_COMPILED=0")

    monkeypatch.setenv("CONFORMANCE_COMPILED", "0")
    monkeypatch.setattr(compiled, "compute", refuse)
    assert_same_bits(golden.forward(X, 0.2), exact_leaky_relu(X, 0.2, out_dtype="float32"))
    assert_same_bits(golden.backward(DY, X, 0.2), exact_backward(DY, X, 0.2, out_dtype="float32"))


@pytest.mark.parametrize("semantics", [Semantics(), Semantics(formulation="mask-multiply"),
                                       Semantics(formulation="maxmin"), Semantics(rounding="rtz")], ids=str)
def test_infinities_nans_and_overflow_raise_no_warning(semantics: Semantics) -> None:
    x = np.array([3e38, -3e38, np.inf, -np.inf, np.nan, -1e-45], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for alpha in (0.0, 2.0):
            golden.forward(x, alpha, out_dtype="float16", semantics=semantics)
            golden.backward(x, x[::-1].copy(), alpha, out_dtype="float16", semantics=semantics)
