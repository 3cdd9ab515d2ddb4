"""msprobe's two-dump workflow on the console: one line per call and direction, where an
msprobe user looks for them: each side's verdict against the golden, whether the two outputs
have the same bits, and msprobe's Cosine and One/Five Thousandth(s) Err Ratio of the device
against the benchmark; then one line per pair that differs, saying why."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from conformance.dtypes import short_name
from conformance.judge.call_pairs import CallPair
from conformance.records import MsprobeValue, Row

_DIRECTION = {"forward": "fwd", "backward": "bwd"}
_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}


def call_label(pair: CallPair) -> str:
    """``Functional.leaky_relu.1`` for ``Functional.leaky_relu.1.forward``: the direction has a column."""
    return pair.name.removesuffix(f".{pair.direction}")


def _verdict(row: Optional[Row]) -> Text:
    return Text("—", style="dim") if row is None else Text(row.verdict, style=_STYLE.get(row.verdict, ""))


def _dtypes(pair: CallPair) -> str:
    """The device's output dtype, and the benchmark's after a slash when it differs."""
    names = [short_name(r.out_dtype) for r in (pair.device, pair.benchmark) if r is not None]
    return "/".join(dict.fromkeys(names))


def _bits(pair: CallPair) -> Text:
    if not pair.partnered:
        return Text("no partner", style="yellow")
    if pair.agreement is None:
        return Text("not comparable", style="yellow")
    if pair.agreement.identical:
        return Text("✓ same", style="green")
    return Text(f"{pair.agreement.differing:,} / {pair.agreement.elements:,}", style="red")


def msprobe_number(value: Optional[MsprobeValue]) -> str:
    """A column value as the console shows it: six decimals, or msprobe's word for none."""
    if value is None:
        return ""
    return value if isinstance(value, str) else f"{value:.6f}"


def _table(pairs: Sequence[CallPair], *, title: str) -> Table:
    table = Table(title=title, header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  collapse_padding=True, padding=(0, 1), caption="1‰, 5‰: msprobe's One Thousandth and "
                  "Five Thousandths Err Ratio; verdicts against the golden")
    for name in ("call", "dir", "dtype", "device", "bench", "bits", "Cosine", "1‰", "5‰"):
        table.add_column(name, no_wrap=True, justify="right" if name in ("Cosine", "1‰", "5‰") else "left")
    for pair in pairs:
        columns = pair.columns
        numbers = ("", "", "") if columns is None else (columns.cosine, columns.one_thousandth_err_ratio,
                                                        columns.five_thousandths_err_ratio)
        table.add_row(Text(call_label(pair)), _DIRECTION.get(pair.direction, pair.direction), _dtypes(pair),
                      _verdict(pair.device), _verdict(pair.benchmark), _bits(pair),
                      *(msprobe_number(v) for v in numbers))
    return table


def counts_line(pairs: Sequence[CallPair]) -> str:
    """``pairs: 2 same bits, 3 differ, 1 not bit-comparable, 1 without partner``."""
    same = sum(p.same_bits is True for p in pairs)
    differ = sum(p.same_bits is False for p in pairs)
    alone = sum(not p.partnered for p in pairs)
    other = len(pairs) - same - differ - alone
    parts = [f"{same} same bits", f"{differ} differ", f"{other} not bit-comparable", f"{alone} without partner"]
    return f"{len(pairs)} calls × directions: " + ", ".join(p for p in parts if not p.startswith("0 "))


def render_pairs(pairs: Sequence[CallPair], *, console: Console, device: str, benchmark: str) -> None:
    """The per-call table, then why each pair that is not plainly the same bits is what it is."""
    if not pairs:
        return
    console.print(_table(pairs, title=f"device {device} against benchmark {benchmark}, call by call"))
    for pair in pairs:
        order = f"matched by order with the benchmark's {pair.benchmark_name}; " if pair.by_order else ""
        if order or pair.why != "same bits":
            label = Text(f"{call_label(pair)} {_DIRECTION.get(pair.direction, pair.direction)}: ", style="bold")
            console.print(label + Text(order + pair.why))
    console.print(counts_line(pairs), markup=False)
