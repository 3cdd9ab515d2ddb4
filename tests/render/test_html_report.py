"""The HTML report: its plot data (judge.plots), the --html flag, and the page in a real browser.

The browser tests open each page in headless Chromium with networking off, and check that
every panel's plot rendered, that nothing was fetched and that the console stayed clean;
a screenshot of each page goes to reports/.  They skip only when no Chromium is found and
CONFORMANCE_REQUIRE_BROWSER is unset.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conformance.judge import plots
from conformance.records import TilePlan, TileSpan, class_order
from conformance.reference import golden as ref
from conformance.triage import Batch, Claim
from tests.helpers import assert_usage_error, run_cli

ROOT = Path(__file__).resolve().parents[2]
SHAPE = (2, 16, 32, 32)  # N, C, H, W
WRONG_CHANNEL = 5


def _batch(x: np.ndarray, actual: np.ndarray) -> Batch:
    golden = ref.compute("forward", x, 0.2, out_dtype=x.dtype.name)
    return Batch(x, None, 0.2, "forward", x.dtype.name, golden, actual)


def _claim(index: np.ndarray, category: str = "unexplained") -> Claim:
    return Claim(category, np.asarray(index), int(np.size(index)), "")


# ----------------------------------------------------------------------------- plot data

def test_ulp_bins_are_powers_of_two_and_nan_apart() -> None:
    x = np.full(6, 1.0)
    golden = ref.compute("forward", x, 0.2, out_dtype="float64")
    ordered = golden.view(np.int64)
    actual = (ordered + np.array([1, 2, 3, 4, (1 << 60) - 1, 0])).view(np.float64)
    actual[5] = np.nan
    found = plots.measure([_claim(np.arange(6))], Batch(x, None, 0.2, "forward", "float64", golden, actual))
    assert found is not None
    assert dict(found.ulp["unexplained"]) == {"1": 1, "2": 2, "4": 1, str(1 << 59): 1, "nan": 1}  # 2^60-1: exact


def test_input_classes_name_sign_binade_and_specials() -> None:
    x = np.array([0.0, -0.0, 5e-324, -np.inf, np.inf, np.nan, 1.5, -3.0, 2.0 ** -1022])
    found = plots.measure([_claim(np.arange(x.size))], _batch(x, np.zeros_like(x)))
    assert found is not None
    assert set(found.values["unexplained"]) == {"+0", "-0", "+subnormal", "-inf", "+inf", "nan", "+2^0",
                                                "-2^1", "+2^-1022"}
    order = sorted(found.values["unexplained"], key=class_order)
    assert order == ["-inf", "-2^1", "-0", "+0", "+subnormal", "+2^-1022", "+2^0", "+inf", "nan"]


def test_plan_grid_counts_each_error_in_its_core_and_tile() -> None:
    spans = tuple(TileSpan(core, tile, 8 * core + 4 * tile, 4, is_tail=tile == 1)
                  for core in range(2) for tile in range(2))
    x = np.linspace(-2, 2, 16, dtype=np.float32)
    found = plots.measure([_claim([1, 13, 14]), _claim([6], "tail-block")], _batch(x, np.zeros_like(x)),
                          tile_plan=TilePlan(4, spans))
    assert found is not None
    (grid,) = found.grids
    assert (grid.kind, grid.axes, grid.size, grid.bins) == ("plan", ("core", "tile"), (2, 2), (1, 1))
    assert grid.cells == {"unexplained": {(0, 0): 1, (1, 1): 2}, "tail-block": {(0, 1): 1}}


def test_shape_grid_is_channel_by_spatial_with_the_batch_summed() -> None:
    x = np.ones(2 * 3 * 4, dtype=np.float32)
    wrong = [4 * 1 + 2, 12 + 4 * 1 + 2, 12 + 4 * 2 + 3]  # (n0, c1, s2), (n1, c1, s2), (n1, c2, s3)
    found = plots.measure([_claim(wrong)], _batch(x, np.zeros_like(x)), shape=(2, 3, 4))
    assert found is not None
    (grid,) = found.grids
    assert grid.axes[0].startswith("channel") and grid.size == (3, 4)
    assert grid.cells == {"unexplained": {(1, 2): 2, (2, 3): 1}}


def test_grids_are_bounded_by_their_bins_not_the_tensor() -> None:
    x = np.ones((4, 200, 300), dtype=np.float32)
    found = plots.measure([_claim(np.arange(x.size))], _batch(x.reshape(-1), np.zeros(x.size, np.float32)),
                          shape=x.shape)
    assert found is not None
    (grid,) = found.grids
    assert grid.bins == (4, 5) and len(grid.cells["unexplained"]) == 50 * 60
    assert sum(grid.cells["unexplained"].values()) == x.size


def test_a_row_with_plots_is_a_valid_report_document() -> None:
    from conformance.render import export
    from tests.helpers import judge

    x = np.linspace(-4, 4, 64, dtype=np.float32)
    row = judge(x, ref.compute("forward", x, 0.01, out_dtype="float32"), 0.2)
    doc = export.report_dict([row], seed=0, versions={}, plots=True)
    assert export.validate(doc, export.SCHEMA) == []
    assert set(doc["rows"][0]["plots"]) == {"ulp", "values", "grids"}
    assert "plots" not in export.report_dict([row], seed=0, versions={})["rows"][0]


def test_a_sweep_store_keeps_the_plot_data() -> None:
    from conformance.sweep.store import row_from_text, row_text
    from tests.helpers import judge

    x = np.linspace(-4, 4, 64, dtype=np.float32)
    row = judge(x, ref.compute("forward", x, 0.01, out_dtype="float32"), 0.2)
    assert row.plots is not None and row_from_text(row_text(row)).plots == row.plots


def test_merge_sums_counts_and_keeps_the_grids_with_most_errors() -> None:
    x = np.ones(12, dtype=np.float32)
    small = plots.measure([_claim([0])], _batch(x, np.zeros_like(x)), shape=(3, 4), part="a")
    big = plots.measure([_claim([1, 2, 3])], _batch(x, np.zeros_like(x)), shape=(3, 4), part="b")
    merged = plots.merge(small, big)
    assert merged is not None and plots.merge(None, small) is small
    assert merged.values["unexplained"]["+2^0"] == 4
    assert [g.part for g in merged.grids] == ["b", "a"]


# ----------------------------------------------------------------------------- the pages

@pytest.fixture(scope="module")
def dump_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4-D fp32 dump whose channel 5 used the slope 0.01 on its first four rows."""
    d = tmp_path_factory.mktemp("dump")
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    y = ref.compute("forward", x.reshape(-1), 0.2, out_dtype="float32").reshape(SHAPE)
    band = x[:, WRONG_CHANNEL, :4, :]
    y[:, WRONG_CHANNEL, :4, :] = np.where(band > 0, band, band * np.float32(0.01))
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", y)
    return d


