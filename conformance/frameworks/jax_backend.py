"""``jax``: ``jax.nn.leaky_relu`` on CPU, forward, and backward by ``jax.vjp``.

In the default suite.  float64 needs
``jax_enable_x64``, which this backend switches on when it starts; the switch is
process-wide, as JAX's configuration is.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from conformance.backends import SameDtypeBackend
from conformance.frameworks.loading import require
from conformance.records import BackendResult


class JaxBackend(SameDtypeBackend):
    """``jax.nn.leaky_relu(x, negative_slope=alpha)``; ``jax.vjp`` gives dx for dy."""

    name = "jax"
    default_suite = True
    packages = ("jax", "jaxlib")
    allowed = frozenset({"alpha-precision", "subnormal-flush", "grad-at-zero"})  # XLA:CPU DAZ/FTZ; x >= 0

    def __init__(self) -> None:
        self.jax = require("jax", backend=self.name)
        self.jax.config.update("jax_enable_x64", True)

    def _fn(self, alpha: float):
        return lambda t: self.jax.nn.leaky_relu(t, negative_slope=alpha)

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        return BackendResult(np.asarray(self._fn(alpha)(self.jax.numpy.asarray(x))))

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        jnp = self.jax.numpy
        _, pullback = self.jax.vjp(self._fn(alpha), jnp.asarray(x))
        (dx,) = pullback(jnp.asarray(dy))
        return BackendResult(np.asarray(dx))
