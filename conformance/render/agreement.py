"""The agreement of backends, bit for bit, on the console: a line per backend against a reference
before the table of every compared row, and the backends x backends tables of ``agree``, split
into column groups the console's width holds with every word whole.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from conformance.dtypes import info
from conformance.judge.agreement import Agreement, Cell
from conformance.records import DEFAULT_OP, RowKey
from conformance.render.summary import AgreementTally, agreement_by_backend
from conformance.render.text import short_float
from conformance.render.widths import words_fit

_DIRECTION = {"forward": "fwd", "backward": "bwd"}
TOP_CAUSES = 3  # causes named per backend in the summary line


def _pair(dtype: str, out_dtype: str) -> str:
    return info(dtype).short + (f"→{info(out_dtype).short}" if out_dtype != dtype else "")


def _table(title: str) -> Table:
    return Table(title=title, header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                 collapse_padding=True, padding=(0, 1))


# ----------------------------------------------------------------------------- against a reference

def causes_text(tally: AgreementTally, *, top: int = TOP_CAUSES) -> str:
    """``alpha-precision 30, rounding 8``: the ``top`` causes with their rows, and how many more."""
    shown = [f"{cause} {n}" for cause, n in tally.causes[:top]]
    rest = len(tally.causes) - top
    return ", ".join(shown + ([f"{rest} more"] if rest > 0 else []))


_SUMMARY = (("backend", "left"), ("rows", "right"), ("same", "right"), ("differ", "right"),
            ("elements", "right"), ("causes (rows)", "left"))


def render_agreement_summary(found: Sequence[Agreement], *, console: Console) -> None:
    """One line per backend: its rows compared with the reference, how many have the same bits,
    how many differ (and in how many elements), and the causes that differ most often."""
    table = _table(f"agreement with {found[0].reference}, bit for bit on the same inputs, per backend")
    for name, justify in _SUMMARY:
        table.add_column(name, justify=justify, no_wrap=name != "causes (rows)")  # type: ignore[arg-type]
    for tally in agreement_by_backend(found):
        table.add_row(Text(tally.backend), str(tally.rows), str(tally.identical),
                      Text(str(tally.differing_rows), style="red" if tally.differing_rows else "green"),
                      f"{tally.differing:,}", causes_text(tally))
    words_fit(table, width=console.width)
    console.print(table)


def render_agreement(found: Sequence[Agreement], *, console: Console, every_row: bool = False) -> None:
    """The per-backend summary, then one line per backend, dtype pair and direction (the alphas
    folded), or with ``every_row`` one line per compared row: ✓ when bit-identical to the
    reference, else the count and why."""
    if not found:
        return
    render_agreement_summary(found, console=console)
    table = _every_row(found) if every_row else _folded(found)
    words_fit(table, width=console.width)
    console.print(table)


def _label(a: Agreement) -> str:
    return a.backend + (f"[{a.profile}]" if a.profile else "") + ("" if a.op == DEFAULT_OP else f" {a.op}")


def _every_row(found: Sequence[Agreement]) -> Table:
    table = _table(f"agreement with {found[0].reference}, every row, same inputs, bit for bit")
    for name in ("backend", "pair", "dir", "alpha", "differing", "why"):
        table.add_column(name, no_wrap=name != "why")
    for a in found:
        cell = Text("✓", style="green") if a.identical else Text(f"{a.differing:,} / {a.elements:,}", style="red")
        table.add_row(Text(_label(a)), _pair(a.dtype, a.out_dtype), _DIRECTION[a.direction], short_float(a.alpha),
                      cell, Text("" if a.identical else a.why))
    return table


def _folded(found: Sequence[Agreement]) -> Table:
    """One line per (backend, dtype pair, direction): the alphas with the same bits, the differing
    elements over every alpha, and the causes, most differing elements first."""
    table = _table(f"agreement with {found[0].reference}, α folded (each row: --details all)")
    for name in ("backend", "pair", "dir", "α same bits", "differing", "why"):
        table.add_column(name, no_wrap=name not in ("α same bits", "why"))
    groups: dict[tuple, list[Agreement]] = {}
    for a in found:
        groups.setdefault((_label(a), a.dtype, a.out_dtype, a.direction), []).append(a)
    for (label, dtype, out_dtype, direction), rows in groups.items():
        table.add_row(Text(label), _pair(dtype, out_dtype), _DIRECTION[direction], _same_alphas(rows),
                      *_differing_cells(rows))
    return table


def _same_alphas(rows: Sequence[Agreement]) -> str:
    same = [short_float(a.alpha) for a in rows if a.identical]
    return "all" if len(same) == len(rows) else " ".join(same) or "none"


def _differing_cells(rows: Sequence[Agreement]) -> tuple[Text, Text]:
    """``1,994,140 / 13,160,344`` over every alpha (✓ when none differs), and the causes."""
    if all(a.identical for a in rows):
        return Text("✓", style="green"), Text("")
    weight: dict[str, int] = {}
    for a in rows:
        if not a.identical:
            weight[a.cause] = weight.get(a.cause, 0) + max(a.differing, 1)
    causes = ", ".join(sorted(weight, key=lambda c: (-weight[c], c)))
    return (Text(f"{sum(a.differing for a in rows):,} / {sum(a.elements for a in rows):,}", style="red"),
            Text(causes))


# ----------------------------------------------------------------------------- backends x backends

def _cell_label(cell: Optional[Cell]) -> Text:
    if cell is None:
        return Text("")
    if cell.identical:
        return Text("✓", style="green")
    if cell.cause == "not comparable":
        return Text("n/a", style="yellow")
    return Text(f"{cell.differing:,}\n{cell.cause}", style="red")


def matrix_tables(found: Sequence[Cell], *, width: int) -> list[Table]:
    """One backends x backends table per (dtype, out_dtype, direction), in the order first seen;
    a table too wide for ``width`` with every word whole goes in parts, each with as many of the
    columns as fit (every part keeps every row)."""
    tables = []
    for key in dict.fromkeys((c.dtype, c.out_dtype, c.direction) for c in found):
        mine = [c for c in found if (c.dtype, c.out_dtype, c.direction) == key]
        who = list(dict.fromkeys(b for c in mine for b in (c.first, c.second)))
        by_pair = {frozenset((c.first, c.second)): c for c in mine}
        title = f"{_pair(key[0], key[1])} {_DIRECTION[key[2]]}: differing elements over every alpha, same inputs"
        tables += _column_groups(title, who, by_pair, width=width)
    return tables


def _column_groups(title: str, who: Sequence[str], by_pair: dict, *, width: int) -> list[Table]:
    """The table of ``who`` x ``who`` in parts of about equal numbers of columns, each part as many
    as ``width`` holds (at least one)."""
    most = len(who)
    while most > 1 and not words_fit(_matrix(title, who, who[:most], by_pair), width=width):
        most -= 1
    per = math.ceil(len(who) / math.ceil(len(who) / most))
    parts = []
    for start in range(0, len(who), per):
        table = _matrix(title if not parts else f"{title} (continued)", who, who[start:start + per], by_pair)
        words_fit(table, width=width)
        parts.append(table)
    return parts


def _matrix(title: str, rows: Sequence[str], columns: Sequence[str], by_pair: dict) -> Table:
    table = Table(title=title, header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, 1, 0, 0))
    table.add_column("", no_wrap=True)
    for b in columns:
        table.add_column(Text(b))
    for a in rows:
        table.add_row(Text(a), *(Text("·", style="dim") if a == b
                                 else _cell_label(by_pair.get(frozenset((a, b)))) for b in columns))
    return table


def left_out(found: Sequence[Cell], *, backends: Sequence[str],
             skipped: Sequence[tuple[RowKey, str]]) -> list[str]:
    """One line per backends x backends table that leaves out some of ``backends``: which, and
    why (the reason their rows of that dtype pair and direction were skipped)."""
    lines = []
    for key in dict.fromkeys((c.dtype, c.out_dtype, c.direction) for c in found):
        shown = {b for c in found if (c.dtype, c.out_dtype, c.direction) == key for b in (c.first, c.second)}
        missing = [b for b in backends if b not in shown]
        if missing:
            why = "; ".join(f"{b} ({_skip_reason(skipped, b, key) or 'no row ran'})" for b in missing)
            lines.append(f"note: the {_pair(key[0], key[1])} {_DIRECTION[key[2]]} table leaves out {why}")
    return lines


def _skip_reason(skipped: Sequence[tuple[RowKey, str]], backend: str, key: tuple) -> Optional[str]:
    """Why ``backend``'s rows of ``key`` (dtype, out_dtype, direction) were skipped, if they were."""
    return next((why for spec, why in skipped
                 if (spec.backend, spec.dtype, spec.out_dtype, spec.direction) == (backend, *key)), None)
