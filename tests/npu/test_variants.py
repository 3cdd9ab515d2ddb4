"""Seeded defects: each one differs from golden on docs/domain.md edge inputs in the way its category says.

The baseline is golden with PyTorch's float32 opmath, which the reference
kernel matches bit for bit; every check proves the variant's own category
(recomputing golden under the alternative rule, or reading the hazards).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np
import pytest

from conformance.backends import get_backend
from conformance.dtypes import info, is_nan
from conformance.errors import Unsupported
from conformance.npu_impl import PROFILES, VARIANTS, leaky_relu, leaky_relu_backward
from conformance.npu_impl.backend import CannBackend
from conformance.npu_impl.variants import chip_semantics
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.helpers import bits_differ

ALPHA = 0.2
REFERENCE = VARIANTS["reference"].semantics
#: The chip on which the variants' ``semantics`` hold: the Ascend C kernel, fp32 opmath in every dtype
#: (on TBE chips fp16 computes natively, tested in test_npu_chips.py).
PROFILE = "ascend950"
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def edges(dtype: str) -> np.ndarray:
    """docs/domain.md's edge list: zeros, infinities, NaN, subnormals, limits, the overflow story, a half-way case."""
    rec = info(dtype)
    tiny, sub, top = rec.smallest_normal, rec.smallest_subnormal, rec.max
    values = [0.0, np.inf, np.nan, sub, 3 * sub, tiny - sub, tiny, top, 1.0, 0.5, 6000.0, 1 / 3]
    signed = values + [-v for v in values]
    wide = [7e4, -7e4, 1e5, -1e5, -65519.0, -65520.0] if dtype == "float32" else []
    with np.errstate(over="ignore"):
        arr = np.array(signed + wide, dtype=np.float64).astype(rec.dtype)
    if dtype == "float16":
        arr = np.concatenate([arr, np.array([0x8005], np.uint16).view(np.float16)])
    return arr


def suite(dtype: str, n: int = 3001) -> np.ndarray:
    """Edges followed by ``n`` mixed-scale random values: a multi-core split of modest size."""
    rng = np.random.default_rng(11)
    scale = rng.choice([1e-6, 1.0, 100.0, 1e5], n) if dtype == "float32" else rng.choice([1e-3, 1.0, 100.0], n)
    with np.errstate(over="ignore"):
        body = (rng.standard_normal(n) * scale).astype(info(dtype).dtype)
    return np.concatenate([edges(dtype), body])


@dataclass(frozen=True)
class Run:
    """One variant run with everything a proof needs."""

    variant: str
    direction: str
    src: str
    out: str
    x: np.ndarray
    dy: Optional[np.ndarray]
    actual: np.ndarray
    hazards: tuple
    tile_plan: object

    def golden(self, *, alpha: float = ALPHA, **fields: object) -> np.ndarray:
        """Golden as the reference computes it (float32 opmath), with ``fields`` changed."""
        semantics = replace(REFERENCE, **fields)
        return golden.compute(self.direction, self.x, alpha, dy=self.dy, out_dtype=self.out, semantics=semantics)

    def __str__(self) -> str:
        return f"{self.variant}-{self.direction}-{self.src}->{self.out}"


def execute(variant: str, direction: str, pair: str) -> Run:
    src, _, out = pair.partition("->")
    out = out or src
    x = suite(src)
    if direction == "forward":
        r = leaky_relu(x, ALPHA, profile=PROFILE, variant=variant, out_dtype=out)
        return Run(variant, direction, src, out, x, None, r.y, r.hazards, r.tile_plan)
    dy = x[np.random.default_rng(2).permutation(x.size)]
    r = leaky_relu_backward(dy, x, ALPHA, profile=PROFILE, variant=variant, out_dtype=out)
    return Run(variant, direction, src, out, x, dy, r.dx, r.hazards, r.tile_plan)


def _same_up_to_zero_sign(a: np.ndarray, b: np.ndarray) -> bool:
    with np.errstate(invalid="ignore"):
        zeros = (a.astype(np.float64) == 0) & (b.astype(np.float64) == 0)
    return not (bits_differ(a, b) & ~zeros).any()


