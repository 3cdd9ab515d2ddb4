"""`conformance run`: the conformance suite, its triage table, reports and gate.

Exit codes: 0 pass (warnings allowed), 1 gate failure, 2 usage error (or a
report that cannot be written, or a --baseline that is not a valid report), 3 an
internal error, 130 when Ctrl-C and 143 when SIGTERM stopped the run (in the
last three the completed rows are still reported, marked partial).
"""
from __future__ import annotations

import argparse
import bisect
import functools
import os
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from rich.console import Console
from rich.markup import escape

from conformance import quantized_suite
from conformance.adapters import WARNINGS_NOTE
from conformance.backends import WorkerSpec, default_backends, is_import_path, load, profiles_of, versions_of
from conformance.backends import names as backend_names
from conformance.commands.args import (
    DTYPE_HELP,
    HTML_HELP,
    add_gate_options,
    add_kernel_options,
    add_view_options,
    config_from,
    html_paths,
    items,
    parse_alpha,
    parse_dtype,
    parse_int,
    view_from,
)
from conformance.errors import UsageError
from conformance.frameworks.quantized_profiles import SUITE_PROFILES
from conformance.interrupts import exit_code
from conformance.judge.baseline import compare, judged_against
from conformance.judge.gate import GateConfig
from conformance.records import Row, Skip
from conformance.render import console as show
from conformance.render import export, files
from conformance.render import github as ci
from conformance.render.baseline import load_report
from conformance.render.baseline import render as render_diff
from conformance.render.files import ReportPaths
from conformance.render.summary import RunInfo, command_line
from conformance.suite import (
    DIRECTIONS,
    SUITE_ALPHAS,
    ExtraRow,
    Options,
    RowSpec,
    Selection,
    SuiteResult,
    backend_of,
    plan,
    processes,
    run_suite,
)

MAX_EXAMPLES = 10_000  # hypothesis examples per dtype pair; more only slows the run
MAX_JOBS = 256
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
    add("--jobs", metavar="N",
        help="processes the rows run on (default: the cores this process may use); 1 runs every row "
             "in this process; the reports are the same either way")
    add_gate_options(parser)
    add_view_options(parser)


def add_selection_options(parser: argparse.ArgumentParser, *, reference: bool = False,
                          backend_help: str = "") -> None:
    """What to run (backends, dtypes, slopes, directions, kernel, workers, seed), as ``run`` and
    ``agree`` take it; ``reference``: also ``--reference``."""
    add = parser.add_argument
    add("--backend", action="append", metavar="NAME",
        help=f"one of {', '.join(backend_names())}, or your own as module:NAME or file.py:NAME, NAME a "
             "factory, a backend object or a kernel fn(x, alpha) "
             f"(repeat or comma-separate; default: {backend_help or ', '.join(default_backends())})")
    add("--dtype", action="append", metavar="D", help=f"{DTYPE_HELP}; repeat or comma-separate")
    add("--alpha", action="append", metavar="A", help="slope(s), e.g. 0.2 or 1/3 (default: the suite's 8)")
    add("--direction", action="append", metavar="DIR", help="forward or backward (default: both)")
    if reference:
        add("--reference", action="append", metavar="NAME",
            help="also compare every other backend's rows bit for bit with this backend's output on the "
                 "same inputs (a --backend name, added to the run if not selected; comma-separate "
                 "several: each is compared with the ones before it)")
    add_kernel_options(parser)
    add("--worker", action="append", metavar="CMD",
        help="run the backend a worker serves through it, e.g. \"ssh npu-host /opt/venv/bin/conformance "
             "worker --backend torch_npu\" (repeatable; without --backend only worker backends run)")
    add("--worker-timeout", default="600", metavar="S",
        help="seconds a worker may take per call before its row gets an error finding (default 600)")
    add("--seed", default="0", help="seed for random inputs and hypothesis examples (default 0)")
    add("--max-examples", default="100", help="hypothesis examples per dtype and direction (default 100)")


# ----------------------------------------------------------------------------- argument parsing

