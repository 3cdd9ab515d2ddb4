"""`conformance replay FILE`: re-run a saved reproducer and print its finding.

Exit codes: 1 if the case still fails, 0 if it now passes, 2 for a bad file.

The file's fields choose only built-in or registered backends.  A reproducer
naming an import path (``file.py:kernel``, ``pkg.mod:factory``) replays only with
``--backend PATH`` on the command line, and one from a row served by a worker
only with ``--worker CMD``: the user, not the file, states what code runs.
"""
from __future__ import annotations

import argparse

from conformance.backends import WorkerSpec, is_import_path
from conformance.backends import names as backend_names
from conformance.cases.corpus import Reproducer, load
from conformance.commands.args import parse_seconds
from conformance.commands.output import add_view_options, view_from
from conformance.config import load_config
from conformance.errors import CorpusError, Unsupported, UsageError
from conformance.judge.gate import GateConfig
from conformance.records import Row
from conformance.render import console as show
from conformance.replay import replay

HELP = "re-run a reproducer (.npz) saved by 'conformance run' and print its finding"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a .npz reproducer from the results directory")
    parser.add_argument("--backend", metavar="PATH",
                        help="the backend to replay on, e.g. my_kernel.py:kernel; required when the file "
                             "names an import path (a file never chooses code to run)")
    parser.add_argument("--worker", metavar="CMD",
                        help="replay through this worker; required for a reproducer of a worker's row")
    parser.add_argument("--worker-timeout", default="600", metavar="S",
                        help="seconds the worker may take (default 600)")
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
    found = [f.category for f in row.findings if f.gated]
    if row.verdict == "fail":
        same = "same finding" if rep.category in found else f"recorded {rep.category!r}, now"
        return f"still fails ({same}: {', '.join(found)})"
    return f"now passes (recorded finding was {rep.category!r})"


def _replayed(rep: Reproducer, args: argparse.Namespace, *, config: GateConfig) -> Row:
    """The judged row; a backend, profile, pair or direction the file names but no backend runs is exit 2."""
    path = args.file
    worker = None
    if args.worker is not None:
        worker = WorkerSpec(args.worker, parse_seconds(args.worker_timeout, flag="--worker-timeout"))
    if args.backend is not None and not is_import_path(args.backend) and args.backend not in backend_names():
        raise UsageError(f"--backend {args.backend!r} is unknown; choose from {', '.join(backend_names())} "
                         "or pass an import path such as my_kernel.py:kernel")
    try:
        return replay(rep, config=config, backend=args.backend, worker=worker)
    except Unsupported as exc:
        raise UsageError(f"cannot replay {path}: {exc}; the reproducer names a case its backend "
                         "does not run") from None
    except (ValueError, TypeError) as exc:
        raise UsageError(f"cannot replay {path}: {exc}") from None


def execute(args: argparse.Namespace) -> int:
    rep = _load(args.file)
    row = _replayed(rep, args, config=load_config(args.config, strict_zeros=args.strict_zeros))
    console, view = show.make_console(), view_from(args)
    if not view.quiet:
        console.print(f"replaying {args.file}: {rep.label or rep.backend}", markup=False)  # text from the file
        console.print(f"  {rep.case}", markup=False)
    show.render_rows([row], console=console, view=view)
    console.print(_verdict_line(rep, row), markup=False)
    return 1 if row.verdict == "fail" else 0
