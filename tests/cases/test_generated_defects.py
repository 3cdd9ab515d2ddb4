"""Proof by generated defects: random defects from the catalogue planted into
golden outputs must be named with their planted category, element by element.

``conformance.cases.defects`` varies the dtype pair, direction, shape (0-d, one
element, unaligned, multi-dimensional), alpha (0, above 1, negative, random), the share
of zeros, NaN, infinities and subnormals, the defect's parameters and pairs of stacked
defects.  The expected categories come from the planting, never from triage.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.console import Console

from conformance.cases import regional_defects
from conformance.cases.defects import Planted, catalogue, generate
from conformance.cases.regional_defects import generate_composed, generate_regional
from conformance.dtypes import all_patterns
from conformance.reference import golden
from conformance.reference.semantics import EXACT
from conformance.render.messages import failure_message
from conformance.selftest_generated import Scored, name_generated, profile_plan, run_generated, tally
from tests.helpers import counts, judge, sampled

GENERATED = 2000  # cases in the aggregate proof (`exhaustive`)
#: Its first cases: every facet (`_facets`) of the 2,000 occurs in them; the default run names their covering sample.
SAMPLE = 100
REQUIRED = 0.999  # share of planted elements named right
PLANTED = {"alpha-mismatch", "alpha-precision", "formulation", "subnormal-flush", "saturation", "grad-at-zero",
           "nan-gradient", "input-precision", "tail-block"}  # planted, and named right, in every sample
#: The cases a proof names: by default its covering sample, all of them under `exhaustive`.
SHARE = ["covering", pytest.param("all", marks=pytest.mark.exhaustive)]


def _facets(case: Planted) -> tuple[str, ...]:
    """What a generated case stands for: its defects' categories, each category that alone
    names one of its planted elements, dtype pair, direction, rank, number of defects, and
    whether it runs on a chip's tile plan."""
    alone = dict.fromkeys(f"names {cats[0]}" for cats in case.accept.values() if len(cats) == 1)
    return (*(d.category for d in case.defects), *alone,
            f"{case.x.dtype}->{case.out_dtype}", case.direction,
            f"{case.x.ndim}-d", f"{len(case.defects)} defects", f"layout {case.tile_plan is not None}")


@functools.cache
def _first(count: int) -> tuple[Planted, ...]:
    """The aggregate proof's first ``count`` cases (generated once per run)."""
    return tuple(regional_defects.cases(count, seed=0, plan=profile_plan))


def _scored(share: str) -> list[Scored]:
    if share == "all":
        return run_generated(GENERATED, seed=0)[0]
    return [name_generated(c) for c in covering(list(_first(SAMPLE)), facets=_facets)]


def test_the_covering_sample_of_the_first_cases_keeps_every_facet_of_them() -> None:
    sample = covering(list(_first(SAMPLE)), facets=_facets)
    assert len(sample) < SAMPLE / 3 and sample == sorted(sample, key=lambda c: c.seed)
    facets = set().union(*map(_facets, _first(SAMPLE)))
    assert set().union(*map(_facets, sample)) == facets >= {f"names {c}" for c in PLANTED}


@pytest.mark.exhaustive
def test_the_first_cases_hold_every_facet_of_the_aggregate_proof() -> None:
    every = set().union(*map(_facets, regional_defects.cases(GENERATED, seed=0, plan=profile_plan)))
    assert set().union(*map(_facets, _first(SAMPLE))) == every


@pytest.mark.parametrize("share", SHARE)
def test_generated_defects_are_named_with_their_planted_category(share: str) -> None:
    scored = _scored(share)
    named_right, false = tally(scored)
    planted = sum(len(s.pairs) for s in scored)
    assert planted > 10 * len(scored), "the generator must plant defects"
    assert {p for s in scored for p, _, ok in s.pairs if ok} >= PLANTED
    assert false == 0, [str(s.case) for s in scored if s.false_findings][:5]
    wrong = [str(s.case) for s in scored if not all(ok for *_, ok in s.pairs)]
    assert named_right >= REQUIRED, wrong[:10]


ONE_DEFECT = 40  # random seeds the default run names one defect on; `make test-exhaustive` ten times as many


def _one_defect_is_named_exactly(seed: int) -> None:
    case = generate(seed, defects=1, min_size=64)
    scored = name_generated(case)
    assert not scored.false_findings, str(case)
    wrong = [(p, n) for p, n, ok in scored.pairs if not ok]
    assert not wrong, f"{case}: {wrong[:5]}"


