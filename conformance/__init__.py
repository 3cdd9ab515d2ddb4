"""conformance: bit-exact LeakyReLU conformance across PyTorch, TensorFlow and CANN.

``conformance.check(fn, ...)`` runs the suite on your own kernel (see :mod:`conformance.api`);
``conformance.assert_leaky_relu(actual, x, alpha=...)`` judges arrays already in memory
(see :mod:`conformance.testing`).
"""
import os
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before any TensorFlow import

__version__ = "0.1.0"
__all__ = ["check", "Report", "assert_leaky_relu", "__version__"]


def __getattr__(name: str) -> Any:
    """``check``, ``Report`` and ``assert_leaky_relu`` on first use: ``import conformance`` stays light."""
    if name in ("check", "Report"):
        from conformance import api

        return getattr(api, name)
    if name == "assert_leaky_relu":
        from conformance import testing

        return testing.assert_leaky_relu
    raise AttributeError(f"module 'conformance' has no attribute {name!r}")
