"""Argument parsing shared by the sub-commands: the kernel and gate options, lists, dtypes,
slopes, tolerances, counts, seconds and bounded integers (``names`` checks the names a
command takes, ``output`` the report and view options, ``selection`` what a run selects)."""
from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Optional

from conformance.errors import UsageError

if TYPE_CHECKING:
    from conformance.judge.gate import GateConfig


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
_COUNT = re.compile(r"0[xX][0-9a-fA-F]+|[0-9]+", re.ASCII)


def parse_dtype(text: str, *, flag: str = "--dtype") -> str:
    """A dtype (aliases allowed) or a pair (``fp32:fp16``, or the quoted ``"fp32->fp16"``) as table
    names, a pair written ``src->out``; a UsageError naming the shell-safe spelling otherwise."""
    from conformance.adapters import parse_pair

    src, out = parse_pair(text, what=flag)
    return src if src == out and ":" not in text and "->" not in text else f"{src}->{out}"


DTYPE_HELP = "fp16, bf16, fp32, fp64, or a pair such as fp32:fp16 (or the quoted \"fp32->fp16\")"


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


def parse_tolerance(text: str, *, flag: str) -> float:
    """A finite number >= 0 (``1e-3``, ``0``); a UsageError otherwise."""
    try:
        value = float(text.strip())
    except ValueError:
        raise UsageError(f"{flag} {shown(text)} is not a number; pass a tolerance such as 1e-3") from None
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{flag} must be a finite number >= 0, got {shown(text)[1:-1]}")
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


def parse_count(text: str, *, flag: str, minimum: int = 0) -> int:
    """A whole number in ASCII hex (0x...) or decimal digits, >= ``minimum``."""
    spelled = text.strip()
    if not _COUNT.fullmatch(spelled) or len(spelled) > 40:
        raise UsageError(f"{flag} {spelled[:24]!r} is not a whole number; pass ASCII decimal or 0x hex digits")
    value = int(spelled, 0) if spelled[:2].lower() == "0x" else int(spelled)
    if value < minimum:
        raise UsageError(f"{flag} must be >= {minimum}, got {spelled}")
    return value


def parse_range(text: Optional[str]) -> tuple[int, Optional[int]]:
    """``--range START:STOP`` as (start, stop); (0, None) when not given."""
    if text is None:
        return 0, None
    start, sep, stop = text.partition(":")
    if not sep:
        raise UsageError(f"--range {text[:24]!r} needs START:STOP, e.g. 0:0x1000000")
    lo, hi = parse_count(start, flag="--range START"), parse_count(stop, flag="--range STOP")
    if lo >= hi:
        raise UsageError(f"--range {text[:40]!r} is empty; STOP must be greater than START")
    return lo, hi


def parse_seconds(text: str, *, flag: str) -> float:
    """A finite number of seconds > 0; a UsageError otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{flag} {text!r}: pass a number of seconds > 0, such as 600")
    return value


def add_kernel_options(parser: argparse.ArgumentParser) -> None:
    """``--profile`` and ``--variant`` of the backends that have them (cann)."""
    parser.add_argument("--profile", help="chip profile of the backends that have one (cann: default ascend910b1)")
    parser.add_argument("--variant", help="kernel variant of the backends that have one (cann: default reference)")


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    """``--strict-zeros``, ``--strict`` and ``--allow CATEGORY`` of the commands that gate."""
    add = parser.add_argument
    add("--strict-zeros", action="store_true", help="a zero of the wrong sign fails the row")
    add("--strict", action="store_true",
        help="any bit difference from golden fails the row, allowed behaviours and 1-ULP rounding included")
    add("--allow", action="append", metavar="CATEGORY",
        help="a triage category every backend may show without failing (repeat or comma-separate)")
    add("--rtol", metavar="R", help="relative tolerance for every output dtype (with --atol; default: "
        "torch.testing's per dtype)")
    add("--atol", metavar="A", help="absolute tolerance for every output dtype (with --rtol)")
    add("--max-ulp", metavar="N", help="the most units in the last place an element may be off (default 1)")


def config_from(args: argparse.Namespace) -> GateConfig:
    """The gate configuration the flags ask for: --config (over pyproject.toml), --strict-zeros,
    --strict and --allow."""
    from conformance.config import load_config, with_tolerances

    config = load_config(args.config, strict_zeros=args.strict_zeros, strict=args.strict,
                         allow=items(args.allow, flag="--allow"))
    rtol, atol = (None if v is None else parse_tolerance(v, flag=f) for v, f in ((args.rtol, "--rtol"),
                                                                                  (args.atol, "--atol")))
    max_ulp = None if args.max_ulp is None else parse_int(args.max_ulp, flag="--max-ulp")
    return with_tolerances(config, rtol=rtol, atol=atol, max_ulp=max_ulp, prefix="--")


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