@settings(max_examples=ONE_DEFECT, deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1))
@example(seed=148719058)  # a stride of zeros over the only subnormal results a flush would explain
@example(seed=2178554)  # NC1HWC0 read back: golden moved alone beats a permutation with rules on top
@example(seed=790444289)  # a clamp at 65536 that fp16 narrowing, saturation and a rule at zero also reach
@example(seed=464830523)  # NaN became 0 by a clamp, not by a NaN-gradient rule on three of them
def test_one_defect_on_a_sizable_tensor_is_named_exactly(seed: int) -> None:
    _one_defect_is_named_exactly(seed)


@pytest.mark.exhaustive
@settings(max_examples=10 * ONE_DEFECT, deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1))
def test_one_defect_on_a_sizable_tensor_is_named_exactly_on_many_seeds(seed: int) -> None:
    _one_defect_is_named_exactly(seed)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1))
def test_clean_outputs_give_no_finding(seed: int) -> None:
    case = generate(seed, defects=0)
    assert not case.accept and not name_generated(case).pairs
    assert (case.actual.view(np.uint8) == case.golden.view(np.uint8)).all()


REGIONAL = 80  # regional (and composed) cases in their own aggregate proofs (`exhaustive`)


def _region_kind(case: Planted) -> str:
    """How the first defect's region is given: core, tile, first, index, or a span ``[a, b)``."""
    kind = str(case.defects[0]).split(" in ")[-1].split()[0]
    return "span" if kind.startswith("[") else kind


def _regional_facets(case: Planted) -> tuple[str, ...]:
    """A regional case's planted categories, region kind and rank."""
    return (*(d.category for d in case.defects), f"in {_region_kind(case)}", f"{case.x.ndim}-d")


def covering(cases: list[Planted], *, facets: Callable[[Planted], tuple[str, ...]] = _regional_facets) -> list[Planted]:
    """The first case of every facet (default: of every planted category, region kind and
    rank), in seed order."""
    first: dict[str, int] = {}
    for i, case in enumerate(cases):
        for key in facets(case):
            first.setdefault(key, i)
    return [cases[i] for i in sorted(set(first.values()))]


@functools.cache
def _regional(plan: object) -> list[Planted]:
    """The regional proofs' cases on ``plan`` (None: synthetic plans), generated once per run."""
    return [generate_regional(s, plan=plan) for s in range(1000, 1000 + REGIONAL)]  # type: ignore[arg-type]


def _sample(cases: list[Planted], share: str) -> list[Planted]:
    return covering(cases) if share == "covering" else cases


def test_the_covering_sample_keeps_every_category_region_kind_and_rank_of_its_cases() -> None:
    cases = _regional(profile_plan)
    sample = covering(cases)
    assert len(sample) < len(cases) / 2 and sample == sorted(sample, key=lambda c: c.seed)
    for facet in (lambda c: {d.category for d in c.defects}, lambda c: {_region_kind(c)}, lambda c: {c.x.ndim}):
        assert set().union(*map(facet, sample)) == set().union(*map(facet, cases))


@pytest.mark.parametrize("share", SHARE)
@pytest.mark.parametrize("plan", [None, profile_plan], ids=["synthetic-plans", "chip-profile-plans"])
def test_defects_confined_to_a_region_are_named_with_their_planted_category(plan: object, share: str) -> None:
    cases = _regional(plan)
    assert {c.x.ndim for c in cases} == {1, 2, 3, 4, 5}
    assert {_region_kind(c) for c in cases} >= {"core", "tile", "first", "index", "span"}
    assert any(c.defects[0].category == "stale-block" for c in cases)
    scored = [name_generated(c) for c in _sample(cases, share)]
    pairs = [ok for s in scored for *_, ok in s.pairs]
    assert not any(s.false_findings for s in scored)
    assert sum(pairs) >= REQUIRED * len(pairs), [str(s.case) for s in scored if not all(o for *_, o in s.pairs)][:5]


def test_generator_reaches_every_shape_kind_and_special_share() -> None:
    cases = [generate(s) for s in range(300)]
    ndims = {c.x.ndim for c in cases}
    sizes = {c.x.size for c in cases}
    assert {0, 1, 2} <= ndims and 1 in sizes and any(s % 16 for s in sizes)
    assert any(c.alpha < 0 for c in cases) and any(c.alpha > 1 for c in cases) and any(c.alpha == 0 for c in cases)
    assert any(len(c.defects) == 2 for c in cases) and any(not c.defects for c in cases)


