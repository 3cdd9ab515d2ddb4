"""Arrays between numpy and each framework's own tensors, bit for bit.

bfloat16 goes through each framework's own type: ``torch.bfloat16`` by a bit view (torch
cannot take an ``ml_dtypes.bfloat16`` array), and JAX's and TensorFlow's bfloat16, which
are ml_dtypes' type.  Frameworks are imported only when an array of theirs is asked for.
"""
from __future__ import annotations

import importlib.util
from typing import Any, Literal, Optional

import numpy as np

Framework = Literal["numpy", "torch", "jax", "tensorflow"]
#: The frameworks a kernel may take tensors of, in the order a plain function is tried with them.
FRAMEWORKS: tuple[Framework, ...] = ("numpy", "torch", "jax", "tensorflow")
#: The top-level module of each framework's array type (``type(a).__module__``'s first part).
_MODULES: dict[str, Framework] = {"numpy": "numpy", "torch": "torch", "jax": "jax", "jaxlib": "jax",
                                  "tensorflow": "tensorflow"}


def framework_of(value: Any) -> Optional[Framework]:
    """The framework whose array ``value`` is, or None for anything else."""
    return _MODULES.get(type(value).__module__.split(".")[0])


def installed(framework: Framework) -> bool:
    """Whether ``framework`` can be imported here (nothing is imported)."""
    return importlib.util.find_spec(framework) is not None


def to_framework(a: np.ndarray, framework: Framework) -> Any:
    """``a`` as a fresh array of ``framework``, same dtype and bits (float64 included)."""
    if framework == "torch":
        from conformance.frameworks.torch_backend import tensor_from_numpy

        return tensor_from_numpy(np.ascontiguousarray(a))
    if framework == "jax":
        from conformance.frameworks.jax_backend import jax_module

        return jax_module().numpy.array(a)
    if framework == "tensorflow":
        from conformance.frameworks.tensorflow_backend import tensorflow

        return tensorflow().convert_to_tensor(a)
    return a.copy()


def to_numpy(value: Any) -> Optional[np.ndarray]:
    """A framework's array (or a numpy one) as numpy, same dtype and bits; None for anything
    that is not an array of a framework this module knows."""
    framework = framework_of(value)
    if framework == "torch":
        from conformance.frameworks.torch_backend import numpy_from_tensor

        return numpy_from_tensor(value.detach().cpu())
    if framework == "tensorflow":
        return np.asarray(value.numpy())
    if framework in ("jax", "numpy"):
        return np.asarray(value)
    return None
