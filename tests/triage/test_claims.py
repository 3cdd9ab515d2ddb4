"""The data model: a batch that stands for a bigger tensor, and removing claimed elements."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.triage.claims import MEMO_ELEMENTS, MEMO_WHOLE, Batch, without


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


def _batch(n: int) -> Batch:
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    x[::5] = -x[::5] * np.float32(1e-40)  # subnormals, where DAZ and FTZ change the result
    g = ref.forward(x, 0.2)
    return Batch(x, None, 0.2, "forward", "float32", g, g)


def test_a_scope_is_gathered_once_for_its_index_and_again_for_another() -> None:
    x = np.random.default_rng(4).standard_normal(100).astype(np.float32)
    batch = Batch(x, -x, 0.2, "backward", "float32", x, x)
    index = np.arange(0, 100, 3)
    first = batch._operands_at(index)
    assert all(a is b for a, b in zip(batch._operands_at(index), first))  # the kept pair
    other = batch._operands_at(index[::-1].copy())
    np.testing.assert_array_equal(other[0], x[index[::-1]])
    np.testing.assert_array_equal(other[1], -x[index[::-1]])
    assert batch._operands_at(index)[0] is not first[0]  # only the last index is kept
    assert batch._operands_at(None)[0] is x


@pytest.mark.parametrize("n", [1000, MEMO_WHOLE + 1, 8 * MEMO_ELEMENTS])
def test_a_variant_on_some_elements_is_the_variant_computed_on_them(n: int, monkeypatch) -> None:
    batch = _batch(n)
    calls = []
    compute = ref.compute
    monkeypatch.setattr(ref, "compute", lambda *a, **k: calls.append(1) or compute(*a, **k))
    index = np.arange(3, n, 7)  # memoised by its index up to MEMO_ELEMENTS
    for s in (Semantics(daz=True, ftz=True), Semantics(opmath="float16"), Semantics(saturate=True, slope=3e38)):
        expected = compute("forward", batch.x[index], 0.2, out_dtype="float32", semantics=s)
        for _ in range(2):
            got = batch.recomputed(index, semantics=s)
            np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
        sub = batch.subset(index[::2])
        np.testing.assert_array_equal(sub.recomputed(semantics=s).view(np.uint32), expected[::2].view(np.uint32))
    # per variant: once on every element; once on index and once on the subset; or on every call
    assert len(calls) == (3 if n <= MEMO_WHOLE else 6 if index.size <= MEMO_ELEMENTS else 9)

