"""``jax``: ``jax.nn.leaky_relu`` on CPU, forward, and backward by ``jax.vjp``.

In the default suite.  JAX is imported when the backend is made (a broken install is
a one-line error before any row runs), and ``jax_enable_x64`` (which float64 needs) is
switched on then; the switch is process-wide, as JAX's configuration is.  The backward is one jitted function of
(x, dy, alpha), ``vjp``'s pullback applied to dy: XLA compiles it once per shape and
dtype, where the pullback run op by op compiles each of its operations (the same
bits, on every 16-bit pattern and every suite slope).
"""
from __future__ import annotations

import functools
from typing import Any, Optional

import numpy as np

from conformance.backends import SameDtypeBackend
from conformance.extras import require
from conformance.records import BackendResult


def jax_module() -> Any:
    """The jax module (imported on the first call), with float64 switched on."""
    jax = require("jax", backend="jax")
    jax.config.update("jax_enable_x64", True)
    return jax


@functools.lru_cache(maxsize=1)
def _backward() -> Any:
    """dx = the pullback of ``leaky_relu`` at x, applied to dy, as one jitted function."""
    jax = jax_module()

    def dx(x: Any, dy: Any, alpha: Any) -> Any:
        _, pullback = jax.vjp(lambda t: jax.nn.leaky_relu(t, negative_slope=alpha), x)
        return pullback(dy)[0]

    return jax.jit(dx)


class JaxBackend(SameDtypeBackend):
    """``jax.nn.leaky_relu(x, negative_slope=alpha)``; ``jax.vjp`` gives dx for dy."""

    name = "jax"
    default_suite = True
    packages = ("jax", "jaxlib")
    requires = ("jax",)
    allowed = frozenset({"alpha-precision", "subnormal-flush", "grad-at-zero"})  # XLA:CPU DAZ/FTZ; x >= 0

    def __init__(self) -> None:
        jax_module()

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        jax = jax_module()
        return BackendResult(np.asarray(jax.nn.leaky_relu(jax.numpy.asarray(x), negative_slope=alpha)))

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        jnp = jax_module().numpy
        return BackendResult(np.asarray(_backward()(jnp.asarray(x), jnp.asarray(dy), alpha)))

    ops = ("leaky_relu", "prelu")
    #: JAX has no PReLU of its own: a model writes ``jax.nn.leaky_relu(x, negative_slope=w)`` with an array
    #: slope, ``jnp.where(x >= 0, x, w*x)`` (jax/_src/nn/functions.py), so x = ±0 select x and dy; ``vjp``
    #: adds the branches' cotangents; XLA:CPU flushes subnormals (docs/reference/prelu.md).
    prelu_allowed = frozenset({"formulation", "grad-at-zero", "subnormal-flush"})

    def prelu_supports(self, dtype: str, direction: str) -> bool:
        """Every PReLU row: float32, float16 and bfloat16, both directions (the float16 dweight is a
        sequential float16 sum of exact shares, or of shares rounded to float16 on a host that widens
        op by op: :mod:`conformance.reference.reductions`, docs/reference/prelu.md)."""
        return dtype in ("float32", "float16", "bfloat16")

    def prelu(self, direction: str, x: np.ndarray, weight: np.ndarray, *,
              dy: Optional[np.ndarray] = None) -> BackendResult:
        """``jax.nn.leaky_relu`` with the weight broadcast on axis 1; dx and dweight from ``jax.vjp``."""
        from conformance.reference.prelu import expanded_weight

        jax = jax_module()
        jnp = jax.numpy
        w = jnp.asarray(expanded_weight(weight, x.shape))
        if direction == "forward":
            return BackendResult(np.asarray(jax.nn.leaky_relu(jnp.asarray(x), negative_slope=w)))
        _, pullback = jax.vjp(lambda t, s: jax.nn.leaky_relu(t, negative_slope=s), jnp.asarray(x), w)
        dx, dw = pullback(jnp.asarray(dy))
        return BackendResult(np.asarray(dx), dweight=np.asarray(dw).reshape(np.shape(weight)))
