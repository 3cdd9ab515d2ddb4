"""What computed a stored chunk: a fingerprint of the code behind one backend's rows.

A chunk row depends on the backend and on the harness that judged it (golden, metrics,
triage), so an in-process backend's fingerprint hashes every source file of the
``conformance`` package, the source file of each module its class comes from (a plug-in
lives outside the package) and the versions of numpy, ml_dtypes and the distributions it
declares in ``packages`` (torch, jax, ...).  A worker backend's fingerprint hashes its hello (its
backend, profile, variant, versions and supported pairs) and the command that starts it.
Any edit to any of those files gives another fingerprint, so a store never serves a row
that older code computed.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

import conformance

PACKAGE_DIR = Path(conformance.__file__).resolve().parent
ALWAYS = ("numpy", "ml_dtypes")  # every row's golden and judging computes with them


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


@functools.cache
def package_digest() -> str:
    """sha256 over the path and bytes of every ``.py`` file of the installed package."""
    sources = sorted(PACKAGE_DIR.rglob("*.py"))
    return _digest(*(p for f in sources for p in (f.relative_to(PACKAGE_DIR).as_posix().encode(),
                                                 f.read_bytes())))


def _source_file(cls: type) -> Optional[Path]:
    try:
        found = inspect.getsourcefile(cls)
    except (TypeError, OSError):  # a builtin or a class defined in a REPL
        return None
    return Path(found).resolve() if found else None


def _outside_sources(backend: object) -> list[bytes]:
    """Path and bytes of each source file of the backend's classes that the package digest misses."""
    files = {f for f in map(_source_file, type(backend).__mro__) if f is not None}
    outside = sorted(f for f in files if PACKAGE_DIR not in f.parents and f.is_file())
    return [p for f in outside for p in (str(f).encode(), f.read_bytes())]


@functools.cache
def _versions(packages: tuple[str, ...]) -> bytes:
    """The installed versions, read once per process (a later install does not change the
    modules this process imported; reading each distribution's metadata costs milliseconds)."""
    found = {}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return json.dumps(found, sort_keys=True).encode()


def fingerprint(backend: Any) -> str:
    """The fingerprint of the code that computes ``backend``'s rows (see the module docstring)."""
    head = (conformance.__version__.encode(), package_digest().encode())
    hello = getattr(backend, "hello", None)
    if isinstance(hello, dict):  # a worker: its own code is out of reach, its hello says what it is
        command = str(getattr(getattr(backend, "spec", None), "command", "")).encode()
        return _digest(*head, b"worker", command, json.dumps(hello, sort_keys=True, default=repr).encode())
    packages = ALWAYS + tuple(getattr(backend, "packages", ()) or ())
    return _digest(*head, b"in-process", _versions(packages), *_outside_sources(backend))
