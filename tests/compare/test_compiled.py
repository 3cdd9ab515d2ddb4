"""The compiled scan of a chunk reproduces the numpy path bit for bit.

``conformance.judge.chunked`` judges a dump a chunk at a time; with the compiled paths
compiled passes find a chunk's mismatches and add up its cosine sums, judge the mismatches
a range per thread and pick the evidence (``scan_loops``).  On every supported dtype pair,
forward and backward, on edge and random bit patterns (NaN payloads on both sides,
infinities, signed zeros, subnormals), several tolerances and chunkings, the metrics
(cosine sums included), the kept elements and the evidence sample with its weights are
the numpy path's.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from conformance import jit
from conformance.config import load_config
from conformance.dtypes import all_patterns, info, to_bits
from conformance.errors import UsageError
from conformance.judge import chunked
from conformance.judge import plots as plotting
from conformance.metrics import chunk_golden, first_pass
from conformance.metrics.exact import _cosine_sums
from conformance.records import Chunk, Tolerance
from conformance.reference import golden
from conformance.reference.exact import SUPPORTED_PAIRS
from conformance.triage import Claim
from conformance.triage.sampling import SAMPLING

scan_loops = pytest.importorskip("conformance.metrics._compiled.scan_loops",
                                  reason="numba (the fast extra) is not installed")
compiled_golden = pytest.importorskip("conformance.reference.compiled",
                                      reason="numba (the fast extra) is not installed")

TOLERANCES = (Tolerance(1e-3, 1e-5), Tolerance(0.0, 0.0, max_ulp=0, strict_zeros=True),
              Tolerance(1.3e-6, 1e-5, max_ulp=3))


def _inputs(name: str, *, seed: int) -> np.ndarray:
    """Every 16-bit pattern; for 32/64 bits, edge patterns of both signs and random bits."""
    rec = info(name)
    if rec.bits == 16:
        return np.random.default_rng(seed).permutation(all_patterns(name))
    m = rec.mant_bits
    edges = np.array([0, 1, 3, rec.mant_mask, 1 << m, rec.exp_mask - 1, rec.exp_mask, rec.exp_mask | 1,
                      rec.exp_mask | rec.mant_mask, rec.bias << m], dtype=np.uint64)
    edges = np.concatenate([edges, edges | np.uint64(rec.sign_mask)]).astype(rec.uint)
    random = np.random.default_rng(seed).integers(0, 1 << rec.bits, 40_000, dtype=np.uint64).astype(rec.uint)
    normal = np.random.default_rng(seed + 1).standard_normal(40_000).astype(rec.dtype)
    return np.concatenate([edges.view(rec.dtype), random.view(rec.dtype), normal])


def _device(expected: np.ndarray, x: np.ndarray, dy: np.ndarray | None, direction: str) -> np.ndarray:
    """What a defective device could write: another slope's result, some elements exact, 1 ULP
    off, another pattern, golden's NaN with another payload, a zero of the other sign."""
    out = golden.compute(direction, x, 0.01, dy=dy, out_dtype=expected.dtype.name)
    rec = info(expected.dtype)
    bits, want = to_bits(out), to_bits(expected)
    bits[::5] = want[::5]
    bits[1::9] = want[1::9] ^ rec.uint.type(1)
    bits[2::13] = np.roll(want, 7)[2::13]
    nan = ((want & rec.exp_mask) == rec.exp_mask) & ((want & rec.mant_mask) != 0)
    bits[nan] = rec.exp_mask | rec.uint.type(1)  # a NaN of another payload matches
    zero = (want & ~rec.uint.type(rec.sign_mask)) == 0
    bits[zero & (np.arange(bits.size) % 2 == 0)] ^= rec.uint.type(rec.sign_mask)
    return out


def _chunks(x: np.ndarray, dy: np.ndarray | None, actual: np.ndarray, *, size: int) -> Iterator[Chunk]:
    for lo in range(0, x.size, size):
        hi = min(lo + size, x.size)
        yield Chunk(lo, x[lo:hi], None if dy is None else dy[lo:hi], actual[lo:hi])


