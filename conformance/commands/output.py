"""How a command shows its results: the view options (``--details``, ``-q``) and the report
paths (``--json``, ``--junit``, ``--html``)."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conformance.render.console import View
    from conformance.render.files import ReportPaths


def add_view_options(parser: argparse.ArgumentParser, *, details: bool = True) -> None:
    """``--details fail|warn|all`` (when the command has panels) and ``-q/--quiet``."""
    from conformance.render.console import DETAILS

    if details:
        parser.add_argument("--details", choices=DETAILS, default="fail",
                            help="panels for failing rows (fail, the default), also for warning rows "
                                 "(warn), and also the full per-alpha table (all)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the final verdict line")


def view_from(args: argparse.Namespace) -> View:
    """The rendering options the flags of :func:`add_view_options` ask for."""
    from conformance.render.console import View

    return View(details=getattr(args, "details", "fail"), quiet=bool(args.quiet))


HTML_HELP = "write the HTML report (tables and figures, one self-contained offline file) here"


def html_paths(args: argparse.Namespace) -> ReportPaths:
    """The --json, --junit, --csv (a command may have none) and --html paths."""
    from conformance.render.files import ReportPaths

    return ReportPaths(args.json, getattr(args, "junit", None), args.html, getattr(args, "csv", None))
