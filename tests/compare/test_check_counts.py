"""Other tools' checks counted by the compiled chunk scan are numpy's counts, bit for bit.

With the compiled paths, ``conformance.judge.chunked`` counts what torch's ``isclose``,
``np.testing.assert_allclose`` (ONNX, TF, JAX) and msprobe's errors say of a float32 or
float64 dump's mismatches while it judges them (``check_loops.check_run``), and the NaN and
infinities both sides hold while it finds them.  Here those tallies are
``other_checks.tally`` of the same mismatches taken with numpy, on outputs a few ULP either
side of every check's tolerance (where the order of the operands and each rounding decide),
with NaN, infinities, signed zeros, subnormals and overflowing differences among them.
"""
from __future__ import annotations

import numpy as np
import pytest

from conformance.dtypes import from_bits, info, is_nan, to_bits
from conformance.judge import chunked
from conformance.judge import other_checks as oc
from conformance.judge.gate import GateConfig
from conformance.metrics.exact import compare
from conformance.records import Chunk
from conformance.reference import golden as ref

pytest.importorskip("conformance.metrics._compiled.check_loops", reason="numba (the fast extra) is not installed")


def _x(name: str, *, seed: int) -> np.ndarray:
    """Magnitudes over the whole range (subnormals to the largest), both signs, and special patterns."""
    rec = info(name)
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << rec.bits, 30_000, dtype=np.uint64).astype(rec.uint)
    near_one = (rng.standard_normal(30_000) * 3).astype(rec.dtype)
    tiny = (rng.standard_normal(3_000) * rec.smallest_normal * 4).astype(rec.dtype)
    huge = (rng.uniform(-1, 1, 3_000) * rec.max).astype(rec.dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, rec.max, -rec.max], dtype=rec.dtype)
    return np.concatenate([bits.view(rec.dtype), near_one, tiny, huge, np.tile(special, 40)])


def _device(expected: np.ndarray, *, seed: int) -> np.ndarray:
    """The golden moved by up to 40 ULP either way (the checks' tolerances lie in that range near 1),
    with some elements NaN, infinite, zero of the other sign or exact (the matching NaN and
    infinities of the golden stay)."""
    rec = info(expected.dtype)
    rng = np.random.default_rng(seed)
    bits = to_bits(expected).astype(np.int64) + rng.integers(-40, 41, expected.size)
    out = from_bits(np.clip(bits, 0, (1 << rec.bits) - 1).astype(rec.uint), expected.dtype)
    out[::11] = np.nan
    out[1::13] = np.inf
    out[2::17] = -np.inf
    out[3::19] = -expected[3::19]
    out[4::7] = expected[4::7]
    out[5::23] = np.float64(rec.max) * np.sign(rng.standard_normal(out[5::23].size))
    return out


def _judged(x: np.ndarray, actual: np.ndarray, *, size: int) -> dict[str, tuple]:
    """The tallies of each check on the row ``evaluate_chunks`` judges in chunks of ``size``."""
    def chunks() -> list[Chunk]:
        return [Chunk(lo, x[lo:lo + size], None, actual[lo:lo + size]) for lo in range(0, x.size, size)]

    row = chunked.evaluate_chunks(chunks, numel=x.size, dtype=x.dtype, alpha=0.2, direction="forward",
                                  out_dtype=x.dtype.name, backend="dump", config=GateConfig())
    return {c.name: c.tally for c in row.other_checks}


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_compiled_counts_are_numpy_tally(name: str, threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONFORMANCE_THREADS", threads)
    monkeypatch.setattr(chunked, "SPLIT", 97)  # each chunk's mismatches judged in ranges on both threads
    x = _x(name, seed=5)
    expected = ref.forward(x, 0.2)
    actual = _device(expected, seed=6)
    mismatch = (to_bits(actual) != to_bits(expected)) & ~(is_nan(actual) & is_nan(expected))
    nan, inf = oc.specials(expected)
    want = oc.tally(actual[mismatch], expected[mismatch], golden_nan=nan, golden_inf=inf)
    got = _judged(x, actual, size=7_919)
    assert sorted((k, repr(v)) for k, v in got.items()) == sorted((k, repr(v)) for k, v in want.items())
    shared = dict(want[oc.MSPROBE])["shared"]
    assert dict(want[oc.TORCH])["nan_both"] > 0 and shared > dict(want[oc.TORCH])["nan_both"]  # both kinds held
    failing = [dict(v)["failing"] for k, v in want.items() if k != oc.MSPROBE]
    assert all(0 < n < mismatch.sum() for n in failing), "outputs both sides of every tolerance"


def test_compiled_counts_are_the_numpy_path_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """The row's checks with the compiled scan are those of the numpy scan (``CONFORMANCE_COMPILED=0``)."""
    x = _x("float32", seed=8)
    actual = _device(ref.forward(x, 0.2), seed=9)
    compiled = _judged(x, actual, size=10_007)
    monkeypatch.setenv("CONFORMANCE_COMPILED", "0")
    assert _judged(x, actual, size=10_007) == compiled


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_a_batchs_checks_taken_compiled_are_numpys(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``of_batch`` (a whole batch in memory, as ``run``, ``agree`` and ``sweep`` judge one) counts a
    float32 or float64 batch's mismatches by the compiled pass: the same checks, tallies and
    verdicts as numpy's ``tally`` of the same batch."""
    x = _x(name, seed=15)
    golden = ref.forward(x, 0.2)
    actual = _device(golden, seed=16)
    index = np.flatnonzero((to_bits(actual) != to_bits(golden)) & ~(is_nan(actual) & is_nan(golden)))
    metrics = compare(actual, golden, tolerance=GateConfig().tolerance(name)).metrics
    compiled = oc.of_batch(actual, golden, mismatch_index=index, metrics=metrics)
    nan, inf = oc.specials(golden)
    numpy = oc.decided(oc.tally(actual[index], golden[index], golden_nan=nan, golden_inf=inf), out_dtype=name,
                       metrics=metrics)
    assert [(c.name, c.passes, c.detail, c.tally) for c in compiled] == \
        [(c.name, c.passes, c.detail, c.tally) for c in numpy]
    assert dict(compiled[0].tally)["nan_both"] > 0 and not all(c.passes for c in compiled)
    monkeypatch.setenv("CONFORMANCE_COMPILED", "0")
    assert repr(oc.of_batch(actual, golden, mismatch_index=index, metrics=metrics)) == repr(numpy)
