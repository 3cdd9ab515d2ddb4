"""``compare`` on a dump too big to triage whole: the reduced batch (every mismatch, then a
weighted sample of the matching elements) reaches the row the whole-batch evaluator
reaches, and the pieces that make it cheap give what the plain numpy forms give.

The defect cases are benchmarks/bench_compare.py's at a size a test affords: chunks hold
far more matching elements than the evidence sample keeps, so the weights are not 1."""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from conformance.config import load_config
from conformance.dtypes import all_patterns, to_bits
from conformance.ingest.arrays import load
from conformance.judge.chunked import evaluate_chunks
from conformance.judge.evaluate import evaluate
from conformance.metrics import exact as met
from conformance.records import BackendResult, Chunk, Finding, Offender, Row
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.triage.sampling import SAMPLING

N = 200_000  # half of them negative: more mismatches than triage selects on unsampled (SAMPLING.select_sample)
TWO_THIRDS = 2 * N // 3
CHUNKS = (1 << 21, 65_536, 9_973)  # one chunk; several; a prime, so edges fall anywhere


@dataclass(frozen=True)
class Defect:
    """Arrays of one judged dump: x, the device's output, and dy for backward."""

    name: str
    make: Callable[[], tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]]
    direction: str = "forward"
    alpha: float = 0.2

    def __str__(self) -> str:
        return self.name


def _normal(n: int = N, *, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def _torch_slope() -> tuple[np.ndarray, np.ndarray, None]:
    x = _normal()
    return x, ref.forward(x, 0.01), None


def _torch_slope_with_a_garbled_end() -> tuple[np.ndarray, np.ndarray, None]:
    x = _normal(seed=1)
    y = ref.forward(x, 0.01)
    y[-3_000:] = np.float32(0.5)
    y[::7_919] = np.nan
    return x, y, None


def _bfloat16_flushed_and_rounded_slope() -> tuple[np.ndarray, np.ndarray, None]:
    x = np.tile(all_patterns("bfloat16"), 4)
    return x, ref.forward(x, 0.1, semantics=Semantics(daz=True, ftz=True, slope_dtype="bfloat16")), None


def _backward_torch_slope_ge() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = _normal(seed=2)
    x[::101] = 0.0
    dy = _normal(seed=3)
    return x, ref.backward(dy, x, 0.01, semantics=Semantics(grad_rule="ge")), dy


DEFECTS = [
    Defect("torch-default-slope", _torch_slope),
    Defect("torch-default-slope-garbled-end", _torch_slope_with_a_garbled_end),
    Defect("bfloat16-flush-and-rounded-slope", _bfloat16_flushed_and_rounded_slope, alpha=0.1),
    Defect("backward-torch-slope-grad-at-zero", _backward_torch_slope_ge, direction="backward"),
]


def _reader(x: np.ndarray, out: np.ndarray, dy: Optional[np.ndarray], *,
            size: int) -> Callable[[], Iterator[Chunk]]:
    def read() -> Iterator[Chunk]:
        for lo in range(0, x.size, size):
            hi = min(lo + size, x.size)
            yield Chunk(lo, x[lo:hi], None if dy is None else dy[lo:hi], out[lo:hi])

    return read


def _bits(v: object) -> object:
    return None if v is None else (np.asarray(v).dtype.str, to_bits(np.asarray(v)).item())


def _example(e: Offender) -> tuple:
    """An offender with its values as bit patterns (a NaN equals itself)."""
    return e.index, _bits(e.x), _bits(e.dy), _bits(e.expected), _bits(e.actual), e.core, e.tile, e.part


def _pinned(row: Row) -> tuple:
    """Everything a report shows but the cosine sums (equal up to summation order)."""
    metrics = {k: v for k, v in vars(row.metrics).items() if not k.startswith("cos_")}
    findings = [(f.category, f.count, f.violations, not f.gated, f.summary, f.detail,
                 [_example(e) for e in f.examples]) for f in row.findings]
    return metrics, findings, row.verdict


def _frozen(*arrays: Optional[np.ndarray]) -> None:
    """Arrays shared by every chunk size's test, read-only so that no evaluation edits them."""
    for a in arrays:
        if a is not None:
            a.setflags(write=False)


@functools.cache
def _judged_whole(defect: Defect) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray], Row]:
    """The defect's arrays and the row the whole-batch evaluator gives them, once for every chunk size."""
    x, out, dy = defect.make()
    _frozen(x, out, dy)
    whole = evaluate(x, defect.alpha, BackendResult(out), direction=defect.direction, dy=dy,
                     backend="dump", config=load_config(None), label="out.npy")
    return x, out, dy, whole


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("defect", DEFECTS, ids=str)
def test_the_reduced_batch_reaches_the_whole_batch_row(defect: Defect, chunk: int) -> None:
    x, out, dy, whole = _judged_whole(defect)
    chunked = evaluate_chunks(_reader(x, out, dy, size=chunk), numel=x.size, dtype=x.dtype,
                              alpha=defect.alpha, direction=defect.direction,
                              out_dtype=out.dtype.name, backend="dump", config=load_config(None),
                              label="out.npy")
    assert whole.findings, "the defect is found"
    assert _pinned(chunked) == _pinned(whole)
    assert math.isclose(chunked.metrics.cosine, whole.metrics.cosine, rel_tol=1e-12)


