"""`conformance sweep`: exhaustive sweeps (every fp32 pattern, every 16-bit slope) that resume.

Exit codes as `run`: 0 pass, 1 gate failure, 2 usage error, 130/143 when Ctrl-C/SIGTERM
stopped it (the finished chunks stay in the store, the report is partial; run the same
command again to resume).
"""
from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Sequence
from typing import Optional

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from conformance.backends import names as backend_names
from conformance.backends import skip_reason
from conformance.commands.args import (
    HTML_HELP,
    add_gate_options,
    add_kernel_options,
    add_view_options,
    config_from,
    html_paths,
    items,
    parse_alpha,
    view_from,
)
from conformance.commands.run import _check_profile, _choice, parse_dtype
from conformance.dtypes import info
from conformance.errors import UsageError
from conformance.interrupts import exit_code
from conformance.judge.gate import GateConfig
from conformance.records import Row
from conformance.render import console as show
from conformance.render import export, files, github
from conformance.render.summary import RunInfo, command_line
from conformance.suite import Selection
from conformance.sweep import run as sweeping
from conformance.sweep.pairs import PairTotal
from conformance.sweep.spec import DIRECTIONS, MAX_CHUNK, MIN_CHUNK, X_CLASS_IDS, SweepSpec
from conformance.sweep.store import DEFAULT_STORE, Store

HELP = "exhaustive sweep (every fp32 pattern, or every 16-bit x and slope) in resumable chunks, on Dask"
DEFAULT_BACKENDS = ("torch", "cann")  # the exact golden is computed once per chunk for all of them
DEFAULT_CHUNK = 1 << 21  # measured faster per pattern than 2^22 (judging temporaries nearer the caches)
_INT = re.compile(r"0[xX][0-9a-fA-F]+|[0-9]+", re.ASCII)


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

def parse_count(text: str, *, flag: str, minimum: int = 0) -> int:
    """A whole number in ASCII hex (0x...) or decimal digits, >= ``minimum``."""
    spelled = text.strip()
    if not _INT.fullmatch(spelled) or len(spelled) > 40:
        raise UsageError(f"{flag} {spelled[:24]!r} is not a whole number; pass ASCII decimal or 0x hex digits")
    value = int(spelled, 0) if spelled[:2].lower() == "0x" else int(spelled)
    if value < minimum:
        raise UsageError(f"{flag} must be >= {minimum}, got {spelled}")
    return value


def parse_range(text: Optional[str]) -> tuple[int, Optional[int]]:
    """``START:STOP`` as (start, stop); (0, None) when not given."""
    if text is None:
        return 0, None
    start, sep, stop = text.partition(":")
    if not sep:
        raise UsageError(f"--range {text[:24]!r} needs START:STOP, e.g. 0:0x1000000")
    lo, hi = parse_count(start, flag="--range START"), parse_count(stop, flag="--range STOP")
    if lo >= hi:
        raise UsageError(f"--range {text[:40]!r} is empty; STOP must be greater than START")
    return lo, hi


def parse_chunk(text: str) -> int:
    """``--chunk`` within [MIN_CHUNK, MAX_CHUNK]."""
    value = parse_count(text, flag="--chunk")
    if not MIN_CHUNK <= value <= MAX_CHUNK:
        raise UsageError(f"--chunk must be between {MIN_CHUNK} ({MIN_CHUNK:#x}) and {MAX_CHUNK:,} "
                         f"({MAX_CHUNK:#x}) patterns, got {text.strip()[:24]}")
    return value


def _x_classes(args: argparse.Namespace, direction: str) -> tuple[Optional[str], ...]:
    chosen = items(args.x_class, flag="--x-class")
    if direction == "forward":
        if chosen:
            raise UsageError("--x-class applies to --direction backward only")
        return (None,)
    for name in chosen or ():
        _choice(name, X_CLASS_IDS, flag="--x-class")
    return chosen or X_CLASS_IDS


def _alpha(args: argparse.Namespace, dtype: str) -> Optional[float]:
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
        _choice(name, backend_names(), flag="--backend")
    direction = _choice(args.direction, DIRECTIONS, flag="--direction") or "forward"
    src, _, out = parse_dtype(args.dtype).partition("->")
    out = out or src
    if info(src).bits > 32:
        raise UsageError(f"--dtype {args.dtype!r}: a sweep covers fp32, fp16 or bf16 inputs (fp64 has 2^64 patterns)")
    alpha, classes = _alpha(args, src), _x_classes(args, direction)
    profile, variant = _check_profile(args, backends)
    selection = Selection(backends=backends, profile=profile, variant=variant)
    tol = config.tolerance(out)
    specs = []
    for name in backends:
        backend = selection.backend(name)
        if not backend.supports(src, out, direction):  # type: ignore[arg-type]
            why = skip_reason(backend, src, out, direction)  # type: ignore[arg-type]
            if not args.quiet:
                console.print(f"skipped {name} {src}->{out} {direction}: {why}", markup=False)
            continue
        specs += [SweepSpec(name, src, out, direction, alpha, getattr(backend, "profile", None),
                            getattr(backend, "variant", None), x,
                            (tol.rtol, tol.atol, tol.max_ulp, tol.strict_zeros)) for x in classes]
    if not specs:
        raise UsageError(f"no selected backend supports {src}->{out} {direction}; pick another --backend or --dtype")
    return specs


# ----------------------------------------------------------------------------- progress and lines

