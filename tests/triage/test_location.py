"""Location proofs: tail-block by confinement, stale-block for a block, a stride or a shifted output."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from conformance.dtypes import from_bits, to_bits
from conformance.records import TileLayout, TileSpan
from conformance.reference import golden as ref
from tests.helpers import F16, counts, differs, judge, judge_dump


def _edit(exact: np.ndarray, index: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    out = exact.copy()
    out[index] = fn(out[index])
    return out


def _layout(numel: int, *, cores: int, tile: int) -> TileLayout:
    """Contiguous core ranges; each core's last tile is a shorter tail tile."""
    per = numel // cores
    spans = []
    for core in range(cores):
        start, stop = core * per, (core + 1) * per if core < cores - 1 else numel
        starts = list(range(start, stop, tile))
        spans += [TileSpan(core, t, s, min(tile, stop - s), is_tail=(t == len(starts) - 1))
                  for t, s in enumerate(starts)]
    return TileLayout(tile, tuple(spans), 16)


def _garbage_in(exact: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, int]:
    index = np.arange(start, stop)
    index = index[np.isfinite(exact[index].astype(np.float64))]
    actual = _edit(exact, index, lambda v: from_bits(to_bits(v) ^ 0x0300, v.dtype))
    return actual, differs(actual, exact)


def test_errors_confined_to_tail_tiles_are_tail_block() -> None:
    layout = _layout(F16.size, cores=4, tile=5000)
    tail = next(s for s in layout.spans if s.is_tail and s.core == 2)
    exact = ref.leaky_relu(F16, 0.2)
    actual, edited = _garbage_in(exact, tail.start, tail.stop)
    row = judge(F16, actual, 0.2, layout=layout)
    assert counts(row) == {"tail-block": edited}
    detail = row.findings[0].detail
    assert detail["regions"] == [{"core": 2, "tile": tail.tile, "start": tail.start,
                                  "stop": tail.stop}]
    assert row.findings[0].examples[0].core == 2


def test_errors_outside_tail_tiles_are_not_tail_block() -> None:
    layout = _layout(F16.size, cores=4, tile=5000)
    body = next(s for s in layout.spans if not s.is_tail)
    exact = ref.leaky_relu(F16, 0.2)
    actual, _ = _garbage_in(exact, body.start, body.stop)
    assert "tail-block" not in counts(judge(F16, actual, 0.2, layout=layout))


def _f32_specials() -> np.ndarray:
    bits = np.random.default_rng(7).integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    extra = np.float32([0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 7e4, -7e4, 1e5, 65519, -65520])
    return np.concatenate([bits.view(np.float32), extra])


X32 = _f32_specials()


def _named(row, category: str, text: str) -> None:
    __tracebackhide__ = True
    (finding,) = [f for f in row.findings if f.category == category]
    assert text in finding.summary, finding.summary


def _exact32(alpha: float = 0.2) -> np.ndarray:
    return ref.leaky_relu(X32, alpha)


def test_every_kth_element_zero_is_stale_block() -> None:
    """One lane of a vector never written back: every 7th result is 0."""
    exact = _exact32()
    actual = exact.copy()
    actual[3::7] = 0
    row = judge_dump(X32, actual, 0.2)
    assert counts(row) == {"stale-block": differs(actual, exact)}
    _named(row, "stale-block", "every 7th element")


def test_a_middle_tile_holding_the_previous_tiles_results_is_stale_block() -> None:
    """A ping-pong buffer reused too early: tile 2 holds tile 1's results."""
    exact = _exact32()
    actual = exact.copy()
    actual[4096:6144] = exact[2048:4096]
    row = judge_dump(X32, actual, 0.2)
    assert counts(row) == {"stale-block": differs(actual, exact)}
    _named(row, "stale-block", "the results of the elements 2048 before")


