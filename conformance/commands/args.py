"""Argument parsing shared by the sub-commands: lists, slopes, bounded integers."""
from __future__ import annotations

import argparse
import math
import os
import re
from fractions import Fraction
from pathlib import Path
from typing import Optional, Sequence

from conformance.errors import UsageError


def items(values: Optional[Sequence[str]], *, flag: str) -> Optional[tuple[str, ...]]:
    """Repeated and comma-separated values, flattened and de-duplicated; None when not given."""
    if not values:
        return None
    found = tuple(dict.fromkeys(v.strip() for value in values for v in value.split(",") if v.strip()))
    if not found:
        raise UsageError(f"{flag} needs a value (got an empty one)")
    return found


# ASCII only: Python's float() and int() also take other scripts' digits ("٣", "５", "²"
# for isdigit) and underscores ("1_000"), which no user means as a slope or a count.
_DECIMAL = re.compile(r"[+-]?(?P<digits>[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_FRACTION = re.compile(r"[+-]?[0-9]+/[0-9]+", re.ASCII)
_NON_FINITE = re.compile(r"[+-]?(?:inf|infinity|nan)", re.ASCII | re.IGNORECASE)
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)


def shown(text: str, *, limit: int = 24) -> str:
    """``text`` quoted for a one-line message, its middle elided when it is long."""
    return repr(text) if len(text) <= limit else repr(f"{text[:limit - 9]}...{text[-6:]}")


def parse_alpha(text: str, *, flag: str = "--alpha") -> float:
    """A finite slope from ``0.2``, ``-1.5e-3``, ``.5`` or ``1/3`` (ASCII); a UsageError otherwise."""
    spelled = text.strip()
    if _NON_FINITE.fullmatch(spelled):
        raise UsageError(f"{flag} {shown(text)} must be finite; pass a slope such as 0.2")
    decimal = _DECIMAL.fullmatch(spelled)
    if decimal is None and not _FRACTION.fullmatch(spelled):
        raise UsageError(f"{flag} {shown(text)} is not a number; pass a finite slope in ASCII digits "
                         "such as 0.2, -1.5e-3 or 1/3")
    try:
        value = float(spelled) if decimal else float(Fraction(spelled))
    except ZeroDivisionError:
        raise UsageError(f"{flag} {shown(text)} divides by zero; pass a slope such as 1/3") from None
    except ValueError:  # more digits than Python converts to an int
        raise UsageError(f"{flag} {shown(text)} has too many digits; pass a slope such as 0.2") from None
    except OverflowError:  # a fraction beyond the float range
        raise UsageError(f"{flag} {shown(text)} must be finite; pass a slope such as 0.2") from None
    if not math.isfinite(value):
        raise UsageError(f"{flag} {shown(text)} must be finite; pass a slope such as 0.2")
    if value == 0 and decimal is not None and decimal["digits"].strip("0.") != "":
        raise UsageError(f"{flag} {shown(text)} underflows to 0 in binary64; pass 0 or a slope >= 5e-324")
    return value


def parse_int(text: str, *, flag: str, minimum: int = 0, maximum: Optional[int] = None) -> int:
    """A whole number in ASCII digits in ``minimum..maximum``; a UsageError otherwise."""
    spelled = text.strip()
    if not _INTEGER.fullmatch(spelled):
        raise UsageError(f"{flag} {shown(text)} is not an integer; pass a whole number >= {minimum} "
                         "in ASCII digits")
    try:
        value = int(spelled)
    except ValueError:  # more digits than Python converts
        raise UsageError(f"{flag} {shown(text)} has too many digits; pass a whole number") from None
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and <= {maximum:,}" if maximum is not None else ""
        raise UsageError(f"{flag} must be >= {minimum}{upper}, got {shown(spelled)[1:-1]}")
    return value


def ascii_int(text: str) -> int:
    """argparse ``type=``: an integer in ASCII digits (``int`` alone also takes "５")."""
    if not _INTEGER.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer in ASCII digits")
    return int(text)


def ascii_float(text: str) -> float:
    """argparse ``type=``: a decimal number in ASCII digits (``float`` alone also takes "٣")."""
    if not (_DECIMAL.fullmatch(text.strip()) or _NON_FINITE.fullmatch(text.strip())):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number in ASCII digits")
    return float(text)


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