def _indices(hazards: tuple, kind: str) -> set[int]:
    return {h.index for h in hazards if h.kind == kind}


def prove_alpha_mismatch(run: Run) -> None:
    slope = VARIANTS[run.variant].slope
    assert not bits_differ(run.actual, run.golden(alpha=slope)).any(), "equals golden at the host's slope"


def prove_alpha_precision(run: Run) -> None:
    expected = golden.forward(run.x, ALPHA, semantics=Semantics(slope_dtype="float16"))
    assert not bits_differ(run.actual, expected).any(), "equals golden with the slope rounded to fp16"


def prove_out_of_bounds(run: Run) -> None:
    n = run.x.size
    assert any(i < 0 or i >= n for i in _indices(run.hazards, "out-of-bounds-write"))


def prove_tail_block(run: Run) -> None:
    bad = np.flatnonzero(bits_differ(run.actual, run.golden()))
    tails = [s for s in run.tile_plan.spans if s.is_tail]
    assert all(any(s.start <= i < s.stop for s in tails) for i in bad.tolist()), "confined to tail tiles"
    assert bad.size > 0 or _indices(run.hazards, "out-of-bounds-write"), "visible in values or red zones"


def prove_write_race(run: Run) -> None:
    races = _indices(run.hazards, "write-race")
    bad = set(np.flatnonzero(bits_differ(run.actual, run.golden())).tolist())
    assert races and bad <= races, f"{len(races)} races; wrong values only where raced"


def prove_overflow(run: Run) -> None:
    g = run.golden()
    with np.errstate(invalid="ignore"):
        hit = np.isfinite(g.astype(np.float64)) & np.isinf(run.actual.astype(np.float64))
    assert hit.any(), "golden finite where the kernel gave inf"


def prove_saturation(run: Run) -> None:
    assert _same_up_to_zero_sign(run.actual, run.golden(saturate=True))


def prove_lost_nan(run: Run) -> None:
    assert (is_nan(run.golden()) & ~is_nan(run.actual)).any()
    assert (np.isinf(run.actual.astype(np.float64))).any(), "inf passes unsaturated: not saturation mode"


def prove_grad_at_zero(run: Run) -> None:
    bad = bits_differ(run.actual, run.golden())
    assert not bits_differ(run.actual, run.golden(grad_rule="ge")).any()
    assert bad.any() and (run.x[bad].astype(np.float64) == 0).all()


def prove_spurious_nan(run: Run) -> None:
    hit = is_nan(run.actual) & ~is_nan(run.golden())
    assert hit.any()
    gate = run.x if run.direction == "forward" else run.dy
    assert np.isinf(gate[hit].astype(np.float64)).all(), "only at +/-inf"


def prove_subnormal_flush(run: Run) -> None:
    assert not bits_differ(run.actual, run.golden(daz=True, ftz=True)).any()


def prove_formulation(run: Run) -> None:
    """Forward: golden recomputed as mask-multiply reproduces the kernel bit for bit."""
    if run.direction == "forward":
        assert not bits_differ(run.actual, run.golden(formulation="mask-multiply")).any()


PROOFS: dict[str, Callable[[Run], None]] = {
    "alpha-mismatch": prove_alpha_mismatch, "alpha-precision": prove_alpha_precision,
    "out-of-bounds-write": prove_out_of_bounds, "tail-block": prove_tail_block,
    "write-race": prove_write_race, "overflow": prove_overflow, "saturation": prove_saturation,
    "lost-nan": prove_lost_nan, "grad-at-zero": prove_grad_at_zero, "spurious-nan": prove_spurious_nan,
    "subnormal-flush": prove_subnormal_flush, "formulation": prove_formulation,
}
CASES = [pytest.param(v.name, d, p, id=f"{v.name}-{d}-{p}")
         for v in VARIANTS.values() for d in v.directions for p in v.dtypes]


@pytest.mark.parametrize("variant,direction,pair", CASES)
def test_variant_differs_from_golden_as_its_category_says(variant: str, direction: str, pair: str) -> None:
    run = execute(variant, direction, pair)
    if variant == "reference":
        assert not bits_differ(run.actual, run.golden()).any() and run.hazards == ()
        return
    assert bits_differ(run.actual, run.golden()).any() or run.hazards, f"{run}: indistinguishable from golden"
    for category in VARIANTS[variant].expected:
        if category == "tail-block" and variant == "tail-overrun":
            continue  # tail-overrun is proved by its red-zone writes
        PROOFS[category](run)


