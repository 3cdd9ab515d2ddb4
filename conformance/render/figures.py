"""The HTML report's figures of one row, as inline SVG (``render.svg``), from the row's ``plots``
in the report document (``judge.plots``) and its findings' examples.

- the transfer picture: the output against the input (the gradient against the upstream
  gradient, backward), the golden line through the sampled elements' golden values, the
  sampled elements of the whole batch in grey and each category's differing ones in its
  colour, the offenders of the row's table ringed: a wrong slope is a second line;
- the ULP distances of the differing elements, stacked by category;
- the input value classes of the differing elements, per category;
- the cell maps over the kernel's plan and over the input's shape (an image of one pixel
  per cell, coloured by the category with most elements there).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import NamedTuple, Optional

import numpy as np

from conformance.judge.gate import CATEGORIES
from conformance.records import class_order, ulp_order
from conformance.render.png import data_uri
from conformance.render.svg import (
    BACKGROUND,
    GOLDEN,
    Frame,
    Scale,
    axes,
    colour,
    dots,
    figure,
    line,
    num,
    scale,
    spans_decades,
)
from conformance.render.text import short_float, short_int

MAX_COLUMNS = 40  # input classes a value-class figure shows apart; more are grouped in runs


class Point(NamedTuple):
    """One element the transfer picture draws (numbers widened to floats)."""

    category: str
    x: float
    dy: Optional[float]
    expected: float
    actual: float


def _float(v: object) -> Optional[float]:
    """A sample's number (a ``repr`` string) or an example's value object, as a float."""
    if v is None:
        return None
    return float(v["decimal"]) if isinstance(v, dict) else float(v)  # type: ignore[arg-type]


def sampled(row: dict) -> list[Point]:
    """The row's sampled elements (its ``plots.transfer``)."""
    return [Point(c, *(_float(v) for v in values)) for c, *values in row["plots"].get("transfer", ())]


def examples(row: dict) -> list[Point]:
    """The offenders of the row's findings that lie in the tensor, as its table lists them."""
    return [Point(f["category"], *(_float(e[k]) for k in ("x", "dy", "expected", "actual")))
            for f in row["findings"] for e in f["examples"] if e["x"] is not None]


def legend(entries: Sequence[tuple[str, str, str]]) -> str:
    """A figure's key below it: (label, colour, mark), mark ``dot``, ``line`` or ``ring``."""
    items = "".join(f'<span class="key"><i class="{mark}" style="--c:{fill}"></i>{escape(label)}</span>'
                    for label, fill, mark in entries)
    return f'<div class="legend">{items}</div>'


# ----------------------------------------------------------------------------- the transfer picture

def _across(p: Point, *, backward: bool) -> float:
    return p.dy if backward and p.dy is not None else p.x


def _golden_lines(points: Sequence[Point], *, backward: bool, across: Scale, up: Scale) -> str:
    """The golden value against the horizontal axis, one line per side of x = 0."""
    drawn = []
    for side in (lambda x: x > 0, lambda x: not x > 0):
        found = sorted({(_across(p, backward=backward), p.expected) for p in points
                        if side(p.x) and math.isfinite(_across(p, backward=backward)) and math.isfinite(p.expected)})
        drawn.append(line([(across.at(h), up.at(v)) for h, v in found], stroke=GOLDEN, name="golden"))
    return "".join(drawn)


def _alike(horizontal: Sequence[float], vertical: Sequence[float], *, linear: bool) -> bool:
    """The vertical axis is linear when the horizontal one is and the outputs stay within ten
    times the inputs' range (a slope then reads as a slope); else symmetric-log."""
    def top(values: Sequence[float]) -> float:
        return max((abs(v) for v in values if math.isfinite(v)), default=0.0)

    return linear and top(vertical) <= 10 * top(horizontal)


ZOOM_SHARE = 0.2  # the differing elements' inputs span at most this share of the batch's: a zoom on them


