"""The compiled passes of a defect compare give the numpy path's results.

``triage._compiled.slope_loops`` summarises the slopes a batch's mismatches show without writing
them out (their median by a radix selection, which candidate slopes some slope shown is near);
``triage.candidates`` picks the candidate rules from them.  On slopes of every sign and
width, repeated ones, signed zeros, infinities, NaN, subnormals, consecutive mismatches and
scattered ones, the selected values are those of a sort and the candidate rules are the
numpy path's.
"""
from __future__ import annotations

import numpy as np
import pytest

from conformance.reference import golden
from conformance.triage import candidates
from conformance.triage.claims import Batch

slope_loops = pytest.importorskip("conformance.triage._compiled.slope_loops",
                                  reason="numba (the fast extra) is not installed")
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # slopes of ±inf


def _slopes(kind: str, n: int, *, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "tight":  # one slope rounded many ways: keys within a narrow range
        return 0.01 * (1 + rng.uniform(-2.0 ** -24, 2.0 ** -24, n))
    if kind == "wide":  # every sign and binade, infinities among them
        s = rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n)
        s[::97] = np.inf
        s[1::89] = -np.inf
        return s
    if kind == "repeated":  # a few values, each many times: buckets of one key
        return rng.choice(np.array([-3.5, 0.01, 0.2, 7.0]), n)
    return np.full(n, 0.25)  # one value


