"""Framework environments of their own: where their python lives, and one line when it is missing.

PaddlePaddle and MindSpore cannot share the main environment (MindSpore 2.10
needs numpy 1.26; Paddle's 720 MB are not part of ``make conformance``).
``make conformance-all`` creates ``.venv-paddle`` and ``.venv-mindspore`` in the
repository root, each holding its framework and this package (``--no-deps``).
A backend living there declares an :class:`Environment`; its default worker
is that environment's python running ``-m conformance worker``.  The variable
``CONFORMANCE_<NAME>_PYTHON`` points a backend at another interpreter.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from conformance.backends import SameDtypeBackend
from conformance.errors import BackendUnavailable

ROOT = Path(__file__).resolve().parents[2]  # the repository of an editable install
SETUP = "make conformance-all"


def in_checkout() -> bool:
    """Whether this package runs from the repository (an editable install, ``make`` beside it):
    set-up hints then name the make target; a pip install is told what to point where."""
    return (ROOT / "Makefile").is_file() and (ROOT / "pyproject.toml").is_file()


@dataclass(frozen=True)
class Environment:
    """A virtual environment of one framework, created by ``make <target>`` in the repository root."""

    name: str  # e.g. "paddle"
    venv: str  # e.g. ".venv-paddle"

    @property
    def variable(self) -> str:
        """The environment variable that names another python for this framework."""
        return f"CONFORMANCE_{self.name.upper()}_PYTHON"

    def python(self) -> Path:
        """The interpreter to run: ``$CONFORMANCE_<NAME>_PYTHON``, else ``<repo>/<venv>/bin/python``."""
        override = os.environ.get(self.variable)
        return Path(override) if override else ROOT / self.venv / "bin" / "python"

    def missing(self) -> Optional[str]:
        """None when the interpreter exists; otherwise one line saying how to create it."""
        python = self.python()
        if python.is_file() and os.access(python, os.X_OK):
            return None
        if in_checkout():
            return (f"the {self.name} environment is not set up ({python} does not exist); "
                    f"`{SETUP}` creates it (or set {self.variable})")
        return (f"{self.name} runs in an environment of its own: set {self.variable} to a python "
                f"where {self.name} and conformance are installed")

    def require(self) -> Path:
        """The interpreter, or BackendUnavailable with the one-line fix."""
        why = self.missing()
        if why is not None:
            raise BackendUnavailable(f"backend {self.name}: {why}")
        return self.python()


class OwnEnvironmentBackend(SameDtypeBackend):
    """A same-dtype backend whose default worker runs in its framework's own environment."""

    environment: Environment

    @classmethod
    def worker_argv(cls) -> tuple[str, ...]:
        python = cls.environment.require()
        return (str(python), "-m", "conformance", "worker", "--backend", cls.name)
