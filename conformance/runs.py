"""The suite as the command line runs it: rows under a progress display, each timed, the quantized
rows beside the float rows, the gate against a baseline report, the console summary (skipped rows,
warnings, agreement), the reports written, and the exit code."""
from __future__ import annotations

import bisect
import functools
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, Optional

from rich.console import Console
from rich.markup import escape

from conformance import machine, prelu_suite, quantized_suite
from conformance.adapters import WARNINGS_NOTE
from conformance.backends import versions_of
from conformance.errors import UsageError
from conformance.frameworks.quantized_profiles import SUITE_PROFILES
from conformance.interrupts import exit_code
from conformance.judge.agreement import Collector
from conformance.judge.baseline import compare, judged_against
from conformance.judge.gate import GateConfig
from conformance.ops import ops_of
from conformance.records import DEFAULT_OP, Row, Skip, backend_label
from conformance.render import console as show
from conformance.render import export
from conformance.render import github as ci
from conformance.render.baseline import render as render_diff
from conformance.render.files import ReportPaths
from conformance.render.summary import RunInfo, command_line
from conformance.suite import (
    ExtraRow,
    Options,
    RowSpec,
    Selection,
    SuiteResult,
    backend_of,
    comparison_order,
    planned,
    processes,
    run_suite,
)


def execute_suite(selection: Selection, options: Options, paths: ReportPaths, *,
                  console: Console, title: str = "conformance", view: show.View = show.View(),
                  baseline: Optional[tuple[str, dict]] = None,
                  quantized: quantized_suite.QuantAsk = quantized_suite.BROUGHT) -> int:
    """Run with a progress display, render, write reports; return the exit code (against ``baseline``,
    a (path, report) pair, when given); ``quantized``: the quantized rows asked for by name.  An
    interruption outside the rows (planning, rendering, writing) still leaves a partial report."""
    result, done, timer = SuiteResult(), [], Timer()
    with export.partial_on_interrupt(paths, lambda: done, seed=options.seed, config=options.config,
                                     info=timer.info):
        result, planned = run_with_progress(selection, options, console=console, title=title,
                                            quiet=view.quiet, done=done, timer=timer, quantized=quantized)
        if baseline is not None and not result.interrupted:
            result.rows = gate_against(result.rows, baseline, console=console, view=view)
        render(result, console=console, view=view, environment=environment_line(timer.specs))
        info = timer.info()
        written = export.write_reports(result.rows, paths, seed=options.seed, partial=result.interrupted,
                                       config=options.config, info=info,
                                       agreement=result.agreement if selection.references else None)
        ci.publish(result.rows, info=info, interrupted=result.interrupted)
        show.print_policy(options.config.described, quiet=view.quiet)  # once the reports are written
    if result.interruption is not None:
        where = f"; partial report written to {', '.join(written)}" if written else ""
        if not view.quiet:
            console.print(f"interrupted after {len(result.rows)} of {planned} rows{where}")
        return exit_code(result.interruption)
    return 1 if any(r.verdict == "fail" for r in result.rows) else 0


def run_with_progress(selection: Selection, options: Options, *, console: Console, title: str,
                      quiet: bool, done: list[Row], timer: Optional[Timer] = None,
                      quantized: Optional[quantized_suite.QuantAsk] = None) -> tuple[SuiteResult, int]:
    """Plan and run the selection under a progress display; every finished row is put into ``done``
    in the planned order (for a partial report) and timed by ``timer``; ``quantized`` adds the
    selection's quantized rows (those its backends bring, and those it names).  The result, and
    the number of rows planned."""
    timer = timer or Timer()
    specs, skipped = planned(selection, options)
    quant_specs, quant_skipped = ([], []) if quantized is None else \
        quantized_suite.for_selection(selection, quantized)
    prelu_specs = prelu_suite.for_selection(selection)
    if not specs and not quant_specs and not prelu_specs:
        raise UsageError(no_op_rows(selection) or no_rows(skipped, also=quant_skipped))
    if selection.references:  # grouped as the collector needs them, the references first
        prelu_specs = [prelu_specs[i] for i in comparison_order(prelu_specs, selection.references)]
    prelu_agreement = Collector(selection.references) if selection.references else None
    place = {id(s): i for i, s in enumerate([*specs, *quant_specs, *prelu_specs])}
    placed: list[int] = []
    groups = side_by_side(selection, [*specs, *quant_specs, *prelu_specs], options)
    with show.make_progress(console=console, disable=quiet, ticking=groups is None) as progress:
        task = progress.add_task(title, total=len(specs) + len(quant_specs) + len(prelu_specs), groups=groups)

        def finished(spec: RowSpec | quantized_suite.QuantRowSpec | prelu_suite.PreluRowSpec, row: Row,
                     seconds: Optional[float] = None) -> None:
            at = bisect.bisect(placed, place[id(spec)])
            placed.insert(at, place[id(spec)])
            done.insert(at, row)
            timer.finished(row, seconds)
            progress.update(task, advance=1, description=escape(str(spec)), group=spec.backend, refresh=True)

        timer.begin(specs, skipped)
        result = run_suite(selection, options, specs=specs, on_row=finished,
                           extra=[*quantized_rows(quant_specs, config=options.config),
                                  *prelu_rows(prelu_specs, options=options, collector=prelu_agreement)])
        progress.update(task, description=f"{title}: {show.plural(len(result.rows), 'row')}")
    result.skipped = skipped
    result.agreement += prelu_agreement.found if prelu_agreement is not None else []
    for line in quant_skipped if not quiet else ():
        console.print(f"skipped {line}", markup=False)
    return result, len(specs) + len(quant_specs) + len(prelu_specs)