def test_stacked_defects_set_disjoint_fields_and_plant_golden_under_both() -> None:
    stacked = [c for c in (generate(s, defects=2) for s in range(200))
               if len(c.defects) == 2 and all(d.semantics != EXACT for d in c.defects)]
    assert len(stacked) > 50
    for case in stacked:
        first, second = (d.semantics.settings().keys() for d in case.defects)
        assert not first & second, str(case)
        both = case.defects[0].semantics.combined(case.defects[1].semantics)
        expected = golden.compute(case.direction, case.x, case.alpha, dy=case.dy, out_dtype=case.out_dtype,
                                  semantics=both).reshape(-1)
        assert (expected.view(np.uint8) == case.actual.view(np.uint8)).all(), str(case)


def test_every_catalogue_defect_names_a_variant_of_golden() -> None:
    pool = catalogue(alpha=0.2, src="float32", out="float16", direction="backward")
    assert all(d.semantics != EXACT for d in pool)
    assert {str(d.semantics) for d in pool} >= {"grad_rule=ge", "daz, ftz", "input_dtype=float16"}


TORCH_ALPHAS = (0.0, 0.01, 0.2, 0.3, 1 / 3, 1.5, -0.5, 2.0)


#: Every slope on both 16-bit dtypes; by default each slope on one of them, in turn.
TORCH_ROWS = sampled([(d, a) for d in ("float16", "bfloat16") for a in TORCH_ALPHAS],
                     default=lambda d, a: ("float16", "bfloat16")[TORCH_ALPHAS.index(a) % 2] == d)


@pytest.mark.parametrize(("dtype", "alpha"), TORCH_ROWS)
def test_torch_is_never_unexplained(dtype: str, alpha: float) -> None:
    import torch

    from tests.helpers import from_torch, to_torch

    x = all_patterns(dtype)
    dy = np.random.default_rng(4).permutation(x)
    tx = to_torch(x).requires_grad_(True)
    y = torch.nn.functional.leaky_relu(tx, alpha)
    (dx,) = torch.autograd.grad(y, tx, to_torch(dy))
    for actual, direction in ((from_torch(y.detach(), dtype), "forward"), (from_torch(dx, dtype), "backward")):
        row = judge(x, actual, alpha, direction=direction, dy=None if direction == "forward" else dy,
                    backend="torch")
        assert "unexplained" not in counts(row), failure_message(row)


def test_selftest_generated_prints_each_planted_category_and_what_else_it_was_named(
        capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers import run_cli

    result = run_cli(["selftest", "--generated", "12", "--seed", "3"], capsys)
    assert result.code == 0, result.text
    assert "named otherwise" in result.out and "alpha-mismatch" in result.out and "named right" in result.out
    quiet = run_cli(["selftest", "--generated", "12", "--seed", "3", "-q"], capsys)
    assert quiet.out.strip().startswith("selftest --generated:") and "named otherwise" not in quiet.out


def test_the_generated_table_counts_wrong_names_per_planted_category() -> None:
    from conformance.commands.selftest import generated_matrix
    from conformance.selftest_generated import Scored

    pairs = (("saturation", "saturation", True), ("saturation", "grad-at-zero", False))
    console = Console(width=100, record=True)
    console.print(generated_matrix([Scored(None, pairs, ())]))
    text = console.export_text()
    assert "50.000%" in text and "grad-at-zero ×1" in text


@pytest.mark.parametrize("value", ["0", "many"])
def test_selftest_generated_rejects_a_bad_count(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers import assert_usage_error, run_cli

    assert_usage_error(run_cli(["selftest", "--generated", value], capsys), mentions="--generated")


@pytest.mark.parametrize("share", SHARE)
def test_a_layout_or_a_clamp_on_top_of_a_rule_names_both_defects(share: str) -> None:
    cases = [generate_composed(s) for s in range(2000, 2000 + REGIONAL)]
    assert {c.defects[0].category for c in cases} == {"layout", "saturation"}
    assert {c.x.ndim for c in cases} == {2, 3, 4, 5}
    scored = [name_generated(c) for c in _sample(cases, share)]
    named = {n for s in scored for p, n, ok in s.pairs if ok}
    assert {"layout", "saturation"} < named and len(named) >= 6, named
    pairs = [ok for s in scored for *_, ok in s.pairs]
    assert not any(s.false_findings for s in scored)
    assert sum(pairs) >= REQUIRED * len(pairs), [str(s.case) for s in scored if not all(o for *_, o in s.pairs)][:5]
