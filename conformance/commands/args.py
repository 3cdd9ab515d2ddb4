"""Argument parsing shared by the sub-commands: lists, slopes, bounded integers."""
from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Optional

from conformance.errors import UsageError

if TYPE_CHECKING:
    from conformance.report.console import View


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


def add_view_options(parser: argparse.ArgumentParser, *, details: bool = True) -> None:
    """``--details fail|warn|all`` (when the command has panels) and ``-q/--quiet``."""
    from conformance.report.console import DETAILS

    if details:
        parser.add_argument("--details", choices=DETAILS, default="fail",
                            help="panels for failing rows (fail, the default), also for warning rows "
                                 "(warn), and also the full per-alpha table (all)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the final verdict line")


def view_from(args: argparse.Namespace) -> View:
    """The rendering options the flags of :func:`add_view_options` ask for."""
    from conformance.report.console import View

    return View(details=getattr(args, "details", "fail"), quiet=bool(args.quiet))