def test_every_expected_category_has_a_proof_and_every_variant_a_direction() -> None:
    assert {c for v in VARIANTS.values() for c in v.expected} <= PROOFS.keys()
    assert all(v.directions and v.dtypes for v in VARIANTS.values())


def test_tail_dropped_leaves_gm_garbage_in_the_last_tile_only() -> None:
    x = suite("float32")
    r = leaky_relu(x, ALPHA, profile=PROFILE, variant="tail-dropped", cores=3)
    bad = np.flatnonzero(bits_differ(r.y, golden.forward(x, ALPHA, semantics=REFERENCE)))
    last = r.tile_plan.spans[-1]
    assert last.is_tail and bad.size > last.length // 2 and bad.min() >= last.start


def test_core_overlap_races_on_a_few_thousand_elements() -> None:
    """The defect deals the elements over every core by hand, where the plan would use one block."""
    r = leaky_relu(suite("float16"), ALPHA, profile=PROFILE, variant="core-overlap")
    races = [h for h in r.hazards if h.kind == "write-race"]
    assert len(r.plan.cores) == PROFILES[PROFILE].vector_cores
    assert len(races) >= 20 and all(len(h.cores) == 2 for h in races)
    assert len(leaky_relu(suite("float16"), ALPHA, profile=PROFILE).plan.cores) == 2


def test_saturation_mode_on_a_saturation_only_chip_is_the_reference_behaviour() -> None:
    x = suite("float16")
    ref = leaky_relu(x, ALPHA, profile="ascend910a").y
    sem = chip_semantics(PROFILES["ascend910a"], x.dtype.name)
    assert sem.saturate and _same_up_to_zero_sign(ref, golden.forward(x, ALPHA, semantics=sem))


def test_backend_reports_result_layout_and_hazards() -> None:
    be = get_backend("cann", profile="ascend910b1", variant="tail-overrun")
    assert isinstance(be, CannBackend) and (be.name, be.profile, be.variant) == ("cann", "ascend910b1", "tail-overrun")
    res = be.forward(suite("float32"), ALPHA)
    assert res.rejected is None and res.tile_plan is not None
    assert any(h.kind == "out-of-bounds-write" for h in res.hazards)


def test_backend_turns_host_rejections_into_rejected_results() -> None:
    res = CannBackend().forward(np.ones(4, np.float32), "slope")
    assert res.value is None and "alpha must be a number" in res.rejected


@pytest.mark.parametrize("profile,dtype,out,expected", [
    ("ascend910b1", "bfloat16", "bfloat16", True), ("ascend910a", "bfloat16", "bfloat16", False),
    ("ascend310p3", "float32", "bfloat16", False), ("ascend910b1", "float32", "bfloat16", True),
    ("ascend910b1", "float64", "float64", False), ("ascend910b1", "float16", "float32", True),
    ("ascend950", "float32", "float16", True),
])
def test_backend_supports_only_what_the_profile_runs(profile: str, dtype: str, out: str, expected: bool) -> None:
    be = CannBackend(profile=profile)
    assert be.supports(dtype, out, "forward") is expected and be.supports(dtype, out, "backward") is expected


def test_backend_raises_unsupported_instead_of_faking() -> None:
    with pytest.raises(Unsupported, match="cann/ascend910a has no forward for bfloat16->bfloat16"):
        CannBackend(profile="ascend910a").forward(np.ones(4, info("bfloat16").dtype), 0.1)
    with pytest.raises(Unsupported, match="cann/ascend910b1 has no backward for float64->float64"):
        CannBackend().backward(np.ones(4), np.ones(4), 0.1)


