"""Clamps at a limit: golden clamped to ±L, for an L the data shows, is ``saturation``.

The clamps are built here in float64 with numpy's clip, on several dtypes, limits,
sides and NaN/inf behaviours; the expected counts come from the edit, never from triage.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pytest

from conformance.dtypes import bfloat16, info
from conformance.reference import golden as ref
from conformance.render.messages import failure_message
from tests.helpers import bits_differ, counts, differs, f32_specials, judge, judge_dump


def _inputs(dtype: object, *, scale: float, seed: int = 0, n: int = 4000) -> np.ndarray:
    """Values of both signs up to about ``scale``, with NaN and both infinities."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) * scale * 10.0 ** rng.uniform(-1, 1, n)
    v[:4] = [np.nan, np.inf, -np.inf, np.nan]
    return v.astype(dtype)


def _clamped(y: np.ndarray, limit: float, *, low: Optional[float] = None, nan: str = "kept",
             inf: str = "L") -> np.ndarray:
    """``y`` clamped to [low, limit] (low -limit by default); NaN kept, 0 or ±limit; inf
    clamped or kept."""
    v = y.astype(np.float64)
    w = np.clip(v, -limit if low is None else low, limit)
    if inf == "kept":
        w = np.where(np.isinf(v), v, w)
    w = np.where(np.isnan(v), {"kept": np.nan, "0": 0.0, "+L": limit, "-L": -limit}[nan], w)
    return w.astype(y.dtype)


def _saturation(row):
    (finding,) = [f for f in row.findings if f.category == "saturation"]
    return finding


def test_an_fp32_kernel_built_with_fp16_limits_keeps_nan() -> None:
    x = _inputs(np.float32, scale=1e5)
    exact = ref.forward(x, 0.2)
    actual = _clamped(exact, 65504.0)
    row = judge(x, actual, 0.2)
    assert counts(row) == {"saturation": differs(actual, exact)}
    finding = _saturation(row)
    assert finding.detail["limit"] == 65504.0 and finding.detail["limit_of"] == "float16"
    assert finding.detail["nan"] == "kept" and finding.detail["inf"] == "L" and finding.detail["side"] == "both"
    assert finding.detail["inf_to_limit"] == 2 and finding.detail["contradicted"] == 0
    assert "±65504 (float16's finite max)" in finding.summary and "NaN kept" in finding.summary


@pytest.mark.parametrize(("dtype", "scale", "limit", "owner"), [
    (np.float32, 1e5, info("float16").max, "float16"),
    (np.float64, 1e39, info("float32").max, "float32"),
    (np.float32, 1e3, 127.0, "int8"),
    (np.float16, 30.0, 6.0, None),
    (bfloat16, 1e5, float(np.array(1e4).astype(bfloat16).astype(np.float64)), None),
])
@pytest.mark.parametrize(("nan", "inf"), [("kept", "L"), ("0", "L"), ("+L", "kept"), ("-L", "L")])
def test_a_clamp_at_any_limit_names_the_limit_and_the_nan_and_inf_behaviour(
        dtype, scale: float, limit: float, owner, nan: str, inf: str) -> None:
    x = _inputs(dtype, scale=scale, seed=int(limit) % 97)
    exact = ref.forward(x, 0.3)
    actual = _clamped(exact, limit, nan=nan, inf=inf)
    row = judge(x, actual, 0.3)
    assert counts(row) == {"saturation": differs(actual, exact)}, \
        failure_message(row)
    detail = _saturation(row).detail
    assert (detail["limit"], detail["limit_of"], detail["nan"], detail["inf"]) == (limit, owner, nan, inf)


def test_a_one_sided_clamp_at_6_is_at_most_6() -> None:
    """A fused min(y, 6): the negative side goes on past -6."""
    x = _inputs(np.float32, scale=100.0, seed=3)
    exact = ref.forward(x, 0.2)
    actual = _clamped(exact, 6.0, low=-np.inf)
    row = judge(x, actual, 0.2)
    assert counts(row) == {"saturation": differs(actual, exact)}
    finding = _saturation(row)
    assert finding.detail["side"] == "upper" and "at most 6" in finding.summary


def test_an_asymmetric_int8_code_clamp_is_found_one_side_at_a_time() -> None:
    x = _inputs(np.float32, scale=1000.0, seed=4)
    exact = ref.forward(x, 0.5)
    actual = _clamped(exact, 127.0, low=-128.0)
    row = judge(x, actual, 0.5)
    assert counts(row) == {"saturation": differs(actual, exact)}
    summary = _saturation(row).summary
    assert "at most 127" in summary and "at least -128" in summary


def test_a_clamped_gradient_is_saturation() -> None:
    x, dy = _inputs(np.float32, scale=1.0, seed=5), _inputs(np.float32, scale=1e5, seed=6)
    exact = ref.backward(dy, x, 0.2)
    actual = _clamped(exact, 65504.0)
    row = judge(x, actual, 0.2, direction="backward", dy=dy)
    assert counts(row) == {"saturation": differs(actual, exact)}


def test_a_clamp_that_misses_one_element_beyond_the_limit_is_no_clamp() -> None:
    """One value beyond L left as it is contradicts the clamp: it is not proved."""
    x = _inputs(np.float32, scale=100.0, seed=7)
    exact = ref.forward(x, 0.2)
    actual = _clamped(exact, 6.0, low=-np.inf)
    beyond = np.flatnonzero(np.isfinite(exact) & (exact.astype(np.float64) > 6))
    assert counts(judge(x, actual, 0.2)) == {"saturation": differs(actual, exact)}
    actual[beyond[0]] = exact[beyond[0]]
    assert "saturation" not in counts(judge(x, actual, 0.2))


