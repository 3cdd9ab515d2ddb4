"""`conformance tiling`: not built yet (see the open issues)."""
from __future__ import annotations

import argparse

from conformance.errors import UsageError

HELP = "tiling (not built yet)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rest", nargs=argparse.REMAINDER)


def execute(args: argparse.Namespace) -> int:
    raise UsageError("'tiling' is not built yet")