def test_the_torch_slope_defect_is_one_finding_of_every_mismatch() -> None:
    """The benchmark's defect, pinned: every mismatch is the default slope, none contradicted."""
    x, out, _ = _torch_slope()
    row = evaluate_chunks(_reader(x, out, None, size=65_536), numel=x.size, dtype=x.dtype,
                          alpha=0.2, direction="forward", out_dtype="float32", backend="dump",
                          config=load_config(None), label="y.npy")
    negative = int((x < 0).sum())
    assert negative > SAMPLING.select_sample, "the defects of N elements are selected on a sample"
    assert row.metrics.mismatches == negative
    (finding,) = row.findings
    assert (finding.category, finding.count, finding.violations) == ("alpha-mismatch", negative, negative)
    assert finding.detail["effective_alpha"] == 0.01
    assert (finding.detail["explained"], finding.detail["contradicted"]) == (negative, 0)
    assert [e.index for e in finding.examples] == list(np.flatnonzero(x < 0)[:5])


@functools.cache
def _wrong_slope_on_two_thirds() -> tuple[np.ndarray, np.ndarray, Finding]:
    """x, an output whose slope is wrong on its first two thirds only, and the whole batch's finding."""
    x = _normal()
    y = ref.forward(x, 0.2)
    y[:TWO_THIRDS] = ref.forward(x[:TWO_THIRDS], 0.01)
    _frozen(x, y)
    (whole,) = evaluate(x, 0.2, BackendResult(y), direction="forward", backend="dump",
                        config=load_config(None)).findings
    return x, y, whole


@pytest.mark.parametrize("chunk", CHUNKS)
def test_contradictions_by_the_sampled_elements_are_weighted(chunk: int) -> None:
    """The slope is wrong on the first two thirds only: the matching negative elements after
    them contradict it, and the sample of them, weighted, stands for all of them."""
    x, y, whole = _wrong_slope_on_two_thirds()
    (chunked,) = evaluate_chunks(_reader(x, y, None, size=chunk), numel=x.size, dtype=x.dtype,
                                 alpha=0.2, direction="forward", out_dtype="float32",
                                 backend="dump", config=load_config(None)).findings
    assert (chunked.category, chunked.count) == (whole.category, whole.count)
    exact = whole.detail["contradicted"]
    assert exact == int((x[TWO_THIRDS:] < 0).sum())
    assert abs(chunked.detail["contradicted"] - exact) <= 0.1 * exact


# ----------------------------------------------------------------------------- the pieces

def test_cosine_sums_are_the_float64_dot_products() -> None:
    a, g = _normal(200_001, seed=4), _normal(200_001, seed=5)
    a[::1000] = np.inf  # an infinite pair is left out
    dot, aa, gg, exp = met._cosine_sums(a, g)
    fin = np.isfinite(a) & np.isfinite(g)
    wa, wg = a[fin].astype(np.float64), g[fin].astype(np.float64)
    scale = 2.0 ** (2 * exp)
    for got, (u, v) in ((dot, (wa, wg)), (aa, (wa, wa)), (gg, (wg, wg))):
        exact = math.fsum((u * v).tolist())  # float32 products are exact in float64
        assert math.isclose(got * scale, exact, rel_tol=1e-13)
    assert (dot, aa, gg, exp) == met._cosine_sums(a.copy(), g.copy()), "the same bits every time"


def test_cosine_sums_of_extreme_float64_are_scaled() -> None:
    big = np.array([1e300, -3e300, 2e299], dtype=np.float64)
    dot, aa, gg, exp = met._cosine_sums(big, big * 0.5)
    assert exp > 480
    assert math.isclose(dot / math.sqrt(aa * gg), 1.0, rel_tol=1e-15)


def test_released_pages_read_back_unchanged(tmp_path: Path) -> None:
    data = _normal(1 << 20, seed=6)
    np.save(tmp_path / "x.npy", data)
    dump = load(str(tmp_path / "x.npy"), flag="--x", bits_dtype=None)
    before = dump.chunk(1000, 900_000).copy()
    dump.release(0, dump.size)
    np.testing.assert_array_equal(dump.chunk(1000, 900_000), before)
    dump.release(5, 3)  # an empty or inverted range is nothing to release