def zoom_window(row: dict) -> Optional[tuple[float, float]]:
    """The inputs the differing elements span, padded, when that is a small part of the batch's
    inputs on a linear axis (a wrong slope on [-0.005, 0) is a dot at the origin otherwise)."""
    backward = row["direction"] == "backward"
    points = sampled(row)
    every = [h for h in (_across(p, backward=backward) for p in points) if math.isfinite(h)]
    differing = [h for h in (_across(p, backward=backward) for p in points if p.category) if math.isfinite(h)]
    if not differing or not every or spans_decades(every):
        return None
    lo, hi = min(differing), max(differing)
    if hi - lo > ZOOM_SHARE * (max(every) - min(every)):
        return None
    pad = 0.08 * (hi - lo) or 0.08 * abs(lo) or 1e-30
    return lo - pad, hi + pad


def transfer_figure(row: dict, *, window: Optional[tuple[float, float]] = None) -> tuple[str, str]:
    """The transfer picture of ``row`` and its key; ``window`` zooms on those inputs."""
    backward = row["direction"] == "backward"
    points, ringed = sampled(row), examples(row)
    if window is not None:
        points, ringed = ([p for p in found if window[0] <= _across(p, backward=backward) <= window[1]]
                          for found in (points, ringed))
    frame = Frame()
    horizontal = [_across(p, backward=backward) for p in points + ringed]
    vertical = [v for p in points + ringed for v in (p.expected, p.actual)]
    across = scale(horizontal, start=frame.x0, stop=frame.x1, linear=True if window else None)
    up = scale(vertical, start=frame.y0, stop=frame.y1,
               linear=_alike(horizontal, vertical, linear=across.linthresh is None))

    def at(p: Point) -> tuple[float, float]:
        return across.at(_across(p, backward=backward)), up.at(p.actual)

    cats = [c for c in CATEGORIES if any(p.category == c for p in points)]
    body = [axes(frame=frame, across=across, up=up, across_title="dy (upstream gradient)" if backward else "x",
                 up_title="dx (gradient)" if backward else "output"),
            _golden_lines(points + ringed, backward=backward, across=across, up=up),
            dots([at(p) for p in points if not p.category], fill=BACKGROUND, size=4, name="batch")]
    body += [dots([at(p) for p in points if p.category == c], fill=colour(c), name=c) for c in cats]
    body += [f'<circle class="ring" cx="{num(x)}" cy="{num(y)}" r="5.5"/>' for x, y in map(at, ringed)]
    title = ("Gradient against dy: the golden is slope 1 where x > 0, α where x ≤ 0" if backward
             else "Output against input, with the golden line")
    if window is not None:
        title = f"Zoom on the differing inputs, {short_float(window[0])} to {short_float(window[1])}"
    keys = [("golden", GOLDEN, "line"), ("sampled elements", BACKGROUND, "dot")]
    keys += [(c, colour(c), "dot") for c in cats] + ([("table's offenders", GOLDEN, "ring")] if ringed else [])
    svg = figure("".join(body), frame=frame, name="zoom" if window else "transfer", title=title)
    return svg, legend(keys)


# ----------------------------------------------------------------------------- ULP distances

def _bin_label(b: str) -> str:
    """``1``, ``2–3``, ..., ``512–1023``, then ``2^10…`` (up to the next power of two)."""
    if b in ("0", "nan", "1"):
        return b
    low = int(b)
    return f"{low}–{2 * low - 1}" if low < 1024 else f"2^{low.bit_length() - 1}…"


def _bar(x: float, *, width: float, base: float, height: float, counts: dict[str, int]) -> list[str]:
    """One stacked bar: its categories' shares of ``height`` pixels up from ``base``."""
    total, parts = sum(counts.values()), []
    for cat, n in counts.items():
        share = height * n / total
        parts.append(f'<rect x="{num(x)}" y="{num(base - share)}" width="{num(width)}" height="{num(share)}" '
                     f'fill="{colour(cat)}"><title>{escape(cat)}: {n:,}</title></rect>')
        base -= share
    return parts


