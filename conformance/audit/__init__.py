"""``conformance audit``: every LeakyReLU of a model and its slope, read before anything runs.

One module per target kind (``source``, ``onnx_model``, ``keras_model``,
``torch_model``, ``msprobe_stats``); :func:`audit` picks it from the target;
``compare`` pairs two audits.  Records and defaults: ``audit.record``.
"""
from __future__ import annotations

import re
from pathlib import Path

from conformance.audit.record import Audit
from conformance.errors import UsageError

_IMPORT_PATH = re.compile(r"^[\w./\\-]+:[\w.]+$")


def kind_of(target: str) -> str:
    """The target's kind, from its name and what is on disk."""
    from conformance.audit.msprobe_stats import is_stats_dump

    path = Path(target)
    if not path.exists():
        if _IMPORT_PATH.match(target) and not re.match(r"^[A-Za-z]:[\\/]", target):
            return "torch"
        raise UsageError(f"{target}: no such file or directory (and not a package.module:factory)")
    if not path.is_dir() and not path.is_file():
        raise UsageError(f"{target}: not a regular file or a directory (a FIFO, socket or device); "
                         "pass a model file or a directory")
    if path.is_dir():
        if (path / "saved_model.pb").is_file():
            return "savedmodel"
        return "msprobe-stats" if is_stats_dump(path) else "source"
    kinds = {".py": "source", ".onnx": "onnx", ".keras": "keras", ".pt2": "torch-export"}
    if path.name == "saved_model.pb":
        return "savedmodel"
    if path.name == "dump.json":
        return "msprobe-stats"
    if path.suffix not in kinds:
        raise UsageError(f"{target}: unknown target kind; pass a .py file or directory, .onnx, .keras, "
                         ".pt2, a SavedModel directory, an msprobe dump, or package.module:factory")
    return kinds[path.suffix]


def audit(target: str) -> Audit:
    """Every LeakyReLU of ``target``; a UsageError (one line) when it cannot be read."""
    try:
        kind, path = kind_of(target), Path(target)
    except PermissionError:  # a directory on the way that may not be listed or entered
        raise UsageError(f"{target}: cannot read it (permission denied); pass a model you can read") from None
    notes: tuple[str, ...] = ()
    if kind == "source":
        from conformance.audit.source import audit_source

        found, notes = audit_source(path)
        return Audit(target, kind, tuple(found), notes)
    if kind == "onnx":
        from conformance.audit.onnx_model import audit_onnx as read
    elif kind == "keras":
        from conformance.audit.keras_model import audit_keras as read
    elif kind == "savedmodel":
        from conformance.audit.keras_model import audit_saved_model as read

        path = path if path.is_dir() else path.parent
    elif kind == "torch-export":
        from conformance.audit.torch_model import audit_exported as read
    elif kind == "msprobe-stats":
        from conformance.audit.msprobe_stats import audit_stats as read
    else:
        from conformance.audit.torch_model import audit_factory

        found, notes = audit_factory(target)
        return Audit(target, kind, tuple(found), notes)
    return Audit(target, kind, tuple(read(path)), notes)