def test_a_zeroed_row_of_a_matrix_is_stale_block() -> None:
    x = X32[:20000].reshape(100, 200)
    exact = ref.leaky_relu(x, 0.01)
    actual = exact.copy()
    actual[37] = 0
    row = judge_dump(x, actual, 0.01)
    assert counts(row) == {"stale-block": differs(actual, exact)}
    _named(row, "stale-block", "zeros")


def test_a_value_defect_on_a_contiguous_range_of_patterns_is_not_stale_block() -> None:
    """All fp16 patterns are sorted by bits, so x > 6 is one contiguous range; a clamp at 6
    changes inputs of kinds found nowhere else, so no position is proved."""
    actual = np.minimum(ref.leaky_relu(F16, 0.2), np.float16(6))
    row = judge_dump(F16, actual, 0.2)
    assert "stale-block" not in counts(row)


def test_a_defect_on_every_16th_bit_pattern_is_not_stale_block() -> None:
    """Over an enumeration of bit patterns a stride is a mantissa bit, not a position: inputs
    sorted along the stride prove nothing about the position."""
    exact = ref.leaky_relu(F16, 0.2)
    actual = exact.copy()
    actual[5::16] = np.float16(1.0)
    row = judge_dump(F16, actual, 0.2)
    assert "stale-block" not in counts(row)


def test_an_output_written_one_element_late_is_stale_block_shifted() -> None:
    exact = _exact32()
    actual = np.concatenate([np.zeros(1, np.float32), exact[:-1]])
    row = judge_dump(X32, actual, 0.2)
    assert counts(row) == {"stale-block": differs(actual, exact)}
    _named(row, "stale-block", "holds the result of element i-1")


def test_an_fp16_output_written_8_elements_early_is_shifted_edge_included() -> None:
    x = np.random.default_rng(9).standard_normal(5000).astype(np.float16)
    exact = ref.leaky_relu(x, 0.01)
    actual = np.concatenate([exact[8:], np.zeros(8, np.float16)])
    row = judge_dump(x, actual, 0.01)
    assert counts(row) == {"stale-block": differs(actual, exact)}
    _named(row, "stale-block", "written 8 elements early")


def test_a_row_with_its_own_slope_is_stale_block_that_names_the_slope() -> None:
    """A per-channel parameter read from the wrong place: one row's negative side has slope 0.3."""
    x = np.random.default_rng(10).standard_normal((64, 128)).astype(np.float32)
    exact = ref.leaky_relu(x, 0.2)
    actual = exact.copy()
    actual[5] = np.where(x[5] > 0, x[5], x[5] * np.float32(0.3))
    row = judge_dump(x, actual, 0.2)
    assert counts(row) == {"stale-block": differs(actual, exact)}
    _named(row, "stale-block", "computed with slope 0.3")


def test_values_two_ulp_low_over_sorted_patterns_are_not_a_shift() -> None:
    """Over an enumeration of patterns a neighbour's result is the value 1 ULP away."""
    exact = ref.leaky_relu(F16, 0.2)
    actual = exact.copy()
    pos = np.flatnonzero((F16 > 1) & (F16 < 1000))
    actual[pos] = exact[pos - 2]
    assert "stale-block" not in counts(judge_dump(F16, actual, 0.2))


def test_plain_relu_on_a_tensor_full_of_zeros_is_not_a_shift() -> None:
    """Zeros match some neighbour's result by chance; a shift is proved by other values."""
    rng = np.random.default_rng(13)
    x = np.where(rng.random(3000) < 0.6, np.float32(0), rng.standard_normal(3000).astype(np.float32))
    actual = np.maximum(x, np.float32(0))
    row = judge_dump(x, actual, 0.2)
    assert counts(row) == {"alpha-mismatch": differs(actual, ref.leaky_relu(x, 0.2))}


def test_a_tail_holding_the_block_before_is_tail_block_not_a_shift() -> None:
    exact = ref.leaky_relu(X32[:1000], 0.2)
    actual = exact.copy()
    actual[-8:] = exact[-16:-8]
    row = judge_dump(X32[:1000], actual, 0.2)
    assert counts(row) == {"tail-block": differs(actual, exact)}
