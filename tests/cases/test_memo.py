"""The process-wide memos of generated inputs: equal to an uncached build, bounded, and out of
every caller's reach (a caller that writes into what it got changes no later run)."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.cases import strategies
from conformance.cases.batches import BatchCache, subseed
from conformance.cases.edges import built_pool, edge_pool
from conformance.cases.expected import golden_of
from conformance.cases.memo import Memo, slopes_key
from conformance.dtypes import info, to_bits
from conformance.reference import golden as ref
from conformance.suite import RowSpec

ALPHAS = (0.2, 1.5)


def _bits(a: np.ndarray) -> np.ndarray:
    return to_bits(a).copy()


def _uncached_draw(dtype: str, out: str, *, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The examples batch built without any memo: the pool, the draw and the flattening."""
    pool = built_pool(info(dtype), info(out), ALPHAS)
    drawn = strategies.collect(strategies.tensors(dtype, direction="backward", pool=pool), count=count,
                               seed=subseed(seed, "examples", dtype, out))
    return (np.concatenate([d.x.reshape(-1) for d in drawn]), np.concatenate([d.dy.reshape(-1) for d in drawn]))


@pytest.mark.parametrize("dtype, out", [("float16", "float16"), ("float32", "float16")])
def test_memoised_examples_equal_an_uncached_draw(dtype: str, out: str) -> None:
    first = BatchCache(seed=7, max_examples=12, alphas=ALPHAS).examples(dtype, out, "backward")
    again = BatchCache(seed=7, max_examples=12, alphas=ALPHAS).examples(dtype, out, "backward")
    x, dy = _uncached_draw(dtype, out, count=12, seed=7)
    assert again.source is first.source  # the second cache got the kept draw
    for batch in (first, again):
        assert np.array_equal(_bits(batch.x), _bits(x)) and np.array_equal(_bits(batch.dy), _bits(dy))


def test_the_memo_keys_on_everything_the_draw_depends_on() -> None:
    base = BatchCache(seed=7, max_examples=12, alphas=ALPHAS).examples("float16", "float16", "backward")
    others = [BatchCache(seed=8, max_examples=12, alphas=ALPHAS),
              BatchCache(seed=7, max_examples=13, alphas=ALPHAS),
              BatchCache(seed=7, max_examples=12, alphas=(0.2,))]
    for cache in others:
        got = cache.examples("float16", "float16", "backward")
        assert got.source is not base.source
    x, _ = _uncached_draw("float16", "float16", count=13, seed=7)
    assert np.array_equal(_bits(others[1].examples("float16", "float16", "backward").x), _bits(x))


def test_forward_examples_are_the_backward_draws_x() -> None:
    cache = BatchCache(seed=5, max_examples=10, alphas=ALPHAS)
    forward, backward = cache.examples("bfloat16", "bfloat16", "forward"), cache.examples("bfloat16", "bfloat16",
                                                                                          "backward")
    assert forward.dy is None and np.array_equal(_bits(forward.x), _bits(backward.x))


def test_a_caller_writing_into_its_batches_changes_no_later_run() -> None:
    cache = BatchCache(seed=11, max_examples=8, alphas=ALPHAS)
    got = [cache.exhaustive16("float16", "backward"), cache.edges("float16", "float16", "backward", 0.2),
           cache.examples("float16", "float16", "backward"), *cache.shapes("float16", "float16", "backward", (33,))]
    kept = [(_bits(b.x), _bits(b.dy)) for b in got]
    for batch in got:
        batch.x[...] = 0
        batch.dy[...] = 0
    later = BatchCache(seed=11, max_examples=8, alphas=ALPHAS)
    again = [later.exhaustive16("float16", "backward"), later.edges("float16", "float16", "backward", 0.2),
             later.examples("float16", "float16", "backward"), *later.shapes("float16", "float16", "backward", (33,))]
    for (x, dy), batch in zip(kept, again):
        assert np.array_equal(_bits(batch.x), x) and np.array_equal(_bits(batch.dy), dy)
        assert batch.x.flags.writeable and not batch.source.x.flags.writeable
    with pytest.raises(ValueError):
        again[0].source.x[0] = 0  # the master itself refuses a write


def test_a_caller_writing_into_its_edge_pool_changes_no_later_pool() -> None:
    pool = edge_pool("float32", out_dtype="float16", alphas=ALPHAS)
    kept = _bits(pool.values)
    pool.values[...] = 0
    again = edge_pool("float32", out_dtype="float16", alphas=ALPHAS)
    fresh = built_pool(info("float32"), info("float16"), ALPHAS)
    assert np.array_equal(_bits(again.values), kept) and np.array_equal(kept, _bits(fresh.values))
    assert again.labels == fresh.labels


def test_slopes_are_kept_apart_by_their_bits() -> None:
    assert slopes_key([0.0]) != slopes_key([-0.0])
    assert slopes_key([1 / 3]) != slopes_key([0.3333333333333333 + 2 ** -54])


def _spec(direction: str = "backward", alpha: float = 0.2) -> RowSpec:
    return RowSpec("golden", None, None, "float16", "float16", direction, alpha)  # type: ignore[arg-type]


def test_the_kept_golden_is_the_golden_of_the_batch() -> None:
    batch = BatchCache(seed=3, max_examples=0, alphas=ALPHAS).exhaustive16("float16", "backward")
    want = ref.compute("backward", batch.x, 0.2, dy=batch.dy, out_dtype="float16")
    first, second = golden_of(_spec(), batch), golden_of(_spec(), batch)
    assert np.array_equal(_bits(first), _bits(want)) and np.array_equal(_bits(second), _bits(want))
    first[...] = 0  # the caller's copy: the next caller still gets the golden
    assert np.array_equal(_bits(golden_of(_spec(), batch)), _bits(want))
    other = golden_of(_spec(alpha=1.5), batch)
    assert np.array_equal(_bits(other), _bits(ref.compute("backward", batch.x, 1.5, dy=batch.dy,
                                                           out_dtype="float16")))


def test_no_golden_is_kept_for_a_changed_or_foreign_batch() -> None:
    batch = BatchCache(seed=4, max_examples=0, alphas=ALPHAS).exhaustive16("float16", "forward")
    assert golden_of(_spec("forward"), batch) is not None
    batch.x[0] = batch.x[1]
    assert golden_of(_spec("forward"), batch) is None  # evaluate computes it from the changed inputs
    assert golden_of(_spec("forward"), type(batch)("own", batch.x.copy())) is None


def test_a_memo_stays_within_its_entries_and_bytes() -> None:
    memo: Memo[np.ndarray] = Memo(entries=3, budget=100, weight=lambda a: a.nbytes)
    built: list[int] = []

    def get(n: int) -> np.ndarray:
        return memo.get(n, lambda: built.append(n) or np.zeros(n, np.uint8))
    for n in (10, 20, 30, 40):
        get(n)
    assert len(memo) == 3 and built == [10, 20, 30, 40]  # four entries: the oldest went
    get(40)
    get(20)
    assert built == [10, 20, 30, 40]  # kept
    get(50)  # 20 + 30 + 40 + 50 > 100 bytes: the least recently used (30, then 40) go
    get(20)
    assert built == [10, 20, 30, 40, 50] and len(memo) == 2
    get(30)
    assert built[-1] == 30
    get(500)
    get(500)  # larger than the whole budget: built each time, never kept
    assert built[-2:] == [500, 500]
    memo.clear()
    assert len(memo) == 0
