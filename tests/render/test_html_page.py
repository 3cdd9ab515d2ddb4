"""The HTML page's contents, from report documents built in memory: the header, the table of
offending elements (the findings' examples, as the console prints them), the transfer picture,
and the page's size bound on a report of many rows."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from conformance.records import Row
from conformance.reference import golden as ref
from conformance.render import export, html
from conformance.render.messages import show_value
from conformance.render.text import index_text
from tests.helpers import judge

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def wrong_slope() -> Row:
    """fp16 outputs computed with the slope 0.01 where 0.2 was asked for."""
    x = np.linspace(-4, 4, 4001, dtype=np.float16)
    return judge(x, ref.compute("forward", x, 0.01, out_dtype="float16"), 0.2, backend="dump")


def _doc(rows: list[Row], *, seed: int | None = None) -> dict:
    return export.report_dict(rows, seed=seed, versions={"numpy": "2"}, plots=True)


def _cells(table: str) -> list[list[str]]:
    body = table[table.index("<tbody>"):]
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
            for tr in re.findall(r"<tr>(.*?)</tr>", body)]


def _figure(page: str, name: str) -> ET.Element:
    found = re.search(rf'<svg class="plot" data-plot="{name}".*?</svg>', page)
    assert found, f"no {name} figure"
    return ET.fromstring(found.group(0).replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1))


# ----------------------------------------------------------------------------- the header

def test_header_says_what_was_run_with_one_row_in_the_singular(wrong_slope: Row) -> None:
    page = html.page(_doc([wrong_slope], seed=None))
    facts = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", page))
    assert facts["rows"] == "1 row: 0 passed, 0 warned, 1 failed"
    assert facts["backends"] == "dump" and facts["dtypes"] == "fp16" and facts["directions"] == "forward"
    assert facts["α"] == "0.2" and "seed" not in facts and "None" not in page
    assert facts["seed"] == "7" if (facts := dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>",
                                                            html.page(_doc([wrong_slope], seed=7))))) else False


def test_header_and_row_sections_take_new_parts(wrong_slope: Row, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html, "HEADER_PARTS", [*html.HEADER_PARTS, lambda doc: '<section id="extra-head"></section>'])
    monkeypatch.setattr(html, "ROW_PARTS", [*html.ROW_PARTS, lambda row: '<div class="extra-row"></div>'])
    page = html.page(_doc([wrong_slope]))
    assert page.index('id="extra-head"') < page.index("<h2>") and page.count('class="extra-row"') == 1


# ----------------------------------------------------------------------------- the offending elements

def test_offenders_table_lists_the_findings_examples_as_the_console_does(wrong_slope: Row) -> None:
    page = html.page(_doc([wrong_slope]))
    table = page[page.index('<table class="offenders">'):]
    rows = _cells(table[:table.index("</table>")])
    examples = [(f.category, e) for f in wrong_slope.findings for e in f.examples]
    assert len(rows) == len(examples) > 0
    finding = ""
    for cells, (category, ex) in zip(rows, examples):
        if len(cells) == 7:  # a finding's first line holds its cell, which spans its examples
            number, finding, index, x, expected, actual, bits = cells
        else:
            number, index, x, expected, actual, bits = cells
        assert finding == category and index == index_text(ex.index, wrong_slope.shape_of(ex.part)) + \
            (f" of {ex.part}" if ex.part else "")
        shown = [show_value(v) for v in (ex.x, ex.expected, ex.actual)]  # "decimal (0xbits)", the console's
        assert [x, expected, actual] == [s.split(" ")[0] for s in shown]  # decimal first
        assert bits.split(" · ") == [re.search(r"0x[0-9a-f]+", s).group(0) for s in shown]  # bits after
    assert any(float(r[-2]) != float(r[-3]) for r in rows)


def test_backward_offenders_show_dy() -> None:
    x = np.linspace(-4, 4, 257, dtype=np.float32)
    dy = np.random.default_rng(0).standard_normal(x.size).astype(np.float32)
    row = judge(x, ref.compute("backward", x, 0.01, dy=dy, out_dtype="float32"), 0.2, direction="backward",
                dy=dy, backend="dump")
    page = html.page(_doc([row]))
    assert "<th>dy</th>" in page and "<th>bits: x · dy · expected · actual</th>" in page
    assert len([p for p in _figure(page, "transfer").iter(f"{SVG}polyline") if p.get("data-series") == "golden"]) == 2


# ----------------------------------------------------------------------------- the transfer picture

def _golden_at(lines: list[list[tuple[float, float]]], px: float) -> list[float]:
    """The golden lines' heights at pixel ``px`` (interpolated), one per line that spans it."""
    found = []
    for pts in lines:
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            if x0 <= px <= x1 and x1 > x0:
                found.append(y0 + (y1 - y0) * (px - x0) / (x1 - x0))
    return found


def _points(path: str) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in re.findall(r"M([\d.]+) ([\d.]+)h0", path)]


