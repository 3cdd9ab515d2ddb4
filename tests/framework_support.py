"""Framework backends for the tests of their results: in this process where it can run them, else a worker.

Keras picks its backend once per process.  The tests' process already runs Keras on one
backend (tests/test_audit.py imports it, on ``KERAS_BACKEND`` or TensorFlow), so a Keras
profile on that backend is served here, by the same class a worker would serve it with,
and only the other profiles pay a worker's start (TensorFlow alone costs ~5 s to import).
"""
from __future__ import annotations

import os
import sys
from typing import Optional

from conformance.backends import Backend, default_worker, get_backend
from conformance.worker import client


def keras_runs_on(profile: str) -> bool:
    """Keras in this process runs (or, not imported yet, would start) on ``profile``."""
    loaded = sys.modules.get("keras")
    current = loaded.backend.backend() if loaded is not None else os.environ.get("KERAS_BACKEND", "tensorflow")
    return current == profile


def keras_backend(profile: str, *, variant: Optional[str] = None) -> Backend:
    """Backend ``keras`` on ``profile``: in-process when Keras here runs on it, else its default worker."""
    if keras_runs_on(profile):
        return get_backend("keras", profile=profile, variant=variant)
    worker = default_worker("keras", profile=profile, variant=variant)
    assert worker is not None, "keras declares a worker command"
    return client.connect(worker)
