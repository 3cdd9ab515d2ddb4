"""The emulator's compiled loops reproduce the numpy instruction path bit for bit.

``CONFORMANCE_COMPILED=0`` is the reference: every chip, every seeded variant, every dtype
pair the chip runs (output casts included), forward and backward, on every 16-bit pattern
and on edge and random float32 bit patterns, with slopes that reach the NaN-payload rules;
then sizes at the tiling boundaries, where the launch-level loop must keep every hazard.
By default the every-pattern proof runs the reference on every chip and each other variant on
one chip, and the boundary proof the launch-level variants on every chip and each tile-level
variant on one chip; ``make test-exhaustive`` runs the other chips.
"""
from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np
import pytest

from conformance.dtypes import all_patterns, info, to_bits
from conformance.npu_impl import PROFILES, VARIANTS, leaky_relu, leaky_relu_backward, supported_pairs
from conformance.npu_impl.chips import get_profile
from conformance.npu_impl.kernel import Window, buffer_spec, build_spec, plan_for, tile_windows
from conformance.npu_impl.variants import Variant, get_variant
from tests.helpers import rotation, sampled, variants_in_turn

pytest.importorskip("conformance.npu_impl.compiled", reason="numba (the fast extra) is not installed")
from conformance.npu_impl import fusion  # noqa: E402

#: Slopes by case index: ordinary, on an fp16 midpoint, negative, zero, NaN (both NaN operands).
ALPHAS = (0.2, 0.3, -0.5, 0.0, float("nan"))


def _float32_edges() -> np.ndarray:
    """Signed zeros, subnormals, normals at the fp16/bf16 limits, infinities, NaN payloads
    (quiet and signalling), every fp16 value widened, and random bits."""
    special = [0, 1, 0x7FFFFF, 0x800000, 0x33000000, 0x33000001, 0x387FFFFF, 0x38800000, 0x3F800000,
               0x477FEFFF, 0x477FF000, 0x47800000, 0x7F7FFFFF, 0x7F800000, 0x7F800001, 0x7FA00000,
               0x7FC00000, 0x7FFFFFFF, 0x7F802000, 0x7F801FFF, 0x00800001, 0x3A83126F]
    bits = np.array(special, dtype=np.uint32)
    widened = to_bits(all_patterns("float16").astype(np.float32))
    random = np.random.default_rng(5).integers(0, 1 << 32, 6000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bits, bits | np.uint32(1 << 31), widened[::7], random]).view(np.float32)


INPUTS = {"float16": all_patterns("float16"), "bfloat16": all_patterns("bfloat16"), "float32": _float32_edges()}