def quantized_rows(specs: Sequence[quantized_suite.QuantRowSpec], *, config: GateConfig) -> list[ExtraRow]:
    """The quantized rows as rows the suite runs after its own, each beside the float rows of the
    backend that brings it (tflite's beside tensorflow's)."""
    return [ExtraRow(q, SUITE_PROFILES[(q.backend, q.profile)].brought_by,
                     functools.partial(quantized_suite.run_quantized_row, q, config=config)) for q in specs]


def prelu_rows(specs: Sequence[prelu_suite.PreluRowSpec], *, options: Options,
               collector: Optional[Collector] = None) -> list[ExtraRow]:
    """The PReLU/RReLU rows as rows the suite runs after its own, each beside its backend's float rows (in this
    process when a worker serves it); a ``collector`` compares each with its references' rows."""
    return [ExtraRow(p, p.backend, functools.partial(prelu_suite.run_spec, p, config=options.config, seed=options.seed,
                                                     collector=collector),
                     here=p.worker is not None) for p in specs]


def side_by_side(selection: Selection, specs: Sequence[RowSpec | quantized_suite.QuantRowSpec],
                 options: Options) -> Optional[dict[str, int]]:
    """Rows per backend (quantized ones included) when the rows run on several processes (the
    progress says when each backend is done); None when they run one after another."""
    if processes(selection, options, rows=len(specs)) <= 1:
        return None
    return dict(Counter(s.backend for s in specs))


def no_rows(skipped: Sequence[tuple[RowSpec, str]], *, also: Sequence[str] = ()) -> str:
    """The usage error of a selection that plans no row, naming its own backends' reasons (and
    ``also``, the quantized rows' skip lines)."""
    reasons = "; ".join([*skip_lines(skipped), *also][:3]) or "no dtype, alpha or direction selected"
    if also and not skipped:  # quantized rows only, their frameworks missing: the fix is an install
        return f"the selection runs no rows ({reasons})"
    return f"the selection runs no rows ({reasons}); pick a --dtype or --direction the backend supports"


def no_op_rows(selection: Selection) -> Optional[str]:
    """The usage error of an ``--op`` that none of the selected backends computes (None: each has one)."""
    for op in (o for o in selection.ops or () if o != DEFAULT_OP):
        if not any(op in ops_of(selection.backend(name)) for name in selection.backends):
            return (f"--op {op}: none of {', '.join(selection.backends) or 'the selected backends'} computes it; "
                    "name a --backend that does (docs/reference/prelu.md lists them)")
    return None


def gate_against(rows: Sequence[Row], baseline: tuple[str, dict], *, console: Console,
                 view: show.View) -> list[Row]:
    """``rows`` judged against the baseline: only findings that are new or grown since it fail
    (see ``judge.baseline``); the changes are printed before the rows."""
    path, doc = baseline
    as_dicts = [export.row_dict(r) for r in rows]
    render_diff(compare(doc["rows"], as_dicts), console=console, against=path, quiet=view.quiet)
    return judged_against(rows, doc, against=path, as_dicts=as_dicts)