_RUN = ("run", "--backend", "cann", "--dtype", "fp16", "--alpha", "0.2", "--direction", "forward",
        "--max-examples", "5")
PAGES = {  # name -> (arguments, the panels the page must show)
    "run-tail-dropped": (_RUN + ("--variant", "tail-dropped"), {"ulp", "values", "plan"}),
    "compare-4d": (("compare", "--x", "{dump}/x.npy", "--y", "{dump}/y.npy", "--alpha", "0.2"),
                   {"ulp", "values", "shape"}),
    "run-reference": (_RUN + ("--variant", "default-slope", "--reference", "golden"),
                      {"agreement", "ulp", "values", "plan"}),
    "agree": (("agree", "--backend", "golden,cann", "--variant", "default-slope") + _RUN[3:],
              {"agreement", "ulp", "values", "plan"}),
}


@pytest.fixture(scope="module")
def pages(small_batches: None, dump_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The pages of rows run on small batches: a page's panels are those of its rows' findings."""
    from conformance import cli

    out = tmp_path_factory.mktemp("html")
    written = {}
    for name, (args, _) in PAGES.items():
        written[name] = out / f"{name}.html"
        argv = [a.format(dump=dump_dir) for a in args] + ["--html", str(written[name]), "-q"]
        if argv[0] == "run":
            argv += ["--results-dir", str(out / "results")]
        assert cli.main(argv) == (0 if argv[0] == "agree" else 1), name  # agree's table is no gate
    return written


def _panels(html: str) -> set[str]:
    return set(re.findall(r'data-plot="([a-z]+)"', html))


@pytest.mark.parametrize("name", list(PAGES))
def test_page_has_its_panels_and_no_remote_script(pages: dict[str, Path], name: str) -> None:
    html = pages[name].read_text()
    assert _panels(html) == PAGES[name][1]
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.IGNORECASE)
    assert "<table class=\"folded\">" in html


def test_compare_page_stays_small(pages: dict[str, Path]) -> None:
    """The page is plotly.js plus counts bounded by the bins, whatever the tensor's size."""
    from plotly.offline import get_plotlyjs

    assert pages["compare-4d"].stat().st_size - len(get_plotlyjs()) < 200_000


def test_json_report_stays_without_plot_data(dump_dir: Path, tmp_path: Path, capsys) -> None:
    report = tmp_path / "r.json"
    result = run_cli(["compare", "--x", str(dump_dir / "x.npy"), "--y", str(dump_dir / "y.npy"), "--alpha",
                      "0.2", "--json", str(report), "-q"], capsys)
    assert result.code == 1
    assert "plots" not in json.loads(report.read_text())["rows"][0]


def test_missing_plotting_library_is_a_usage_error_naming_the_extra(dump_dir: Path, tmp_path: Path, capsys,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)  # import plotly raises ImportError
    result = run_cli(["compare", "--x", str(dump_dir / "x.npy"), "--y", str(dump_dir / "y.npy"), "--alpha",
                      "0.2", "--html", str(tmp_path / "r.html")], capsys)
    assert_usage_error(result, mentions="pip install 'conformance[report]'")
    assert not (tmp_path / "r.html").exists()


def test_html_and_json_on_one_path_is_a_usage_error(dump_dir: Path, tmp_path: Path, capsys) -> None:
    same = str(tmp_path / "r.out")
    result = run_cli(["compare", "--x", str(dump_dir / "x.npy"), "--y", str(dump_dir / "y.npy"), "--alpha",
                      "0.2", "--json", same, "--html", same], capsys)
    assert_usage_error(result, mentions="--html")


# ----------------------------------------------------------------------------- in a browser

def _browser() -> tuple[str, str] | None:
    found = [shutil.which(n) or (f"/usr/bin/{n}" if os.path.exists(f"/usr/bin/{n}") else None)
             for n in ("chromium", "chromedriver")]
    return None if None in found else (found[0], found[1])  # type: ignore[return-value]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    found = _browser()
    if found is None:
        if os.environ.get("CONFORMANCE_REQUIRE_BROWSER"):
            pytest.fail("CONFORMANCE_REQUIRE_BROWSER is set but chromium/chromedriver are not installed")
        pytest.skip("no chromium and chromedriver found (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--window-size=1400,2400"):
        options.add_argument(arg)
    options.binary_location = found[0]
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(found[1]))
    driver.set_network_conditions(offline=True, latency=0, download_throughput=0, upload_throughput=0)
    yield driver
    driver.quit()


