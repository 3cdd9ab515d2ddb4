"""`conformance agree`: do these backends give the same bits?  A backends x backends table per
dtype pair and direction, and the migration check ``--from A --to B``.

Runs the suite (``conformance.suite``) with every selected backend a reference, so each pair
is compared once, bit for bit, on the batches every backend runs (``judge.agreement``); on
``--jobs`` processes, a (dtype, out_dtype, direction, alpha) group whole in one
(``conformance.compared``).  Without ``--html`` the rows measure no plots: only that report draws them.

Exit codes: 0 the table was printed, or the migration is identical or differs only within the
``--allow`` categories; 1 the migration differs otherwise; 2 usage error; 130/143 interrupted.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Optional

from rich.console import Console

from conformance import machine
from conformance.backends import default_backends
from conformance.commands.args import items, parse_int
from conformance.commands.names import checked_backend
from conformance.commands.output import HTML_HELP, html_paths
from conformance.commands.selection import (
    MAX_EXAMPLES,
    add_jobs_option,
    add_selection_options,
    jobs_from,
    selection_from,
)
from conformance.config import allowed_categories, load_config
from conformance.errors import UsageError
from conformance.interrupts import exit_code
from conformance.judge.agreement import Migration, cells, migration
from conformance.judge.gate import GateConfig
from conformance.records import DEFAULT_OP
from conformance.render import console as show
from conformance.render import export, files
from conformance.render.agreement import left_out, matrix_tables
from conformance.render.summary import RunInfo
from conformance.runs import run_with_progress
from conformance.suite import Options, Selection, SuiteResult

HELP = "do backends give the same bits? a backends x backends table per dtype and direction, or --from/--to"


def configure(parser: argparse.ArgumentParser) -> None:
    add_selection_options(parser, backend_help=f"the main-environment backends, {', '.join(default_backends())}")
    add = parser.add_argument
    add("--from", dest="source", metavar="NAME", help="the backend you migrate from (with --to)")
    add("--to", dest="target", metavar="NAME", help="the backend you migrate to (with --from)")
    add("--allow", action="append", metavar="CATEGORY",
        help="with --from/--to: a triage category the migration may differ in and still exit 0 "
             "(repeat or comma-separate)")
    add("--json", metavar="PATH", help="write the JSON report (rows and the agreement section) here")
    add("--html", metavar="PATH", help=HTML_HELP)
    add("-q", "--quiet", action="store_true", help="print only the table (or, with --from/--to, the verdict)")
    add_jobs_option(parser)


# ----------------------------------------------------------------------------- arguments

def migration_pair(args: argparse.Namespace) -> Optional[tuple[str, str]]:
    """``(--from, --to)`` validated, or None without them."""
    if args.source is None and args.target is None:
        if args.allow:
            raise UsageError("--allow names the categories a migration may differ in; add --from A --to B")
        return None
    if args.source is None or args.target is None:
        raise UsageError("--from and --to go together: agree --from torch --to cann")
    if args.backend:
        raise UsageError("--from/--to name the two backends compared; drop --backend")
    source, target = checked_backend(args.source, flag="--from"), checked_backend(args.target, flag="--to")
    if source == target:
        raise UsageError(f"--from and --to are both {source!r}; name two backends")
    return source, target


def agree_selection(args: argparse.Namespace, pair: Optional[tuple[str, str]]) -> Selection:
    """Every selected backend a reference: each pair is compared once."""
    if pair is not None:
        args = argparse.Namespace(**{**vars(args), "backend": list(pair)})
    selection = selection_from(args)
    return replace(selection, references=selection.backends)


def agree_options(args: argparse.Namespace) -> Options:
    return Options(config=load_config(), seed=parse_int(args.seed, flag="--seed"),
                   max_examples=parse_int(args.max_examples, flag="--max-examples", maximum=MAX_EXAMPLES),
                   results_dir=None, jobs=jobs_from(args), plots=args.html is not None)


# ----------------------------------------------------------------------------- rendering

def render_matrix(result: SuiteResult, *, console: Console, quiet: bool = False) -> None:
    """The tables of every pair of backends, then (unless ``quiet``) how to read them and which
    backends a table leaves out; another renderer (HTML) takes the same ``cells``."""
    ops = dict.fromkeys(a.op for a in result.agreement)
    by_op = {op: cells([a for a in result.agreement if a.op == op]) for op in ops}
    for op, found in by_op.items():
        if op != DEFAULT_OP:
            console.print(f"{op} rows:", markup=False, style="bold")
        for table in matrix_tables(found, width=console.width):
            console.print(table)
    if quiet:
        return
    profiles = {r.backend: "/".join(p for p in (r.profile, r.variant) if p) for r in result.rows}
    shown = "; ".join(f"{b}: {p}" for b, p in profiles.items() if p)
    console.print("✓ bit-identical on every input and alpha; otherwise the differing elements and the "
                  "cause in a word, from both sides' triage against golden (n/a: no shared inputs)"
                  + (f". Profiles: {shown}" if shown else ""), markup=False, style="dim")
    for op, found in by_op.items():
        ran = list(dict.fromkeys(r.backend for r in result.rows if r.op == op))
        for line in left_out(found, backends=ran, skipped=result.skipped):
            console.print(line if op == DEFAULT_OP else line.replace("the ", f"the {op} ", 1), markup=False,
                          style="dim")


# ----------------------------------------------------------------------------- running

def report(result: SuiteResult, *, console: Console, quiet: bool, pair: Optional[tuple[str, str]],
           accepted: frozenset[str]) -> int:
    """Print the table or the migration verdict; the exit code."""
    if pair is None:
        render_matrix(result, console=console, quiet=quiet)
        return 0
    found: Migration = migration(result.agreement, source=pair[0], target=pair[1], accepted=accepted)
    if not found.rows:
        raise UsageError(f"{pair[0]} and {pair[1]} share no row (dtype pair, direction, alpha); "
                         "pick a --dtype and --direction both support")
    if not quiet:
        render_matrix(result, console=console)
    console.print(found.line, markup=False, soft_wrap=True)
    return 1 if found.outcome == "differs" else 0


def execute(args: argparse.Namespace) -> int:
    paths = files.prepare(html_paths(args), inputs={})
    pair = migration_pair(args)
    accepted = allowed_categories(items(args.allow, flag="--allow")) if args.allow else frozenset()
    selection, options = agree_selection(args, pair), agree_options(args)
    console, done = show.make_console(), []
    config: GateConfig = options.config
    with export.partial_on_interrupt(paths, lambda: done, seed=options.seed, config=config):
        result, planned = run_with_progress(selection, options, console=console, title="agree",
                                            quiet=args.quiet, done=done)
        if result.interruption is None:
            code = report(result, console=console, quiet=args.quiet, pair=pair, accepted=accepted)
        export.write_reports(result.rows, paths, seed=options.seed, partial=result.interrupted,
                             config=config, agreement=result.agreement,
                             info=RunInfo(environment=machine.describe()))
    if result.interruption is not None:
        console.print(f"interrupted after {len(result.rows)} of {planned} rows")
        return exit_code(result.interruption)
    return code