class RateColumn(ProgressColumn):
    """Patterns per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("? patterns/s" if not speed else f"{speed / 1e6:,.2f} M patterns/s", style="progress.data.speed")


def make_progress(*, console: Console, disable: bool) -> Progress | show.LineProgress:
    """A bar with the pattern rate on a terminal; progress lines on stderr on a pipe."""
    if not console.is_terminal:
        return show.LineProgress(disable=disable)
    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), TaskProgressColumn(),
                    RateColumn(), TextColumn("ETA"), TimeRemainingColumn(), TimeElapsedColumn(),
                    console=console, transient=False, disable=disable)


def total_line(row: Row, *, planned: int, x_class: Optional[str] = None) -> str:
    """``torch fp32->fp32 forward alpha=0.2: k of 4,294,967,296 differ from exact, all alpha-precision``."""
    m = row.metrics
    at = f" at x={x_class}" if x_class is not None else ""
    head = f"{row.title}{at}: {m.mismatches:,} of {m.elements:,} differ from exact"
    if m.elements < planned:
        head += f" (partial: {m.elements:,} of {planned:,} patterns swept)"
    if len(row.findings) == 1:
        return f"{head}, all {row.findings[0].category}"
    return head + "".join(f", {f.category} {f.count:,}" for f in row.findings)


def render(judged: Sequence[tuple[SweepSpec, Row]], plan: sweeping.Plan, *, console: Console,
           view: show.View, interrupted: bool, pairs: Sequence[PairTotal] = ()) -> None:
    """The run-style panels and table, one total line per sweep, one line per pair of backends
    (patterns whose bits differ), and the summary line."""
    rows = [row for _, row in judged]
    show.render_rows(rows, console=console, view=view)
    if not view.quiet:
        for spec, row in judged:
            planned = sum(hi - lo for lo, hi in plan.chunks[spec])
            console.print(total_line(row, planned=planned, x_class=spec.x_class), markup=False, soft_wrap=True)
        for total in pairs:
            console.print(total.line, markup=False, soft_wrap=True)
    console.print(show.summary_line(rows, interrupted=interrupted))


# ----------------------------------------------------------------------------- execution

def _workers(args: argparse.Namespace) -> int:
    if args.workers is None:
        return os.cpu_count() or 1
    return parse_count(args.workers, flag="--workers", minimum=1)


def _executor(args: argparse.Namespace, *, workers: int):  # noqa: ANN202 - a context manager
    from contextlib import nullcontext

    if args.scheduler is None and workers == 1:
        return nullcontext(sweeping.serial)
    return sweeping.dask_executor(workers=workers, scheduler=args.scheduler)


def execute(args: argparse.Namespace) -> int:
    paths = files.prepare(html_paths(args), inputs={"--config": args.config})
    console, view = show.make_console(), view_from(args)
    config = config_from(args)
    if not view.quiet:
        console.print(config.described, markup=False, soft_wrap=True)
    started = time.perf_counter()
    start, stop = parse_range(args.range)
    chunk, workers = parse_chunk(args.chunk), _workers(args)
    if args.scheduler is not None:
        sweeping.check_scheduler(args.scheduler)
    specs = specs_from(args, config=config, console=console)
    with Store(args.store) as store:
        try:
            plan = sweeping.make_plan(specs, store, start=start, stop=stop, chunk=chunk, config=config,
                                      fresh=args.fresh)
        except ValueError as exc:
            raise UsageError(f"--range/--chunk: {exc}") from None
        with export.placeholder(paths, seed=None, config=config):  # a vanished process leaves a fail
            interruption = _run(plan, store, args, workers=workers, console=console, view=view)
            judged = sweeping.report_rows(plan, store, config=config)
            pairs = sweeping.pair_totals(plan, store)
    rows = [row for _, row in judged]
    render(judged, plan, console=console, view=view, interrupted=interruption is not None, pairs=pairs)
    info = RunInfo(command=command_line(), total_seconds=time.perf_counter() - started)
    written = export.write_reports(rows, paths, seed=None, partial=interruption is not None, config=config,
                                   info=info)
    github.publish(rows, info=info, interrupted=interruption is not None)
    if interruption is not None:
        if not view.quiet:
            where = f"; partial report written to {', '.join(written)}" if written else ""
            console.print(f"interrupted: the finished chunks are in {args.store}; run the same command "
                          f"again to resume{where}", markup=False)
        return exit_code(interruption)
    return 1 if any(r.verdict == "fail" for r in rows) else 0


def _run(plan: sweeping.Plan, store: Store, args: argparse.Namespace, *, workers: int, console: Console,
         view: show.View) -> Optional[KeyboardInterrupt]:
    """Run the plan's missing chunks with a progress bar; the interruption, if one stopped it."""
    if not view.quiet:
        recomputed = plan.describe_recomputed()
        console.print(f"sweep: {len(plan.chunks)} sweep(s), {plan.stored} chunk row(s) from {args.store}, "
                      f"{len(plan.tasks)} chunk(s) to compute" + (f"; {recomputed}" if recomputed else ""),
                      markup=False)
    if not plan.tasks:
        return None
    try:
        with make_progress(console=console, disable=view.quiet) as progress:
            task = progress.add_task("sweep", total=plan.patterns, unit="pattern")
            with _executor(args, workers=workers) as execute:
                sweeping.run_plan(plan, store, execute, advance=lambda n: progress.update(task, advance=n))
    except KeyboardInterrupt as exc:
        return exc
    return None
