"""Argument parsing shared by the sub-commands: the options several commands define, lists,
slopes, counts, seconds and bounded integers, and the checks of backend, profile and variant names."""
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
    from conformance.render.console import View
    from conformance.render.files import ReportPaths


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


def add_view_options(parser: argparse.ArgumentParser, *, details: bool = True) -> None:
    """``--details fail|warn|all`` (when the command has panels) and ``-q/--quiet``."""
    from conformance.render.console import DETAILS

    if details:
        parser.add_argument("--details", choices=DETAILS, default="fail",
                            help="panels for failing rows (fail, the default), also for warning rows "
                                 "(warn), and also the full per-alpha table (all)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the final verdict line")


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


def add_selection_options(parser: argparse.ArgumentParser, *, reference: bool = False,
                          backend_help: str = "") -> None:
    """What to run (backends, dtypes, slopes, directions, kernel, workers, seed), as ``run`` and
    ``agree`` take it; ``reference``: also ``--reference``."""
    from conformance.backends import default_backends
    from conformance.backends import names as backend_names

    add = parser.add_argument
    add("--backend", action="append", metavar="NAME",
        help=f"one of {', '.join(backend_names())}, or your own as module:NAME or file.py:NAME, NAME a "
             "factory, a backend object or a kernel fn(x, alpha) "
             f"(repeat or comma-separate; default: {backend_help or ', '.join(default_backends())}, "
             "those installed here)")
    add("--dtype", action="append", metavar="D", help=f"{DTYPE_HELP}; repeat or comma-separate")
    add("--alpha", action="append", metavar="A", help="slope(s), e.g. 0.2 or 1/3 (default: the suite's 8)")
    add("--direction", action="append", metavar="DIR", help="forward or backward (default: both)")
    if reference:
        add("--reference", action="append", metavar="NAME",
            help="also compare every other backend's rows bit for bit with this backend's output on the "
                 "same inputs (a --backend name, added to the run if not selected; comma-separate "
                 "several: each is compared with the ones before it)")
    add_kernel_options(parser)
    add("--worker", action="append", metavar="CMD",
        help="run the backend a worker serves through it, e.g. \"ssh npu-host /opt/venv/bin/conformance "
             "worker --backend torch_npu\" (repeatable; without --backend only worker backends run)")
    add("--worker-timeout", default="600", metavar="S",
        help="seconds a worker may take per call before its row gets an error finding (default 600)")
    add("--seed", default="0", help="seed for random inputs and hypothesis examples (default 0)")
    add("--max-examples", default="100", help="hypothesis examples per dtype and direction (default 100)")


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


def view_from(args: argparse.Namespace) -> View:
    """The rendering options the flags of :func:`add_view_options` ask for."""
    from conformance.render.console import View

    return View(details=getattr(args, "details", "fail"), quiet=bool(args.quiet))


HTML_HELP = "write the HTML report (tables and plots, one self-contained file) here; needs the report extra"


def html_paths(args: argparse.Namespace) -> ReportPaths:
    """The --json, --junit (a command may have none) and --html paths; --html without the plotting
    library is a usage error."""
    from conformance.render.files import ReportPaths
    from conformance.render.html import require_plotly

    if args.html is not None:
        require_plotly()
    return ReportPaths(args.json, getattr(args, "junit", None), args.html)


# ----------------------------------------------------------------------------- names checked

def choice(value: Optional[str], choices: Sequence[str], *, flag: str) -> Optional[str]:
    """``value`` when it is one of ``choices`` (or None); a UsageError listing them otherwise."""
    if value is not None and value not in choices:
        raise UsageError(f"{flag} {value!r} is unknown; choose from {', '.join(choices)}")
    return value


def checked_backend(name: str, *, flag: str) -> str:
    """A backend name or import path, validated (an import path that does not load is exit 2
    before any work)."""
    from conformance.backends import is_import_path, load
    from conformance.backends import names as backend_names

    if is_import_path(name):
        load(name)
        return name
    return choice(name, backend_names(), flag=flag) or name


def references_from(values: Optional[Sequence[str]]) -> tuple[str, ...]:
    """The --reference backends (repeated or comma-separated), validated as --backend is."""
    names = items(values, flag="--reference") or ()
    return tuple(dict.fromkeys(checked_backend(n, flag="--reference") for n in names))


def check_profile(args: argparse.Namespace, backends: Sequence[str]) -> tuple[Optional[str], Optional[str]]:
    """``--profile`` and ``--variant`` checked against what ``backends`` declare; (None, None)
    without them."""
    if not (args.profile or args.variant):
        return None, None
    profiles, variants = _profile_choices(backends)
    if not (profiles or variants):
        raise UsageError(_profile_hint(args.profile, args.variant))
    return (choice(args.profile, profiles, flag="--profile"),
            choice(args.variant, variants, flag="--variant"))


def _profile_choices(backends: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The --profile and --variant values the selected backends declare."""
    from conformance.backends import profiles_of

    found = [profiles_of(name) for name in backends]
    return (tuple(dict.fromkeys(p for ps, _ in found for p in ps)),
            tuple(dict.fromkeys(v for _, vs in found for v in vs)))


def _profile_hint(profile: Optional[str], variant: Optional[str]) -> str:
    """Which backend a --profile/--variant value belongs to, as a fix to suggest."""
    from conformance.backends import names as backend_names

    declared = {n: _safe_profiles(n) for n in backend_names()}
    having = [n for n, (ps, vs) in declared.items() if profile in ps or variant in vs] or \
        [n for n, pv in declared.items() if any(pv)] or ["NAME"]
    return (f"--profile/--variant apply to the {' or '.join(having)} backend; "
            f"add --backend {having[0]}")


def _safe_profiles(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    from conformance.backends import profiles_of

    try:
        return profiles_of(name)
    except UsageError:
        return (), ()