_RENDERED = """
return Array.from(document.querySelectorAll('[data-plot]')).map(function (div) {
  var gd = div.querySelector('.plotly-graph-div');
  return {name: div.dataset.plot, svgs: div.querySelectorAll('.main-svg').length,
          title: (div.querySelector('.gtitle') || {}).textContent || '',
          ticks: ((gd.data[0].colorbar || {}).ticktext || []),
          rows: (gd.data[0].type === 'heatmap' ? gd.data[0].z.map(function (r, i) {
                   return r.some(function (v) { return v !== null; }) ? gd.data[0].y[i] : null; })
                 .filter(function (v) { return v !== null; }) : [])};
});
"""


def _open(browser, path: Path) -> list[dict]:  # noqa: ANN001 - a selenium WebDriver
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(path.as_uri())
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return document.querySelectorAll('[data-plot] .main-svg').length > 0 && "
                                   "Array.from(document.querySelectorAll('.plotly-graph-div'))"
                                   ".every(function (g) { return g._fullLayout; })"))
    return browser.execute_script(_RENDERED)


@dataclass(frozen=True)
class Rendered:
    """What one page showed in the browser: its plots, its severe console entries, what it fetched."""

    plotted: list[dict]
    errors: list[dict]
    fetched: list[str]


@pytest.fixture(scope="module")
def rendered(browser, pages: dict[str, Path]) -> Callable[[str], Rendered]:  # noqa: ANN001 - a WebDriver
    """Each page opened once (its screenshot to reports/), for every test that reads it.

    Every page is shown from one path: a ``file://`` page is an origin of its own, so Chromium
    would compile the 4.8 MB of plotly.js inline in each page again; from one path it reuses the
    first page's compiled code (what each page runs, and shows, is still its own)."""
    seen: dict[str, Rendered] = {}
    shown = next(iter(pages.values())).parent / "shown.html"

    def page(name: str) -> Rendered:
        if name not in seen:
            shutil.copyfile(pages[name], shown)
            plotted = _open(browser, shown)
            errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            fetched = browser.execute_script("return performance.getEntriesByType('resource')"
                                             ".map(function (r) { return r.name; })")
            (ROOT / "reports").mkdir(exist_ok=True)
            browser.save_screenshot(str(ROOT / "reports" / f"html-report-{name}.png"))
            seen[name] = Rendered(plotted, errors, fetched)
        return seen[name]

    return page


@pytest.mark.parametrize("name", list(PAGES))
def test_page_renders_offline_without_console_errors(rendered: Callable[[str], Rendered], name: str) -> None:
    page = rendered(name)
    assert page.errors == []
    assert {p["name"] for p in page.plotted} == PAGES[name][1]
    assert all(p["svgs"] >= 1 and p["title"] for p in page.plotted), page.plotted
    assert page.fetched == []


def test_maps_show_where_the_errors_are(rendered: Callable[[str], Rendered]) -> None:
    """The tail-dropped kernel's plan map names tail-block; the dump's shape map has only the wrong channel."""
    plan = [p for p in rendered("run-tail-dropped").plotted if p["name"] == "plan"]
    assert any("tail-block" in p["ticks"] for p in plan)
    (shape,) = [p for p in rendered("compare-4d").plotted if p["name"] == "shape"]
    assert shape["rows"] == [WRONG_CHANNEL]
    assert "Errors over the input's shape" in shape["title"]
