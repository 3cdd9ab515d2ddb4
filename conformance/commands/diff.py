"""`conformance diff OLD.json NEW.json`: what changed between two reports, finding by finding.

Exit codes: 1 when a finding is new or grown (or now fails) and fails its row,
0 otherwise, 2 when a report is unreadable or not a ``leakyrelu-conformance/1``
report.  See :mod:`conformance.judge.baseline` for the rules.
"""
from __future__ import annotations

import argparse

from conformance.commands.output import add_view_options, view_from
from conformance.judge.baseline import compare
from conformance.render import console as show
from conformance.render import files
from conformance.render.baseline import load_report, render, write_json
from conformance.render.files import ReportPaths

HELP = "compare two JSON reports: new, fixed, grown and shrunk findings per row (exit 1 if new ones fail)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", help="the earlier report (conformance run --json), e.g. the baseline")
    parser.add_argument("new", help="the later report")
    parser.add_argument("--json", metavar="PATH", help="write the changes as JSON here")
    add_view_options(parser, details=False)


def execute(args: argparse.Namespace) -> int:
    files.prepare(ReportPaths(args.json), inputs={"OLD": args.old, "NEW": args.new})
    old, new = load_report(args.old, flag="OLD"), load_report(args.new, flag="NEW")
    diff = compare(old["rows"], new["rows"])
    render(diff, console=show.make_console(), against=args.old, quiet=view_from(args).quiet)
    if args.json:
        write_json(diff, args.json, old=args.old, new=args.new)
    return 1 if diff.gating else 0