def _scanned(chunks: list[Chunk], *, direction: str, out: str, tolerance: Tolerance, compiled: bool,
             numel: int) -> tuple[list, chunked.Kept, list]:
    ctx = chunked._Context(0.2, direction, out, tolerance, "dump", load_config(None), "y.npy", lambda: None)
    kept, metrics, samples = None, [], []
    scratch = first_pass.Room() if compiled else None
    for chunk in chunks:
        kept = kept or chunked.Kept(chunk, numel=numel, where=np.dtype(np.int32))
        expected = golden.compute(direction, chunk.x, 0.2, dy=chunk.dy, out_dtype=out)
        m, s = (chunked.compiled_scan(chunk, expected, ctx, kept, scratch) if compiled
                else chunked.numpy_scan(chunk, expected, ctx, kept))
        metrics.append(m)
        samples.append(s)
    return metrics, kept, samples


def _same(a: np.ndarray | None, b: np.ndarray | None) -> None:
    assert (a is None) == (b is None)
    if a is not None:
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(to_bits(a) if a.dtype.kind in "fV" or a.dtype.name == "bfloat16" else a,
                              to_bits(b) if b.dtype.kind in "fV" or b.dtype.name == "bfloat16" else b)


def _forward_dump_row(x: np.ndarray, actual: np.ndarray, *, size: int) -> object:
    """The row of a forward float32 dump at alpha 0.2, judged in chunks of ``size``."""
    return chunked.evaluate_chunks(lambda: _chunks(x, None, actual, size=size), numel=x.size, dtype=x.dtype,
                                   alpha=0.2, direction="forward", out_dtype="float32", backend="dump",
                                   config=load_config(None), label="y.npy")


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("pair", sorted(SUPPORTED_PAIRS), ids="->".join)
def test_the_compiled_scan_is_the_numpy_path(pair, direction, monkeypatch):
    src, out = pair
    x = _inputs(src, seed=3)
    dy = None if direction == "forward" else _inputs(src, seed=4)[::-1].copy()
    actual = _device(golden.compute(direction, x, 0.2, dy=dy, out_dtype=out), x, dy, direction)
    monkeypatch.setattr(chunked, "SAMPLING", replace(SAMPLING, chunk_special=37, chunk_plain=101))
    for tolerance, size in zip(TOLERANCES, (x.size, 9_973, 65_536)):
        chunks = list(_chunks(x, dy, actual, size=size))
        got = _scanned(chunks, direction=direction, out=out, tolerance=tolerance, compiled=True, numel=x.size)
        with monkeypatch.context() as m:
            m.setenv("CONFORMANCE_COMPILED", "0")
            ref = _scanned(chunks, direction=direction, out=out, tolerance=tolerance, compiled=False, numel=x.size)
        assert got[0] == ref[0], "the metrics, cosine sums included"
        assert got[1].size == ref[1].size and got[1].size > 0
        for name in ("where", "x", "dy", "golden", "actual", "violating"):
            _same(got[1].column(name), ref[1].column(name))
        for a, b in zip(got[2], ref[2], strict=True):
            assert np.array_equal(a.weight, b.weight) and a.weight.dtype == b.weight.dtype
            for name in a.values:
                _same(a.values[name], b.values[name])
        assert any((s.weight > 1).any() for s in got[2]), "the stride sample thins"


