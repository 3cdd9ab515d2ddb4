"""A user's own LeakyReLU kernels, checked by the conformance harness.

- ``naive_leaky_relu`` multiplies by the slope rounded to x's dtype, as many
  hand-written kernels do: in float16 and bfloat16 that is the
  ``alpha-precision`` defect the harness names.
- ``max_leaky_relu`` computes ``max(x, alpha*x)``: wrong for alpha > 1
  (x = 2 with alpha 1.5 gives 3).
- ``exact_leaky_relu`` rounds the exact product ``x * alpha`` once: it forms
  the float64 product with its exact error (Dekker's two-product), rounds it to
  odd, then casts.  Round-to-odd in 53 bits followed by one cast to float16 or
  float32 is correctly rounded.  (bfloat16 is left out: numpy casts float64 to
  bfloat16 through float32, which rounds twice.)

Run them three ways (from the repository root):

    conformance run --backend examples/my_kernel.py:backend --dtype fp16 --alpha 0.1
    conformance run --backend examples/my_kernel.py:naive_leaky_relu --dtype fp16 --alpha 0.1

    import conformance
    conformance.check(exact_leaky_relu, backward=exact_leaky_relu_backward, dtypes=["float16"], alphas=[0.1])

and in pytest with the ``leakyrelu_conformance`` fixture (see test_my_kernel.py).
"""
from __future__ import annotations

import numpy as np

from conformance.adapters import KernelBackend, from_numpy

EXACT_DTYPES = ("float16", "float32", "float64")


def naive_leaky_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    """``x > 0 ? x : x * T(alpha)``: the slope is rounded to x's dtype first (in fp16/bf16 that is
    ``alpha-precision``, within 1 ULP: a warning)."""
    with np.errstate(all="ignore"):
        return np.where(x > 0, x, x * x.dtype.type(alpha))


def naive_leaky_relu_backward(dy: np.ndarray, x: np.ndarray, alpha: float) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(x > 0, dy, dy * dy.dtype.type(alpha))


def max_leaky_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    """``max(x, alpha * x)``: a popular shortcut that is right only for 0 <= alpha <= 1."""
    with np.errstate(all="ignore"):
        return np.maximum(x, (x.astype(np.float64) * alpha).astype(x.dtype))


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp's split of float64 values into two 26-bit halves."""
    c = 134217729.0 * a  # 2**27 + 1
    hi = c - (c - a)
    return hi, a - hi


def _times_alpha(v: np.ndarray, alpha: float) -> np.ndarray:
    """``v * alpha`` rounded once to v's dtype (float16, float32: via round-to-odd float64)."""
    if v.dtype == np.float64:
        return v * np.float64(alpha)
    with np.errstate(all="ignore"):
        a, b = v.astype(np.float64), np.float64(alpha)
        p = a * b
        (ah, al), (bh, bl) = _split(a), _split(np.full_like(a, b))
        err = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # p + err == a * b exactly
        even = (p.view(np.uint64) & 1) == 0
        nudge = np.isfinite(err) & (err != 0) & even
        p = np.where(nudge, np.nextafter(p, np.where(err > 0, np.inf, -np.inf)), p)
        return p.astype(v.dtype)


def exact_leaky_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, _times_alpha(x, alpha))


def exact_leaky_relu_backward(dy: np.ndarray, x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, dy, _times_alpha(dy, alpha))


def backend() -> KernelBackend:
    """``--backend examples/my_kernel.py:backend``: the exact kernel, forward and backward."""
    return from_numpy(exact_leaky_relu, backward=exact_leaky_relu_backward, dtypes=EXACT_DTYPES,
                      name="exact_leaky_relu")


def max_backend() -> KernelBackend:
    """``--backend examples/my_kernel.py:max_backend``: the max(x, alpha*x) kernel, forward only."""
    return from_numpy(max_leaky_relu, dtypes=EXACT_DTYPES)


def naive_backend() -> KernelBackend:
    """``--backend examples/my_kernel.py:naive_backend``: the naive kernel on its default (probed) pairs,
    as ``--backend examples/my_kernel.py:naive_leaky_relu`` gives it (the plain function, its
    ``naive_leaky_relu_backward`` beside it), here with a name of its own."""
    return from_numpy(naive_leaky_relu, backward=naive_leaky_relu_backward, name="naive_leaky_relu")
