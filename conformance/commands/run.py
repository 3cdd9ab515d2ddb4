"""`conformance run`: the conformance suite, its triage table, reports and gate.

Exit codes: 0 pass (warnings allowed), 1 gate failure, 2 usage error (or a
report that cannot be written, or a --baseline that is not a valid report), 3 an
internal error, 130 when Ctrl-C and 143 when SIGTERM stopped the run (in the
last three the completed rows are still reported, marked partial).
"""
from __future__ import annotations

import argparse

from conformance.commands.args import add_gate_options
from conformance.commands.names import references_from
from conformance.commands.output import HTML_HELP, add_view_options, html_paths, view_from
from conformance.commands.selection import (
    add_jobs_option,
    add_selection_options,
    options_from,
    run_selection_from,
)
from conformance.render import console as show
from conformance.render import files
from conformance.render.baseline import load_report
from conformance.runs import execute_suite

HELP = "run the conformance suite (golden, torch, tensorflow, cann, ...) and gate on it"


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add_selection_options(parser, reference=True)
    add("--json", metavar="PATH", help="write the JSON report here")
    add("--junit", metavar="PATH", help="write JUnit XML here")
    add("--html", metavar="PATH", help=HTML_HELP)
    add("--results-dir", default="results", metavar="DIR", help="where reproducers of failing rows go")
    add("--config", metavar="FILE", help="TOML gate configuration ([tool.conformance] table)")
    add("--baseline", metavar="OLD.json",
        help="gate only on findings that are new or larger than in this earlier --json report")
    add_jobs_option(parser)
    add_gate_options(parser)
    add_view_options(parser)


def execute(args: argparse.Namespace) -> int:
    paths = files.prepare(html_paths(args),
                          inputs={"--config": args.config, "--baseline": args.baseline},
                          results_dir=args.results_dir)
    baseline = None if args.baseline is None else (args.baseline, load_report(args.baseline, flag="--baseline"))
    selection, quantized = run_selection_from(args, references=references_from(args.reference))
    options = options_from(args)
    return execute_suite(selection, options, paths, console=show.make_console(), view=view_from(args),
                         baseline=baseline, quantized=quantized)
