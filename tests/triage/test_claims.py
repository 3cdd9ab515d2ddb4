"""The data model: a batch that stands for a bigger tensor, and removing claimed elements."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.report.triage.claims import Batch, without


@pytest.mark.parametrize("dense", [False, True])
def test_removing_claimed_indices_is_a_set_difference(dense: bool) -> None:
    rng = np.random.default_rng(int(dense))
    remaining = np.unique(rng.integers(0, 100_000, 60_000))
    index = rng.permutation(remaining)[: (40_000 if dense else 50)]
    index = np.concatenate([index, [100_003, 5]])  # not all of them remain
    np.testing.assert_array_equal(without(remaining, index),
                                  np.setdiff1d(remaining, index, assume_unique=True))
    assert without(remaining, remaining).size == 0


def test_weights_stand_for_the_last_elements_only() -> None:
    x = np.zeros(5, dtype=np.float32)
    batch = Batch(x, None, 0.2, "forward", "float32", x, x, where=np.arange(5), numel=100,
                  weight=np.array([7.5, 20.0]))
    np.testing.assert_array_equal(batch.weight_of(np.array([4, 0, 3, 2])), [20.0, 1.0, 7.5, 1.0])
