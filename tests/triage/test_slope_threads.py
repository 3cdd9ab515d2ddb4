"""The slope passes give the same survey, ranks and hits whatever the number of threads.

``triage._compiled.slope_loops`` splits every pass over ``CONFORMANCE_THREADS`` threads by position
range and merges the parts' counts, histograms and extremes.  On slopes with zero, infinite,
NaN and subnormal operands, signed zeros, many equal keys, one element and odd and even
counts, read in order and at positions, one, two and three threads (every pass split, down
to a part of no element) give identical results, and those are a sort's.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pytest

from conformance.triage import candidates

slope_loops = pytest.importorskip("conformance.triage._compiled.slope_loops",
                                  reason="numba (the fast extra) is not installed")
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                        "ignore:invalid value encountered:RuntimeWarning")

_SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2e-308, 1e308, -1e308])


def _operands(n: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(actual, operand): random slopes, runs of one slope (equal keys), and special values
    on either side (a zero operand, inf or NaN shows no slope; a subnormal or a zero actual does)."""
    rng = np.random.default_rng(seed)
    operand = rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5, n)
    actual = operand * rng.choice([0.01, 0.2, -0.3, 1.0], n) * (1 + rng.uniform(-1e-6, 1e-6, n))
    same = rng.random(n) < 0.2
    actual[same] = 0.5 * operand[same]  # exact: slope 0.5, one key many times
    for side in (actual, operand):
        at = rng.random(n) < 0.15
        side[at] = rng.choice(_SPECIALS, int(at.sum()))
    return actual, operand


def _shown(actual: np.ndarray, operand: np.ndarray, index: Optional[np.ndarray]) -> np.ndarray:
    a, v = (actual, operand) if index is None else (actual[index], operand[index])
    ok = np.isfinite(a) & np.isfinite(v) & (v != 0)
    return a[ok] / v[ok]


def _results(actual: np.ndarray, operand: np.ndarray, index: Optional[np.ndarray], windows: list) -> tuple:
    """Everything the passes answer on these operands: the survey, ranks, and windows hit."""
    seen = slope_loops.survey(actual, operand, operand, actual, index, smallest_normal=2.0 ** -1022, forward=True)
    fields = (seen.count, seen.normal, seen.negative, seen.lo, seen.hi, seen.present,
              seen.starts.tolist(), seen.stops.tolist(), seen.counts.tolist())
    n = seen.count
    ranks = sorted({(r, min(r + 1, n - 1)) for r in (0, n // 2 - 1, n // 2, n - 1) if 0 <= r < n})
    picked = [slope_loops.at_ranks(actual, operand, index, ranks=r, surveyed=seen) for r in ranks]
    hits = (slope_loops.shown_within(actual, operand, index, windows),
            slope_loops.shown_within(actual, operand, index, windows, surveyed=seen))
    return fields, ranks, picked, hits


def _windows(slopes: np.ndarray) -> list[tuple[float, float]]:
    probes = np.concatenate([np.sort(slopes)[::max(1, slopes.size // 7)], [0.01, -0.3, 1e300, -0.0]])
    return [candidates._window(float(p)) for p in probes if np.isfinite(p)] + [(-0.0, 0.0), (1.0, 2.0)]


@pytest.mark.parametrize("n", [1, 2, 7, 8, 1001, 1000, 20_001])
@pytest.mark.parametrize("scattered", [False, True])
@pytest.mark.parametrize("few", [1 << 20, 3])
def test_one_two_and_three_threads_give_a_sorts_answers(n, scattered, few, monkeypatch):
    """``few`` 3: the selection narrows by histogram passes down to three slopes (split too)."""
    monkeypatch.setattr(slope_loops, "_SPLIT_FROM", 1)  # every pass split, even of one element
    monkeypatch.setattr(slope_loops, "_FEW", few)
    actual, operand = _operands(n, seed=n)
    index = np.arange(0, n, 2) if scattered and n > 1 else None
    slopes = _shown(actual, operand, index)
    windows = _windows(slopes)
    got = {}
    for threads in (1, 2, 3):
        monkeypatch.setenv("CONFORMANCE_THREADS", str(threads))
        got[threads] = _results(actual, operand, index, windows)
    assert repr(got[1]) == repr(got[2]) == repr(got[3])
    fields, ranks, picked, (passed, told) = got[1]
    assert fields[0] == slopes.size
    ordered = np.sort(slopes)
    for (r, s), answer in zip(ranks, picked):
        expected = (float(ordered[r]), float(ordered[s]))
        assert answer == (None if 0.0 in expected else expected)
    expected_hits = [bool(((slopes >= lo) & (slopes <= hi)).any()) for lo, hi in windows]
    assert passed == told == expected_hits


def test_a_survey_counts_as_numpy_does(monkeypatch):
    """Count, informative (a finite normal golden) and negative side (x < 0) of the slopes shown."""
    monkeypatch.setattr(slope_loops, "_SPLIT_FROM", 1)
    monkeypatch.setenv("CONFORMANCE_THREADS", "2")
    actual, operand = _operands(5001, seed=3)
    golden = np.where(np.arange(actual.size) % 5 == 0, 1e-310, actual)
    seen = slope_loops.survey(actual, operand, operand, golden, None, smallest_normal=2.0 ** -1022, forward=True)
    ok = np.isfinite(actual) & np.isfinite(operand) & (operand != 0)
    g = golden[ok]
    assert (seen.count, seen.normal, seen.negative) == \
        (int(ok.sum()), int(((np.abs(g) >= 2.0 ** -1022) & np.isfinite(g)).sum()), int((operand[ok] < 0).sum()))


def test_a_pass_over_no_slope_answers_nothing(monkeypatch):
    monkeypatch.setattr(slope_loops, "_SPLIT_FROM", 1)
    monkeypatch.setenv("CONFORMANCE_THREADS", "2")
    actual, operand = np.array([1.0, np.nan, 2.0]), np.array([0.0, 1.0, np.inf])
    seen = slope_loops.survey(actual, operand, operand, actual, None, smallest_normal=0.0, forward=True)
    assert seen.count == 0 and not seen.present
    assert slope_loops.shown_within(actual, operand, None, [(-1.0, 1.0)], surveyed=seen) == [False]