def test_a_whole_row_is_the_numpy_paths(monkeypatch):
    """The row of a defect dump judged in chunks, compiled or not: every field."""
    x = _inputs("float32", seed=5)
    actual = _device(golden.forward(x, 0.2), x, None, "forward")

    def row() -> object:
        return _forward_dump_row(x, actual, size=30_011)

    compiled = row()
    monkeypatch.setenv("CONFORMANCE_COMPILED", "0")
    reference = row()
    assert compiled.metrics == reference.metrics
    assert [(f.category, f.count, f.violations, f.summary, f.detail) for f in compiled.findings] == \
        [(f.category, f.count, f.violations, f.summary, f.detail) for f in reference.findings]
    assert compiled.findings
    assert compiled.plots == reference.plots and compiled.plots is not None


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("pair", sorted(SUPPORTED_PAIRS), ids="->".join)
def test_what_the_scan_counts_for_the_plots_is_what_measure_counts(pair, direction, monkeypatch):
    """The ULP bins and input classes the compiled scan counts of every mismatch (NaN on
    either side, infinities, signed zeros, subnormals among them) are those the plots count
    of a claim that takes every mismatch."""
    src, out = pair
    x = _inputs(src, seed=8)
    dy = None if direction == "forward" else _inputs(src, seed=9)[::-1].copy()
    actual = _device(golden.compute(direction, x, 0.2, dy=dy, out_dtype=out), x, dy, direction)
    chunks = list(_chunks(x, dy, actual, size=20_011))
    _, kept, samples = _scanned(chunks, direction=direction, out=out, tolerance=TOLERANCES[0], compiled=True,
                                numel=x.size)
    n = kept.size
    ctx = chunked._Context(0.2, direction, out, TOLERANCES[0], "dump", load_config(None), "y.npy", lambda: None)
    batch = chunked._reduced(kept, samples, ctx, numel=x.size)[0]
    whole = [Claim("alpha-mismatch", np.arange(n), n, "all"), Claim("rounding", np.arange(3), 3, "some")]
    assert kept.tally is not None and kept.tally.count == n > 3
    tallied = plotting.measure(whole, batch, tally=kept.tally)
    with monkeypatch.context() as m:
        m.setenv("CONFORMANCE_COMPILED", "0")
        assert tallied == plotting.measure(whole, batch)
    assert tallied.ulp["alpha-mismatch"]["nan"] > 0 or info(out).bits > 32
    assert sum(tallied.values["alpha-mismatch"].values()) == n


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 127, 128, 129, 1000, 65_535, 65_536, 200_003])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_pairwise_sum_is_numpys(n, dtype):
    """The products' pairwise sum of float32 or float64 values, widened, is numpy's of the
    widened products (a from 5, a from 0), for each of the three products."""
    rng = np.random.default_rng(n)
    a, g = ((rng.standard_normal(n + 5) * 10.0 ** rng.integers(-8, 8, n + 5)).astype(dtype) for _ in range(2))
    wa, wg = a.astype(np.float64), g.astype(np.float64)
    products = (wa * wg, wa * wa, wg * wg)
    assert scan_loops.pairwise_sums(a, g, 5, n) == tuple(np.add.reduce(p[5:]) for p in products)
    assert scan_loops.pairwise_sums(a, g, 0, n) == tuple(np.add.reduce(p[:n]) for p in products)


def test_extreme_values_take_the_scaled_cosine_sums():
    """Beyond the exponents the unscaled sums hold, the sums of the scaled values, as numpy's path."""
    x = np.array([1e300, -3e300, 2e299, 1.0], dtype=np.float64)
    actual = x * 0.5
    got = _scanned([Chunk(0, x, None, actual)], direction="forward", out="float64", tolerance=TOLERANCES[0],
                   compiled=True, numel=x.size)[0][0]
    assert (got.cos_dot, got.cos_aa, got.cos_gg, got.cos_exp) == _cosine_sums(actual, golden.forward(x, 0.2))
    assert got.cos_exp > 480