class Timer:
    """Seconds each finished row took (where it ran) and since the start."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.seconds: dict[tuple, float] = {}
        self.specs: Sequence[RowSpec] = ()
        self.skipped: Sequence[tuple[RowSpec, str]] = ()

    def begin(self, specs: Sequence[RowSpec], skipped: Sequence[tuple[RowSpec, str]]) -> None:
        """The rows ``specs`` start now (planning, which may start workers, is the run's, not the
        first row's); ``skipped`` are the rows planned out."""
        self.last = time.perf_counter()
        self.specs, self.skipped = specs, skipped

    def finished(self, row: Row, seconds: Optional[float] = None) -> None:
        """``row`` took ``seconds`` (None: the time since the last row finished here)."""
        now = time.perf_counter()
        self.seconds[row.key], self.last = now - self.last if seconds is None else seconds, now

    def info(self) -> RunInfo:
        """What the reports record of the run so far: command, versions, skipped rows, timings."""
        return RunInfo(command=command_line(), versions=framework_versions(self.specs),
                       environment=run_environment(self.specs),
                       skipped=tuple(as_skip(s, why) for s, why in self.skipped), seconds=dict(self.seconds),
                       total_seconds=time.perf_counter() - self.start)


def framework_versions(specs: Sequence[RowSpec]) -> dict[str, str]:
    """The versions each backend that ran reports of its framework (first report of a name wins)."""
    found: dict[str, str] = {}
    for spec in {(s.backend, s.profile, s.variant, s.worker): s for s in specs}.values():
        try:
            backend = backend_of(spec)
        except Exception:  # noqa: BLE001 - a backend that could not start has rows saying so, and no version
            continue
        found.update({k: v for k, v in versions_of(backend).items() if k not in found})
    return found


def run_environment(specs: Sequence[RowSpec]) -> dict[str, Any]:
    """This process's machine and FTZ/DAZ state now (:mod:`conformance.machine`), and what each
    worker that ran said of its own in its hello."""
    workers: dict[str, Any] = {}
    for spec in {(s.backend, s.profile, s.variant, s.worker): s for s in specs}.values():
        try:
            own = getattr(backend_of(spec), "machine", None)
        except Exception:  # noqa: BLE001 - a backend that could not start has rows saying so
            continue
        if isinstance(own, dict) and own:
            workers.setdefault(backend_label(spec.backend, spec.profile, spec.variant), own)
    return {**machine.describe(), **({"workers": workers} if workers else {})}


def environment_line(specs: Sequence[RowSpec]) -> str:
    """The console's one line of the run's environment: frameworks, CPU features, FTZ/DAZ, workers."""
    return machine.summary_line(run_environment(specs), versions=framework_versions(specs))


def as_skip(spec: RowSpec, reason: str) -> Skip:
    """A skipped row as the reports record it."""
    return Skip(*spec.key, reason)


def render(result: SuiteResult, *, console: Console, view: show.View = show.View(),
           environment: Optional[str] = None) -> None:
    """Panels and the folded table as ``view`` asks, skipped rows, the ``environment`` line, the
    one-line summary."""
    show.render_rows(result.rows, console=console, view=view)
    if not view.quiet:
        for reference in dict.fromkeys(a.reference for a in result.agreement):
            show.render_agreement([a for a in result.agreement if a.reference == reference], console=console,
                                  every_row=view.details == "all")
        own = own_batch_line(result.own_batches)
        if own:
            console.print(own, markup=False)
        for line in warnings_lines(result.rows):
            console.print(line, markup=False, soft_wrap=True)
    if result.skipped and not view.quiet:
        console.print(f"skipped {show.plural(len(result.skipped), 'row')} the backends do not support:")
        for line in skip_lines(result.skipped):
            console.print(f"  {line}", markup=False)
    if environment and not view.quiet:
        console.print(environment, markup=False, style="dim", soft_wrap=False)
    console.print(show.summary_line(result.rows, interrupted=result.interrupted))


def skip_lines(skipped: Sequence[tuple[RowSpec, str]]) -> list[str]:
    """One line per (backend, reason): how many rows, one example, and why."""
    groups: dict[tuple[str, str], list[RowSpec]] = {}
    for spec, why in skipped:
        groups.setdefault((spec.backend, why), []).append(spec)
    return [f"{show.plural(len(specs), 'row')}, e.g. {specs[0]}: {why}" for (_, why), specs in groups.items()]


def warnings_lines(rows: Sequence[Row]) -> list[str]:
    """One line per kernel that raised Python warnings: on how many rows, and the first message."""
    noted: dict[str, list[str]] = {}
    for row in rows:
        noted.setdefault(row.backend, []).extend(n for n in row.notes if n.startswith(WARNINGS_NOTE))
    return [f"note: {backend} raised Python warnings on {show.plural(len(notes), 'row')} (each row's notes in "
            f"the JSON count them); the first: {notes[0].split('(the first: ', 1)[-1].rstrip(')')}"
            for backend, notes in noted.items() if notes]


def own_batch_line(backends: Sequence[str]) -> Optional[str]:
    """One line naming the backends whose rows include boundary batches no other backend ran
    (their counts include them; the agreement leaves them out)."""
    if not backends:
        return None
    return (f"note: the counts of {', '.join(backends)} include boundary batches of their own "
            "(labelled with the backend's name, run on no other backend; see each row's notes in the "
            "JSON); other batches are the same for every backend")
