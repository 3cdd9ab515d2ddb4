"""Strategies: validated, width-aware, deterministic, and producing every edge class (meta-tests)."""
from __future__ import annotations

import collections
import contextlib
import math

import numpy as np
import pytest

from conformance.cases import strategies as cs
from conformance.cases.edges import edge_pool
from conformance.dtypes import DTYPES, info, is_nan, is_subnormal


@pytest.mark.parametrize("dtype", tuple(DTYPES))
def test_tensors_produce_every_edge_class(dtype: str) -> None:
    pool = edge_pool(dtype)
    drawn = cs.collect(cs.tensors(dtype, pool=pool), count=200, seed=7)
    counts = collections.Counter(label for d in drawn for label in d.edge_classes)
    missing = pool.classes() - set(counts)
    assert not missing, f"never drawn: {sorted(missing)}"
    uint = info(dtype).uint
    seen = {int(b) for d in drawn for v in (d.x, d.dy) if v is not None for b in v.view(uint).reshape(-1)}
    absent = [c for c in pool.classes() if not {int(b) for b in pool.of(c).view(uint)} & seen]
    assert not absent, f"labelled but no member value present: {sorted(absent)}"


def test_injected_values_really_are_in_the_tensor() -> None:
    """The labels are not just bookkeeping: a drawn NaN class shows up as a NaN element."""
    drawn = cs.collect(cs.tensors("bfloat16"), count=100, seed=3)
    with_nan = [d for d in drawn if {"quiet-nan", "signalling-nan"} & set(d.edge_classes)]
    assert with_nan and all(is_nan(d.x).any() or is_nan(d.dy if d.dy is not None else d.x).any()
                            for d in with_nan)


def test_collect_is_deterministic_per_seed() -> None:
    strategy = cs.tensors("float16", direction="backward")
    a, b = (cs.collect(strategy, count=30, seed=11) for _ in range(2))
    c = cs.collect(strategy, count=30, seed=12)
    same = lambda p, q: all(x.x.tobytes() == y.x.tobytes() and x.dy.tobytes() == y.dy.tobytes()
                            for x, y in zip(p, q))  # noqa: E731
    assert len(a) == 30 and same(a, b) and not same(a, c)


def test_backward_tensors_have_matching_dy() -> None:
    for d in cs.collect(cs.tensors("float32", direction="backward"), count=30, seed=1):
        assert d.dy is not None and d.dy.shape == d.x.shape and d.dy.dtype == d.x.dtype


def test_bfloat16_bits_reach_nan_and_subnormals() -> None:
    values = np.concatenate([v.reshape(-1) for v in cs.collect(cs.scalars("bfloat16"), count=400, seed=5)])
    assert values.dtype == info("bfloat16").dtype
    assert is_nan(values).any() and is_subnormal(values).any()
    assert len(set(values.view(np.uint16).tolist())) > 300


def test_small_shapes_cover_scalar_empty_single_and_sub_block() -> None:
    shapes = set(cs.collect(cs.small_shapes("float16"), count=300, seed=2))
    assert {(), (0,), (1,)} <= shapes
    assert any(len(s) == 1 and 1 < s[0] < cs.block_elements("float16") for s in shapes)
    assert all(math.prod(s) <= 64 for s in shapes)


def test_boundary_sizes_follow_the_tiling_plan() -> None:
    """Each size sits on an edge of the elementwise plan: a core added, a shorter last block or tile."""
    from conformance.npu_impl.kernel import build_spec, plan_for

    spec = build_spec("backward", "float16", "float16", profile="ascend910b1")
    blocks = {n: [c.length for c in plan_for(n, spec).cores] for n in cs.boundary_sizes("float16")}
    one_core = min(blocks)
    assert blocks[one_core] == [one_core]
    assert len(blocks[one_core + 1]) == 2 and blocks[one_core + 1][1] < blocks[one_core + 1][0]
    assert len(blocks[2 * one_core + 1]) == 3
    full = spec.profile.vector_cores * one_core
    assert blocks[full] == [one_core] * spec.profile.vector_cores and blocks[full + 1][-1] < blocks[full + 1][0]
    big = [n for n in blocks if n > full + 1]
    assert len(big) == 2 and big[1] - big[0] == 2
    tail = plan_for(big[1], spec).cores[-1].tiles[-1].length
    assert tail < plan_for(big[1], spec).tile_elements
    assert cs.boundary_sizes("float16", profile="ascend910b1", tiles=False) == (
        one_core, one_core + 1, 2 * one_core + 1)


def test_boundary_sizes_depend_on_the_profile() -> None:
    assert cs.boundary_sizes("float16", profile="ascend910a") != cs.boundary_sizes("float16", profile="ascend910b1")


def test_alphas_include_the_named_kinds() -> None:
    drawn = cs.collect(cs.alphas(), count=300, seed=9)
    assert all(math.isfinite(a) for a in drawn)
    assert {0.0, 1.0} <= set(drawn) and any(a < 0 for a in drawn) and any(a > 1 for a in drawn)
    assert any(float(np.float16(a)) != a for a in drawn)  # not representable in fp16
    assert all(a >= 0 for a in cs.collect(cs.alphas(allow_negative=False), count=100, seed=9))


def test_notable_alphas_contain_every_framework_default() -> None:
    from conformance.reference.defaults import DEFAULTS

    assert {d.declared for d in DEFAULTS} <= set(cs.NOTABLE_ALPHAS)


@pytest.mark.parametrize("call, message", [
    (lambda: cs.tensors("float16", pool=edge_pool("float32")), "edge pool is float32"),
    (lambda: cs.tensors("float16", direction="sideways"), "direction must be"),
    (lambda: cs.tensors("float16", max_edges=-1), "max_edges must be"),
    (lambda: cs.small_shapes("float16", max_elements=0), "max_elements must be"),
    (lambda: cs.scalars("int8"), "unsupported dtype"),
])
def test_strategies_validate_their_arguments(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_boundary_sizes_exist_for_dtypes_the_chip_does_not_run() -> None:
    """Other backends run float64 too: their core-boundary sizes still come from the plan."""
    sizes = cs.boundary_sizes("float64", tiles=False)
    assert sizes and all(n >= 0 for n in sizes)


def test_draws_do_not_depend_on_the_literals_of_local_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis mixes local modules' literals into its draws; collect() must not, or the
    same seed draws other inputs in another directory or installation."""
    from hypothesis import strategies as hst
    from hypothesis.internal.conjecture import providers

    from conformance.cases import strategies

    baseline = strategies.collect(hst.integers(), count=300, seed=5)
    literals = providers.Constants(integers={777_777_777, -424_242})
    monkeypatch.setattr(providers, "_get_local_constants", lambda: literals)
    providers.CONSTANTS_CACHE.cache.clear()
    assert strategies.collect(hst.integers(), count=300, seed=5) == baseline
    with strategies.without_source_constants():
        assert not providers._get_local_constants().integers  # the literals are hidden inside
    assert providers._get_local_constants() is literals  # and the collector is back outside
    monkeypatch.setattr(strategies, "without_source_constants", contextlib.nullcontext)
    providers.CONSTANTS_CACHE.cache.clear()
    assert strategies.collect(hst.integers(), count=300, seed=5) != baseline  # the guard matters
