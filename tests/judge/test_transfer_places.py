"""The transfer sample picks elements evenly by their places in the tensor: the picks equal those of
a full sort of the places, whatever ascending runs a reduced batch holds them in."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from conformance.judge import plots


def _batch(where: np.ndarray) -> SimpleNamespace:
    return SimpleNamespace(flat=lambda index: where[index])


@pytest.mark.parametrize("runs", [1, 2, 3, 7, 8, 30])
@pytest.mark.parametrize("seed", range(4))
def test_places_picked_by_search_equal_those_of_a_full_sort(runs: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    places = np.sort(rng.choice(10**6, size=2_000, replace=False))
    labels = rng.integers(0, runs, size=places.size)
    where = np.concatenate([places[labels == k] for k in range(runs)])  # each run ascending
    index = np.sort(rng.choice(where.size, size=1_500, replace=False))
    ranks = plots._evenly(index.size, 37)
    expected = index[np.argsort(where[index], kind="stable")[ranks]]
    assert np.array_equal(plots._place_ranks(_batch(where), index, ranks), expected)


def test_a_whole_tensor_in_place_is_picked_at_the_even_ranks() -> None:
    index = np.arange(1_001, dtype=np.int64)
    picked = plots._picked(_batch(index), index, 11)
    assert picked.tolist() == list(range(0, 1_001, 100))
