"""`conformance run`: not built yet (see the open issues)."""
from __future__ import annotations

import argparse

from conformance.errors import UsageError

HELP = "run (not built yet)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rest", nargs=argparse.REMAINDER)


def execute(args: argparse.Namespace) -> int:
    raise UsageError("'run' is not built yet")
