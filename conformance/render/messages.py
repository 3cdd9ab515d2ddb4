"""The one failure grammar: every line a person reads about a judged row.

``Mismatched elements: k / N (p%)``, the greatest differences with their index (decimal first,
bits after: ``12449.0 (0x1.8508p+13)``; one index style, ``[8]`` or ``[2, 3]``), and each
finding with its first offenders (decimal value and hex bits), as ``torch.testing``
words them.  The console, JUnit, the pytest plugin and the API all print these lines.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, Protocol

import numpy as np

from conformance.dtypes import info
from conformance.metrics import exact as met
from conformance.records import MAX_EXAMPLES, Offender, Shape
from conformance.reference.quantized import QDTYPES
from conformance.render.text import decimal_and_hex, index_text, percent


def describe_offender(example: Offender, *, shape: Optional[Shape] = None) -> str:
    """One line; ``shape`` (of the array the flat index points into) shapes the index."""
    where = f"index {index_text(example.index, shape)}"
    where += f" of {example.part}" if example.part else ""
    if example.core is not None:
        where += f" (core {example.core}" + (f", tile {example.tile})" if example.tile is not None else ")")
    if example.x is None and example.expected is None:
        return f"{where}: written outside the tensor"
    if example.x is None:  # a sum (PReLU's dweight): no one x to show
        return f"{where}: expected {show_value(example.expected)}, actual {show_value(example.actual)}"
    dy = f", dy={show_value(example.dy)}" if example.dy is not None else ""
    return f"{where}: x={show_value(example.x)}{dy}, expected {show_value(example.expected)}, " \
           f"actual {show_value(example.actual)}"


def show_value(v: Any) -> str:
    """Decimal, then the hex bits of a numpy scalar, e.g. ``-0.2 (0xb266)``; a quantized code as itself."""
    if np.asarray(v).dtype.kind in "iu":
        return str(int(v))
    bits = np.asarray(v).view(info(np.asarray(v).dtype).uint).item()
    width = np.asarray(v).dtype.itemsize * 2
    return f"{float(v)!r} (0x{bits:0{width}x})"


class _Finding(Protocol):
    category: str
    count: int
    summary: str
    examples: tuple[Offender, ...]


class JudgedRow(Protocol):
    """What a message needs of a judged row (``records.Row``)."""

    metrics: met.Metrics
    findings: Sequence[_Finding]

    def shape_of(self, part: str) -> Optional[Shape]: ...


def _where(at: met.Where, *, row: JudgedRow) -> str:
    """`` at index [i, j] of part``: a global flat index shown in its part's shape."""
    if at is None:
        return ""
    part, index = at
    return f" at index {index_text(index, row.shape_of(part))}" + (f" of {part}" if part else "")


def mismatch_line(mismatches: int, elements: int) -> str:
    """``Mismatched elements: k / N (p%)``, with a percentage that is non-zero when k is."""
    return f"Mismatched elements: {mismatches} / {elements} ({percent(mismatches, elements)})"


def metric_lines(row: JudgedRow) -> list[str]:
    """"Mismatched elements: k / N (p%)" and the greatest differences with their index; none for
    a row whose backend gave no output to compare (its refusal finding says why)."""
    m = row.metrics
    if sum(f.count for f in row.findings if f.category == "rejected-input") >= m.elements > 0:
        return []
    lines = [mismatch_line(m.mismatches, m.elements)]
    if m.mismatches and getattr(row, "dtype", None) in QDTYPES:  # codes: the distance is in codes
        return [*lines, f"Greatest code difference: {m.max_ulp}{_where(m.max_ulp_at, row=row)}"]
    return lines + _special_lines(m) + _distance_lines(row)


def _special_lines(m: met.Metrics) -> list[str]:
    """The mismatches no distance measures, said as what happened: NaN on one side, zeros of the
    other sign."""
    lines = []
    if m.nan_positions:
        lines.append(f"NaN on one side only: {_elements(m.nan_positions)} (no distance measures them)")
    if m.zero_signs:
        lines.append(f"Zero of the other sign: {_elements(m.zero_signs)} (-0.0 for 0.0, or the reverse)")
    return lines


def _distance_lines(row: JudgedRow) -> list[str]:
    """The greatest differences, decimal first and bits after, with their index; none when every
    mismatch is a NaN on one side or a zero's sign (no distance measures those)."""
    m = row.metrics
    if m.mismatches <= m.nan_positions + m.zero_signs:
        return []
    return [f"Greatest absolute difference: {decimal_and_hex(m.max_abs)}{_where(m.max_abs_at, row=row)}",
            f"Greatest relative difference: {m.max_rel!r}{_where(m.max_rel_at, row=row)}",
            f"Greatest ULP difference: {m.max_ulp}{_where(m.max_ulp_at, row=row)}"]


def _elements(count: int) -> str:
    return f"{count} element" + ("" if count == 1 else "s")


def describe(example: Offender, *, row: JudgedRow) -> str:
    """An offender's line with its index in the shape of the array it came from."""
    return describe_offender(example, shape=row.shape_of(example.part))


def failure_message(row: JudgedRow, *, offenders: int = MAX_EXAMPLES) -> str:
    """The metric lines, then each finding with its first offenders."""
    lines = metric_lines(row)
    for finding in row.findings:
        lines.append(f"{finding.category} x{finding.count}: {finding.summary}")
        lines += [f"  {describe(ex, row=row)}" for ex in finding.examples[:offenders]]
    return "\n".join(lines)