def ulp_figure(ulp: dict[str, dict[str, int]]) -> tuple[str, str]:
    """Bars of the differing elements per ULP-distance bin (height: log of the count), each split
    by category."""
    bins = sorted({b for counts in ulp.values() for b in counts}, key=ulp_order)
    frame = Frame(width=max(360, 60 + 26 * len(bins)), height=290, left=40, bottom=62)
    width = (frame.x1 - frame.x0) / max(len(bins), 1)
    top = math.log10(1 + max(sum(c.get(b, 0) for c in ulp.values()) for b in bins)) * 1.12
    parts = [f'<rect class="area" x="{frame.x0}" y="{frame.y1}" width="{num(frame.x1 - frame.x0)}" '
             f'height="{num(frame.y0 - frame.y1)}"/>']
    for i, b in enumerate(bins):
        counts = {cat: c[b] for cat, c in ulp.items() if c.get(b)}
        total, x = sum(counts.values()), frame.x0 + width * (i + 0.15)
        height = math.log10(1 + total) / top * (frame.y0 - frame.y1)
        parts += _bar(x, width=width * 0.7, base=frame.y0, height=height, counts=counts)
        middle, label_y = x + width * 0.35, frame.y0 + 10
        parts.append(f'<text class="tick" x="{num(middle)}" y="{num(frame.y0 - height - 3)}" '
                     f'text-anchor="middle">{short_int(total)}</text>'
                     f'<text class="tick" x="{num(middle)}" y="{num(label_y)}" text-anchor="end" '
                     f'transform="rotate(-45 {num(middle)} {num(label_y)})">{_bin_label(b)}</text>')
    parts.append(f'<text class="axis" x="{num((frame.x0 + frame.x1) / 2)}" y="{frame.height - 6}" '
                 f'text-anchor="middle">ULP distance from the golden (height: log of the count)</text>')
    svg = figure("".join(parts), frame=frame, name="ulp", title="ULP distance of the differing elements")
    return svg, legend([(c, colour(c), "dot") for c in ulp])


# ----------------------------------------------------------------------------- input value classes

