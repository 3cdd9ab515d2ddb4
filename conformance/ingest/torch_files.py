"""A tensor saved with ``torch.save``: read with ``torch.load(weights_only=True)`` (no code
runs), its zip members bounded before torch reads them, bfloat16 kept bit for bit.

``compare`` reads a ``.pt`` given as ``--x``/``--y``/``--dy``; msprobe dumps hold one per
tensor.  torch is imported only when such a file is read.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from conformance.errors import UsageError
from conformance.extras import require
from conformance.ingest import bounded


def is_torch_file(file: Path) -> bool:
    """A zip that ``torch.save`` wrote (it holds a ``data.pkl``)."""
    try:
        with zipfile.ZipFile(file) as archive:
            return any(name.endswith("data.pkl") for name in archive.namelist())
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError):  # the .npz reader says why
        return False


def _check_zip(file: Path, *, limit: int, where: str, hint: str) -> None:
    """A zip ``.pt`` whose members fit the tensor it should hold."""
    try:
        if not zipfile.is_zipfile(file):
            return
        with zipfile.ZipFile(file) as archive:
            bounded.check_archive(archive.infolist(), limit=limit, where=where)
    except (OSError, zipfile.BadZipFile) as exc:
        raise UsageError(f"{where}: not a readable tensor file ({type(exc).__name__}); {hint}") from None


def torch_tensor(file: Path, *, limit: int, where: str, hint: str) -> np.ndarray:
    """The strided CPU tensor in ``file`` as a numpy array (its members at most ``limit`` bytes);
    ``hint`` says how to save a readable one."""
    torch = require("torch", backend=f"reading {where}")
    from conformance.frameworks.torch_backend import numpy_from_tensor

    _check_zip(file, limit=limit, where=where, hint=hint)
    try:
        value = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001  weights_only refuses anything but plain tensors
        raise UsageError(f"{where}: cannot read it as a tensor ({' '.join(str(exc).split())[:120]}); "
                         f"{hint}") from None
    if not isinstance(value, torch.Tensor):
        raise UsageError(f"{where}: holds a {type(value).__name__}, not a tensor; {hint}")
    if value.layout != torch.strided or value.is_meta or value.is_quantized:
        kind = "meta" if value.is_meta else str(value.layout).replace("torch.", "")
        raise UsageError(f"{where}: holds a {kind} tensor, not a dense one with data; {hint}")
    try:
        return numpy_from_tensor(value.detach().contiguous())
    except (RuntimeError, TypeError, ValueError) as exc:
        raise UsageError(f"{where}: cannot convert its {value.dtype} tensor ({type(exc).__name__}); "
                         f"{hint}") from None
