"""`conformance replay`: not built yet (see the open issues)."""
from __future__ import annotations

import argparse

from conformance.errors import UsageError

HELP = "replay (not built yet)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rest", nargs=argparse.REMAINDER)


def execute(args: argparse.Namespace) -> int:
    raise UsageError("'replay' is not built yet")