def _columns(classes: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(label, classes) per column: each class alone, or runs of neighbours when there are many."""
    size = max(1, -(-len(classes) // MAX_COLUMNS))
    runs = [list(classes[i:i + size]) for i in range(0, len(classes), size)]
    return [(run[0] if len(run) == 1 else f"{run[0]}…{run[-1]}", run) for run in runs]


def values_figure(values: dict[str, dict[str, int]]) -> tuple[str, str]:
    """Cells of category x input class (sign and binade, zero, subnormal, inf, nan), darker with more."""
    columns = _columns(sorted({c for counts in values.values() for c in counts}, key=class_order))
    cats = list(values)
    counts = [[sum(values[cat].get(c, 0) for c in run) for _, run in columns] for cat in cats]
    most = max((n for line_ in counts for n in line_), default=1)
    cell, left, top = 15, 8 + 7 * max(len(c) for c in cats), 34
    frame = Frame(width=max(360, left + cell * len(columns) + 12), height=top + cell * len(cats) + 86, left=left,
                  top=top)
    parts = []
    for r, cat in enumerate(cats):
        y = top + r * cell
        parts.append(f'<text class="tick" x="{left - 4}" y="{y + 11}" text-anchor="end">{escape(cat)}</text>')
        for c, ((label, _), n) in enumerate(zip(columns, counts[r])):
            if n:
                shade = 0.25 + 0.75 * math.log1p(n) / math.log1p(most)
                parts.append(f'<rect x="{left + c * cell}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                             f'fill="{colour(cat)}" fill-opacity="{shade:.2f}"><title>{escape(cat)}, x in '
                             f'{escape(label)}: {n:,}</title></rect>')
    base = top + cell * len(cats) + 4
    for c, (label, _) in enumerate(columns):
        x = left + c * cell + cell / 2
        parts.append(f'<text class="tick" x="{num(x)}" y="{base}" text-anchor="end" '
                     f'transform="rotate(-75 {num(x)} {base})">{escape(label)}</text>')
    svg = figure("".join(parts), frame=frame, name="values", title="Differing elements by input value class")
    return svg, ""


# ----------------------------------------------------------------------------- cell maps

def _dominant(grid: dict) -> tuple[int, int, dict[tuple[int, int], dict[str, int]]]:
    """The map's cell rows and columns, and per non-empty cell its counts by category."""
    (size_r, size_c), (bin_r, bin_c) = grid["size"], grid["bins"]
    cells: dict[tuple[int, int], dict[str, int]] = {}
    for cat, entries in grid["cells"].items():
        for r, c, n in entries:
            cells.setdefault((r, c), {})[cat] = n
    return -(-size_r // bin_r), -(-size_c // bin_c), cells


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def grid_figure(grid: dict) -> tuple[str, str]:
    """The cells of the kernel's plan (cores down, tiles across) or of the input's shape, each
    coloured by the category with most elements there."""
    rows, cols, cells = _dominant(grid)
    pixels = np.full((rows, cols, 3), 246, dtype=np.uint8)
    for (r, c), counts in cells.items():
        pixels[r, c] = _rgb(colour(max(counts, key=counts.__getitem__)))
    across, down = max(3, min(48, 320 // cols)), max(3, min(16, 240 // rows))
    frame = Frame(width=max(340, 64 + across * cols + 12), height=38 + down * rows + 40, left=64, top=38)
    (name_r, name_c), (bin_r, bin_c) = grid["axes"], grid["bins"]
    lit = sorted({r * bin_r for r, _ in cells})
    where = "the kernel's plan" if grid["kind"] == "plan" else "the input's shape"
    part = f'<text class="tick" x="64" y="30">{escape(_clipped(grid["part"], width=frame.width - 70))}</text>' \
        if grid.get("part") else ""
    body = (f'<image x="64" y="38" width="{across * cols}" height="{down * rows}" preserveAspectRatio="none" '
            f'href="{data_uri(pixels)}"/><rect class="frame" x="64" y="38" width="{across * cols}" '
            f'height="{down * rows}"/>'
            f'<text class="tick" x="60" y="48" text-anchor="end">0</text>'
            f'<text class="tick" x="60" y="{38 + down * rows}" text-anchor="end">{(rows - 1) * bin_r}</text>'
            f'<text class="axis" x="64" y="{frame.height - 20}">{escape(_axis_title(name_c, bin_c))} →, '
            f'{cols * bin_c:,} wide</text>'
            f'<text class="axis" x="64" y="{frame.height - 6}">{escape(_axis_title(name_r, bin_r))} ↓</text>'
            + part)
    svg = figure(body, frame=frame, name=grid["kind"], title=f"Errors over {where}",
                 data={"rows": " ".join(map(str, lit))})
    cats = [c for c in CATEGORIES if c in grid["cells"]]
    return svg, legend([(c, colour(c), "dot") for c in cats])


def _clipped(text: str, *, width: float) -> str:
    """``text`` cut to what ``width`` pixels hold at the tick font, an ellipsis marking the cut."""
    room = max(4, int(width / 6.2))
    return text if len(text) <= room else text[:room - 1] + "…"


def _axis_title(name: str, per_cell: int) -> str:
    return name if per_cell == 1 else f"{name} ({per_cell:,} per cell)"


def row_figures(row: dict) -> list[tuple[str, str]]:
    """(figure, key) of every picture the row's ``plots`` allows."""
    plots = row.get("plots")
    if not plots:
        return []
    window = zoom_window(row) if plots.get("transfer") else None
    found = [transfer_figure(row)] if plots.get("transfer") else []
    found += [transfer_figure(row, window=window)] if window else []
    found += [ulp_figure(plots["ulp"])] if plots["ulp"] else []
    found += [values_figure(plots["values"])] if plots["values"] else []
    return found + [grid_figure(grid) for grid in plots.get("grids", ())]
