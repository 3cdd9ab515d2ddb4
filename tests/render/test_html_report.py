"""The HTML report: its plot data (judge.plots) and the pages the --html flag writes.

The page's contents from documents are in test_html_page.py; the pages in a real browser
in test_html_browser.py.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from conformance.judge import plots
from conformance.records import TilePlan, TileSpan, class_order
from conformance.reference import golden as ref
from conformance.triage import Batch, Claim
from tests.helpers import assert_usage_error, run_cli
from tests.render.conftest import PAGES, WRONG_CHANNEL


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
    assert set(doc["rows"][0]["plots"]) == {"ulp", "values", "grids", "transfer"}
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


def test_transfer_sample_is_bounded_and_spread_over_the_inputs() -> None:
    x = np.linspace(-8, 8, 100_001, dtype=np.float32)
    actual = ref.compute("forward", x, 0.01, out_dtype="float32")  # the slope 0.01 where 0.2 was meant
    wrong = np.flatnonzero(x < 0)
    found = plots.measure([_claim(wrong, "alpha-mismatch")], _batch(x, actual))
    assert found is not None
    batch = [s for s in found.transfer if not s.category]
    differing = [s for s in found.transfer if s.category == "alpha-mismatch"]
    assert len(batch) == plots.SAMPLED_ALL and len(differing) == plots.SAMPLED_PER_CATEGORY
    assert min(s.x for s in batch) == -8 and max(s.x for s in batch) == 8  # both ends of the inputs
    def golden(x: float, alpha: float) -> float:
        return float(ref.compute("forward", np.float32([x]), alpha, out_dtype="float32")[0])

    assert all(s.x < 0 and s.actual == golden(s.x, 0.01) for s in differing)
    assert all(s.expected == golden(s.x, 0.2) for s in batch)


def test_merged_transfer_samples_stay_bounded() -> None:
    x = np.linspace(-2, 2, 4096, dtype=np.float32)
    one = plots.measure([_claim(np.arange(0, 2048))], _batch(x, np.zeros_like(x)))
    merged = plots.merge(one, one)
    assert merged is not None and len(merged.transfer) == len(one.transfer)  # type: ignore[union-attr]
    assert plots.from_state(plots.to_state(merged)).transfer == merged.transfer


# ----------------------------------------------------------------------------- the pages

def _figures(html: str) -> set[str]:
    return set(re.findall(r'<svg class="plot" data-plot="([a-z]+)"', html))


@pytest.mark.parametrize("name", list(PAGES))
def test_page_has_its_figures_and_loads_nothing(pages: dict[str, Path], name: str) -> None:
    html = pages[name].read_text()
    assert _figures(html) == PAGES[name][1]
    assert "<script" not in html.lower()
    assert not re.search(r"""\b(?:src|href)\s*=\s*["'](?!data:|#)""", html, re.IGNORECASE)
    assert "http://" not in html and "https://" not in html
    assert '<table class="folded">' in html and '<table class="offenders">' in html


@pytest.mark.parametrize("name", ["run-reference", "agree"])
def test_agreement_is_a_table_of_differing_counts(pages: dict[str, Path], name: str) -> None:
    html = pages[name].read_text()
    assert '<table class="agreement">' in html and re.search(r"[\d,]+ of [\d,]+ differ", html)


def test_pages_stay_small(pages: dict[str, Path]) -> None:
    """Figures and tables only, no plotting library: tens of kilobytes, whatever the tensor's size."""
    assert all(p.stat().st_size < 200_000 for p in pages.values()), {n: p.stat().st_size for n, p in pages.items()}


def test_shape_map_lights_only_the_wrong_channel(pages: dict[str, Path]) -> None:
    (rows,) = re.findall(r'data-plot="shape" data-rows="([\d ]*)"', pages["compare-4d"].read_text())
    assert rows.split() == [str(WRONG_CHANNEL)]


def test_plan_map_names_the_tail_block(pages: dict[str, Path]) -> None:
    html = pages["run-tail-dropped"].read_text()
    plan = html[html.index('data-plot="plan"'):]
    assert "tail-block" in plan[:plan.index("</figure>")]


def test_json_report_stays_without_plot_data(dump_dir: Path, tmp_path: Path, capsys) -> None:
    report = tmp_path / "r.json"
    result = run_cli(["compare", "--x", str(dump_dir / "x.npy"), "--y", str(dump_dir / "y.npy"), "--alpha",
                      "0.2", "--json", str(report), "-q"], capsys)
    assert result.code == 1
    assert "plots" not in json.loads(report.read_text())["rows"][0]


def test_html_needs_no_plotting_library(dump_dir: Path, tmp_path: Path, capsys,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)  # import plotly raises ImportError
    result = run_cli(["compare", "--x", str(dump_dir / "x.npy"), "--y", str(dump_dir / "y.npy"), "--alpha",
                      "0.2", "--html", str(tmp_path / "r.html"), "-q"], capsys)
    assert result.code == 1 and (tmp_path / "r.html").stat().st_size > 10_000


def test_html_and_json_on_one_path_is_a_usage_error(dump_dir: Path, tmp_path: Path, capsys) -> None:
    same = str(tmp_path / "r.out")
    result = run_cli(["compare", "--x", str(dump_dir / "x.npy"), "--y", str(dump_dir / "y.npy"), "--alpha",
                      "0.2", "--json", same, "--html", same], capsys)
    assert_usage_error(result, mentions="--html")
