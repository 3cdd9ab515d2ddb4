"""Rich rendering: the triage table, a detail panel per failing/warning row, progress."""
from __future__ import annotations

from typing import Sequence

from rich.console import Console, Group
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from conformance.dtypes import info
from conformance.report.evaluate import MAX_EXAMPLES, Finding, Row, metric_lines

_DIRECTION = {"forward": "fwd", "backward": "bwd"}
_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}
_COLUMNS = ("backend", "dtype→out", "dir", "α", "elements", "mismatches", "max abs", "max rel",
            "max ULP", "findings", "verdict")


def _number(v: float) -> str:
    return f"{v:.3g}" if v == v and abs(v) != float("inf") else str(v)


def _backend(row: Row) -> str:
    extra = "/".join(p for p in (row.profile, row.variant) if p)
    return f"{row.backend} {extra}".strip()


def _findings_cell(findings: Sequence[Finding]) -> Text:
    text = Text()
    for i, f in enumerate(findings):
        text.append(("\n" if i else "") + f"{f.category} ×{f.count}",
                    style="yellow" if f.allowed else "red")
    return text


def _cells(row: Row) -> list:
    m = row.metrics
    pair = f"{info(row.dtype).short}→{info(row.out_dtype).short}"
    return [_backend(row), pair, _DIRECTION[row.direction], f"{row.alpha:g}", str(m.elements),
            str(m.mismatches), _number(m.max_abs), _number(m.max_rel), str(m.max_ulp),
            _findings_cell(row.findings), Text(row.verdict, style=_STYLE[row.verdict])]


def render_table(rows: Sequence[Row], *, console: Console) -> None:
    """The triage table: one line per row."""
    table = Table(title="LeakyReLU conformance", header_style="bold")
    for name in _COLUMNS:
        table.add_column(name, justify="right" if name in ("elements", "mismatches", "max ULP") else "left")
    for row in rows:
        table.add_row(*_cells(row))
    console.print(table)


def _panel_body(row: Row) -> Group:
    parts: list = [Text(line, style="dim") for line in metric_lines(row)]
    for f in row.findings:
        head = Text(f"{f.category} ×{f.count}", style="yellow" if f.allowed else "bold red")
        head.append(f"  {'allowed' if f.allowed else 'not allowed'}: {f.summary}", style="default")
        if "explained" in f.detail:
            head.append(f"  [explained {f.detail['explained']}, contradicted "
                        f"{f.detail.get('contradicted', 0)}]", style="dim")
        parts.append(head)
        parts += [Text(f"    {ex.describe()}") for ex in f.examples[:MAX_EXAMPLES]]
        if f.reproducer:
            parts.append(Text(f"    reproducer: {f.reproducer}", style="cyan"))
    return Group(*parts)


def render_details(rows: Sequence[Row], *, console: Console) -> None:
    """A panel per failing or warning row: categories, summaries, offenders, reproducers."""
    for row in rows:
        if row.verdict == "pass":
            continue
        title = f"{row.verdict.upper()}  {row.title}"
        console.print(Panel(_panel_body(row), title=title, title_align="left",
                            border_style=_STYLE[row.verdict]))


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def summary_line(rows: Sequence[Row], *, interrupted: bool = False) -> str:
    """``N rows: p passed, w warned, f failed: PASS|FAIL|INCOMPLETE``."""
    counts = {v: sum(r.verdict == v for r in rows) for v in ("pass", "warn", "fail")}
    overall = "INCOMPLETE" if interrupted else "FAIL" if counts["fail"] else "PASS"
    return (f"{plural(len(rows), 'row')}: {counts['pass']} passed, {counts['warn']} warned, "
            f"{counts['fail']} failed: {overall}")


def make_console(*, width: int = 160) -> Console:
    """A console that keeps the table readable when output is not a terminal."""
    probe = Console()
    return probe if probe.is_terminal else Console(width=width)


def make_progress(*, console: Console) -> Progress:
    """A progress bar for the suite (description, bar, n/m, elapsed)."""
    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=False)
