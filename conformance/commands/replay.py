"""`conformance replay FILE`: re-run a saved reproducer and print its finding.

Exit codes: 1 if the case still fails, 0 if it now passes, 2 for a bad file.
"""
from __future__ import annotations

import argparse

from conformance.cases.corpus import Reproducer, load
from conformance.commands.args import add_view_options, view_from
from conformance.errors import CorpusError, Unsupported, UsageError
from conformance.report import console as show
from conformance.report.evaluate import Row
from conformance.report.gate import GateConfig, load_config
from conformance.suite import replay

HELP = "re-run a reproducer (.npz) saved by 'conformance run' and print its finding"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a .npz reproducer from the results directory")
    parser.add_argument("--config", metavar="FILE", help="TOML gate configuration")
    parser.add_argument("--strict-zeros", action="store_true", help="a zero of the wrong sign fails")
    add_view_options(parser)


def _load(path: str) -> Reproducer:
    """The reproducer, checked far enough to print it; a hand-edited, malformed file is exit 2."""
    try:
        rep = load(path)
        str(rep.case)
        return rep
    except CorpusError as exc:
        raise UsageError(str(exc)) from None
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"{path}: malformed reproducer ({exc}); re-create it with 'conformance run'") from None


def _verdict_line(rep: Reproducer, row: Row) -> str:
    found = [f.category for f in row.findings if not f.allowed]
    if row.verdict == "fail":
        same = "same finding" if rep.category in found else f"recorded {rep.category!r}, now"
        return f"still fails ({same}: {', '.join(found)})"
    return f"now passes (recorded finding was {rep.category!r})"


def _replayed(rep: Reproducer, *, path: str, config: GateConfig) -> Row:
    """The judged row; a backend, profile, pair or direction the file names but no backend runs is exit 2."""
    try:
        return replay(rep, config=config)
    except Unsupported as exc:
        raise UsageError(f"cannot replay {path}: {exc}; the reproducer names a case its backend "
                         "does not run") from None
    except (ValueError, TypeError) as exc:
        raise UsageError(f"cannot replay {path}: {exc}") from None


def execute(args: argparse.Namespace) -> int:
    rep = _load(args.file)
    row = _replayed(rep, path=args.file, config=load_config(args.config, strict_zeros=args.strict_zeros))
    console, view = show.make_console(), view_from(args)
    if not view.quiet:
        console.print(f"replaying {args.file}: {rep.label or rep.backend}", markup=False)  # text from the file
        console.print(f"  {rep.case}", markup=False)
    show.render_rows([row], console=console, view=view)
    console.print(_verdict_line(rep, row), markup=False)
    return 1 if row.verdict == "fail" else 0
