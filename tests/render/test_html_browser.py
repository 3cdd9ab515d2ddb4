"""The HTML pages in a real browser: headless Chromium with networking off.

Each page must render every figure and its table of offending elements visibly, fetch
nothing and log no error; its screenshot (kept in reports/) must show ink, which a blank
page does not (a test proves the check fails on one).  The tests skip only when no Chromium
is found and CONFORMANCE_REQUIRE_BROWSER is unset.
"""
from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.render.conftest import PAGES

ROOT = Path(__file__).resolve().parents[2]
INK = 0.03  # the share of a page's screenshot that must differ from its background


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
    for arg in ("--headless=new", "--no-sandbox", "--window-size=1400,1600", "--hide-scrollbars"):
        options.add_argument(arg)
    options.binary_location = found[0]
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(found[1]))
    driver.set_network_conditions(offline=True, latency=0, download_throughput=0, upload_throughput=0)
    yield driver
    driver.quit()


#: The share of a PNG's pixels (decoded by the browser itself) that differ from its top-left pixel.
_INK = """
var done = arguments[arguments.length - 1], img = new Image();
img.onload = function () {
  var c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
  var g = c.getContext('2d'); g.drawImage(img, 0, 0);
  var d = g.getImageData(0, 0, c.width, c.height).data, inked = 0;
  for (var i = 0; i < d.length; i += 4) {
    if (Math.abs(d[i] - d[0]) + Math.abs(d[i + 1] - d[1]) + Math.abs(d[i + 2] - d[2]) > 30) inked++;
  }
  done(inked / (d.length / 4));
};
img.src = 'data:image/png;base64,' + arguments[0];
"""

#: What each figure and table showed: its name, size on screen, and whether it is painted.
_SHOWN = """
return Array.from(document.querySelectorAll('svg.plot, table')).map(function (el) {
  var box = el.getBoundingClientRect(), style = getComputedStyle(el);
  return {name: el.dataset.plot || el.className, width: box.width, height: box.height,
          visible: style.visibility === 'visible' && style.display !== 'none',
          marks: el.querySelectorAll('path, rect, circle, polyline, image, td').length};
});
"""


def ink(browser, png: bytes) -> float:  # noqa: ANN001 - a selenium WebDriver
    """The share of ``png``'s pixels that differ from its background."""
    return browser.execute_async_script(_INK, base64.b64encode(png).decode("ascii"))


@dataclass(frozen=True)
class Rendered:
    """One page in the browser: its figures and tables, severe console entries, what it fetched,
    and the ink of its screenshot and of its first figure's."""

    shown: list[dict]
    errors: list[dict]
    fetched: list[str]
    page_ink: float
    figure_ink: float


def _open(browser, path: Path, *, name: str) -> Rendered:  # noqa: ANN001 - a selenium WebDriver
    from selenium.webdriver.common.by import By

    browser.get(path.as_uri())
    shown = browser.execute_script(_SHOWN)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    fetched = browser.execute_script("return performance.getEntriesByType('resource').map(function (r) "
                                     "{ return r.name; })")
    shot = browser.get_screenshot_as_png()
    (ROOT / "reports").mkdir(exist_ok=True)
    (ROOT / "reports" / f"html-report-{name}.png").write_bytes(shot)
    figures = browser.find_elements(By.CSS_SELECTOR, "svg.plot")
    figure_ink = ink(browser, figures[0].screenshot_as_png) if figures else 0.0
    return Rendered(shown, errors, fetched, ink(browser, shot), figure_ink)


@pytest.fixture(scope="module")
def rendered(browser, pages: dict[str, Path]) -> Callable[[str], Rendered]:  # noqa: ANN001 - a WebDriver
    """Each page opened once (its screenshot to reports/), for every test that reads it."""
    seen: dict[str, Rendered] = {}

    def page(name: str) -> Rendered:
        if name not in seen:
            seen[name] = _open(browser, pages[name], name=name)
        return seen[name]

    return page


@pytest.mark.parametrize("name", list(PAGES))
def test_page_renders_offline_without_console_errors(rendered: Callable[[str], Rendered], name: str) -> None:
    page = rendered(name)
    assert page.errors == [] and page.fetched == []
    figures = {s["name"]: s for s in page.shown if s["name"] in PAGES[name][1]}
    assert set(figures) == PAGES[name][1]
    assert all(f["visible"] and f["width"] > 200 and f["height"] > 60 and f["marks"] >= 2
               for f in figures.values()), figures
    offenders = [s for s in page.shown if s["name"] == "offenders"]
    assert offenders and all(t["visible"] and t["height"] > 40 and t["marks"] >= 7 for t in offenders)


@pytest.mark.parametrize("name", list(PAGES))
def test_screenshot_shows_the_page_not_a_blank(rendered: Callable[[str], Rendered], name: str) -> None:
    page = rendered(name)
    assert page.page_ink > INK, f"the screenshot of {name} is nearly one colour ({page.page_ink:.3%} ink)"
    assert page.figure_ink > INK, f"the first figure of {name} is nearly empty ({page.figure_ink:.3%} ink)"


def test_the_screenshot_check_fails_on_a_blank_page(browser, tmp_path: Path) -> None:  # noqa: ANN001
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    page = _open(browser, blank, name="blank")
    assert page.page_ink <= INK and page.figure_ink == 0.0
    assert not [s for s in page.shown if s["name"] == "offenders"]
