"""Rich rendering: a folded table that reads at a glance, detail panels, progress.

The default view is one line per (backend[profile/variant], dtype→out,
direction), with the alphas folded in: worst verdict, the categories with
their counts summed over alphas, the worst ULP, and which alphas did not pass.
Panels follow for failing rows only.  ``details`` widens that: ``warn`` adds the
warning rows' panels, ``all`` also the full per-alpha table.  ``quiet`` prints
the verdict line alone.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, TextIO

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from conformance.dtypes import info
from conformance.judge.gate import CATEGORIES, VERDICTS
from conformance.records import MAX_EXAMPLES, Row, RowKey
from conformance.reference.quantized import QDTYPES
from conformance.render.agreement import render_agreement  # noqa: F401 - the commands print it from here
from conformance.render.labels import is_quantized, panel_title, row_label, setting_line, setting_short, short_label
from conformance.render.messages import describe, metric_lines
from conformance.render.other_checks import legend, marked
from conformance.render.text import short_float, short_int
from conformance.render.widths import add_line, words_fit

Details = Literal["fail", "warn", "all"]
DETAILS: tuple[str, ...] = ("fail", "warn", "all")
CONSOLE_WIDTH = 120  # when output is not a terminal and COLUMNS is not set
_DIRECTION = {"forward": "fwd", "backward": "bwd"}
_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}
_RANK = {v: i for i, v in enumerate(VERDICTS)}  # pass < warn < fail
_PANELS = {"fail": ("fail",), "warn": ("fail", "warn"), "all": ("fail", "warn")}


@dataclass(frozen=True)
class View:
    """How much to print: panels for ``details`` and above, or the verdict line alone."""

    details: Details = "fail"
    quiet: bool = False


def _backend(row: RowKey) -> Text:
    """:func:`row_label` as a Text (the brackets are not markup)."""
    return Text(row_label(row))


def _short(dtype: str) -> str:
    """``fp16`` for a float dtype; a quantized dtype (``qint8``) by its name."""
    return dtype if dtype in QDTYPES else info(dtype).short


def _pair(row: Row) -> str:
    return f"{_short(row.dtype)}→{_short(row.out_dtype)}"


def _alpha(alpha: float) -> str:
    return f"{alpha:.3g}"


def _alphas(rows: Iterable[Row]) -> str:
    return " ".join(_alpha(r.alpha) for r in rows)


# ----------------------------------------------------------------------------- per-alpha table

def _findings_cell(findings: Iterable[tuple[str, int, bool]], *, sep: str = "\n") -> Text:
    """``category ×count`` per line (or joined by ``sep``), yellow when allowed, red when not."""
    text = Text()
    for i, (category, count, allowed) in enumerate(findings):
        text.append((sep if i else "") + f"{category} ×{short_int(count)}",
                    style="yellow" if allowed else "red")
    return text


def _cells(row: Row) -> list:
    m = row.metrics
    return [_stacked(row), _pair(row), _DIRECTION[row.direction], _alpha(row.alpha),
            short_int(m.elements), short_int(m.mismatches), short_float(m.max_abs),
            short_float(m.max_rel), short_int(m.max_ulp),
            _findings_cell((f.category, f.count, not f.gated) for f in row.findings),
            marked(Text(row.verdict, style=_STYLE[row.verdict]), (row,))]


def _stacked(row: Row) -> Text:
    """The short label, and under it a quantized row's setting (dim)."""
    cell = _backend(row)
    if is_quantized(row):
        cell.append(f"\n{setting_short(row)}", style="dim")
    return cell


_COLUMNS = ("backend", "dtype→out", "dir", "α", "elements", "mismatches", "max abs", "max rel",
            "max ULP", "findings", "verdict")
_RIGHT = frozenset({"elements", "mismatches", "max abs", "max rel", "max ULP"})
_UNDER = ("elements", "mismatches", "max abs", "max rel", "max ULP", "findings")  # under the line when narrow


def render_table(rows: Sequence[Row], *, console: Console) -> None:
    """The per-alpha table: one line per row (its findings on a line under it when the console
    is too narrow for them beside it)."""
    for moved in ((), _UNDER[-1:], _UNDER):
        table = _per_alpha_table(rows, under=moved)
        if words_fit(table, width=console.width):
            break
    console.print(table)


