"""The cosine sums of 16-bit pairs taken compiled (each value from the table of every pattern) are
the numpy path's, bit for bit: the finite pairs only, in pieces, scaled by their largest magnitude."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from conformance import jit
from conformance.dtypes import all_patterns, from_bits, info
from conformance.metrics import exact

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="the compiled paths are off")


def _random(name: str, n: int, *, seed: int) -> np.ndarray:
    return from_bits(np.random.default_rng(seed).integers(0, 1 << 16, n, dtype=np.uint64).astype(np.uint16), name)


def _nonfinite(name: str) -> np.ndarray:
    rec = info(name)
    return from_bits(np.array([rec.exp_mask, rec.exp_mask | 1, rec.exp_mask | rec.sign_mask], dtype=np.uint16), name)


PIECES = 3 * exact.DOT_PIECE + 5  # pairs: three whole pieces and a short one
PAIRS: dict[str, Callable[[str], tuple[np.ndarray, np.ndarray]]] = {
    "every-pattern-against-random": lambda n: (all_patterns(n), _random(n, 1 << 16, seed=1)),
    "several-pieces": lambda n: (_random(n, PIECES, seed=2), _random(n, PIECES, seed=3)),
    "reversed": lambda n: (all_patterns(n)[::-1], all_patterns(n)),
    "one-pair": lambda n: (_random(n, 1, seed=4), _random(n, 1, seed=5)),
    "no-finite-pair": lambda n: (_nonfinite(n), _nonfinite(n)[::-1]),
    "golden-larger": lambda n: (np.full(5, 0.5, dtype=info(n).dtype), np.full(5, 1000.0, dtype=info(n).dtype)),
    "zeros": lambda n: (np.zeros(9, dtype=info(n).dtype), -np.zeros(9, dtype=info(n).dtype)),
}


@pytest.mark.parametrize("pair", PAIRS, ids=str)
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_compiled_16_bit_cosine_sums_are_numpys(name: str, pair: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a, g = PAIRS[pair](name)
    calls: list[int] = []
    tabled = exact._table_sums
    monkeypatch.setattr(exact, "_table_sums", lambda *args: calls.append(1) or tabled(*args))
    compiled = [exact._cosine_sums(a, g), exact._cosine_sums(a, a)]  # ``a is g``: one sum serves all three
    assert len(calls) == 2
    monkeypatch.setenv("CONFORMANCE_COMPILED", "0")
    assert [exact._cosine_sums(a, g), exact._cosine_sums(a, a)] == compiled
    assert repr(compiled) == repr([exact._cosine_sums(a, g), exact._cosine_sums(a, a)])  # signed zeros too
