"""`conformance sweep`: exhaustive sweeps (every fp32 pattern, every 16-bit slope) that resume.

Exit codes as `run`: 0 pass, 1 gate failure, 2 usage error, 130/143 when Ctrl-C/SIGTERM
stopped it (the finished chunks stay in the store, the report is partial; run the same
command again to resume).
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Optional

from rich.console import Console

from conformance.backends import names as backend_names
from conformance.commands.args import (
    add_gate_options,
    add_kernel_options,
    config_from,
    items,
    parse_alpha,
    parse_count,
    parse_dtype,
    parse_range,
)
from conformance.commands.names import check_profile, choice
from conformance.commands.output import HTML_HELP, add_view_options, html_paths, view_from
from conformance.dtypes import info
from conformance.errors import UsageError
from conformance.judge.gate import GateConfig
from conformance.render import console as show
from conformance.render import files
from conformance.sweep import run as sweeping
from conformance.sweep.execution import SweepOptions, execute_sweeps
from conformance.sweep.selection import sweep_specs
from conformance.sweep.spec import DIRECTIONS, MAX_CHUNK, MIN_CHUNK, X_CLASS_IDS, SweepSpec
from conformance.sweep.store import DEFAULT_STORE

HELP = "exhaustive sweep (every fp32 pattern, or every 16-bit x and slope) in resumable chunks, on Dask"
DEFAULT_BACKENDS = ("torch", "cann")  # the exact golden is computed once per chunk for all of them
DEFAULT_CHUNK = 1 << 21  # measured faster per pattern than 2^22 (judging temporaries nearer the caches)


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--backend", action="append", metavar="NAME",
        help=f"one of {', '.join(backend_names())} (repeat or comma-separate; default: "
             f"{', '.join(DEFAULT_BACKENDS)})")
    add("--dtype", default="fp32", metavar="D", help="fp32 (default), fp16, bf16, or a pair such as fp32:fp16")
    add("--alpha", metavar="A", help="the slope, e.g. 0.2 or 1/3 (default 0.2; not with --sweep-alpha)")
    add("--direction", default="forward", metavar="DIR", help="forward (default) or backward")
    add_kernel_options(parser)
    add("--x-class", action="append", metavar="X",
        help=f"backward: the fixed x the dy patterns are swept against, of {', '.join(X_CLASS_IDS)} "
             "(repeat or comma-separate; write --x-class=-1 for a leading minus; default: all)")
    add("--sweep-alpha", action="store_true",
        help="fp16/bf16: sweep every finite slope pattern too (2^16 x or dy patterns per slope)")
    add("--range", metavar="START:STOP",
        help="patterns [START, STOP) only, hex (0x...) or decimal (default: all)")
    add("--chunk", default=str(DEFAULT_CHUNK), metavar="N",
        help=f"patterns per chunk, the unit of work and of the store, {MIN_CHUNK:#x} to {MAX_CHUNK:#x} "
             f"(default {DEFAULT_CHUNK})")
    add("--workers", metavar="N", help="worker processes of the embedded Dask cluster (default: "
                                       "the number of cores; 1 runs in this process without Dask)")
    add("--scheduler", metavar="tcp://HOST:PORT", help="run the chunks on this existing Dask cluster")
    add("--store", default=str(DEFAULT_STORE), metavar="PATH",
        help=f"SQLite checkpoint store of finished chunks (default {DEFAULT_STORE})")
    add("--fresh", action="store_true", help="recompute the chunks the store already holds")
    add("--json", metavar="PATH", help="write the JSON report here")
    add("--junit", metavar="PATH", help="write JUnit XML here")
    add("--html", metavar="PATH", help=HTML_HELP)
    add("--config", metavar="FILE", help="TOML gate configuration ([tool.conformance] table)")
    add_gate_options(parser)
    add_view_options(parser)


# ----------------------------------------------------------------------------- argument parsing

def parse_chunk(text: str) -> int:
    """``--chunk`` within [MIN_CHUNK, MAX_CHUNK]."""
    value = parse_count(text, flag="--chunk")
    if not MIN_CHUNK <= value <= MAX_CHUNK:
        raise UsageError(f"--chunk must be between {MIN_CHUNK} ({MIN_CHUNK:#x}) and {MAX_CHUNK:,} "
                         f"({MAX_CHUNK:#x}) patterns, got {text.strip()[:24]}")
    return value


def _x_classes(args: argparse.Namespace, direction: str) -> tuple[Optional[str], ...]:
    """The --x-class values of a backward sweep (default: all); (None,) forward."""
    chosen = items(args.x_class, flag="--x-class")
    if direction == "forward":
        if chosen:
            raise UsageError("--x-class applies to --direction backward only")
        return (None,)
    for name in chosen or ():
        choice(name, X_CLASS_IDS, flag="--x-class")
    return chosen or X_CLASS_IDS


def _alpha(args: argparse.Namespace, dtype: str) -> Optional[float]:
    """The --alpha slope (default 0.2); None with --sweep-alpha, which sweeps every slope."""
    if not args.sweep_alpha:
        return 0.2 if args.alpha is None else parse_alpha(args.alpha)
    if args.alpha is not None:
        raise UsageError("--sweep-alpha sweeps every slope; drop --alpha")
    if info(dtype).bits != 16:
        raise UsageError("--sweep-alpha needs --dtype fp16 or bf16 (2^16 slopes x 2^16 x patterns)")
    return None


def specs_from(args: argparse.Namespace, *, config: GateConfig, console: Console) -> list[SweepSpec]:
    """The sweeps the flags ask for, one per (backend, x class); unsupported backends are skipped."""
    backends = items(args.backend, flag="--backend") or DEFAULT_BACKENDS
    for name in backends:
        choice(name, backend_names(), flag="--backend")
    direction = choice(args.direction, DIRECTIONS, flag="--direction") or "forward"
    src, _, out = parse_dtype(args.dtype).partition("->")
    out = out or src
    if info(src).bits > 32:
        raise UsageError(f"--dtype {args.dtype!r}: a sweep covers fp32, fp16 or bf16 inputs (fp64 has 2^64 patterns)")
    alpha, classes = _alpha(args, src), _x_classes(args, direction)
    profile, variant = check_profile(args, backends)

    def skipped(line: str) -> None:
        if not args.quiet:
            console.print(line, markup=False)

    return sweep_specs(backends, src=src, out=out, direction=direction, alpha=alpha, x_classes=classes,
                       profile=profile, variant=variant, config=config, on_skip=skipped)


def _workers(args: argparse.Namespace) -> int:
    """--workers (default: the machine's cores)."""
    if args.workers is None:
        return os.cpu_count() or 1
    return parse_count(args.workers, flag="--workers", minimum=1)


def execute(args: argparse.Namespace) -> int:
    paths = files.prepare(html_paths(args), inputs={"--config": args.config})
    console, view = show.make_console(), view_from(args)
    config = config_from(args)
    started = time.perf_counter()
    start, stop = parse_range(args.range)
    chunk, workers = parse_chunk(args.chunk), _workers(args)
    if args.scheduler is not None:
        sweeping.check_scheduler(args.scheduler)
    specs = specs_from(args, config=config, console=console)
    options = SweepOptions(args.store, start, stop, chunk, args.fresh, workers, args.scheduler)
    code = execute_sweeps(specs, options, config=config, paths=paths, console=console, view=view, started=started)
    show.print_policy(config.described, quiet=view.quiet)  # once the reports are written
    return code
