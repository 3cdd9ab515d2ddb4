"""numpy's pairwise sums of the cosine's products, compiled: a whole block of 128 as one vector of
eight lanes, and pieces summed from their blocks, give numpy's bits."""
from __future__ import annotations

import numpy as np
import pytest

pairwise = pytest.importorskip("conformance.metrics._compiled.pairwise",
                               reason="numba (the fast extra) is not installed")

PIECE = 1 << 16


def _values(n: int, dtype: str, *, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)).astype(dtype)


def _numpy_sums(a: np.ndarray, g: np.ndarray) -> tuple[float, float, float]:
    wa, wg = a.astype(np.float64), g.astype(np.float64)
    return tuple(float(np.add.reduce(p)) for p in (wa * wg, wa * wa, wg * wg))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [128, 256, 1000, PIECE, PIECE + 37])
def test_pairwise_sums_are_numpys_contiguous_or_strided(dtype: str, n: int) -> None:
    """Contiguous arrays take the vector lanes, strided ones the scalar block: both numpy's bits."""
    a, g = _values(2 * n, dtype, seed=n), _values(2 * n, dtype, seed=n + 1)
    assert pairwise.pairwise_sums(a, g, 0, n) == _numpy_sums(a[:n], g[:n])
    assert pairwise.pairwise_sums(a[::2], g[::2], 0, n) == _numpy_sums(a[::2], g[::2])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_piece_summed_from_its_blocks_is_its_pairwise_sum(dtype: str) -> None:
    a, g = _values(2 * PIECE, dtype, seed=3), _values(2 * PIECE, dtype, seed=4)
    blocks = np.empty((2 * PIECE // pairwise.BLOCK, 3))
    pairwise.block_sums(a, g, 0, 2 * PIECE, blocks, 0, False)
    count = PIECE // pairwise.BLOCK
    assert pairwise.tree_sums(blocks, count, count) == pairwise.pairwise_sums(a, g, PIECE, PIECE)
    assert pairwise.tree_sums(blocks, 0, count) == pairwise.pairwise_sums(a, g, 0, PIECE)


def test_blocks_of_equal_pairs_sum_the_squares_once_with_the_same_bits() -> None:
    g = _values(PIECE, "float32", seed=5)
    same, apart = (np.empty((PIECE // pairwise.BLOCK, 3)) for _ in range(2))
    pairwise.block_sums(g.copy(), g, 0, PIECE, same, 0, True)
    pairwise.block_sums(g.copy(), g, 0, PIECE, apart, 0, False)
    assert np.array_equal(same, apart)


@pytest.mark.parametrize("piece, run, shaped", [(PIECE, 512, True), (PIECE, 1000, False), (3 * 128, 128, False),
                                                (128, 128, True), (PIECE + 8, 8, False)])
def test_only_a_power_of_two_of_whole_blocks_is_summed_from_its_blocks(piece: int, run: int, shaped: bool) -> None:
    assert pairwise.tree_shaped(piece, run) == shaped
