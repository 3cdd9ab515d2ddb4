"""A sweep as the command line runs it: the plan made against the checkpoint store, the missing
chunks computed (in this process or on Dask) under a pattern-rate progress bar, the rows judged
and shown (one total line per sweep, one line per pair of backends), the reports written, and
the exit code."""
from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
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

from conformance import machine
from conformance.errors import UsageError
from conformance.interrupts import exit_code
from conformance.judge.gate import GateConfig
from conformance.records import Row
from conformance.render import console as show
from conformance.render import export, github
from conformance.render.files import ReportPaths
from conformance.render.summary import RunInfo, command_line
from conformance.sweep import run as sweeping
from conformance.sweep.pairs import PairTotal
from conformance.sweep.spec import SweepSpec
from conformance.sweep.store import Store


@dataclass(frozen=True)
class SweepOptions:
    """Where the finished chunks are kept, which patterns are swept in what chunks, and where
    the chunks run."""

    store: str
    start: int
    stop: Optional[int]
    chunk: int
    fresh: bool  # recompute the chunks the store already holds
    workers: int
    scheduler: Optional[str]  # an existing Dask cluster; None: an embedded one, or this process


@dataclass(frozen=True)
class Swept:
    """The judged rows of a plan's sweeps, the totals of each pair of backends, and the
    interruption that stopped the chunks, if one did."""

    plan: sweeping.Plan
    judged: list[tuple[SweepSpec, Row]]
    pairs: list[PairTotal]
    interruption: Optional[KeyboardInterrupt]


def execute_sweeps(specs: Sequence[SweepSpec], options: SweepOptions, *, config: GateConfig,
                   paths: ReportPaths, console: Console, view: show.View, started: float) -> int:
    """Sweep, render, write the reports; the exit code (``started``: when the command started)."""
    swept = sweep(specs, options, config=config, paths=paths, console=console, view=view)
    rows = [row for _, row in swept.judged]
    interrupted = swept.interruption is not None
    render(swept.judged, swept.plan, console=console, view=view, interrupted=interrupted, pairs=swept.pairs)
    info = RunInfo(command=command_line(), environment=machine.describe(),
                   total_seconds=time.perf_counter() - started)
    written = export.write_reports(rows, paths, seed=None, partial=interrupted, config=config, info=info)
    github.publish(rows, info=info, interrupted=interrupted)
    if swept.interruption is not None:
        if not view.quiet:
            where = f"; partial report written to {', '.join(written)}" if written else ""
            console.print(f"interrupted: the finished chunks are in {options.store}; run the same command "
                          f"again to resume{where}", markup=False)
        return exit_code(swept.interruption)
    return 1 if any(r.verdict == "fail" for r in rows) else 0


def sweep(specs: Sequence[SweepSpec], options: SweepOptions, *, config: GateConfig, paths: ReportPaths,
          console: Console, view: show.View) -> Swept:
    """Plan against the store, compute the missing chunks, judge every sweep's rows; until they
    are judged, ``paths`` hold a failing placeholder (a vanished process leaves a fail)."""
    with Store(options.store) as store:
        try:
            plan = sweeping.make_plan(specs, store, start=options.start, stop=options.stop, chunk=options.chunk,
                                      config=config, fresh=options.fresh, plots=paths.html is not None)
        except ValueError as exc:
            raise UsageError(f"--range/--chunk: {exc}") from None
        with export.placeholder(paths, seed=None, config=config):
            interruption = run_missing(plan, store, options, console=console, view=view)
            judged = sweeping.report_rows(plan, store, config=config)
            pairs = sweeping.pair_totals(plan, store)
    return Swept(plan, judged, pairs, interruption)


def run_missing(plan: sweeping.Plan, store: Store, options: SweepOptions, *, console: Console,
                view: show.View) -> Optional[KeyboardInterrupt]:
    """Run the plan's missing chunks with a progress bar; the interruption, if one stopped it."""
    if not view.quiet:
        recomputed = plan.describe_recomputed()
        console.print(f"sweep: {len(plan.chunks)} sweep(s), {plan.stored} chunk row(s) from {options.store}, "
                      f"{len(plan.tasks)} chunk(s) to compute" + (f"; {recomputed}" if recomputed else ""),
                      markup=False)
    if not plan.tasks:
        return None
    try:
        with make_progress(console=console, disable=view.quiet) as progress:
            task = progress.add_task("sweep", total=plan.patterns, unit="pattern")
            with executor(options) as execute:
                sweeping.run_plan(plan, store, execute, advance=lambda n: progress.update(task, advance=n))
    except KeyboardInterrupt as exc:
        return exc
    return None


def executor(options: SweepOptions) -> AbstractContextManager[sweeping.Executor]:
    """This process for one worker and no scheduler; else a Dask cluster, embedded or ``scheduler``."""
    if options.scheduler is None and options.workers == 1:
        return nullcontext(sweeping.serial)
    return sweeping.dask_executor(workers=options.workers, scheduler=options.scheduler)


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


def total_line(row: Row, *, planned: int, x_class: Optional[str] = None) -> str:
    """``torch fp32 forward alpha=0.2: k of 4,294,967,296 differ from exact, all alpha-precision``."""
    m = row.metrics
    at = f" at x={x_class}" if x_class is not None else ""
    head = f"{row}{at}: {m.mismatches:,} of {m.elements:,} differ from exact"
    if m.elements < planned:
        head += f" (partial: {m.elements:,} of {planned:,} patterns swept)"
    if len(row.findings) == 1:
        return f"{head}, all {row.findings[0].category}"
    return head + "".join(f", {f.category} {f.count:,}" for f in row.findings)
