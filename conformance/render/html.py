"""The HTML report: one self-contained page (plotly.js inlined once, no network).

:func:`render_html` takes the report document ``render.export.report_dict(..., plots=True)``
builds and writes the page: the folded table, then a panel per failing or warning row
with its findings and the plots its ``plots`` data allows (ULP distances, the errors over
the kernel's plan and over the input's shape, the input value classes per category), and
the agreement matrix as a heatmap when the document has one.  The plotting library is
the ``report`` extra; without it the flag is a usage error naming the extra.
"""
from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any, Optional

from conformance.errors import UsageError
from conformance.judge.gate import CATEGORIES
from conformance.records import RowKey, class_order, ulp_order
from conformance.render.files import write_atomic

MISSING = "--html needs the plotting library plotly: pip install 'conformance[report]'"
_DIRECTION = {"forward": "fwd", "backward": "bwd"}
_RANK = {"pass": 0, "warn": 1, "fail": 2}
_PLOT_CONFIG = {"displaylogo": False, "responsive": True,
                "modeBarButtonsToRemove": ["sendDataToCloud"]}
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { padding: 0.2em 0.7em; border-bottom: 1px solid #ddd; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.pass { color: #1a7f37; } .warn { color: #9a6700; } .fail { color: #cf222e; font-weight: bold; }
.allowed { color: #9a6700; } .refused { color: #cf222e; }
section.row-panel { border: 1px solid #ccc; border-radius: 6px; padding: 0.5em 1em; margin: 1em 0; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
.plot { width: 560px; height: 400px; }
"""


def require_plotly() -> None:
    """A usage error naming the ``report`` extra when plotly is not installed."""
    try:
        import plotly  # noqa: F401
    except ImportError:
        raise UsageError(MISSING) from None


# ----------------------------------------------------------------------------- values from the document

def number(value: Any) -> float:
    """A number of the document: plain, or a value object (``{"hex", "bits", "decimal"}``)."""
    return float(value["decimal"]) if isinstance(value, dict) else float(value)


def _who(row: dict) -> str:
    extra = "/".join(str(p) for p in (row.get("profile"), row.get("variant")) if p)
    return row["backend"] + (f"[{extra}]" if extra else "")


def _pair(row: dict) -> str:
    """A table cell's dtypes: ``float16→float16``."""
    return f"{row['dtype']}→{row['out_dtype']}"


def row_title(row: dict) -> str:
    """The row's one spelling (``str(RowKey)``): ``cann[ascend910b1/tail-dropped] fp16 forward alpha=0.2``."""
    return str(RowKey(row["backend"], row.get("profile"), row.get("variant"), row["dtype"], row["out_dtype"],
                      row["direction"], number(row["alpha"])))


# ----------------------------------------------------------------------------- the folded table

def fold(rows: Sequence[dict]) -> list[list[dict]]:
    """Rows grouped by everything but alpha, in first-seen order."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        key = (row["backend"], row.get("profile"), row.get("variant"), row["dtype"], row["out_dtype"],
               row["direction"])
        groups.setdefault(key, []).append(row)
    return list(groups.values())


def _summed(group: Sequence[dict]) -> list[tuple[str, int, bool]]:
    """(category, count summed over alphas, allowed in every alpha), in registry order."""
    counts: dict[str, list] = {}
    for f in (f for r in group for f in r["findings"]):
        entry = counts.setdefault(f["category"], [0, True])
        entry[0] += f["count"]
        entry[1] = entry[1] and f["allowed"]
    return [(c, *counts[c]) for c in CATEGORIES if c in counts]


def _findings_html(found: Sequence[tuple[str, int, bool]]) -> str:
    return ", ".join(f'<span class="{"allowed" if ok else "refused"}">{escape(c)} ×{n:,}</span>'
                     for c, n, ok in found)


def _not_passing(group: Sequence[dict]) -> str:
    fail = [r for r in group if r["verdict"] == "fail"]
    warn = [r for r in group if r["verdict"] == "warn"]

    def span(chosen: Sequence[dict]) -> str:
        return "all" if len(chosen) == len(group) else " ".join(f"{number(r['alpha']):.3g}" for r in chosen)

    return "; ".join(([span(fail)] if fail else []) + ([f"warn {span(warn)}"] if warn else []))


def folded_table(rows: Sequence[dict]) -> str:
    """One line per (backend, dtype→out, direction), the alphas folded in."""
    head = "".join(f"<th>{h}</th>" for h in ("backend", "dtype→out", "dir", "max ULP", "findings (summed)",
                                             "α not passing", "verdict"))
    lines = []
    for group in fold(rows):
        first, verdict = group[0], max((r["verdict"] for r in group), key=_RANK.__getitem__)
        cells = [escape(_who(first)), escape(_pair(first)), _DIRECTION[first["direction"]],
                 f'{max(r["max_ulp"] for r in group):,}', _findings_html(_summed(group)),
                 escape(_not_passing(group)), f'<span class="{verdict}">{verdict}</span>']
        lines.append("<tr>" + "".join(f'<td{" class=num" if i == 3 else ""}>{c}</td>'
                                      for i, c in enumerate(cells)) + "</tr>")
    return f'<table class="folded"><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table>'


# ----------------------------------------------------------------------------- figures

def _colour(category: str) -> str:
    """One colour per category, the same in every plot (by registry order)."""
    from plotly.colors import qualitative

    palette = qualitative.Dark24 + qualitative.Light24
    return palette[list(CATEGORIES).index(category) % len(palette)] if category in CATEGORIES else "#888"


#: A small template in every figure: plotly's default one is 6.5 KB of JSON per figure.
_TEMPLATE = {"layout": {"plot_bgcolor": "#e5ecf6", "paper_bgcolor": "white", "font": {"color": "#2a3f5f"},
                        "xaxis": {"gridcolor": "white", "automargin": True},
                        "yaxis": {"gridcolor": "white", "automargin": True}}}


def _layout(title: str, **more: Any) -> dict:
    return {"title": {"text": title, "x": 0.01, "xanchor": "left", "y": 0.93, "yanchor": "bottom"},
            "margin": {"l": 70, "r": 20, "t": 80, "b": 60},
            "template": _TEMPLATE, **more}


def ulp_figure(ulp: dict[str, dict[str, int]]) -> Any:
    """Stacked bars: elements per ULP-distance bin, per category."""
    import plotly.graph_objects as go

    bins = sorted({b for counts in ulp.values() for b in counts}, key=ulp_order)
    labels = [b if b in ("0", "nan", "1") else f"{b}–{2 * int(b) - 1}" for b in bins]
    bars = [go.Bar(name=cat, x=labels, y=[counts.get(b, 0) for b in bins], marker_color=_colour(cat))
            for cat, counts in ulp.items()]
    return go.Figure(bars, layout=_layout("ULP distance of the differing elements", barmode="stack",
                                          xaxis={"title": {"text": "ULP distance"}, "type": "category"},
                                          yaxis={"title": {"text": "elements"}}))


def values_figure(values: dict[str, dict[str, int]]) -> Any:
    """A heatmap of differing elements by input value class (sign and binade) and category."""
    import plotly.graph_objects as go

    classes = sorted({c for counts in values.values() for c in counts}, key=class_order)
    cats = list(values)
    z = [[values[cat].get(c) for c in classes] for cat in cats]
    return go.Figure(go.Heatmap(z=z, x=classes, y=cats, colorscale="Reds", hoverongaps=False,
                                colorbar={"title": {"text": "elements"}},
                                hovertemplate="%{y}<br>x in %{x}: %{z} elements<extra></extra>"),
                     layout=_layout("Differing elements by input value class",
                                    xaxis={"title": {"text": "input class (sign, binade)"}, "type": "category"},
                                    yaxis={"type": "category"}))


def _grid_cells(grid: dict) -> tuple[int, int, dict[tuple[int, int], dict[str, int]]]:
    """The grid's row and column count and, per non-empty cell, its counts by category."""
    (size_r, size_c), (bin_r, bin_c) = grid["size"], grid["bins"]
    cells: dict[tuple[int, int], dict[str, int]] = {}
    for cat, entries in grid["cells"].items():
        for r, c, n in entries:
            cells.setdefault((r, c), {})[cat] = n
    return -(-size_r // bin_r), -(-size_c // bin_c), cells


def _grid_axis(name: str, *, per_bin: int, cells: int) -> dict:
    """A grid axis: its title (with the bin width), whole-cell ticks at most 8 apart."""
    title = name if per_bin == 1 else f"{name} (bins of {per_bin:,})"
    return {"title": {"text": title}, "dtick": per_bin * max(1, -(-cells // 8)), "zeroline": False}


def grid_figure(grid: dict) -> Any:
    """A heatmap over the plan (cores x tiles) or the shape, each cell coloured by the category
    with most elements there; the hover lists every category's count."""
    import plotly.graph_objects as go

    rows, cols, cells = _grid_cells(grid)
    cats = [c for c in CATEGORIES if c in grid["cells"]]
    z: list[list[Optional[int]]] = [[None] * cols for _ in range(rows)]
    text = [[""] * cols for _ in range(rows)]
    for (r, c), counts in cells.items():
        z[r][c] = cats.index(max(counts, key=counts.__getitem__))
        text[r][c] = "<br>".join(f"{k}: {n:,}" for k, n in counts.items())
    k = len(cats)
    scale = [[step / k, _colour(cat)] for i, cat in enumerate(cats) for step in (i, i + 1)]
    (bin_r, bin_c), (name_r, name_c) = grid["bins"], grid["axes"]
    where = "the kernel's plan" if grid["kind"] == "plan" else "the input's shape"
    heat = go.Heatmap(z=z, text=text, x=[c * bin_c for c in range(cols)], y=[r * bin_r for r in range(rows)],
                      colorscale=scale, zmin=-0.5, zmax=k - 0.5, hoverongaps=False, xgap=1, ygap=1,
                      colorbar={"tickvals": list(range(k)), "ticktext": cats},
                      hovertemplate=f"{name_r} %{{y}}, {name_c} %{{x}}<br>%{{text}}<extra></extra>")
    part = f"<br><sub>{escape(grid['part'])}</sub>" if grid.get("part") else ""
    return go.Figure(heat, layout=_layout(f"Errors over {where}{part}",
                                          xaxis=_grid_axis(name_c, per_bin=bin_c, cells=cols),
                                          yaxis={**_grid_axis(name_r, per_bin=bin_r, cells=rows),
                                                 "autorange": "reversed"}))


def agreement_figure(agreement: Sequence[dict]) -> Any:
    """Backends x (dtype pair, direction): the share of elements that differ from the reference,
    summed over alphas (0: bit-identical everywhere)."""
    import plotly.graph_objects as go

    who = list(dict.fromkeys(_who(a) for a in agreement))
    cols = list(dict.fromkeys(f"{_pair(a)} {_DIRECTION[a['direction']]}" for a in agreement))
    sums: dict[tuple[str, str], list[int]] = {}
    for a in agreement:
        entry = sums.setdefault((_who(a), f"{_pair(a)} {_DIRECTION[a['direction']]}"), [0, 0])
        entry[0] += a["differing"]
        entry[1] += a["elements"]
    z = [[sums[(w, c)][0] / max(sums[(w, c)][1], 1) if (w, c) in sums else None for c in cols] for w in who]
    text = [[f"{sums[(w, c)][0]:,} of {sums[(w, c)][1]:,} differ" if (w, c) in sums else "" for c in cols]
            for w in who]
    reference = agreement[0]["reference"]
    heat = go.Heatmap(z=z, x=cols, y=who, text=text, texttemplate="%{text}", zmin=0, zmax=1,
                      colorscale=[[0, "#1a7f37"], [1e-9, "#fde68a"], [1, "#cf222e"]], hoverongaps=False,
                      colorbar={"title": {"text": "differing share"}},
                      hovertemplate="%{y} vs " + escape(reference) + ", %{x}<br>%{text}<extra></extra>")
    return go.Figure(heat, layout=_layout(f"Agreement with {reference} (bit for bit)",
                                          xaxis={"type": "category"}, yaxis={"type": "category"}))


# ----------------------------------------------------------------------------- the page

def _div(figure: Any, *, name: str) -> str:
    return f'<div class="plot" data-plot="{name}">' + figure.to_html(
        full_html=False, include_plotlyjs=False, config=_PLOT_CONFIG,
        default_width="100%", default_height="100%") + "</div>"


def row_figures(plots: dict) -> list[tuple[str, Any]]:
    """(name, figure) of every plot a row's data allows."""
    found = [("ulp", ulp_figure(plots["ulp"])), ("values", values_figure(plots["values"]))]
    return found + [(grid["kind"], grid_figure(grid)) for grid in plots.get("grids", ())]


def _findings_list(row: dict) -> str:
    items = [f'<li><span class="{"allowed" if f["allowed"] else "refused"}">{escape(f["category"])}'
             f' ×{f["count"]:,}</span>: {escape(f["summary"])}</li>' for f in row["findings"]]
    return f"<ul>{''.join(items)}</ul>"


def row_panel(row: dict) -> str:
    """A row's findings and its plots."""
    plots = row.get("plots")
    body = "".join(_div(fig, name=name) for name, fig in row_figures(plots)) if plots else \
        "<p>no element-wise differences to draw (the findings are about the call, not the values)</p>"
    counts = f"{row['mismatches']:,} of {row['elements']:,} elements differ, max ULP {row['max_ulp']:,}"
    return (f'<section class="row-panel {row["verdict"]}-row"><h3>{escape(row_title(row))} '
            f'<span class="{row["verdict"]}">{row["verdict"]}</span></h3><p>{counts}</p>'
            f'{_findings_list(row)}<div class="plots">{body}</div></section>')


def page(report: dict) -> str:
    """The whole HTML document for ``report``."""
    from plotly.offline import get_plotlyjs

    rows = report["rows"]
    shown = [r for r in rows if r["verdict"] in ("fail", "warn")]
    agreement = report.get("agreement") or []
    verdict = report["verdict"]
    parts = [f"<h1>LeakyReLU conformance: <span class={verdict}>{verdict}</span>"
             f"{' (partial)' if report.get('partial') else ''}</h1>",
             f"<p>{len(rows):,} rows; seed {report.get('seed')}</p>", "<h2>Rows, α folded</h2>",
             folded_table(rows)]
    if agreement:
        heatmap = _div(agreement_figure(agreement), name="agreement")
        parts += ["<h2>Agreement</h2>", f'<div class="plots">{heatmap}</div>']
    parts += [f"<h2>Failing and warning rows ({len(shown)})</h2>"] + [row_panel(r) for r in shown]
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>LeakyReLU conformance report</title>"
            f"<style>{_STYLE}</style><script>{get_plotlyjs()}</script></head><body>"
            + "\n".join(parts) + "</body></html>\n")


def render_html(report: dict, path: str | Path, *, flag: str = "--html") -> None:
    """Write the page for ``report`` (a ``report_dict(..., plots=True)`` document) to ``path``,
    atomically (see ``render.files``)."""
    require_plotly()
    write_atomic(path, page(report).encode("utf-8"), flag=flag)