_OP_NAMES = {"leaky_relu": "LeakyReLU", "prelu": "PReLU", "rrelu": "RReLU"}


def _ops_title(rows: Iterable[Row]) -> str:
    """The operators of ``rows`` as a table's title names them: LeakyReLU, else each in order."""
    ops = [_OP_NAMES.get(op, op) for op in dict.fromkeys(r.op for r in rows)] or ["LeakyReLU"]
    return ops[0] if len(ops) == 1 else f"{', '.join(ops[:-1])} and {ops[-1]}"


def _per_alpha_table(rows: Sequence[Row], *, under: Sequence[str]) -> Table:
    """The per-alpha table with the columns ``under`` on a line under each row."""
    table = Table(title=f"{_ops_title(rows)} conformance: every row", header_style="bold", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, collapse_padding=True)
    under = {_COLUMNS.index(name): "" if name == "findings" else name for name in under}
    for i, name in enumerate(_COLUMNS):
        if i not in under:
            table.add_column(name, justify="right" if name in _RIGHT else "left",
                             no_wrap=name in _RIGHT or (name != "backend" and name != "findings"))
    for row in rows:
        add_line(table, _cells(row), under=under)
    return table


# ----------------------------------------------------------------------------- folded table

@dataclass(frozen=True)
class Folded:
    """The rows of one (backend, profile, variant, dtype, out_dtype, direction), alphas folded."""

    rows: tuple[Row, ...]

    @property
    def verdict(self) -> str:
        return max((r.verdict for r in self.rows), key=_RANK.__getitem__)

    @property
    def max_ulp(self) -> int:
        return max(r.metrics.max_ulp for r in self.rows)

    def categories(self) -> list[tuple[str, int, bool]]:
        """(category, count summed over alphas, allowed in every alpha), in triage order."""
        counts: dict[str, list] = {}
        for f in (f for r in self.rows for f in r.findings):
            entry = counts.setdefault(f.category, [0, True])
            entry[0] += f.count
            entry[1] = entry[1] and not f.gated
        return [(c, *counts[c]) for c in CATEGORIES if c in counts]

    def not_passing(self) -> str:
        """The failing alphas, then the warning ones marked apart: ``0.3``, ``all``, ``all but
        0 1``, ``0.3; warn 0.1 0.2``, ``warn all``."""
        fail = [r for r in self.rows if r.verdict == "fail"]
        warn = [r for r in self.rows if r.verdict == "warn"]
        parts = [self._span(fail)] if fail else []
        return "; ".join(parts + ([f"warn {self._span(warn)}"] if warn else []))

    def _span(self, chosen: Sequence[Row]) -> str:
        """``chosen`` alphas, as ``all`` or ``all but ...`` when they are most of the group; for
        quantized rows (one per setting) how many settings: ``2 of 5 settings``."""
        if len(chosen) == len(self.rows):
            return "all"
        if is_quantized(self.rows[0]):
            return f"{len(chosen)} of {len(self.rows)} settings"
        others = [r for r in self.rows if r not in chosen]
        if len(chosen) > 1 and 2 * len(chosen) > len(self.rows):
            return f"all but {_alphas(others)}"
        return _alphas(chosen)


def fold(rows: Sequence[Row]) -> list[Folded]:
    """Rows grouped by everything but alpha (and a quantized row's setting), in first-seen order."""
    groups: dict[tuple, list[Row]] = {}
    for row in rows:
        groups.setdefault(_group_key(row), []).append(row)
    return [Folded(tuple(g)) for g in groups.values()]


def _group_key(row: Row) -> tuple:
    return (row.op, short_label(row), row.dtype, row.out_dtype, row.direction)


def _folded_cells(group: Folded) -> list:
    first = group.rows[0]
    return [_backend(first), _pair(first), _DIRECTION[first.direction], short_int(group.max_ulp),
            _findings_cell(group.categories(), sep=", "), group.not_passing(),
            marked(Text(group.verdict, style=_STYLE[group.verdict]), group.rows)]