def test_a_correct_output_and_a_few_odd_values_are_no_clamp() -> None:
    x = _inputs(np.float32, scale=1e5, seed=8)
    exact = ref.forward(x, 0.2)
    assert judge(x, exact, 0.2).findings == ()
    odd = exact.copy()
    odd[10] = np.float32(0.5) * exact[10]  # one value shrunk: nothing agrees on a limit
    assert "saturation" not in counts(judge(x, odd, 0.2))


def test_random_bit_patterns_clamped_at_the_fp16_limits() -> None:
    x = f32_specials()
    exact = ref.forward(x, 0.2)
    actual = _clamped(exact, 65504.0, nan="0")
    row = judge_dump(x, actual, 0.2)
    assert counts(row) == {"saturation": differs(actual, exact)}
    assert _saturation(row).detail["nan"] == "0" and row.verdict == "fail"


def test_a_clamp_on_a_wrong_slope_names_both() -> None:
    """torch with slope 0.3 where 0.2 was meant, clamped at fp16's max: the negative results
    that only the wrong slope took beyond 65504 are clamped too.  The clamp is proved on
    golden under the slope rule, and each names its own elements."""
    torch = pytest.importorskip("torch")
    from tests.helpers import from_torch, to_torch

    rng = np.random.default_rng(31)
    x = np.concatenate([rng.uniform(-3e5, -2.2e5, 300), rng.standard_normal(3000) * 1e4,
                        rng.uniform(7e4, 1e5, 100)]).astype(np.float32)
    out = from_torch(torch.nn.functional.leaky_relu(to_torch(x), 0.3), "float32")
    actual = _clamped(out, 65504.0)
    exact = ref.forward(x, 0.2)
    clamped = int((np.abs(out.astype(np.float64)) > 65504.0).sum())
    row = judge(x, actual, 0.2, backend="torch")
    assert counts(row) == {"alpha-mismatch": differs(actual, exact) - clamped, "saturation": clamped}, \
        failure_message(row)
    finding = _saturation(row)
    assert finding.detail["limit_of"] == "float16" and finding.detail["contradicted"] == 0
    assert "0.3" in finding.detail["clamped_after"][0] and "after" in finding.summary


def _clamped_reference(clamp, actual: np.ndarray, values: np.ndarray, wrong: np.ndarray) -> tuple[np.ndarray, int]:
    """What ``clamp`` explains and contradicts, from its clamped copy (the definition)."""
    from conformance.metrics.exact import match_mask

    pred = clamp.apply(values)
    changes, follows = ~match_mask(pred, values), match_mask(actual, pred)
    return changes & follows & wrong, int((changes & ~follows).sum())


@pytest.mark.parametrize("dtype", [np.float16, np.float32, bfloat16])
def test_every_clamp_counts_what_its_clamped_copy_shows(dtype: object) -> None:
    """Every side and NaN/inf behaviour judged at once explains and contradicts exactly the
    elements its clamped copy of golden does."""
    from conformance.triage.clamps import Outcomes, _candidates

    rng = np.random.default_rng(3)
    limit = 6.0
    values = _inputs(dtype, scale=8.0, n=3000)
    values = values[~(np.abs(values.astype(np.float64)) <= limit)]  # beyond the limit or NaN
    picks = [values, _clamped(values, limit), _clamped(values, limit, nan="0", inf="kept"),
             _clamped(values, limit, low=-1e9, nan="-L"), np.zeros_like(values),
             (rng.standard_normal(values.size) * 10).astype(dtype)]
    actual = np.stack(picks)[rng.integers(0, len(picks), values.size), np.arange(values.size)]
    wrong = rng.random(values.size) < 0.7
    outcomes = Outcomes(actual, values, wrong, limit=limit)
    for clamp in _candidates(limit, seen=(True, True)):
        explained, contradicted = _clamped_reference(clamp, actual, values, wrong)
        assert outcomes.counts(clamp) == (int(explained.sum()), contradicted), clamp
        assert np.array_equal(outcomes.explained(clamp), explained), clamp


@pytest.mark.parametrize("odd", [0, 2, 40])
def test_the_first_look_keeps_every_clamp_the_whole_batch_proves(odd: int) -> None:
    """A clamp judged on every element of a large batch is kept only if the first look (the
    errors and a stride sample of the rest) lets it through; ``odd`` finite elements beyond
    the limit, half on each side, left unclamped contradict every clamp."""
    from conformance.triage.claims import Batch, State
    from conformance.triage.clamps import _best, _may_hold

    x = _inputs(np.float32, scale=4.0, n=1 << 16)
    golden = ref.forward(x, 0.2)
    actual = _clamped(golden, 6.0)
    for side in (golden > 6.0, golden < -6.0):
        at = np.flatnonzero(np.isfinite(golden) & side)[:odd // 2]
        actual[at] = golden[at]
    batch = Batch(x, None, 0.2, "forward", "float32", golden, actual)
    state = State(np.flatnonzero(bits_differ(actual, golden)))
    proof = _best(batch, state, 6.0)
    assert (proof is not None) == (odd == 0)
    if proof is not None:
        assert _may_hold(batch, state, 6.0, (), beat=0)
        assert _may_hold(batch, state, 6.0, (), beat=int(proof.explained.size) - 1)
