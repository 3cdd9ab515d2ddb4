"""The reference kernel: each chip's own kernel (bit-identical to torch where it computes in fp32),
exactly its golden semantics, host validation, in-place."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest
import torch

from conformance.dtypes import all_patterns, info, is_nan, to_bits, ulp_distance
from conformance.errors import HostValidationError
from conformance.npu_impl import PROFILES, leaky_relu, leaky_relu_backward
from conformance.npu_impl.variants import chip_semantics
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.helpers import assert_same_bits, from_torch, to_torch

ALPHAS = (0.0, 0.01, 0.2, 0.3, 1.5)
INF_NAN = [p for p, prof in PROFILES.items() if prof.float_mode == "inf_nan"]
SATURATING = [p for p, prof in PROFILES.items() if prof.float_mode == "saturation"]


def torch_forward(x: np.ndarray, alpha: float) -> np.ndarray:
    return from_torch(torch.nn.functional.leaky_relu(to_torch(x), alpha), x.dtype.name)


def torch_backward(dy: np.ndarray, x: np.ndarray, alpha: float) -> np.ndarray:
    tx = to_torch(x).clone().requires_grad_(True)
    torch.nn.functional.leaky_relu(tx, alpha).backward(to_torch(dy))
    return from_torch(tx.grad, x.dtype.name)


def inputs(dtype: str) -> np.ndarray:
    """All 16-bit patterns, or 2**17 random float32 bit patterns."""
    if info(dtype).bits == 16:
        return all_patterns(dtype)
    bits = np.random.default_rng(32).integers(0, 1 << 32, 1 << 17, dtype=np.uint64).astype(np.uint32)
    return bits.view(np.float32)


def shuffled(x: np.ndarray) -> np.ndarray:
    return x[np.random.default_rng(1).permutation(x.size)]


@dataclass(frozen=True)
class Case:
    profile: str
    dtype: str
    alpha: float

    def __str__(self) -> str:
        return f"{self.profile}-{self.dtype}-alpha={self.alpha:g}"


OPMATH = Semantics(opmath="float32")
#: Where the chip's kernel computes in fp32 opmath, as torch: every dtype on ascend950, bf16 and fp32 on 910B.
TORCH_CASES = [Case(p, d, a) for p in INF_NAN for d in PROFILES[p].dtypes for a in ALPHAS
               if chip_semantics(PROFILES[p], d) == OPMATH]


@pytest.mark.parametrize("case", TORCH_CASES, ids=str)
def test_reference_forward_is_bit_identical_to_torch(case: Case) -> None:
    x = inputs(case.dtype)
    y = leaky_relu(x, case.alpha, profile=case.profile).y
    assert_same_bits(y, torch_forward(x, case.alpha), what=str(case))


@pytest.mark.parametrize("case", TORCH_CASES, ids=str)
def test_reference_backward_is_bit_identical_to_torch_autograd(case: Case) -> None:
    x = inputs(case.dtype)
    dy = shuffled(x)
    dx = leaky_relu_backward(dy, x, case.alpha, profile=case.profile).dx
    assert_same_bits(dx, torch_backward(dy, x, case.alpha), what=str(case))


def assert_within_one_ulp(actual: np.ndarray, expected: np.ndarray, *, what: str, zeros_signless: bool = False) -> None:
    dist = ulp_distance(actual, expected)
    nan_a, nan_e = is_nan(actual), is_nan(expected)
    assert np.array_equal(nan_a, nan_e), f"{what}: NaN positions differ at {np.flatnonzero(nan_a != nan_e)[:5]}"
    assert dist.max() <= 1, f"{what}: {dist.max()} ULPs at {np.argmax(dist.ulps)}"
    if not zeros_signless:
        sign = to_bits(actual) >> (info(actual.dtype).bits - 1) != to_bits(expected) >> (info(actual.dtype).bits - 1)
        with np.errstate(invalid="ignore"):
            zero = (actual.astype(np.float64) == 0) & (expected.astype(np.float64) == 0)
        assert not (sign & zero).any(), f"{what}: zero signs differ"


GOLDEN_CASES = [Case(p, d, a) for p in PROFILES for d in PROFILES[p].dtypes for a in ALPHAS + (1 / 3,)]


def positive_subnormals(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return (x > 0) & (np.abs(x.astype(np.float64)) < info(x.dtype).smallest_normal)


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=str)
def test_reference_computes_its_chips_golden_semantics(case: Case) -> None:
    """Bit for bit under ``chip_semantics`` (zero signs not compared on saturation-only chips), and within
    1 ULP of the exact golden wherever the slope is not rounded to fp16.  The 910A step-function
    backward is left out at positive fp32 subnormals (tested on its own below)."""
    prof = PROFILES[case.profile]
    sat, sem = prof.float_mode == "saturation", chip_semantics(prof, case.dtype)
    x = inputs(case.dtype)
    dy = shuffled(x)
    y = leaky_relu(x, case.alpha, profile=case.profile).y
    dx = leaky_relu_backward(dy, x, case.alpha, profile=case.profile).dx
    keep = ~positive_subnormals(x) if prof.backward_kernel == "tbe-step" else np.ones(x.size, bool)
    for what, actual, expected in (("fwd", y, golden.forward(x, case.alpha, semantics=sem)),
                                   ("bwd", dx[keep], golden.backward(dy, x, case.alpha, semantics=sem)[keep])):
        if sat:
            assert_within_one_ulp(actual, expected, what=f"{what} {case}", zeros_signless=True)
            assert ulp_distance(actual, expected).max() == 0, f"{what} {case}"
        else:
            assert_same_bits(actual, expected, what=f"{what} {case}")
    if sem.slope_dtype is None:
        assert_within_one_ulp(y, golden.forward(x, case.alpha, semantics=Semantics(saturate=sat)),
                              what=f"fwd {case} vs exact", zeros_signless=sat)


@pytest.mark.parametrize("out", ["float16", "bfloat16"])
@pytest.mark.parametrize("alpha", [0.01, 0.2])
def test_fp32_to_narrow_output_is_torch_then_cast(out: str, alpha: float) -> None:
    x = np.concatenate([inputs("float32"), np.array([7e4, -7e4, 3e38, -3e38], np.float32)])
    y = leaky_relu(x, alpha, out_dtype=out).y
    expected = golden.forward(x, alpha, out_dtype=out, semantics=Semantics(opmath="float32"))
    assert_same_bits(y, expected, what=f"float32->{out}")
    assert (y[-4] == np.inf) if out == "float16" else np.isfinite(y[-4]), "7e4 overflows fp16 only"


def test_saturation_profile_clamps_the_narrowing_cast() -> None:
    y = leaky_relu(np.array([7e4, -7e5, np.nan], np.float32), 0.2, profile="ascend910a", out_dtype="float16").y
    assert y.tolist() == [65504.0, -65504.0, 0.0]


@pytest.mark.parametrize("profile", ["ascend910b1", "ascend910a"])
@pytest.mark.parametrize("numel", [0, 3, 17, 1000, 20_003])
@pytest.mark.parametrize("cores", [1, 5, None])
def test_sizes_and_core_counts_leave_no_hazards_and_match_golden(profile: str, numel: int, cores: int | None) -> None:
    x = np.random.default_rng(numel).standard_normal(numel).astype(np.float16)
    r = leaky_relu(x, 0.2, profile=profile, cores=cores)
    assert r.hazards == ()
    expected = golden.forward(x, 0.2, semantics=chip_semantics(PROFILES[profile], "float16"))
    assert_same_bits(r.y, expected, what=f"{profile} n={numel}")


def test_shape_is_kept_and_layout_covers_the_output() -> None:
    x = np.random.default_rng(3).standard_normal((7, 9, 5)).astype(np.float32)
    r = leaky_relu(x, 0.1, cores=4)
    assert r.y.shape == x.shape
    assert sum(s.length for s in r.tile_plan.spans) == x.size and r.tile_plan.align_elements == 8
    assert r.tile_plan.locate(x.size - 1).is_tail


@pytest.mark.parametrize("profile", ["ascend910b1", "ascend910a", "ascend310p3"])
@pytest.mark.parametrize("numel", [5, 1003, 70_001])
def test_in_place_equals_out_of_place(profile: str, numel: int) -> None:
    """In-place goes through a fresh output and a copy back, so it equals out-of-place on every chip."""
    x = np.random.default_rng(numel).standard_normal(numel).astype(np.float16) * 100
    expected = leaky_relu(x, 0.3, profile=profile, cores=2).y.copy()
    work = x.copy()
    r = leaky_relu(work, 0.3, profile=profile, cores=2, inplace=True)
    assert r.y is work and r.hazards == ()
    assert_same_bits(work, expected, what=f"in-place {profile} n={numel}")


def test_there_is_no_in_place_backward() -> None:
    """aclnn declares no in-place LeakyReluBackward (ops-nn aclnn_leaky_relu_backward.h)."""
    dy = x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="inplace"):
        leaky_relu_backward(dy, x, 0.2, inplace=True)  # type: ignore[call-arg]


def test_in_place_computes_into_a_fresh_buffer() -> None:
    """aclnnInplaceLeakyRelu writes a fresh tensor and ViewCopy's it back: input and output never alias.

    A dropped tail shows it: the fresh output keeps its GM garbage there, an aliased one would keep x."""
    x = np.random.default_rng(3).standard_normal(4099).astype(np.float32)
    out_of_place = leaky_relu(x, 0.3, variant="tail-dropped", profile="ascend910a")
    work = x.copy()
    r = leaky_relu(work, 0.3, variant="tail-dropped", profile="ascend910a", inplace=True)
    assert r.y is work and r.hazards == out_of_place.hazards
    assert_same_bits(work, out_of_place.y, what="in-place equals out-of-place, dropped tail included")


@pytest.mark.parametrize("alpha", [float("inf"), float("-inf"), float("nan")])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_non_finite_slopes_are_computed(alpha: float, dtype: str) -> None:
    """aclnn's CheckParams checks null, dtype and shape only: the slope reaches the kernel's fp32 Muls
    on ascend950, and the LeakyRelu instruction (x < 0 ? T(slope)*x : x, zeros kept) on 910B."""
    x = np.array([-2.0, -0.0, 0.0, 3.0, -np.inf, np.nan], dtype)
    wide = x.astype(np.float32)
    with np.errstate(all="ignore"):
        select = np.where(wide > 0, wide, wide * np.float32(alpha)).astype(dtype)
        instruction = np.where(x < 0, x * x.dtype.type(alpha), x)
    assert_same_bits(leaky_relu(x, alpha, profile="ascend950").y, select, what=f"950 alpha={alpha} {dtype}")
    assert_same_bits(leaky_relu(x, alpha, profile="ascend910b1").y, instruction, what=f"910B alpha={alpha} {dtype}")


def test_rank_nine_is_rejected_and_rank_eight_runs() -> None:
    assert leaky_relu(np.ones((1,) * 8, np.float32), 0.1).y.shape == (1,) * 8
    with pytest.raises(HostValidationError, match="rank .* at most 8"):
        leaky_relu(np.ones((1,) * 9, np.float32), 0.1)


def test_rank_nine_is_a_rejection_on_the_cann_backend() -> None:
    from conformance.npu_impl.backend import CannBackend

    result = CannBackend().forward(np.ones((1,) * 9, np.float32), 0.1)
    assert result.value is None and "at most 8" in result.rejected


def test_float64_runs_on_aicpu_not_the_emulated_kernel() -> None:
    from conformance.errors import Unsupported

    with pytest.raises(Unsupported, match="AICPU"):
        leaky_relu(np.ones(4), 0.1)


@pytest.mark.parametrize("shape", [(0,), (3, 0, 2)])
def test_empty_tensors_return_at_once(shape: tuple[int, ...]) -> None:
    r = leaky_relu(np.ones(shape, np.float16), 0.1)
    assert r.y.shape == shape and r.y.dtype == np.float16 and r.plan.cores == () and r.hazards == ()
    assert leaky_relu_backward(np.ones(shape, np.float32), np.ones(shape, np.float32), 0.1).dx.shape == shape


def test_backward_from_the_result_matches_backward_from_the_input() -> None:
    x = inputs("float16")
    dy = shuffled(x)
    y = leaky_relu(x, 0.2).y
    from_result = leaky_relu_backward(dy, y, 0.2, self_is_result=True).dx
    assert_same_bits(from_result, leaky_relu_backward(dy, x, 0.2).dx, what="selfIsResult")


REJECTIONS = [
    ("text alpha", lambda: leaky_relu(np.ones(4, np.float32), "x"), "alpha must be a number"),
    ("bf16 on 910a", lambda: leaky_relu(np.ones(4, info("bfloat16").dtype), 0.1, profile="ascend910a"),
     "not supported by the LeakyRelu kernel on ascend910a"),
    ("fp32->bf16 on 910a", lambda: leaky_relu(np.ones(4, np.float32), 0.1, profile="ascend910a",
                                               out_dtype="bfloat16"), "not supported"),
    ("unknown profile", lambda: leaky_relu(np.ones(4, np.float32), 0.1, profile="ascend999"), "unknown profile"),
    ("unknown variant", lambda: leaky_relu(np.ones(4, np.float32), 0.1, variant="nope"), "unknown variant"),
    ("too many cores", lambda: leaky_relu(np.ones(4, np.float32), 0.1, cores=49), "cores must be"),
    ("negative slope from result",
     lambda: leaky_relu_backward(np.ones(4, np.float32), np.ones(4, np.float32), -0.1, self_is_result=True),
     "selfIsResult"),
    ("shapes that do not broadcast",
     lambda: leaky_relu_backward(np.ones(4, np.float32), np.ones(5, np.float32), 0.1),
     "cannot broadcast .*OP_CHECK_BROADCAST_AND_INFER_SHAPE"),
    ("rank nine gradient", lambda: leaky_relu_backward(np.ones((1,) * 9, np.float32), np.ones(1, np.float32), 0.1),
     "at most 8"),
    ("in-place cast", lambda: leaky_relu(np.ones(4, np.float32), 0.1, out_dtype="float16", inplace=True),
     "in-place needs"),
    ("not an array", lambda: leaky_relu([1.0, 2.0], 0.1), "numpy arrays"),
]


@pytest.mark.parametrize("call,message", [(c, m) for _, c, m in REJECTIONS], ids=[r[0] for r in REJECTIONS])
def test_host_validation_rejects_with_one_line(call, message: str) -> None:
    with pytest.raises(HostValidationError, match=message) as err:
        call()
    assert "\n" not in str(err.value)


def test_negative_slope_is_accepted_when_backward_is_from_the_input() -> None:
    x = np.array([-2.0, 3.0], np.float32)
    dx = leaky_relu_backward(np.ones(2, np.float32), x, -0.5).dx
    assert dx.tolist() == [-0.5, 1.0]


def test_in_place_tail_shorter_than_a_block_reads_back_into_the_previous_tile() -> None:
    """The shifted block covers 11 finished elements of the previous tile: they are rewritten unchanged."""
    from conformance.npu_impl.kernel import KernelSpec, plan_for
    from conformance.npu_impl.variants import VARIANTS

    spec = KernelSpec("forward", info("float16"), info("float16"), 0.3, VARIANTS["reference"],
                      PROFILES["ascend910a"])
    numel = plan_for(1 << 20, spec, cores=1).tile_elements + 5
    assert plan_for(numel, spec, cores=1).cores[0].tiles[-1].length == 5
    x = -np.abs(np.random.default_rng(9).standard_normal(numel).astype(np.float16)) - 1
    expected = golden.forward(x, 0.3, semantics=chip_semantics(PROFILES["ascend910a"], "float16"))
    r = leaky_relu(x, 0.3, profile="ascend910a", cores=1, inplace=True)
    assert_same_bits(r.y, expected, what="in-place, 5-element tail on 910A")


KNOBS = ("ub_bytes", "ub_usable_bytes", "vector_cores", "float_modes", "has_datacopy_pad", "dtypes",
         "gm_bytes_per_s", "vector_bytes_per_cycle", "clock_hz", "forward_kernel", "backward_kernel", "aclnn",
         "allowed", "tiling", "subnormals", "maxmin_nan")


@pytest.mark.parametrize("profile", list(PROFILES))
def test_every_profile_knob_says_where_its_value_comes_from(profile: str) -> None:
    prof = PROFILES[profile]
    assert prof.name == profile
    missing = [k for k in KNOBS if prof.source(k) == "unknown"]
    assert not missing, f"{profile}: no source for {missing}"
    assert prof.ub_usable_bytes <= prof.ub_bytes and prof.float_mode in prof.float_modes


def test_profile_facts_from_domain_md() -> None:
    b1, a = PROFILES["ascend910b1"], PROFILES["ascend910a"]
    assert (b1.ub_bytes, b1.ub_usable_bytes, b1.vector_cores) == (192 * 1024, 184 * 1024, 48)
    assert PROFILES["ascend910b3"].vector_cores == 40
    assert (a.ub_usable_bytes, a.float_modes, a.has_datacopy_pad) == (248 * 1024, ("saturation",), False)
    assert "bfloat16" not in a.dtypes and "bfloat16" not in PROFILES["ascend310p3"].dtypes


def test_a_shape_plans_once_and_a_changed_chip_plans_anew() -> None:
    from conformance.npu_impl.kernel import build_spec, plan_for, tile_plan_of

    spec = build_spec("forward", "float32", "float32", profile="ascend910b1", slope=0.2)
    plan = plan_for(100_003, spec)
    assert plan_for(100_003, spec) is plan and tile_plan_of(plan) is tile_plan_of(plan)
    assert tile_plan_of(plan) == plan.tile_plan()
    fewer = replace(spec, profile=spec.profile.with_knobs(vector_cores=2))
    assert len(plan_for(100_003, fewer).cores) == 2 < len(plan.cores)
