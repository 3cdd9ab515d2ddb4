"""Importing an optional framework: lazily, once, and with one clear line when it is missing."""
from __future__ import annotations

import importlib
from typing import Any

from conformance.errors import BackendUnavailable

EXTRA = "pip install 'conformance[frameworks]'"


def require(module: str, *, backend: str) -> Any:
    """``import module``, or BackendUnavailable saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackendUnavailable(f"backend {backend}: cannot import {module} ({exc}); {EXTRA}") from None