def test_transfer_picture_shows_a_wrong_slope_off_the_golden_line(wrong_slope: Row) -> None:
    page = html.page(_doc([wrong_slope]))
    svg = _figure(page, "transfer")
    lines = [[tuple(map(float, p.split(","))) for p in pl.get("points").split()]
             for pl in svg.iter(f"{SVG}polyline") if pl.get("data-series") == "golden"]
    series = {p.get("data-series"): _points(p.get("d")) for p in svg.iter(f"{SVG}path") if p.get("data-series")}
    (category,) = [f.category for f in wrong_slope.findings]
    doc_row = _doc([wrong_slope])["rows"][0]
    sampled = [s for s in doc_row["plots"]["transfer"] if s[0] == category]
    assert len(lines) == 2 and len(series[category]) == len(sampled) > 10
    assert len(series["batch"]) == sum(1 for s in doc_row["plots"]["transfer"] if not s[0])
    off = [min(abs(y - g) for g in _golden_at(lines, x)) for x, y in series[category] if _golden_at(lines, x)]
    assert len(off) > 10 and sum(d > 4 for d in off) >= 0.75 * len(off) and max(off) > 25  # pixels off the line
    positive = lines[0]  # the golden where x > 0, where the slope is 1 and nothing differs
    on = [min(abs(y - g) for g in _golden_at([positive], x)) for x, y in series["batch"]
          if positive[0][0] < x <= positive[-1][0]]
    assert on and max(on) < 1.5
    assert len(list(svg.iter(f"{SVG}circle"))) == sum(len(f.examples) for f in wrong_slope.findings)


def test_a_wrong_slope_on_a_narrow_band_gets_a_zoom(wrong_slope: Row) -> None:
    """The slope 0.01 where 0.2 was meant, on inputs in [-0.3, 0) only: at the whole batch's
    scale those are a dot at the origin, so a second picture zooms on them."""
    x = np.random.default_rng(1).standard_normal(20_000).astype(np.float16)
    actual = ref.compute("forward", x, 0.2, out_dtype="float16")
    band = (x < 0) & (x > -0.3)
    actual[band] = ref.compute("forward", x[band], 0.01, out_dtype="float16")
    page = html.page(_doc([judge(x, actual, 0.2, backend="dump")]))
    zoom = _figure(page, "zoom")
    ticks = [float(t.text) for t in zoom.iter(f"{SVG}text") if t.get("class") == "tick" and
             t.get("text-anchor") == "middle"]
    assert -0.3 <= min(ticks) and max(ticks) <= 0.05  # the axis spans the band, not the batch
    assert 'data-plot="zoom"' not in html.page(_doc([wrong_slope]))  # every negative input: no zoom


def test_figures_of_a_row_are_small(wrong_slope: Row) -> None:
    page = html.page(_doc([wrong_slope]))
    assert len(page.encode()) < 60_000
    assert {"transfer", "ulp", "values"} <= set(re.findall(r'data-plot="([a-z]+)"', page))


# ----------------------------------------------------------------------------- the budget

def _many(row: Row, *, count: int) -> dict:
    """A document of ``count`` copies of ``row``'s, each its own backend and slope, every third warned.
    The copies share ``row``'s findings and plots (the page only reads them), so a deep copy of
    each, which took twenty times as long as the page, is not made."""
    doc = _doc([row])
    base = doc["rows"][0]
    doc["rows"] = [{**base, "backend": f"kernel{i // 8}", "alpha": {"decimal": repr(0.01 * (1 + i % 8))},
                    "verdict": "warn" if i % 3 else "fail"} for i in range(count)]
    doc["summary"] = {**doc["summary"], "rows": count}
    return doc


@pytest.mark.parametrize("count", [250, 3000])
def test_page_stays_under_a_megabyte_with_many_rows(wrong_slope: Row, count: int) -> None:
    page = html.page(_many(wrong_slope, count=count))
    assert len(page.encode()) <= 1_000_000
    assert f"{count} rows: " in page and page.count('<tr>') >= count // 8  # every folded group is listed
    sections = page.count('<section class="row-panel')
    shown_figures = page.count('data-plot="transfer"')
    assert shown_figures >= 20 and sections >= min(count, 200)
    left = re.search(r"([\d,]+) rows? not shown", page)
    assert (left is None) == (sections == count)
    assert left is None or int(left.group(1).replace(",", "")) == count - sections
    first = page.index('<section class="row-panel')
    assert page.index('data-plot="transfer"') > first
    assert page[first:].startswith('<section class="row-panel fail-row"')


def test_the_page_holds_no_plotting_library() -> None:
    """The page holds no plotting library: no script at all."""
    assert "plotly" not in html.page({"verdict": "pass", "seed": 0, "rows": [], "summary": {}}).lower()


def test_a_row_shows_what_other_tools_checks_say_and_the_header_its_machine(wrong_slope: Row) -> None:
    from conformance import machine
    from conformance.render.summary import RunInfo

    doc = export.report_dict([wrong_slope], seed=None, versions={}, plots=True,
                             info=RunInfo(environment=machine.describe()))
    page = html.page(doc)
    table = re.search(r'<table class="checks">.*?</table>', page)
    assert table, "no table of other checks"
    verdicts = {name: verdict for name, verdict, _ in _cells(table.group(0))}
    assert verdicts == {c.name: "passes" if c.passes else "fails" for c in wrong_slope.other_checks}
    assert verdicts["torch.assert_close"] == "fails"
    facts = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", page))
    assert "FTZ off, DAZ off" in facts["machine"]
