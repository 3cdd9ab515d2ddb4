"""Column widths under which a table splits no word.

rich shrinks a table that is too wide by narrowing its widest wrapping columns, down through
the middle of a word (``alpha-precisi`` / ``on``) or to an ellipsis (``alpha-p…``).  Here the
wrapping columns get fixed widths: each at least its longest word, the rest of the console's
width shared out up to what each needs.  When even the longest words do not fit, nothing is
set and the caller lays the table out another way: some cells on a line under their row
(:func:`add_line`), or fewer columns.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.cells import cell_len
from rich.table import Column, Table
from rich.text import Text


def words_fit(table: Table, *, width: int) -> bool:
    """Whether ``table`` can be at most ``width`` wide with every word whole; when it can, its
    wrapping columns are given the widths that do it (:func:`settle`)."""
    spare = width - _fixed_width(table)
    wrapping = [c for c in table.columns if not c.no_wrap and c.width is None]
    lows = [_longest(_lines(c, words=True)) for c in wrapping]
    if sum(lows) > spare:
        return False
    highs = [max(low, _longest(_lines(c, words=False))) for c, low in zip(wrapping, lows)]
    for column, chosen in zip(wrapping, settle(lows, highs, spare=spare)):
        column.width = chosen
    return True


def settle(lows: Sequence[int], highs: Sequence[int], *, spare: int) -> list[int]:
    """Widths from ``lows`` up to ``highs`` within ``spare``: the columns that need least more get
    all they need first (a short column is not wrapped for a long one's sake), the last what is left."""
    widths = list(lows)
    left = spare - sum(widths)
    for i in sorted(range(len(widths)), key=lambda i: highs[i] - lows[i]):
        more = max(0, min(highs[i] - widths[i], left))
        widths[i] += more
        left -= more
    return widths


def add_line(table: Table, cells: list, *, under: Mapping[int, str]) -> None:
    """A line of cells; the cells at the indices of ``under`` taken out and put, each after its
    name there (``max ULP 3``; none for an empty name), in the first column of a line of their
    own, indented, when they hold anything."""
    moved = [(name, as_text(cells[i])) for i, name in under.items()]
    table.add_row(*(c for i, c in enumerate(cells) if i not in under))
    parts = [Text(f"{name} " if name else "").append_text(text) for name, text in moved if text.plain]
    if parts:
        line = Text("  ").append_text(Text(", ").join(parts))
        table.add_row(line, *([""] * (len(cells) - len(under) - 1)))


def as_text(cell: object) -> Text:
    """A cell as one line of text (the lines of a stacked cell joined by commas)."""
    text = cell if isinstance(cell, Text) else Text(str(cell))
    return Text(", ").join(text.split("\n"))


def _fixed_width(table: Table) -> int:
    """The width of everything but the wrapping columns' text: borders, padding, the columns
    that never wrap."""
    fixed = table._extra_width + sum(table._get_padding_width(c._index) for c in table.columns)
    return fixed + sum(c.width if c.width is not None else _longest(_lines(c, words=False))
                       for c in table.columns if c.no_wrap or c.width is not None)


def _lines(column: Column, *, words: bool) -> list[str]:
    """The column's header and cells as lines of text, or as words."""
    texts = [_plain(column.header), *(_plain(cell) for cell in column._cells)]
    lines = [line for text in texts for line in text.splitlines()]
    return [w for line in lines for w in line.split()] if words else lines


def _plain(cell: object) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return cell if isinstance(cell, str) else ""


def _longest(texts: Sequence[str]) -> int:
    return max((cell_len(t) for t in texts), default=0)