def _choice(value: Optional[str], choices: Sequence[str], *, flag: str) -> Optional[str]:
    if value is not None and value not in choices:
        raise UsageError(f"{flag} {value!r} is unknown; choose from {', '.join(choices)}")
    return value


def _profile_choices(backends: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The --profile and --variant values the selected backends declare."""
    found = [profiles_of(name) for name in backends]
    return (tuple(dict.fromkeys(p for ps, _ in found for p in ps)),
            tuple(dict.fromkeys(v for _, vs in found for v in vs)))


def _check_profile(args: argparse.Namespace, backends: Sequence[str]) -> tuple[Optional[str], Optional[str]]:
    if not (args.profile or args.variant):
        return None, None
    profiles, variants = _profile_choices(backends)
    if not (profiles or variants):
        raise UsageError(_profile_hint(args.profile, args.variant))
    return (_choice(args.profile, profiles, flag="--profile"),
            _choice(args.variant, variants, flag="--variant"))


def _profile_hint(profile: Optional[str], variant: Optional[str]) -> str:
    """Which backend a --profile/--variant value belongs to, as a fix to suggest."""
    declared = {n: _safe_profiles(n) for n in backend_names()}
    having = [n for n, (ps, vs) in declared.items() if profile in ps or variant in vs] or \
        [n for n, pv in declared.items() if any(pv)] or ["NAME"]
    return (f"--profile/--variant apply to the {' or '.join(having)} backend; "
            f"add --backend {having[0]}")


def _safe_profiles(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    try:
        return profiles_of(name)
    except UsageError:
        return (), ()


def workers_from(args: argparse.Namespace) -> tuple[tuple[str, WorkerSpec], ...]:
    """Start each --worker, learn from its handshake which backend it serves."""
    from conformance.worker.client import connect

    timeout = parse_seconds(args.worker_timeout, flag="--worker-timeout")
    found = []
    for command in args.worker or ():
        spec = WorkerSpec(command, timeout)
        found.append((connect(spec).name, spec))
    return tuple(found)


def parse_seconds(text: str, *, flag: str) -> float:
    """A finite number of seconds > 0; a UsageError otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{flag} {text!r}: pass a number of seconds > 0, such as 600")
    return value


def selection_from(args: argparse.Namespace, *, references: Sequence[str] = ()) -> Selection:
    """The suite selection the flags ask for, validated (UsageError on anything unknown);
    ``references`` (validated backend names) run first and every other row is compared with them."""
    chosen = items(args.backend, flag="--backend")
    for name in chosen or ():
        checked_backend(name, flag="--backend")
    directions = items(args.direction, flag="--direction") or DIRECTIONS
    for d in directions:
        _choice(d, DIRECTIONS, flag="--direction")
    dtypes, alphas = items(args.dtype, flag="--dtype"), items(args.alpha, flag="--alpha")
    dtypes = None if dtypes is None else tuple(dict.fromkeys(map(parse_dtype, dtypes)))
    alphas = SUITE_ALPHAS if alphas is None else tuple(dict.fromkeys(map(parse_alpha, alphas)))
    workers = workers_from(args)  # last: starting a worker is the slow part
    served = tuple(name for name, _ in workers)
    backends = tuple(dict.fromkeys((*references, *(chosen or (() if workers else default_backends())), *served)))
    profile, variant = _check_profile(args, [b for b in backends if b not in served])
    return Selection(backends=backends, workers=workers,
                     worker_timeout=parse_seconds(args.worker_timeout, flag="--worker-timeout"),
                     dtypes=dtypes, alphas=alphas, directions=tuple(directions),  # type: ignore[arg-type]
                     profile=profile, variant=variant, references=tuple(references))


def checked_backend(name: str, *, flag: str) -> str:
    """A backend name or import path, validated (an import path that does not load is exit 2
    before any work)."""
    if is_import_path(name):
        load(name)
        return name
    return _choice(name, backend_names(), flag=flag) or name


def references_from(values: Optional[Sequence[str]]) -> tuple[str, ...]:
    """The --reference backends (repeated or comma-separated), validated as --backend is."""
    names = items(values, flag="--reference") or ()
    return tuple(dict.fromkeys(checked_backend(n, flag="--reference") for n in names))


def options_from(args: argparse.Namespace) -> Options:
    config = config_from(args)
    jobs = available_cores() if args.jobs is None else parse_int(args.jobs, flag="--jobs", minimum=1,
                                                                 maximum=MAX_JOBS)
    return Options(config=config, seed=parse_int(args.seed, flag="--seed"),
                   max_examples=parse_int(args.max_examples, flag="--max-examples", maximum=MAX_EXAMPLES),
                   results_dir=Path(args.results_dir), jobs=jobs)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# ----------------------------------------------------------------------------- reports

def skip_lines(skipped: Sequence[tuple[RowSpec, str]]) -> list[str]:
    """One line per (backend, reason): how many rows, one example, and why."""
    groups: dict[tuple[str, str], list[RowSpec]] = {}
    for spec, why in skipped:
        groups.setdefault((spec.backend, why), []).append(spec)
    return [f"{show.plural(len(specs), 'row')}, e.g. {specs[0]}: {why}" for (_, why), specs in groups.items()]


def render(result: SuiteResult, *, console: Console, view: show.View = show.View()) -> None:
    """Panels and the folded table as ``view`` asks, skipped rows, the one-line summary."""
    show.render_rows(result.rows, console=console, view=view)
    if not view.quiet:
        for reference in dict.fromkeys(a.reference for a in result.agreement):
            show.render_agreement([a for a in result.agreement if a.reference == reference], console=console)
        own = own_batch_line(result.own_batches)
        if own:
            console.print(own, markup=False)
        for line in warnings_lines(result.rows):
            console.print(line, markup=False, soft_wrap=True)
    if result.skipped and not view.quiet:
        console.print(f"skipped {show.plural(len(result.skipped), 'row')} the backends do not support:")
        for line in skip_lines(result.skipped):
            console.print(f"  {line}", markup=False)
    console.print(show.summary_line(result.rows, interrupted=result.interrupted))


def as_skip(spec: RowSpec, reason: str) -> Skip:
    """A skipped row as the reports record it."""
    return Skip(spec.backend, spec.profile, spec.variant, spec.dtype, spec.out_dtype, spec.direction,
                spec.alpha, reason)


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
        return RunInfo(command=command_line(), versions=framework_versions(self.specs),
                       skipped=tuple(as_skip(s, why) for s, why in self.skipped), seconds=dict(self.seconds),
                       total_seconds=time.perf_counter() - self.start)


def execute_suite(selection: Selection, options: Options, paths: ReportPaths, *,
                  console: Console, title: str = "conformance", view: show.View = show.View(),
                  baseline: Optional[tuple[str, dict]] = None) -> int:
    """Run with a progress display, render, write reports; return the exit code (against ``baseline``,
    a (path, report) pair, when given).  An interruption outside the rows (planning, rendering,
    writing) still leaves a partial report."""
    result, done, timer = SuiteResult(), [], Timer()
    if not view.quiet:
        console.print(options.config.described, markup=False, soft_wrap=True)
    with export.partial_on_interrupt(paths, lambda: done, seed=options.seed, config=options.config,
                                     info=timer.info):
        result, planned = run_with_progress(selection, options, console=console, title=title,
                                            quiet=view.quiet, done=done, timer=timer, quantized=True)
        if baseline is not None and not result.interrupted:
            result.rows = gate_against(result.rows, baseline, console=console, view=view)
        render(result, console=console, view=view)
        info = timer.info()
        written = export.write_reports(result.rows, paths, seed=options.seed, partial=result.interrupted,
                                       config=options.config, info=info,
                                       agreement=result.agreement if selection.references else None)
        ci.publish(result.rows, info=info, interrupted=result.interrupted)
    if result.interruption is not None:
        where = f"; partial report written to {', '.join(written)}" if written else ""
        if not view.quiet:
            console.print(f"interrupted after {len(result.rows)} of {planned} rows{where}")
        return exit_code(result.interruption)
    return 1 if any(r.verdict == "fail" for r in result.rows) else 0


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


def run_with_progress(selection: Selection, options: Options, *, console: Console, title: str,
                      quiet: bool, done: list[Row], timer: Optional[Timer] = None,
                      quantized: bool = False) -> tuple[SuiteResult, int]:
    """Plan and run the selection under a progress display; every finished row is put into ``done``
    in the planned order (for a partial report) and timed by ``timer``; ``quantized`` adds the
    selection's quantized rows.  The result, and the number of rows planned."""
    timer = timer or Timer()
    specs, skipped = plan(selection)
    if not specs:
        raise UsageError(no_rows(skipped))
    quant_specs, quant_skipped = quantized_suite.for_selection(selection) if quantized else ([], [])
    place = {id(s): i for i, s in enumerate([*specs, *quant_specs])}
    placed: list[int] = []
    groups = side_by_side(selection, [*specs, *quant_specs], options)
    with show.make_progress(console=console, disable=quiet, ticking=groups is None) as progress:
        task = progress.add_task(title, total=len(specs) + len(quant_specs), groups=groups)

        def finished(spec: RowSpec | quantized_suite.QuantRowSpec, row: Row, seconds: Optional[float] = None) -> None:
            at = bisect.bisect(placed, place[id(spec)])
            placed.insert(at, place[id(spec)])
            done.insert(at, row)
            timer.finished(row, seconds)
            progress.update(task, advance=1, description=escape(str(spec)), group=spec.backend, refresh=True)

        timer.begin(specs, skipped)
        result = run_suite(selection, options, specs=specs, on_row=finished,
                           extra=quantized_rows(quant_specs, config=options.config))
        progress.update(task, description=f"{title}: {show.plural(len(result.rows), 'row')}")
    result.skipped = skipped
    for line in quant_skipped if not quiet else ():
        console.print(f"skipped {line}", markup=False)
    return result, len(specs) + len(quant_specs)


def quantized_rows(specs: Sequence[quantized_suite.QuantRowSpec], *, config: GateConfig) -> list[ExtraRow]:
    """The quantized rows as rows the suite runs after its own, each beside the float rows of the
    backend that brings it (tflite's beside tensorflow's)."""
    return [ExtraRow(q, SUITE_PROFILES[(q.backend, q.profile)].brought_by,
                     functools.partial(quantized_suite.run_quantized_row, q, config=config)) for q in specs]


def side_by_side(selection: Selection, specs: Sequence[RowSpec | quantized_suite.QuantRowSpec],
                 options: Options) -> Optional[dict[str, int]]:
    """Rows per backend (quantized ones included) when the rows run on several processes (the
    progress says when each backend is done); None when they run one after another."""
    if processes(selection, options, rows=len(specs)) <= 1:
        return None
    return dict(Counter(s.backend for s in specs))


def no_rows(skipped: Sequence[tuple[RowSpec, str]]) -> str:
    """The usage error of a selection that plans no row, naming its own backends' reasons."""
    reasons = "; ".join(skip_lines(skipped)[:3]) or "no dtype, alpha or direction selected"
    return f"the selection runs no rows ({reasons}); pick a --dtype or --direction the backend supports"


def gate_against(rows: Sequence[Row], baseline: tuple[str, dict], *, console: Console,
                 view: show.View) -> list[Row]:
    """``rows`` judged against the baseline: only findings that are new or grown since it fail
    (see ``report.baseline``); the changes are printed before the rows."""
    path, doc = baseline
    diff = compare(doc["rows"], [export.row_dict(r) for r in rows])
    render_diff(diff, console=console, against=path, quiet=view.quiet)
    return judged_against(rows, doc, against=path, as_dicts=[export.row_dict(r) for r in rows])


def execute(args: argparse.Namespace) -> int:
    paths = files.prepare(html_paths(args),
                          inputs={"--config": args.config, "--baseline": args.baseline},
                          results_dir=args.results_dir)
    baseline = None if args.baseline is None else (args.baseline, load_report(args.baseline, flag="--baseline"))
    selection = selection_from(args, references=references_from(args.reference))
    options = options_from(args)
    return execute_suite(selection, options, paths, console=show.make_console(), view=view_from(args),
                         baseline=baseline)
