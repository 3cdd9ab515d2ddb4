"""Inline SVG for the HTML report, drawn by hand: axes, dots, lines, bars and cells.

No plotting library and no script: a figure is a few kilobytes of markup the browser draws
as it is.  An axis (:class:`Scale`) is linear, or symmetric-logarithmic when its values span
many decades (an exhaustive fp16 batch runs from 6e-8 to 65504), and keeps a band past each
end for the non-finite values it holds (``-inf``, ``inf``, ``nan``).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Optional

from conformance.judge.gate import CATEGORIES
from conformance.render.text import short_float

#: One colour per category, by registry order, the same in every figure and table; the categories
#: that often share a row (alpha-*, formulation, subnormal-flush, grad-at-zero, tail-block, lost-nan,
#: rounding, unexplained) get the most distinct ones.
PALETTE = ("#7f7f7f", "#843c39", "#7b4173", "#637939", "#8c6d31", "#e15759", "#edc948", "#ff9da7", "#9c755f",
           "#393b79", "#76b7b2", "#bcbd22", "#aec7e8", "#59a14f", "#b07aa1", "#ffbb78", "#d62728", "#c49c94",
           "#17becf", "#f28e2b", "#4e79a7", "#e377c2", "#98df8a", "#c5b0d5", "#dbdb8d", "#9edae5", "#6b6ecf")
GOLDEN = "#222"  # the golden line
BACKGROUND = "#b8b8b8"  # elements sampled from the whole batch
LINEAR_SPAN = 200  # an axis is linear when its largest magnitude is at most this times its 10th percentile
MAX_DECADES = 12  # a symmetric-log axis shows at most this many decades below its largest magnitude
BAND = 18  # pixels of each non-finite band past an axis' end
SPECIALS = ("-inf", "inf", "nan")


def colour(category: str) -> str:
    """The category's colour (grey for one the registry does not know)."""
    names = list(CATEGORIES)
    return PALETTE[names.index(category) % len(PALETTE)] if category in names else "#888"


def num(v: float) -> str:
    """A pixel coordinate, to a tenth."""
    return f"{v:.1f}".rstrip("0").rstrip(".")


def special(v: float) -> Optional[str]:
    """``-inf``, ``inf`` or ``nan`` for a non-finite value; None for a finite one."""
    if math.isnan(v):
        return "nan"
    return None if math.isfinite(v) else ("inf" if v > 0 else "-inf")


# ----------------------------------------------------------------------------- axes