def _alphas_title(groups: Sequence[Folded]) -> str:
    sets = {tuple(r.alpha for r in g.rows) for g in groups}
    if len(sets) != 1:
        return "α folded"
    (alphas,) = sets
    return "α ∈ {" + ", ".join(map(_alpha, alphas)) + "} folded"


_FOLDED = (("backend", "left"), ("dtype→out", "left"), ("dir", "left"), ("max ULP", "right"),
           ("findings (summed)", "left"), ("α not passing", "left"), ("verdict", "left"))
_WRAPS = frozenset({"findings (summed)", "α not passing"})  # the others never break a word


def passing_backends(groups: Sequence[Folded]) -> dict[str, list[Folded]]:
    """Groups by backend label, for backends of more than one group where every group passes."""
    by_backend: dict[str, list[Folded]] = {}
    for group in groups:
        by_backend.setdefault(str(_backend(group.rows[0])), []).append(group)
    return {label: gs for label, gs in by_backend.items()
            if len(gs) > 1 and all(g.verdict == "pass" for g in gs)}


def _pair_short(row: Row) -> str:
    """``fp16`` for fp16→fp16, else the pair."""
    return _short(row.dtype) if row.dtype == row.out_dtype else _pair(row)


def _passing_cells(label: str, groups: Sequence[Folded]) -> list:
    pairs = " ".join(dict.fromkeys(_pair_short(g.rows[0]) for g in groups))
    dirs = "+".join(dict.fromkeys(_DIRECTION[g.rows[0].direction] for g in groups))
    return [Text(label), "all", "all", short_int(max(g.max_ulp for g in groups)),
            f"{plural(len(groups), 'line')} pass: {pairs} {dirs}", "", Text("pass", style=_STYLE["pass"])]


def render_folded(rows: Sequence[Row], *, console: Console) -> None:
    """One line per (backend, dtype→out, direction), the alphas folded in; a backend whose
    every line passes is one line."""
    groups = fold(rows)
    table = _folded_table(groups, stacked=False)
    if not words_fit(table, width=console.width):  # the findings under each line, as wide as it needs
        table = _folded_table(groups, stacked=True)
        words_fit(table, width=console.width)
    console.print(table)


_STACKED = "findings (summed)"  # the column that goes under its line when the console is narrow


def _folded_table(groups: Sequence[Folded], *, stacked: bool) -> Table:
    """The folded table; ``stacked``: each line's findings on a line of their own under it."""
    table = Table(title=f"{_ops_title([r for g in groups for r in g.rows])} conformance, {_alphas_title(groups)}",
                  header_style="bold",
                  box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True,
                  padding=(0, 0))
    under = {[name for name, _ in _FOLDED].index(_STACKED): ""} if stacked else {}
    for i, (name, justify) in enumerate(_FOLDED):
        if i not in under:
            table.add_column(name, justify=justify,  # type: ignore[arg-type]
                             no_wrap=name not in _WRAPS and not (stacked and i == 0))
    folded = passing_backends(groups)
    for group in groups:
        label = str(_backend(group.rows[0]))
        if label not in folded:
            add_line(table, _folded_cells(group), under=under)
        elif folded[label][0] is group:
            add_line(table, _passing_cells(label, folded[label]), under=under)
    return table


# ----------------------------------------------------------------------------- panels

def _panel_body(row: Row) -> Group:
    setting = setting_line(row)
    parts: list = [Text(line, style="dim") for line in [*([setting] if setting else []), *metric_lines(row)]]
    for f in row.findings:
        head = Text(f"{f.category} ×{f.count}", style="bold red" if f.gated else "yellow")
        head.append(f"  {'not allowed' if f.gated else 'allowed'}: {f.summary}", style="default")
        if "explained" in f.detail:
            head.append(f"  [explained {f.detail['explained']}, contradicted "
                        f"{f.detail.get('contradicted', 0)}]", style="dim")
        parts.append(head)
        parts += [Text(f"    {describe(ex, row=row)}") for ex in f.examples[:MAX_EXAMPLES]]
        if f.reproducer:
            parts.append(Text(f"    reproducer: {f.reproducer}", style="cyan"))
    return Group(*parts)