def test_kept_columns_grow_past_what_they_reserve(monkeypatch):
    """A tensor larger than the reservation: the columns grow, and hold what a large one holds."""
    x = _inputs("float32", seed=6)
    actual = _device(golden.forward(x, 0.2), x, None, "forward")
    chunks = list(_chunks(x, None, actual, size=10_007))
    whole = _scanned(chunks, direction="forward", out="float32", tolerance=TOLERANCES[0], compiled=True,
                     numel=x.size)[1]
    monkeypatch.setattr(chunked, "RESERVED", 1_000)
    grown = _scanned(chunks, direction="forward", out="float32", tolerance=TOLERANCES[0], compiled=True,
                     numel=x.size)[1]
    assert whole.columns["x"].size == x.size + 1 and grown.size > 1_000  # one place past the last, for the scan
    for name in ("where", "x", "golden", "actual", "violating"):
        _same(grown.column(name), whole.column(name))


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_triage_on_consecutive_mismatches_reads_them_in_order_as_numpy_does(name, direction, monkeypatch):
    """A reduced batch's mismatches are its first positions: the compiled passes read them as
    one run of elements, and find what the numpy path finds."""
    from conformance.triage.claims import Batch, beyond_rounding, observed_slopes

    x = _inputs(name, seed=7)
    dy = None if direction == "forward" else _inputs(name, seed=8)[::-1].copy()
    expected = golden.compute(direction, x, 0.2, dy=dy)
    batch = Batch(x, dy, 0.2, direction, name, expected, _device(expected, x, dy, direction))
    for index in (np.arange(x.size), np.arange(3, x.size // 2)):
        got = beyond_rounding(batch, index), *observed_slopes(batch, index)
        with monkeypatch.context() as m:
            m.setenv("CONFORMANCE_COMPILED", "0")
            ref = beyond_rounding(batch, index), *observed_slopes(batch, index)
        for a, b in zip(got, ref, strict=True):
            _same(a, b)


@pytest.mark.parametrize("size", [1_000, 333])
def test_a_tensor_that_differs_everywhere_is_kept_whole(size, monkeypatch):
    """Every element a mismatch, in every chunk: the columns hold the whole tensor (and the
    place past it the scan writes), as the numpy path does."""
    x = np.random.default_rng(9).standard_normal(1_000).astype(np.float32) - np.float32(5)
    actual = golden.forward(x, 0.01)
    chunks = list(_chunks(x, None, actual, size=size))
    got = _scanned(chunks, direction="forward", out="float32", tolerance=TOLERANCES[0], compiled=True, numel=x.size)
    monkeypatch.setenv("CONFORMANCE_COMPILED", "0")
    ref = _scanned(chunks, direction="forward", out="float32", tolerance=TOLERANCES[0], compiled=False, numel=x.size)
    assert got[0] == ref[0] and got[1].size == ref[1].size == x.size
    for name in ("where", "x", "golden", "actual", "violating"):
        _same(got[1].column(name), ref[1].column(name))


@pytest.mark.parametrize("layout", ["none excluded", "ends excluded", "dense", "all but one", "all excluded"])
@pytest.mark.parametrize("step", [1, 3, 64])
def test_the_plain_picks_are_every_step_th_plain_element(layout, step):
    """``scan_loops.plain_picks`` finds the plain matching elements of ranks 0, step, ... from
    the lists of mismatches and special matching elements alone, as taking every step-th of
    the complement of both does."""
    n, offset = 1_000, 4_096
    rng = np.random.default_rng(step)
    excluded = {"none excluded": np.zeros(n, bool), "dense": rng.random(n) < 0.7,
                "all but one": np.arange(n) != 517, "all excluded": np.ones(n, bool)}.get(layout)
    if excluded is None:  # the first and last places, and a run at each end
        excluded = np.zeros(n, bool)
        excluded[:9] = excluded[-7:] = True
    local = np.flatnonzero(excluded)
    special = np.sort(rng.choice(local, local.size // 3, replace=False)) if local.size else local
    mismatches = np.setdiff1d(local, special)
    where = np.concatenate([[7, 9], mismatches + offset, [3]]).astype(np.int32)  # others' entries around them
    plain = np.flatnonzero(~excluded)
    want = plain[::step]
    got = np.full(want.size, -1, dtype=np.int64)
    scan_loops.plain_picks(where, 2, 2 + mismatches.size, offset, np.concatenate([special, [-5]]).astype(np.int64),
                           special.size, step, got)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("threads", ["1", "3"], ids=["one-thread", "three-threads"])
@pytest.mark.parametrize("mixed", [False, True], ids=["one-cause", "two-causes"])
def test_a_sampled_round_on_many_mismatches_is_the_numpy_paths(mixed, threads, monkeypatch):
    """More mismatches than one round selects on alone: the rule chosen on a sample is proved
    on every mismatch, a piece at a time with the compiled paths (small pieces here, so
    that there are many, split over the threads), as the numpy path proves it on all at once;
    with a second cause on some elements the rule explains only part and the rest goes on."""
    from conformance.triage import attribution

    x = np.random.default_rng(11).standard_normal(3 * SAMPLING.select_sample).astype(np.float32)
    actual = golden.forward(x, 0.01)
    if mixed:
        actual[::7] = golden.forward(x[::7], 0.3)
    monkeypatch.setattr(attribution, "PIECE", 4_099)
    monkeypatch.setenv("CONFORMANCE_THREADS", threads)
    split, in_parallel = [], attribution.jit.in_parallel

    def spy(calls):  # how many parts the rule's proof (attribution's ``pieces``) was split into
        if getattr(getattr(calls[0], "func", None), "__name__", "") == "pieces":
            split.append(len(calls))
        return in_parallel(calls)

    monkeypatch.setattr(attribution.jit, "in_parallel", spy)

    def row() -> object:
        return _forward_dump_row(x, actual, size=50_003)

    compiled = row()
    assert int(threads) in split  # the proof ran its pieces on every thread
    monkeypatch.setenv("CONFORMANCE_COMPILED", "0")
    reference = row()
    assert compiled.metrics.mismatches > SAMPLING.select_sample
    assert compiled.metrics == reference.metrics
    assert [(f.category, f.count, f.violations, f.summary, f.detail, f.examples) for f in compiled.findings] == \
        [(f.category, f.count, f.violations, f.summary, f.detail, f.examples) for f in reference.findings]
    assert sum(f.count for f in compiled.findings) == compiled.metrics.mismatches
    assert [f.category for f in compiled.findings] == ["alpha-mismatch"]
    assert ("slope 0.3 " in compiled.findings[0].summary) == mixed, compiled.findings[0].summary  # a second round


def _row_and_kept(x: np.ndarray, dy: np.ndarray | None, actual: np.ndarray, *, direction: str, out: str,
                  monkeypatch) -> tuple[object, dict, list, set]:
    """The row of a dump judged in chunks of 9,973, what was kept of it (columns, samples, the
    tally) as triage received it, and the threads its golden ran on (a chunk's, and the ranges
    the golden split the first chunk into: ``first:`` and the thread)."""
    kept_seen: list = []
    judge_findings, golden_of, split = chunked._mismatch_findings, chunk_golden.Goldens.__call__, jit.split
    threads: set = set()

    def spy(kept: chunked.Kept, samples: list, ctx, **kw) -> object:
        copied = {name: None if kept.column(name) is None else kept.column(name).copy() for name in chunked._FIELDS}
        kept_seen.append((copied, samples, kept.tally.ulp.copy(), kept.tally.classes.copy(), kept.tally.count))
        return judge_findings(kept, samples, ctx, **kw)

    size = [0]  # the chunk whose golden is computed

    def golden_on(goldens: chunk_golden.Goldens, chunk: Chunk, slot: int) -> np.ndarray:
        threads.add(threading.current_thread().name.split("_")[0])
        size[0] = chunk.x.size
        try:
            return golden_of(goldens, chunk, slot)
        finally:
            size[0] = 0  # triage computes goldens of its own after

    def split_on(work, n: int, *, least: int) -> None:
        def ranged(lo: int, hi: int) -> object:
            if hi - lo < size[0]:  # a range of a chunk's golden
                threads.add("first:" + threading.current_thread().name.split("_")[0])
            return work(lo, hi)

        return split(ranged, n, least=least)

    monkeypatch.setattr(chunked, "_mismatch_findings", spy)
    monkeypatch.setattr(chunk_golden.Goldens, "__call__", golden_on)
    monkeypatch.setattr(jit, "split", split_on)
    monkeypatch.setattr(compiled_golden, "SPLIT", 31)  # the golden splits a chunk of 9,973 too
    row = chunked.evaluate_chunks(lambda: _chunks(x, dy, actual, size=9_973), numel=x.size, dtype=x.dtype,
                                  alpha=0.2, direction=direction, out_dtype=out, backend="dump",
                                  config=load_config(None), label="y.npy")
    (columns, samples, ulp, classes, count), = kept_seen
    return row, {"columns": columns, "ulp": ulp, "classes": classes, "count": count}, samples, threads


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("name", ["float16", "float32"])
def test_one_thread_or_two_judge_a_dump_alike(name, direction, monkeypatch):
    """CONFORMANCE_THREADS=1 and 2 give the same row (metrics, findings, plots), the same kept
    columns, samples and tally, on a dump of many chunks with mismatches in every one of them
    (NaN payloads, signed zeros, infinities, subnormals among the inputs): with two threads
    the golden splits the first chunk a range per thread, the next chunk's golden runs whole on
    the reader thread, and each chunk's mismatches are judged in ranges (small ones here) on
    both."""
    x = _inputs(name, seed=12)
    dy = None if direction == "forward" else _inputs(name, seed=13)[::-1].copy()
    actual = _device(golden.compute(direction, x, 0.2, dy=dy, out_dtype=name), x, dy, direction)
    monkeypatch.setattr(chunked, "SPLIT", 31)
    got = {}
    for threads in ("1", "2"):
        with monkeypatch.context() as m:
            m.setenv("CONFORMANCE_THREADS", threads)
            got[threads] = _row_and_kept(x, dy, actual, direction=direction, out=name, monkeypatch=m)
    (one, kept_one, samples_one, on_one), (two, kept_two, samples_two, on_two) = got["1"], got["2"]
    assert on_one == {"MainThread"}, on_one
    split_first = {"first:MainThread", "first:conformance-pass"}  # the first chunk's golden, a range per thread
    fused = chunk_golden.fused_loop(direction, 0.2, x=name, out=name) is not None  # computed in the scan instead
    assert on_two == {"MainThread", "conformance-read"} | (set() if fused else split_first), on_two
    per_chunk = np.bincount(kept_one["columns"]["where"] // 9_973)
    assert per_chunk.size == -(-x.size // 9_973) and per_chunk.min() > 2 * 31, "mismatches in every chunk, split"
    assert one.metrics == two.metrics and one.plots == two.plots and one.plots is not None
    assert [(f.category, f.count, f.violations, f.summary, f.detail, repr(f.examples)) for f in one.findings] == \
        [(f.category, f.count, f.violations, f.summary, f.detail, repr(f.examples)) for f in two.findings]  # NaN
    for field in chunked._FIELDS:
        _same(kept_one["columns"][field], kept_two["columns"][field])
    assert kept_one["count"] == kept_two["count"] == one.metrics.mismatches
    assert np.array_equal(kept_one["ulp"], kept_two["ulp"]) and np.array_equal(kept_one["classes"], kept_two["classes"])
    for a, b in zip(samples_one, samples_two, strict=True):
        assert np.array_equal(a.weight, b.weight)
        for field in a.values:
            _same(a.values[field], b.values[field])


def test_a_reader_error_on_two_threads_comes_after_the_chunks_before_it(monkeypatch):
    """A dump whose fourth chunk cannot be read: with two threads, as with one, the three
    chunks before it are judged and told to ``advance`` in order, then the reader's own
    error is raised."""
    x = _inputs("float32", seed=14)
    actual = _device(golden.forward(x, 0.2), x, None, "forward")

    def broken() -> Iterator[Chunk]:
        for k, chunk in enumerate(_chunks(x, None, actual, size=9_973)):
            if k == 3:
                raise UsageError("y.npy: the file shrank while it was read")
            yield chunk

    for threads in ("1", "2"):
        monkeypatch.setenv("CONFORMANCE_THREADS", threads)
        told: list[int] = []
        with pytest.raises(UsageError, match="the file shrank"):
            chunked.evaluate_chunks(broken, numel=x.size, dtype=x.dtype, alpha=0.2, direction="forward",
                                    out_dtype="float32", backend="dump", config=load_config(None),
                                    advance=told.append)
        assert told == [9_973] * 3, threads


@pytest.mark.parametrize("places", [(5, 9, 2_000, 5_000), (1_100, 1_101, 4_000)], ids=["runs-apart", "run-neighbours"])
def test_the_first_place_of_an_error_maximum_wins_across_runs(places, monkeypatch):
    """Mismatches judged a run at a time: where the largest abs, rel and ULP error each occur
    at several places, in one run and in runs apart, the compiled row names the first place,
    as the numpy path does."""
    x = np.random.default_rng(5).standard_normal(9_000).astype(np.float32)
    actual = golden.forward(x, 0.2)
    bits = to_bits(actual)
    bits[::3] ^= np.uint32(1)  # many mismatches of 1 ULP: the maxima lie elsewhere
    for at in places:
        x[at], bits[at] = -1.0, np.float32(-0.25).view(np.uint32)  # the same, largest error at each place
    rows = {}
    for compiled in ("1", "0"):
        monkeypatch.setenv("CONFORMANCE_COMPILED", compiled)
        rows[compiled] = _forward_dump_row(x, actual, size=x.size).metrics
    got = rows["1"]
    assert got == rows["0"]
    assert got.max_abs_at[1] == got.max_rel_at[1] == got.max_ulp_at[1] == places[0], got
    mismatches = np.flatnonzero(to_bits(actual) != to_bits(golden.forward(x, 0.2)))
    runs = {int(np.searchsorted(mismatches, at)) // scan_loops.RUN for at in places}
    assert len(runs) > 1, "the places lie in more than one run of the judge"


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_the_mismatches_positions_are_an_arange_on_any_threads(threads, monkeypatch):
    monkeypatch.setenv("CONFORMANCE_THREADS", threads)
    for n in (0, 5, chunked.SPLIT - 1, chunked.SPLIT, 3 * chunked.SPLIT + 7):
        got = chunked._positions(n)
        assert got.dtype == np.int64 and np.array_equal(got, np.arange(n))


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("backward", [False, True], ids=["x-and-out", "x-dy-and-out"])
def test_a_dumps_chunks_are_its_files_whatever_the_threads_read_the_first(threads, backward, tmp_path,
                                                                          monkeypatch):
    """The first chunk's files are read at once, a thread each; every chunk is the files'."""
    from conformance.ingest import arrays, dumps

    monkeypatch.setenv("CONFORMANCE_THREADS", threads)
    data = {name: np.random.default_rng(k).standard_normal(10_000).astype(np.float32)
            for k, name in enumerate(("x", "dy", "y"))}
    for name, a in data.items():
        np.save(tmp_path / f"{name}.npy", a)
    x, dy, y = (arrays.load(str(tmp_path / f"{name}.npy"), flag=f"--{name}", bits_dtype=None)
                for name in ("x", "dy", "y"))
    got = list(dumps.chunks(x, y, dy=dy if backward else None, size=4_096))
    assert [c.offset for c in got] == [0, 4_096, 8_192]
    for chunk in got:
        part = slice(chunk.offset, chunk.offset + chunk.x.size)
        assert np.array_equal(chunk.x, data["x"][part]) and np.array_equal(chunk.actual, data["y"][part])
        assert chunk.dy is None if not backward else np.array_equal(chunk.dy, data["dy"][part])


@pytest.mark.parametrize("n", [0, 1, 129, 65_536, 200_003])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_metrics_cosine_sums_compiled_are_numpys(dtype, n, monkeypatch):
    """``metrics._dots`` by the compiled pieces gives numpy's sums, of two arrays and of one,
    contiguous or strided."""
    from conformance.metrics import exact as metrics

    rng = np.random.default_rng(n)
    a, g = ((rng.standard_normal(2 * n) * 10.0 ** rng.integers(-30, 30, 2 * n)).astype(dtype) for _ in range(2))
    cases = [(a[:n], g[:n]), (a[:n], None), (a[::2], g[::2])]
    got = [metrics._dots(x, y) for x, y in cases]
    monkeypatch.setenv("CONFORMANCE_COMPILED", "0")
    assert got == [metrics._dots(x, y) for x, y in cases]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_metrics_cosine_sums_are_numpys_with_every_pair_finite_or_not(dtype, monkeypatch):
    """``metrics._cosine_sums`` (the largest finite magnitude found compiled when every pair is
    finite) gives the numpy path's scaled sums and exponent: finite pairs, an inf or a NaN on
    either side, zeros only, extreme magnitudes, one array for both sides."""
    from conformance.metrics import exact as metrics

    rng = np.random.default_rng(9)
    a = (rng.standard_normal(70_000) * 10.0 ** rng.integers(-30, 30, 70_000)).astype(dtype)
    scalar = np.dtype(dtype).type
    g = a * scalar(0.2)
    cases = [(a, g), (a, a), (np.zeros(5, dtype), np.zeros(5, dtype)), (a * scalar(1e-30), g)]
    for bad in (np.inf, -np.inf, np.nan):
        for side in (0, 1):
            pair = [a.copy(), g.copy()]
            pair[side][7] = bad
            cases.append(tuple(pair))
    got = [metrics._cosine_sums(x, x if y is x else y) for x, y in cases]
    monkeypatch.setenv("CONFORMANCE_COMPILED", "0")
    assert got == [metrics._cosine_sums(x, x if y is x else y) for x, y in cases]
