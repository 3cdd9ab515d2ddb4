"""Argument parsing shared by the sub-commands: lists, slopes, bounded integers."""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Optional

from conformance.errors import UsageError


def items(values: Optional[Sequence[str]], *, flag: str) -> Optional[tuple[str, ...]]:
    """Repeated and comma-separated values, flattened and de-duplicated; None when not given."""
    if not values:
        return None
    found = tuple(dict.fromkeys(v.strip() for value in values for v in value.split(",") if v.strip()))
    if not found:
        raise UsageError(f"{flag} needs a value (got an empty one)")
    return found


def parse_alpha(text: str, *, flag: str = "--alpha") -> float:
    """A finite slope from ``0.2``, ``-1.5e-3`` or ``1/3``; a UsageError otherwise."""
    try:
        value = float(Fraction(text)) if "/" in text else float(text)
    except (ValueError, ZeroDivisionError, OverflowError):
        raise UsageError(f"{flag} {text!r} is not a number; pass a finite slope such as 0.2 or 1/3") from None
    if not math.isfinite(value):
        raise UsageError(f"{flag} {text!r} must be finite; pass a slope such as 0.2")
    return value


def parse_int(text: str, *, flag: str, maximum: Optional[int] = None) -> int:
    """A whole number in ``0..maximum``; a UsageError otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not an integer; pass a whole number >= 0") from None
    if value < 0 or (maximum is not None and value > maximum):
        upper = f" and <= {maximum:,}" if maximum is not None else ""
        raise UsageError(f"{flag} must be >= 0{upper}, got {value}")
    return value


def check_writable(path: Optional[str], *, flag: str) -> None:
    """Fail early, before any work, when a report cannot be written to ``path``."""
    if path is None:
        return
    target = Path(path)
    if not path.strip() or target.is_dir():
        raise UsageError(f"{flag} {path!r} is not a file path; pass one such as reports/out.json")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "a"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write there ({exc.strerror}); pass a writable path") from None


def check_directory(path: Optional[str], *, flag: str) -> None:
    """``path`` is, or can become, a writable directory (it is created only when needed)."""
    if path is None:
        return
    target = Path(path).absolute()
    existing = next(p for p in (target, *target.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        what = "is not a directory" if existing == target else f"cannot be created under {existing}"
        raise UsageError(f"{flag} {path} {what}; pass a writable directory")
