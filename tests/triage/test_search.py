"""Many mismatches: triage selects its rules on a sample of them and proves every claim on
all of them, with the same categories and counts as triage of every mismatch at once."""
from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest

from conformance import triage as tri
from conformance.dtypes import all_patterns
from conformance.metrics.exact import match_mask
from conformance.reference import exact
from conformance.reference import golden as ref
from conformance.reference.semantics import EXACT, Semantics
from conformance.triage import attribution, sampling
from conformance.triage.candidates import sorted_median
from conformance.triage.rules import catalogue
from conformance.triage.search import stack_semantics
from tests.helpers import assert_same_bits

N = 1 << 20
FLUSHED, NANS = 3, 5  # rare planted defects a sample of the mismatches would miss


def _select_sample(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """More remaining mismatches than ``size`` are selected on a sample of them."""
    monkeypatch.setattr(sampling, "SAMPLING", replace(sampling.SAMPLING, select_sample=size))


def _torch_like(direction: str) -> tuple[tri.Batch, np.ndarray]:
    """Slope fp32(0.2) on every negative value, plus a few flushed subnormal results and
    spurious NaNs planted among them: built once, and each caller gets its own copies (writable,
    as a run's arrays are, so the compiled passes take the signatures the set-up compiled)."""
    x, dy, golden, actual, mismatches = (None if a is None else a.copy() for a in _torch_like_arrays(direction))
    return tri.Batch(x, dy, 0.2, direction, "float32", golden, actual), mismatches


@functools.cache
def _torch_like_arrays(direction: str) -> tuple[np.ndarray, ...]:
    """:func:`_torch_like`'s arrays (x, dy, golden, actual, mismatches), built once."""
    rng = np.random.default_rng(12)
    v = (-np.exp2(rng.uniform(-60, 60, N))).astype(np.float32)  # negatives: the slope side
    v[:: N // 16] = np.abs(v[:: N // 16])  # a few positives for contrast
    tiny = np.arange(1, FLUSHED + 1) * (N // (FLUSHED + 1))
    v[tiny] = -np.float32(2.0 ** -126) * np.float32(0.75)  # subnormal inputs
    x = v if direction == "forward" else np.full(N, -1.0, dtype=np.float32)
    dy = None if direction == "forward" else v
    golden = ref.forward(x, 0.2) if dy is None else ref.backward(dy, x, 0.2)
    with np.errstate(all="ignore"):
        actual = np.where(v > 0, v, v * np.float32(0.2)).astype(np.float32) if dy is None \
            else (v * np.float32(0.2)).astype(np.float32)
    actual[tiny] = np.float32(-0.0)  # flushed
    spurious = rng.choice(N, NANS, replace=False)
    actual[spurious] = np.float32(np.nan)
    mismatches = np.flatnonzero(~match_mask(actual, golden))
    return x, dy, golden, actual, mismatches


def _claims(batch: tri.Batch, mismatches: np.ndarray) -> list[tuple[str, int, bytes]]:
    claims = tri.triage(batch, mismatches=mismatches)
    return sorted((c.category, c.count, np.sort(c.index).tobytes()) for c in claims)


@functools.cache
def _fully_selected(direction: str) -> list[tuple[str, int, bytes]]:
    """The claims on :func:`_torch_like`'s batch with every mismatch in the selection, once
    for both sample sizes."""
    with pytest.MonkeyPatch.context() as mp:
        _select_sample(mp, 1 << 40)
        return _claims(*_torch_like(direction))


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("sample", [None, 1 << 12], ids=["default-sample", "small-sample"])
def test_sampled_selection_claims_what_full_selection_claims(direction: str, sample: int | None,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A small sample misses the rare defects: the leftovers' round finds them."""
    batch, mismatches = _torch_like(direction)
    if sample is not None:
        _select_sample(monkeypatch, sample)
    rounds: list[int] = []
    real = attribution.sampled_round
    monkeypatch.setattr(attribution, "sampled_round",
                        lambda b, state: rounds.append(state.remaining.size) or real(b, state))
    sampled = _claims(batch, mismatches)
    assert rounds and rounds[0] == mismatches.size  # the sampled path is the one taken
    full = _fully_selected(direction)
    assert [(c, n) for c, n, _ in sampled] == [(c, n) for c, n, _ in full]
    assert sampled == full  # the very same elements
    named = {c: n for c, n, _ in sampled}
    assert named.get("subnormal-flush") == FLUSHED
    assert named.get("spurious-nan") == NANS
    assert sum(named.values()) == mismatches.size


def _reduced(batch: tri.Batch, mismatches: np.ndarray, *, every: int) -> tri.Batch:
    """The batch as ``conformance compare`` reduces a large dump: every mismatch first, then
    every ``every``-th matching element standing for its share of them."""
    keep = np.ones(batch.x.size, dtype=bool)
    keep[mismatches] = False
    matched = np.flatnonzero(keep)
    pick = matched[::every]
    where = np.concatenate([mismatches, pick])
    dy = None if batch.dy is None else batch.dy[where]
    return tri.Batch(batch.x[where], dy, batch.alpha, batch.direction, batch.out_dtype, batch.golden[where],
                     batch.actual[where], where=where, numel=batch.x.size,
                     weight=np.full(pick.size, matched.size / pick.size))


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_a_reduced_batch_claims_the_same_sampled_or_not(direction: str, monkeypatch: pytest.MonkeyPatch) -> None:
    whole, mismatches = _torch_like(direction)
    batch = _reduced(whole, mismatches, every=16)
    leading = np.arange(mismatches.size)
    _select_sample(monkeypatch, 1 << 12)
    sampled = _claims(batch, leading)
    _select_sample(monkeypatch, 1 << 40)
    assert sampled == _claims(batch, leading)
    named = {c: n for c, n, _ in sampled}
    assert named.get("subnormal-flush") == FLUSHED and named.get("spurious-nan") == NANS


def test_sampled_rounds_stop_when_nothing_is_claimed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mismatches no rule explains end in the value classes, sampled or not."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(1 << 18).astype(np.float32)
    golden = ref.forward(x, 0.2)
    actual = rng.standard_normal(x.size).astype(np.float32) * np.float32(1e6)
    batch = tri.Batch(x, None, 0.2, "forward", "float32", golden, actual)
    mismatches = np.flatnonzero(~match_mask(actual, golden))
    _select_sample(monkeypatch, 1 << 12)
    sampled = _claims(batch, mismatches)
    _select_sample(monkeypatch, 1 << 40)
    assert sampled == _claims(batch, mismatches)
    assert {c for c, _, _ in sampled} == {"unexplained"}


@pytest.mark.parametrize("n", [1, 2, 3, 10, 11, 1_000, 1_001])
def test_the_median_of_sorted_slopes_is_numpys(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(50):
        ratio = np.round(rng.standard_normal(n), int(rng.integers(1, 8)))
        assert sorted_median(np.sort(ratio)) == float(np.median(ratio))


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_a_stack_computes_the_record_its_rules_set_together(direction: str) -> None:
    """A stack's record, combined from its rules' records, is the one built from their
    settings and checked, for every pair of rules the search may stack (no field in common)."""
    rules = catalogue(alpha=0.2, direction=direction, dtypes=("float16", "float32"), estimates=[0.01])
    pairs = [(a, b) for a in rules for b in rules if a is not b and not a.keys & b.keys]
    assert pairs
    for a, b in pairs:
        built = Semantics(**a.semantics.settings(), **b.semantics.settings())
        assert stack_semantics([a, b]) == built and str(stack_semantics([a, b])) == str(built)
    assert stack_semantics([]) == EXACT and stack_semantics(rules[:1]) is rules[0].semantics


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_operand_narrows_as_the_formula_does(dtype: str) -> None:
    """Every 16-bit pattern, narrowed to each dtype (saturating or not), has the bits of the
    conversion computed on it, in any shape."""
    v = all_patterns(dtype).reshape(256, 256)[:, ::-1]
    with np.errstate(all="ignore"):
        for narrow in ("float16", "bfloat16", "float32"):
            for saturating in (False, True):
                got = exact.narrowed(v, narrow, saturating=saturating)
                want = exact.narrowed_by_formula(v, narrow, saturating=saturating)
                assert got.dtype == want.dtype and got.shape == want.shape
                assert_same_bits(got, want, what=f"{dtype} narrowed to {narrow}")
