"""The pip extras: which one installs each optional module, and importing an optional dependency
lazily, once, with one clear line naming the extra when it is missing (the extras are listed in
pyproject.toml and docs/setup.md)."""
from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from conformance.errors import BackendUnavailable

#: The extra that installs each optional top-level module.
EXTRAS = {"torch": "torch", "tensorflow": "tensorflow", "jax": "jax", "jaxlib": "jax", "onnx": "onnx",
          "onnxruntime": "onnx", "keras": "keras", "scipy": "keras", "dask": "sweep", "distributed": "sweep",
          "threadpoolctl": "sweep", "numba": "fast"}


def install_hint(module: str) -> str:
    """How to install ``module``: its extra, or the module itself when no extra gives it."""
    extra = EXTRAS.get(module.partition(".")[0])
    return f"pip install 'conformance[{extra}]'" if extra else f"install {module.partition('.')[0]}"


def require(module: str, *, backend: str) -> Any:
    """``import module``, or BackendUnavailable saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackendUnavailable(f"{_user(backend)}: cannot import {module} ({exc}); {install_hint(module)}") from None


def require_installed(*modules: str, backend: str) -> None:
    """BackendUnavailable naming the extra when one of ``modules`` cannot be found (nothing is
    imported: a backend checks this when it is made, and imports its framework when first called)."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise BackendUnavailable(f"{_user(backend)}: {module} is not installed; {install_hint(module)}")


def _user(backend: str) -> str:
    return backend if " " in backend else f"backend {backend}"