def _pair(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(actual, operand) whose ratio is ``s``: operand 1, or a finite pair that overflows to ±inf."""
    inf = np.isinf(s)
    actual, operand = np.where(inf, np.copysign(1e300, s), s), np.where(inf, 1e-300, 1.0)
    assert np.array_equal(actual / operand, s)
    return actual, operand


@pytest.mark.parametrize("kind", ["tight", "wide", "repeated", "one"])
@pytest.mark.parametrize("n", [1, 2, 3, 1000, 40_001, 300_000])
def test_the_slopes_at_two_ranks_are_a_sorts(kind, n):
    actual, operand = _pair(_slopes(kind, n, seed=n))
    seen = slope_loops.survey(actual, operand, operand, operand, None, smallest_normal=0.0, forward=True)
    assert seen.count == n
    ordered = np.sort(actual / operand)
    for r in sorted({0, n // 2 - 1 if n > 1 else 0, n // 2, n - 2 if n > 1 else 0}):
        ranks = (r, min(r + 1, n - 1))
        assert slope_loops.at_ranks(actual, operand, None, ranks=ranks, surveyed=seen) == \
            (ordered[ranks[0]], ordered[ranks[1]])


@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize("scattered", [False, True], ids=["in-order", "scattered"])
@pytest.mark.parametrize("kind", ["tight", "wide"])
def test_the_median_comes_from_the_keys_the_survey_kept_about_it(kind, scattered, threads, monkeypatch):
    """The survey keeps the keys about its sample's median (each thread's part its own, joined
    in order): the median ranks are selected from them with no other pass; ranks outside them
    (the least) and a window that misses them take the selection passes, with the same answers."""
    monkeypatch.setenv("CONFORMANCE_THREADS", threads)
    actual, operand = _pair(_slopes(kind, 400_002, seed=7))
    index = np.arange(0, actual.size, 2) if scattered else None
    shown = actual / operand if index is None else actual[index] / operand[index]
    ordered, n = np.sort(shown), shown.size
    median = (n // 2, n // 2)
    seen = slope_loops.survey(actual, operand, operand, operand, index, smallest_normal=0.0, forward=True)
    under, keys = seen.middle
    assert under <= median[0] < under + keys.size < n, "the median lies among the kept keys"
    with monkeypatch.context() as m:
        m.setattr(slope_loops, "_selected", None)  # no selection pass
        assert slope_loops.at_ranks(actual, operand, index, ranks=median, surveyed=seen) == (ordered[n // 2],) * 2
    assert slope_loops.at_ranks(actual, operand, index, ranks=(0, 1), surveyed=seen) == (ordered[0], ordered[1])
    monkeypatch.setattr(slope_loops, "_MIDDLE", 0.0)  # one key kept: the median's rank misses it
    missed = slope_loops.survey(actual, operand, operand, operand, index, smallest_normal=0.0, forward=True)
    assert missed.middle[1].size <= 1
    assert slope_loops.at_ranks(actual, operand, index, ranks=(n // 2 - 1, n // 2), surveyed=missed) == \
        (ordered[n // 2 - 1], ordered[n // 2])


def test_keys_about_the_median_that_overflow_their_room_are_not_kept():
    """One slope repeated: every key lies about the median, more than the room holds; the
    survey keeps none and the selection answers."""
    actual, operand = _pair(_slopes("one", 50_000, seed=1))
    seen = slope_loops.survey(actual, operand, operand, operand, None, smallest_normal=0.0, forward=True)
    assert seen.middle is None
    assert slope_loops.at_ranks(actual, operand, None, ranks=(24_999, 25_000), surveyed=seen) == (0.25, 0.25)


def test_one_part_overflowing_its_room_keeps_no_keys(monkeypatch):
    """Slopes in order along the positions: the keys about the median all lie in the middle of
    three parts, more than its room (here a quarter of theirs) holds, none in the others; the
    survey keeps none, and the selection answers."""
    monkeypatch.setenv("CONFORMANCE_THREADS", "3")
    monkeypatch.setattr(slope_loops, "_ROOM", 1)
    actual, operand = _pair(np.sort(_slopes("wide", 300_001, seed=2)))
    parts = slope_loops._parts(actual.size)
    assert len(parts) == 3
    seen = slope_loops.survey(actual, operand, operand, operand, None, smallest_normal=0.0, forward=True)
    assert seen.middle is None
    with monkeypatch.context() as m:
        m.setattr(slope_loops, "_ROOM", 4)
        assert slope_loops.survey(actual, operand, operand, operand, None, smallest_normal=0.0,
                                  forward=True).middle is not None, "with room enough, the middle part keeps them"
    ordered = actual / operand
    assert slope_loops.at_ranks(actual, operand, None, ranks=(150_000, 150_000), surveyed=seen) == \
        (ordered[150_000],) * 2


def test_a_zero_at_a_rank_is_left_to_the_sort():
    """Zeros of either sign are equal to a sort and lie in an order of its own: no answer."""
    actual = np.array([-0.0, 0.0, 0.0, -0.0, 1.0, -1.0, 2.0])
    operand = np.ones_like(actual)
    seen = slope_loops.survey(actual, operand, operand, operand, None, smallest_normal=0.0, forward=True)
    assert slope_loops.at_ranks(actual, operand, None, ranks=(3, 3), surveyed=seen) is None
    assert slope_loops.at_ranks(actual, operand, None, ranks=(5, 6), surveyed=seen) == (1.0, 2.0)


@pytest.mark.parametrize("slope", [0.01, float(np.float32(0.01)), 0.2, -0.3, 0.0, -0.0, 1e-300, 5e-324, 1e308, -1e308])
def test_a_window_is_where_the_plausibility_test_holds(slope):
    def holds(r: float) -> bool:
        return abs(r - slope) <= abs(slope) * 2.0 ** -6

    lo, hi = candidates._window(slope)
    assert lo <= slope <= hi and holds(lo) and holds(hi)
    assert not holds(float(np.nextafter(lo, -np.inf))) and not holds(float(np.nextafter(hi, np.inf)))
    inside = np.random.default_rng(1).uniform(lo, hi, 1000).tolist() if hi > lo else []
    assert all(holds(r) for r in inside)


@pytest.mark.parametrize("kind", ["tight", "wide", "repeated"])
def test_which_windows_some_slope_lies_in(kind):
    actual, operand = _pair(_slopes(kind, 50_000, seed=7))
    ratio = actual / operand
    ordered = np.sort(ratio)
    probes = np.concatenate([ordered[::4999], [-1e308, -0.0, 1e-300, 1e308, 0.01, 0.2, 0.25, 7.0]])
    windows = [candidates._window(float(p)) for p in probes] + [(1.0, 1.0), (-5.0, -3.0), (-0.0, 0.0)]
    expected = [bool(((ratio >= lo) & (ratio <= hi)).any()) for lo, hi in windows]
    assert slope_loops.shown_within(actual, operand, None, windows) == expected
    assert any(expected) and not all(expected)
    seen = slope_loops.survey(actual, operand, operand, operand, None, smallest_normal=0.0, forward=True)
    assert slope_loops.shown_within(actual, operand, None, windows, surveyed=seen) == expected
    scattered = np.arange(0, ratio.size, 3)
    assert slope_loops.shown_within(actual, operand, scattered, windows) == \
        [bool(((ratio[scattered] >= lo) & (ratio[scattered] <= hi)).any()) for lo, hi in windows]


def _edge_inputs(dtype: type, n: int, *, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)).astype(dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, -np.finfo(dtype).max]
    return x


def _batch(x: np.ndarray, *, direction: str, slope: float, dy: np.ndarray | None = None) -> Batch:
    out = x.dtype.name
    g = golden.compute(direction, x, 0.2, dy=dy, out_dtype=out)
    a = golden.compute(direction, x, slope, dy=dy, out_dtype=out)
    return Batch(x, dy, 0.2, direction, out, g, a)


def _numpy_candidates(batch: Batch, mis: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> list:
    with monkeypatch.context() as m:
        m.setenv("CONFORMANCE_COMPILED", "0")
        return candidates.candidates_for(batch, mis)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("slope", [0.01, 0.0, -0.3, 1.5])
def test_the_compiled_candidates_are_the_numpy_paths(dtype, direction, slope, monkeypatch):
    monkeypatch.setattr(candidates, "COMPILED_FROM", 1)  # the compiled passes on batches of every size
    x = _edge_inputs(dtype, 70_001, seed=11)
    dy = None if direction == "forward" else _edge_inputs(dtype, x.size, seed=12)[::-1].copy()
    batch = _batch(x, direction=direction, slope=slope, dy=dy)
    word = f"u{x.dtype.itemsize}"
    differs = np.flatnonzero(batch.golden.view(word) != batch.actual.view(word))
    negative = np.flatnonzero(x < 0)
    for mis in (differs, negative, negative[::3], np.arange(x.size), differs[differs >= 8]):
        got = candidates.candidates_for(batch, mis)
        assert [r.summary for r in got] == [r.summary for r in _numpy_candidates(batch, mis, monkeypatch)]


def test_the_compiled_candidates_answer_where_they_should(monkeypatch):
    """The slope defect's mismatches (consecutive, all informative, one side) take the
    compiled path, and it keeps exactly the slopes some element shows."""
    x = -np.abs(_edge_inputs(np.float32, 100_000, seed=3)[8:])
    batch = _batch(x, direction="forward", slope=0.01)
    mis = np.arange(x.size)
    got = candidates._compiled_candidates(batch, mis)
    assert got is not None
    assert [r.summary for r in got] == [r.summary for r in _numpy_candidates(batch, mis, monkeypatch)]
    assert any("0.01" in r.summary for r in got)
    assert len(got) < len(candidates.catalogue(alpha=0.2, direction="forward", dtypes=batch.dtypes,
                                               estimates=[0.01])), "some slope no element shows is dropped"