def render_details(rows: Sequence[Row], *, console: Console, details: Details = "warn") -> None:
    """A panel per failing row, and per warning row when ``details`` is ``warn`` or ``all``."""
    shown = _PANELS[details]
    for row in rows:
        if row.verdict not in shown:
            continue
        title = Text(f"{row.verdict.upper()}  {panel_title(row)}")  # a Text: [profile/variant] is not markup
        console.print(Panel(_panel_body(row), title=title, title_align="left",
                            border_style=_STYLE[row.verdict]))


def render_rows(rows: Sequence[Row], *, console: Console, view: View) -> None:
    """Everything but the verdict line: [per-alpha table], panels, then the folded table."""
    if view.quiet or not rows:
        return
    if view.details == "all":
        render_table(rows, console=console)
    render_details(rows, console=console, details=view.details)
    render_folded(rows, console=console)
    for line in footnotes(rows, details=view.details):
        console.print(line, markup=False, style="dim")


#: Categories a user may not expect to pass within tolerance: why they only warn, how to gate them.
_GATES = {"signed-zero": ("a zero's sign is within tolerance by default",
                          "--strict-zeros (or strict_zeros = true under [tool.conformance]) fails it")}


def footnotes(rows: Sequence[Row], *, details: Details = "fail") -> list[str]:
    """One line under the folded table for each thing it folds away: how to gate a warned category
    the user may not expect, and where a quantized line's settings are."""
    lines = []
    for category, (why, how) in _GATES.items():
        found = [f for r in rows if r.verdict == "warn" for f in r.findings
                 if f.category == category and not f.gated and not f.violations]
        if found:
            lines.append(f"note: {category} ×{short_int(sum(f.count for f in found))} only warned on "
                         f"{plural(len(found), 'row')} ({why}); {how}")
    if details != "all" and any(map(is_quantized, rows)):
        lines.append("note: a quantized line folds its rows, one per setting of scales and zero points; "
                     "--details all shows each row's setting, the JSON its variant")
    return lines + legend(rows)


# ----------------------------------------------------------------------------- summary

def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def print_policy(described: str, *, quiet: bool = False) -> None:
    """Which configuration judges the run (``GateConfig.described``), on stderr: stdout holds the
    report, and a script reading it wants the rows and the verdict; nothing when ``quiet``.  Printed
    once the reports are written, so a usage error is the only line on stderr."""
    if not quiet:
        print(described, file=sys.stderr, flush=True)


def summary_line(rows: Sequence[Row], *, interrupted: bool = False) -> str:
    """``N rows: p passed, w warned, f failed: PASS|FAIL|INCOMPLETE``."""
    counts = {v: sum(r.verdict == v for r in rows) for v in ("pass", "warn", "fail")}
    overall = "INCOMPLETE" if interrupted else "FAIL" if counts["fail"] else "PASS"
    return (f"{plural(len(rows), 'row')}: {counts['pass']} passed, {counts['warn']} warned, "
            f"{counts['fail']} failed: {overall}")


def make_console(*, width: Optional[int] = None) -> Console:
    """The terminal's console; when output is not a terminal, ``COLUMNS`` or 120 columns wide."""
    probe = Console()
    if probe.is_terminal:
        return probe
    return Console(width=width or (probe.width if os.environ.get("COLUMNS") else CONSOLE_WIDTH))


PROGRESS_EVERY = 30.0  # seconds between progress lines on a pipe while one backend keeps running


@dataclass
class _Task:
    title: str
    total: Optional[float]
    unit: str
    completed: float = 0
    group: Optional[str] = None
    in_group: float = 0  # completed in the current group
    shown: float = field(default_factory=time.monotonic)  # when the last line was printed
    totals: dict[str, float] = field(default_factory=dict)  # units per group, when groups run side by side
    in_groups: dict[str, float] = field(default_factory=dict)  # completed per group of ``totals``


