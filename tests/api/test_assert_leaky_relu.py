"""``conformance.testing.assert_leaky_relu``: arrays already in memory, judged and named."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.errors import UsageError
from conformance.reference import golden as ref
from conformance.testing import assert_leaky_relu, judge_leaky_relu

X16 = np.linspace(-4, 4, 1001).astype(np.float16)


def _counts(row) -> dict[str, int]:
    return {f.category: f.count for f in row.findings}


def test_the_exact_output_passes_with_no_finding() -> None:
    assert_leaky_relu(ref.forward(X16, 0.2), X16, alpha=0.2)
    assert judge_leaky_relu(ref.forward(X16, 0.2), X16, alpha=0.2).findings == ()


def test_another_slope_fails_naming_the_cause_and_its_count() -> None:
    wrong = ref.forward(X16, 0.01)
    differing = int(np.count_nonzero(wrong.view(np.uint16) != ref.forward(X16, 0.2).view(np.uint16)))
    with pytest.raises(AssertionError) as caught:
        assert_leaky_relu(wrong, X16, alpha=0.2, msg="discriminator layer 3")
    text = str(caught.value)
    assert text.startswith("discriminator layer 3\n\nMismatched elements: ")
    assert f"alpha-mismatch ×{differing}" in text or f"alpha-mismatch x{differing}" in text
    assert _counts(judge_leaky_relu(wrong, X16, alpha=0.2)) == {"alpha-mismatch": differing}


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_arrays_in_the_other_byte_order_are_judged_by_their_values(dtype: str) -> None:
    x = X16.astype(dtype)
    wrong = ref.forward(x, 0.01)
    swapped = [v.astype(v.dtype.newbyteorder()) for v in (wrong, x)]
    assert _counts(judge_leaky_relu(*swapped, alpha=0.2)) == _counts(judge_leaky_relu(wrong, x, alpha=0.2))
    assert _counts(judge_leaky_relu(*swapped, alpha=0.2))["alpha-mismatch"] > 0
    assert_leaky_relu(ref.forward(x, 0.2).astype(x.dtype.newbyteorder()), swapped[1], alpha=0.2)


def test_one_ulp_passes_by_default_and_fails_when_strict_or_at_zero_tolerance() -> None:
    exact = ref.forward(X16, 0.2)
    off = exact.copy()
    off.view(np.uint16)[700] += 1  # a positive output one ULP up
    assert_leaky_relu(off, X16, alpha=0.2)
    with pytest.raises(AssertionError):
        assert_leaky_relu(off, X16, alpha=0.2, strict=True)
    with pytest.raises(AssertionError):
        assert_leaky_relu(off, X16, alpha=0.2, rtol=0.0, atol=0.0, max_ulp=0)


def test_an_allowed_cause_passes() -> None:
    wrong = ref.forward(X16, 0.01)
    assert_leaky_relu(wrong, X16, alpha=0.2, allow=["alpha-mismatch"])
    assert judge_leaky_relu(wrong, X16, alpha=0.2, allow=["alpha-mismatch"]).verdict == "warn"


def test_a_gradient_is_judged_with_dy() -> None:
    x = np.linspace(-2, 2, 257).astype(np.float32)
    dy = np.full_like(x, 1.5)
    assert_leaky_relu(ref.backward(dy, x, 0.2), x, alpha=0.2, dy=dy)
    with pytest.raises(AssertionError, match="Mismatched elements"):
        assert_leaky_relu(ref.backward(dy, x, 0.3), x, alpha=0.2, dy=dy)


def test_a_narrower_output_dtype_is_judged_as_such() -> None:
    x = np.linspace(-3, 3, 301).astype(np.float32)
    assert_leaky_relu(ref.forward(x, 0.2, out_dtype="float16"), x, alpha=0.2)


def test_torch_tensors_bfloat16_included() -> None:
    torch = pytest.importorskip("torch")
    x = torch.linspace(-3, 3, 101, dtype=torch.bfloat16)
    assert_leaky_relu(torch.nn.functional.leaky_relu(x, 0.2), x, alpha=0.2)
    with pytest.raises(AssertionError, match="alpha-mismatch"):
        assert_leaky_relu(torch.nn.functional.leaky_relu(x), x, alpha=0.2)


def test_jax_arrays() -> None:
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.linspace(-3, 3, 101, dtype=jnp.float32)
    assert_leaky_relu(jnp.where(x > 0, x, jnp.float32(0.2) * x), x, alpha=jnp.float32(0.2).item())


def test_tensorflow_tensors() -> None:
    tf = pytest.importorskip("tensorflow")
    t = tf.linspace(-3.0, 3.0, 101)
    with pytest.raises(AssertionError, match="alpha-mismatch"):
        assert_leaky_relu(tf.nn.leaky_relu(t), t, alpha=0.01)  # TF's default slope is 0.2


@pytest.mark.parametrize(("call", "says"), [
    (lambda: assert_leaky_relu(X16[:5], X16, alpha=0.2), "shapes differ"),
    (lambda: assert_leaky_relu(np.arange(4), np.arange(4), alpha=0.2), "pass a float16, bfloat16"),
    (lambda: assert_leaky_relu(X16, X16, alpha=0.2, rtol=1e-3), "rtol and atol together"),
    (lambda: assert_leaky_relu(X16, X16, alpha=0.2, max_ulp=-1), "max_ulp must be an integer"),
    (lambda: assert_leaky_relu(X16, X16, alpha=0.2, allow=["no-such"]), "unknown category"),
    (lambda: assert_leaky_relu(X16, X16, alpha=float("nan")), "alpha"),
], ids=["shape", "integers", "rtol-alone", "max-ulp", "category", "nan-alpha"])
def test_arguments_that_cannot_be_judged_are_usage_errors(call, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        call()


def test_the_package_offers_it() -> None:
    import conformance

    assert conformance.assert_leaky_relu is assert_leaky_relu
