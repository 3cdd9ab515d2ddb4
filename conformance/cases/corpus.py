"""The ``Case`` record and ``.npz`` reproducers.

A reproducer is a plain ``.npz`` (loaded with ``allow_pickle=False``): the
inputs as unsigned bit patterns (so bfloat16 and NaN payloads survive), the
dtype names and the metadata as 0-d string/float arrays.
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from conformance.dtypes import from_bits, info, to_bits
from conformance.records import Direction

FORMAT = "leakyrelu-reproducer/1"
_STRINGS = ("format", "dtype", "out_dtype", "direction", "backend", "profile", "variant",
            "category", "summary", "label")


class CorpusError(ValueError):
    """A reproducer file that cannot be read; the message says why and what to do."""


def _scalar_text(a: np.ndarray) -> str:
    """One element as Python would spell it (``-0.0``, ``nan``, ``inf``)."""
    return repr(float(a.reshape(-1)[0].astype(np.float64)))


def _arg_text(a: np.ndarray) -> str:
    """A scalar's value, or ``dtype[shape]`` for anything bigger."""
    if a.size == 1:
        return _scalar_text(a)
    return f"{info(a.dtype).short}[{','.join(str(n) for n in a.shape)}]"


@dataclass(frozen=True)
class Case:
    """One LeakyReLU call: inputs, slope, direction, and (when known) the expected output."""

    x: np.ndarray
    alpha: float
    direction: Direction = "forward"
    dy: Optional[np.ndarray] = None
    out_dtype: Optional[str] = None
    expected: Optional[np.ndarray] = None

    @property
    def dtype(self) -> str:
        return info(self.x.dtype).name

    def __str__(self) -> str:
        args = [f"x={_arg_text(self.x)}", f"alpha={self.alpha!r}"]
        if self.direction == "backward" and self.dy is not None:
            args.insert(0, f"dy={_arg_text(self.dy)}")
        if self.out_dtype is not None and self.out_dtype != self.dtype:
            args.append(f"out={info(self.out_dtype).short}")
        name = "leaky_relu" if self.direction == "forward" else "leaky_relu_backward"
        text = f"{name}({', '.join(args)})"
        return text if self.expected is None else f"{text} -> {_arg_text(self.expected)}"


@dataclass(frozen=True)
class Reproducer:
    """A minimal failing case and where it failed (backend, profile, variant, category)."""

    case: Case
    backend: str
    profile: Optional[str] = None
    variant: Optional[str] = None
    category: str = ""
    summary: str = ""
    label: str = ""


def _text(value: Optional[str]) -> np.ndarray:
    return np.array("" if value is None else str(value))


def save(rep: Reproducer, path: Path | str) -> Path:
    """Write ``rep`` as a pickle-free ``.npz`` and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    case = rep.case
    arrays = {name: _text(value) for name, value in zip(_STRINGS, (
        FORMAT, case.dtype, case.out_dtype, case.direction, rep.backend, rep.profile, rep.variant,
        rep.category, rep.summary, rep.label))}
    arrays["alpha"] = np.array(float(case.alpha), dtype=np.float64)
    arrays["x_bits"] = to_bits(np.ascontiguousarray(case.x))
    if case.dy is not None:
        arrays["dy_bits"] = to_bits(np.ascontiguousarray(case.dy))
    with path.open("wb") as fh:
        np.savez(fh, **arrays)
    return path


def _read(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz``, refusing pickles, with one-line errors."""
    if not path.is_file():
        raise CorpusError(f"reproducer {path} does not exist; pass a .npz written by 'conformance run'")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise CorpusError(f"cannot read reproducer {path}: {exc}; pass a .npz written by "
                          "'conformance run'") from None


def _optional(data: dict[str, np.ndarray], key: str) -> Optional[str]:
    value = str(data[key])
    return value or None


def load(path: Path | str) -> Reproducer:
    """Read a reproducer written by :func:`save`."""
    path = Path(path)
    data = _read(path)
    missing = [k for k in (*_STRINGS, "alpha", "x_bits") if k not in data]
    if missing or str(data.get("format", "")) != FORMAT:
        raise CorpusError(f"{path} is not a {FORMAT} file (missing {', '.join(missing) or 'format tag'})")
    dtype = str(data["dtype"])
    dy = from_bits(data["dy_bits"], dtype) if "dy_bits" in data else None
    case = Case(from_bits(data["x_bits"], dtype), float(data["alpha"]), str(data["direction"]),  # type: ignore[arg-type]
                dy=dy, out_dtype=_optional(data, "out_dtype"))
    return Reproducer(case, str(data["backend"]), _optional(data, "profile"), _optional(data, "variant"),
                      str(data["category"]), str(data["summary"]), str(data["label"]))