@dataclass(frozen=True)
class Scale:
    """Values to pixels along one axis, from ``start`` to ``stop`` (``stop < start`` for a vertical
    axis drawn upwards).  ``linthresh`` None: linear; else ``sign(v) * log10(1 + |v| / linthresh)``."""

    lo: float  # the finite range, transformed
    hi: float
    start: float
    stop: float
    linthresh: Optional[float]
    specials: tuple[str, ...]  # the non-finite values present, each with its band

    def _transform(self, v: float) -> float:
        if self.linthresh is None:
            return v
        return math.copysign(math.log10(1 + abs(v) / self.linthresh), v)

    def _band(self, name: str) -> float:
        step = BAND if self.stop > self.start else -BAND
        if name == "-inf":
            return self.start + step / 2
        after = [s for s in self.specials if s != "-inf"]
        return self.stop - step * (len(after) - after.index(name) - 0.5)

    def at(self, v: float) -> float:
        """The pixel of ``v`` (a non-finite value: the middle of its band)."""
        name = special(v)
        if name is not None:
            return self._band(name)
        step = BAND if self.stop > self.start else -BAND
        first = self.start + (step if "-inf" in self.specials else 0)
        last = self.stop - step * sum(s != "-inf" for s in self.specials)
        share = (self._transform(v) - self.lo) / ((self.hi - self.lo) or 1.0)
        return first + share * (last - first)

    def ticks(self) -> list[tuple[float, str]]:
        """(pixel, label) of the ticks: round steps (linear) or 0 and powers of ten; the bands."""
        values = _linear_ticks(self.lo, self.hi) if self.linthresh is None else self._decades()
        return [(self._band(s), s) for s in self.specials] + [(self.at(v), short_float(v)) for v in values]


    def _decades(self) -> list[float]:
        """0 and up to four powers of ten each side, the largest first, within the range."""
        c = self.linthresh or 1.0
        top = min(308, math.floor(max(abs(self.lo), abs(self.hi)) + math.log10(c)))  # log10 of the largest
        powers = [10.0 ** k for k in range(top, top - MAX_DECADES - 1, -1) if 10.0 ** k >= c]
        powers = powers[::max(1, -(-len(powers) // 4))]
        signed = [s * v for v in powers for s in (-1, 1) if self.lo <= self._transform(s * v) <= self.hi]
        return sorted([0.0, *signed])

def _linear_ticks(lo: float, hi: float) -> list[float]:
    """At most about six round values in ``[lo, hi]``: steps of 1, 2 or 5 times a power of ten."""
    span = (hi - lo) or 1.0
    raw = span / 5
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step)
    return [k * step for k in range(first, math.floor(hi / step) + 1)]


def apart(ticks: Sequence[tuple[float, str]], *, gap: float) -> list[tuple[float, str]]:
    """The ticks whose labels stay ``gap`` pixels from every one kept before them (the first first)."""
    kept: list[tuple[float, str]] = []
    for px, label in ticks:
        if all(abs(px - other) >= gap for other, _ in kept):
            kept.append((px, label))
    return kept

def spans_decades(values: Iterable[float]) -> bool:
    """Whether the largest finite magnitude of ``values`` is more than LINEAR_SPAN times their 10th percentile."""
    mags = sorted(abs(v) for v in values if math.isfinite(v) and v)
    return bool(mags) and mags[-1] > LINEAR_SPAN * mags[len(mags) // 10]


def scale(values: Iterable[float], *, start: float, stop: float, linear: Optional[bool] = None) -> Scale:
    """An axis for ``values``, zero in range: linear when asked, or by default when they span few
    decades (:func:`spans_decades`); else symmetric-log."""
    values = list(values)
    finite = [v for v in values if math.isfinite(v)]
    present = {special(v) for v in values}
    specials = tuple(s for s in SPECIALS if s in present)
    mags = sorted(abs(v) for v in finite if v)
    linthresh = None
    if mags and not (linear if linear is not None else not spans_decades(mags)):
        linthresh = max(mags[len(mags) // 20], mags[-1] * 10.0 ** -MAX_DECADES)
    probe = Scale(0.0, 1.0, start, stop, linthresh, specials)
    moved = [probe._transform(v) for v in finite] + [0.0]
    lo, hi = min(moved), max(moved)
    pad = 0.04 * ((hi - lo) or 1.0)
    return Scale(lo - pad, hi + pad, start, stop, linthresh, specials)


# ----------------------------------------------------------------------------- a figure's frame

@dataclass(frozen=True)
class Frame:
    """A figure of ``width`` x ``height`` pixels and its plotting area inside the margins."""

    width: int = 460
    height: int = 320
    left: int = 62
    right: int = 12
    top: int = 30
    bottom: int = 44

    @property
    def x0(self) -> float:
        return float(self.left)

    @property
    def x1(self) -> float:
        return float(self.width - self.right)

    @property
    def y0(self) -> float:
        return float(self.height - self.bottom)

    @property
    def y1(self) -> float:
        return float(self.top)


def figure(body: str, *, frame: Frame, name: str, title: str, label: str = "",
           data: Optional[dict[str, str]] = None) -> str:
    """An ``<svg>`` element named ``data-plot=name`` (and ``data``'s ``data-*`` attributes), titled,
    its ``body`` drawn inside."""
    more = "".join(f' data-{k}="{escape(v)}"' for k, v in (data or {}).items())
    return (f'<svg class="plot" data-plot="{name}"{more} viewBox="0 0 {frame.width} {frame.height}" '
            f'width="{frame.width}" height="{frame.height}" role="img" aria-label="{escape(label or title)}">'
            f'<text class="title" x="8" y="18">{escape(title)}</text>{body}</svg>')


def axes(*, frame: Frame, across: Scale, up: Scale, across_title: str, up_title: str) -> str:
    """The plotting area's box, grid lines with tick labels on both axes, and the axis titles."""
    parts = [f'<rect class="area" x="{num(frame.x0)}" y="{num(frame.y1)}" width="{num(frame.x1 - frame.x0)}" '
             f'height="{num(frame.y0 - frame.y1)}"/>']
    for px, label in apart(across.ticks(), gap=34):
        parts.append(f'<path class="grid" d="M{num(px)} {num(frame.y1)}V{num(frame.y0)}"/>'
                     f'<text class="tick" x="{num(px)}" y="{num(frame.y0 + 14)}" text-anchor="middle">'
                     f'{escape(label)}</text>')
    for py, label in apart(up.ticks(), gap=13):
        parts.append(f'<path class="grid" d="M{num(frame.x0)} {num(py)}H{num(frame.x1)}"/>'
                     f'<text class="tick" x="{num(frame.x0 - 4)}" y="{num(py + 3.5)}" text-anchor="end">'
                     f'{escape(label)}</text>')
    mid_x, mid_y = (frame.x0 + frame.x1) / 2, (frame.y0 + frame.y1) / 2
    parts.append(f'<text class="axis" x="{num(mid_x)}" y="{frame.height - 6}" text-anchor="middle">'
                 f'{escape(across_title)}</text>'
                 f'<text class="axis" x="12" y="{num(mid_y)}" text-anchor="middle" '
                 f'transform="rotate(-90 12 {num(mid_y)})">{escape(up_title)}</text>')
    return "".join(parts)


def dots(points: Sequence[tuple[float, float]], *, fill: str, size: float = 5.0, name: str = "") -> str:
    """Round dots at pixel ``points``, as one path (a zero-length stroke with round caps each)."""
    if not points:
        return ""
    path = "".join(f"M{num(x)} {num(y)}h0" for x, y in points)
    named = f' data-series="{escape(name)}"' if name else ""
    return (f'<path class="dots"{named} d="{path}" stroke="{fill}" stroke-width="{num(size)}" '
            f'stroke-linecap="round"/>')


def line(points: Sequence[tuple[float, float]], *, stroke: str, name: str = "") -> str:
    """A polyline through pixel ``points`` (nothing for fewer than two)."""
    if len(points) < 2:
        return ""
    named = f' data-series="{escape(name)}"' if name else ""
    coords = " ".join(f"{num(x)},{num(y)}" for x, y in points)
    return f'<polyline class="line"{named} points="{coords}" stroke="{stroke}"/>'

