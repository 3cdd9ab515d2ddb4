"""A large batch's scope split in one compiled pass is the numpy path's scope: the same positions,
mismatches first, then every special other element and the same sample of the plain ones, with
the same weights."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from conformance import jit
from conformance.dtypes import all_patterns, from_bits
from conformance.metrics.exact import match_mask
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.triage.claims import Batch
from conformance.triage.sampling import SAMPLING, scope_of

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="the compiled paths are off")


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], Batch]

    def __str__(self) -> str:
        return self.name


def _forward(x: np.ndarray, *, out: str, slope_dtype: str) -> Batch:
    golden = ref.forward(x, 0.2, out_dtype=out)
    actual = ref.forward(x, 0.2, out_dtype=out, semantics=Semantics(slope_dtype=slope_dtype))
    return Batch(x, None, 0.2, "forward", out, golden, actual)


def _backward(*, x_value: float, alpha: float = 0.2, slope_dtype: str = "float16") -> Batch:
    """dy = every 2^16-th fp32 pattern, subnormals among them, against one x."""
    dy = from_bits(np.arange(1 << 16, dtype=np.uint64) * (1 << 16) + 7, "float32")
    x = np.full(dy.size, x_value, dtype=np.float32)
    golden = ref.compute("backward", x, alpha, dy=dy, out_dtype="float32")
    actual = ref.compute("backward", x, alpha, dy=dy, out_dtype="float32", semantics=Semantics(slope_dtype=slope_dtype))
    return Batch(x, dy, alpha, "backward", "float32", golden, actual)


def _fp32(seed: int, *, size: int = 1 << 16) -> np.ndarray:
    return from_bits(np.random.default_rng(seed).integers(0, 1 << 32, size, dtype=np.uint64), "float32")


CASES = [
    Case("every-fp16-pattern", lambda: _forward(all_patterns("float16"), out="float16", slope_dtype="float16")),
    Case("every-bf16-pattern", lambda: _forward(all_patterns("bfloat16"), out="bfloat16", slope_dtype="bfloat16")),
    Case("fp32-random-bits-to-fp16", lambda: _forward(_fp32(3), out="float16", slope_dtype="float16")),
    Case("fp16-to-fp32", lambda: _forward(all_patterns("float16"), out="float32", slope_dtype="float16")),
    Case("fp64", lambda: _forward(_fp32(4).astype(np.float64), out="float64", slope_dtype="float32")),
    # a last block shorter than the others, special elements scattered through the blocks
    Case("fp32-odd-length-to-fp16", lambda: _forward(_fp32(5, size=(1 << 16) + 37), out="float16",
                                                     slope_dtype="float16")),
    Case("backward-plain-x", lambda: _backward(x_value=-1.0)),
    Case("backward-special-x", lambda: _backward(x_value=float("nan"))),
    # a steep slope makes a subnormal dy's gradient normal: only dy is special there
    Case("backward-steep-slope", lambda: _backward(x_value=-1.0, alpha=1e30, slope_dtype="bfloat16")),
]


def _scope(batch: Batch, mismatches: np.ndarray) -> tuple:
    scope = scope_of(batch, mismatches)
    return scope.n_mis, scope.index.tolist(), scope.weight.tolist()


@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_compiled_scope_is_the_numpy_paths(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    from conformance.triage import sampling

    batch = case.make()
    assert batch.x.size > SAMPLING.full_scope  # a sampled scope
    mismatches = np.flatnonzero(~match_mask(batch.actual, batch.golden))
    split, calls = sampling._split_compiled, []
    monkeypatch.setattr(sampling, "_split_compiled", lambda *a: calls.append(1) or split(*a))
    for mis in (mismatches, mismatches[::7], mismatches[:0]):
        compiled = _scope(batch, mis)
        with monkeypatch.context() as m:
            m.setenv("CONFORMANCE_COMPILED", "0")
            assert _scope(batch, mis) == compiled
        assert compiled[1][:mis.size] == mis.tolist()
    assert len(calls) == 3 and mismatches.size > 0


def test_mismatches_out_of_order_take_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = CASES[0].make()
    mis = np.flatnonzero(~match_mask(batch.actual, batch.golden))
    shuffled = np.random.default_rng(0).permutation(mis)
    monkeypatch.setattr("conformance.triage.sampling._split_compiled", None)  # would raise if called
    scope = scope_of(batch, shuffled)
    assert scope.index[:mis.size].tolist() == shuffled.tolist() and scope.size > mis.size