RULES = [("flush-subnormals", False), ("saturation-mode", True), ("grad-at-zero-one", False)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("alpha", [0.0, 0.01, 0.2, 1.5])
@pytest.mark.parametrize("variant,signless", RULES, ids=[r[0] for r in RULES])
def test_semantic_variants_equal_golden_under_their_semantics_on_every_pattern(
        dtype: str, alpha: float, variant: str, signless: bool) -> None:
    from conformance.dtypes import all_patterns

    x = all_patterns(dtype)
    dy = x[np.random.default_rng(1).permutation(x.size)]
    semantics = VARIANTS[variant].semantics
    actual = leaky_relu_backward(dy, x, alpha, profile=PROFILE, variant=variant).dx
    expected = golden.backward(dy, x, alpha, semantics=semantics)
    if "forward" in VARIANTS[variant].directions:
        actual = np.stack([actual, leaky_relu(x, alpha, profile=PROFILE, variant=variant).y])
        expected = np.stack([expected, golden.forward(x, alpha, semantics=semantics)])
    assert _same_up_to_zero_sign(actual, expected) if signless else not bits_differ(actual, expected).any()


MODELLED = [c for c in CASES if VARIANTS[c.values[0]].semantics_in(c.values[1]) is not None]


@pytest.mark.parametrize("variant,direction,pair", MODELLED)
def test_variant_computes_the_golden_under_its_semantics(variant: str, direction: str, pair: str) -> None:
    run = execute(variant, direction, pair)
    semantics = VARIANTS[variant].semantics_in(direction)
    expected = golden.compute(direction, run.x, ALPHA, dy=run.dy, out_dtype=run.out, semantics=semantics)
    assert not bits_differ(run.actual, expected).any(), f"{run}: differs from golden under {semantics}"


def test_only_location_defects_and_unmodelled_formulas_lack_semantics() -> None:
    lacking = {v.name for v in VARIANTS.values() if v.semantics is None}
    assert lacking == {"tail-overrun", "tail-dropped", "core-overlap", "nan-swallowing-max"}
    assert VARIANTS["mask-multiply"].semantics_in("backward") is None


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_a_saturating_cast_before_compute_on_910a_is_named_in_full(direction: str):
    """In saturation mode the fp32->fp16 cast clamps at ±65504 and turns NaN into 0: the golden
    narrowed that way (with the operands saturated) reproduces every element, none unexplained."""
    from tests.helpers import counts, judge_named

    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(4000).astype(np.float32) * 1e5,
                        np.array([np.nan, np.inf, -np.inf, 7e4, -7e4, 65504, 1e-30, -1e-30], np.float32)])
    if direction == "forward":
        actual, dy = leaky_relu(x, 0.2, profile="ascend910a", variant="cast-before-compute").y, None
    else:
        dy = rng.standard_normal(x.size).astype(np.float32) * 100
        dy[-8:] = [7e4, -7e4, np.nan, np.inf, -np.inf, 1e6, -1e6, 3.0]
        actual = leaky_relu_backward(dy, x, 0.2, profile="ascend910a", variant="cast-before-compute").dx
    row = judge_named(x, actual, 0.2, dy=dy)
    assert "input-precision" in counts(row) and "lost-nan" not in counts(row)


def _full_last_tile_size(dtype: str) -> int:
    """A size whose plan gives the final core a last tile of full length (no short tail)."""
    from conformance.npu_impl.kernel import build_spec, plan_for

    spec = build_spec("forward", dtype, dtype)
    tile = plan_for(1 << 20, spec).tile_elements
    for n in range(tile, 64 * tile + 1, tile):
        last = plan_for(n, spec).cores[-1].tiles[-1]
        if last.length == plan_for(n, spec).tile_elements:
            return n
    raise AssertionError("no size with a full last tile")


@pytest.mark.parametrize("variant", ["tail-dropped", "tail-overrun"])
def test_a_tail_variant_changes_nothing_when_the_last_tile_is_full(variant: str) -> None:
    n = _full_last_tile_size("float16")
    x = np.resize(edges("float16"), n)
    right = leaky_relu(x, 0.2)
    seeded = leaky_relu(x, 0.2, variant=variant)
    assert not bits_differ(seeded.y, right.y).any() and not seeded.hazards
    short = leaky_relu(x[:-1], 0.2, variant=variant)  # one element less: a short tail, which the variant breaks
    assert bits_differ(short.y, right.y[:-1]).any() or short.hazards