class LineProgress:
    """Progress for a pipe, as CI reads it: plain lines on stderr, one each time a group (a backend)
    finishes, one every ``every`` seconds while a group runs, and one at the end, each
    ``TITLE progress: WHAT; DONE/TOTAL UNITS, SECONDS s``.  It takes the calls of rich's
    ``Progress`` that the commands make (``add_task``, ``update``).  When groups finish side by side
    (rows on several processes), ``add_task(groups=...)`` gives each group's total, and a group's
    line comes when its last unit is done."""

    def __init__(self, *, stream: Optional[TextIO] = None, every: float = PROGRESS_EVERY,
                 clock: Callable[[], float] = time.monotonic, disable: bool = False):
        self.stream, self.every, self.clock, self.disable = stream, every, clock, disable
        self.tasks: list[_Task] = []
        self.start = clock()

    def __enter__(self) -> LineProgress:
        self.start = self.clock()
        return self

    def __exit__(self, *exc: object) -> None:
        for task in self.tasks:
            if task.group is not None:
                self._line(task, f"{task.group} done ({_count(task.in_group, task.unit)})")
            self._line(task, "finished" if task.total is None or task.completed >= task.total else "stopped")

    def add_task(self, description: str, *, total: Optional[float] = None, unit: str = "row",
                 groups: Optional[dict[str, float]] = None, **_: Any) -> int:
        self.tasks.append(_Task(description, total, unit, shown=self.clock(), totals=dict(groups or {})))
        return len(self.tasks) - 1

    def update(self, task_id: int, *, advance: float = 0, group: Optional[str] = None, **_: Any) -> None:
        """Count ``advance`` more done, in ``group`` when given; print a line when a group ends
        or ``every`` seconds have passed since the last line."""
        task = self.tasks[task_id]
        if group is not None and task.in_groups.get(group, 0) < task.totals.get(group, 0):
            return self._side_by_side(task, group, advance=advance)
        if group is not None and task.group is not None and group != task.group:
            self._line(task, f"{task.group} done ({_count(task.in_group, task.unit)})")
            task.in_group = 0
        task.group = group if group is not None else task.group
        task.completed += advance
        task.in_group += advance
        if self.clock() - task.shown >= self.every:
            self._line(task, "running" + (f" {task.group}" if task.group else ""))

    def _side_by_side(self, task: _Task, group: str, *, advance: float) -> None:
        """:meth:`update` for a group of ``totals``: its line once all its units are done."""
        task.completed += advance
        task.in_groups[group] = task.in_groups.get(group, 0) + advance
        if task.in_groups[group] >= task.totals[group]:
            self._line(task, f"{group} done ({_count(task.in_groups[group], task.unit)})")
        elif self.clock() - task.shown >= self.every:
            running = [g for g, n in task.in_groups.items() if n < task.totals[g]]
            self._line(task, f"running {', '.join(running)}")

    def done(self, task_id: int, what: str, *, advance: float = 1) -> None:
        """Count ``advance`` more done and say at once that ``what`` finished."""
        task = self.tasks[task_id]
        task.completed += advance
        self._line(task, f"{what} done")

    def _line(self, task: _Task, what: str) -> None:
        task.shown = self.clock()
        if self.disable:
            return
        done = (f"{int(task.completed):,}/{_count(task.total, task.unit)}" if task.total is not None
                else _count(task.completed, task.unit))
        print(f"{task.title} progress: {what}; {done}, {self.clock() - self.start:.0f} s",
              file=self.stream or sys.stderr, flush=True)


def _count(n: Optional[float], unit: str) -> str:
    """``1 row``, ``1,024 rows``."""
    count = int(n or 0)
    return f"{count:,} {unit}" + ("" if count == 1 else "s")


def make_progress(*, console: Console, disable: bool = False, ticking: bool = True) -> Progress | LineProgress:
    """A progress bar for the suite (description, bar, n/m, elapsed), redrawn in place on a
    terminal; on a pipe, :class:`LineProgress` lines on stderr instead.  ``ticking=False``: the bar
    is redrawn only when updated with ``refresh=True``, by no thread of its own (a process about
    to fork must not have a thread holding the console's lock)."""
    if not console.is_terminal:
        return LineProgress(disable=disable)
    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=False,
                    disable=disable, auto_refresh=ticking)