def _call(direction: str, x: np.ndarray, alpha: float, *, compiled: bool, **kw):
    """One emulator call with the compiled loops on or off (the result, or the error's text)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONFORMANCE_COMPILED", "1" if compiled else "0")
        try:
            if direction == "forward":
                return leaky_relu(x, alpha, **kw)
            dy = (to_bits(x)[::-1] ^ np.array(info(x.dtype).sign_mask, to_bits(x).dtype)).view(x.dtype)
            return leaky_relu_backward(dy, x, alpha, **kw)
        except Exception as exc:  # the same rejection on both paths counts as the same result
            return f"{type(exc).__name__}: {exc}"


def _assert_same(direction: str, x: np.ndarray, alpha: float, **kw) -> None:
    want = _call(direction, x, alpha, compiled=False, **kw)
    got = _call(direction, x, alpha, compiled=True, **kw)
    where = f"{direction} {x.dtype}[{x.size}] alpha={alpha} {kw}"
    if isinstance(want, str) or isinstance(got, str):
        assert got == want, where
        return
    differ = np.flatnonzero(to_bits(got.value).ravel() != to_bits(want.value).ravel())
    assert got.value.dtype == want.value.dtype and differ.size == 0, (
        f"{where}: {differ.size} elements differ, first at {differ[:5]}: x bits "
        f"{[hex(b) for b in to_bits(x).ravel()[differ[:3]]]}")
    assert got.hazards == want.hazards, where


#: Every chip with every variant; by default the reference on every chip and each other variant
#: on one chip where it seeds a defect, in turn.
_IN_TURN = variants_in_turn()
EVERY_PAIR = sampled([(p, v) for p in PROFILES for v in VARIANTS],
                     default=lambda p, v: v == "reference" or _IN_TURN(p, v))


@pytest.mark.parametrize(("profile", "variant"), EVERY_PAIR)
def test_every_pattern_matches_the_instruction_path(profile, variant):
    cases = [(d, pair) for pair in sorted(supported_pairs(get_profile(profile))) for d in ("forward", "backward")]
    for i, (direction, (src, out)) in enumerate(cases):
        alpha = ALPHAS[(i + len(variant)) % len(ALPHAS)]
        _assert_same(direction, INPUTS[src], alpha, profile=profile, variant=variant, out_dtype=out)


BOUNDARY_SIZES = (1, 31, 511, 512, 513, 4097, 600_001)  # 600,001 fp32: every core, several tiles each
BOUNDARY_PROFILES = ("ascend910b1", "ascend910a", "ascend950")
LAUNCH_VARIANTS = ("reference", "saturation-mode")  # fused over the whole launch
TILE_VARIANTS = ("tail-overrun", "tail-dropped", "core-overlap")  # fused per tile, hazards recorded per element

#: Every variant on every chip; by default the launch-level variants on every chip and each
#: tile-level variant on one chip, in turn (every chip runs one).
_TILE_IN_TURN = rotation(TILE_VARIANTS, BOUNDARY_PROFILES)
BOUNDARY_CASES = sampled([(p, v) for p in BOUNDARY_PROFILES for v in (*LAUNCH_VARIANTS, *TILE_VARIANTS)],
                         default=lambda p, v: v in LAUNCH_VARIANTS or _TILE_IN_TURN(p, v))


@pytest.mark.parametrize(("profile", "variant"), BOUNDARY_CASES)
def test_tiling_boundaries_keep_values_and_hazards(profile, variant):
    rng = np.random.default_rng(11)
    for n in BOUNDARY_SIZES:
        for dtype in ("float32", "float16"):
            x = rng.standard_normal(n).astype(dtype) * 100
            x[::97] = np.nan
            _assert_same("forward", x, 0.2, profile=profile, variant=variant)
            if n < 10_000:
                _assert_same("backward", x, -0.5, profile=profile, variant=variant)


def test_every_variant_setting_is_classified():
    """A new Variant setting must say how far it lets the lanes fuse, or the dispatch is wrong."""
    assert {f.name for f in dataclasses.fields(Variant)} <= set(fusion.FIELD_FUSION)


@pytest.mark.parametrize(("variant", "level"), [
    ("reference", "launch"), ("saturation-mode", "launch"), ("flush-subnormals", "launch"),
    ("mask-multiply", "launch"), ("tail-overrun", "tile"), ("tail-dropped", "tile"), ("core-overlap", "tile")])
def test_the_variants_fusion_level(variant, level):
    assert fusion.variant_fusion(get_variant(variant)) == level


def test_an_unclassified_value_keeps_the_instructions():
    odd = dataclasses.replace(get_variant("reference"), tail="sideways")  # type: ignore[arg-type]
    assert fusion.variant_fusion(odd) == "instructions"


def _level(spec, numel: int) -> str:
    plan = plan_for(numel, spec)
    windows = partial(tile_windows, plan=plan, variant=spec.variant, has_pad=spec.profile.has_datacopy_pad)
    return fusion.fusion_for(spec, plan, windows=windows,
                             ub_bytes=sum(b.bytes_for(plan.tile_elements) for b in buffer_spec(spec)))


def test_the_launch_level_needs_a_plan_without_hazards(monkeypatch):
    spec = build_spec("forward", "float32", "float32", profile="ascend910b1", slope=0.2)
    assert _level(spec, 600_001) == "launch"
    overrun = build_spec("forward", "float32", "float32", profile="ascend910b1", variant="tail-overrun")
    assert _level(overrun, 4097) == "tile"
    monkeypatch.setenv("CONFORMANCE_COMPILED", "0")
    assert _level(spec, 600_001) == "instructions"


def test_a_window_reaching_into_a_neighbour_is_no_launch():
    """A plan whose last copy would shift back over the core before it keeps the emulated launch."""
    spec = build_spec("forward", "float32", "float32", profile="ascend910a", slope=0.2)
    plan = plan_for(4096, spec)
    assert len(plan.cores) > 1
    shifted = lambda core: [Window(max(core.start - 8, 0), core.length, core.length, "block")]  # noqa: E731
    assert not fusion.launch_is_elementwise(spec, plan, windows=shifted)
    for numel in (4096, 1025, 4097, 12_345):  # 910A has no DataCopyPad: bulk copies plus a shifted last block
        plan = plan_for(numel, spec)
        assert fusion.launch_is_elementwise(spec, plan, windows=partial(
            tile_windows, plan=plan, variant=spec.variant, has_pad=False)), numel


def test_a_lane_numpy_decides_by_position_goes_back_to_the_instructions():
    """Two NaN operands of a float32 multiply: the loop reports the lane instead of guessing."""
    from conformance.npu_impl import compiled

    spec = build_spec("forward", "float32", "float32", profile="ascend950", slope=float("nan"))
    x = np.float32([1.0, np.nan, -2.0])
    sink = np.empty_like(x)
    assert compiled.run_lanes(x, x, sink, fusion.lanes_for(spec, whole=True)) == 1
    assert compiled.run_lanes(x[::2].copy(), x[::2].copy(), sink[:2], fusion.lanes_for(spec, whole=True)) == -1
