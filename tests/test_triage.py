"""Triage: a synthetic defect per category, named with its independently counted size.

Expected counts come from the defect itself (elements where a golden variant
differs from golden, or the bits a test edited), never from the triage code.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pytest

from conformance.dtypes import all_patterns, from_bits, info, is_nan, is_subnormal, to_bits
from conformance.frameworks.tensorflow_backend import tensorflow
from conformance.npu_impl.backend import CannBackend
from conformance.npu_impl.variants import VARIANTS
from conformance.records import BackendResult, Hazard, TileLayout, TileSpan
from conformance.reference import golden as ref
from conformance.report.evaluate import Row, evaluate
from conformance.report.gate import GateConfig
from conformance.report.metrics import match_mask
from tests.helpers import bits_differ, from_torch, to_torch

CONFIG = GateConfig()
F16 = all_patterns("float16")
RNG = np.random.default_rng(20240601)
DY16 = RNG.permutation(F16)


def judge(x: np.ndarray, actual: np.ndarray, alpha: float, *, direction: str = "forward",
          dy: Optional[np.ndarray] = None, backend: str = "cann", config: GateConfig = CONFIG,
          **extra) -> Row:
    return evaluate(x, alpha, BackendResult(actual, **extra), direction=direction, dy=dy,
                    backend=backend, config=config)


def counts(row: Row) -> dict[str, int]:
    return {f.category: f.count for f in row.findings}


def differs(a: np.ndarray, b: np.ndarray) -> int:
    """Independent count of elements whose bits differ (NaN equals NaN): the test helper, not metrics."""
    return int(bits_differ(a, b).sum())


@dataclass(frozen=True)
class VariantCase:
    """A defect made by recomputing golden under another rule."""

    category: str
    dtype: str
    alpha: float
    rule: dict
    direction: str = "forward"
    wrong_alpha: Optional[float] = None

    def __str__(self) -> str:
        return f"{self.category}-{self.dtype}-{self.direction}-a{self.alpha}"


VARIANT_CASES = [
    VariantCase("alpha-mismatch", "float16", 0.2, {}, wrong_alpha=0.01),
    VariantCase("alpha-mismatch", "bfloat16", 0.01, {}, wrong_alpha=0.0),
    VariantCase("alpha-mismatch", "float16", 0.01, {}, "backward", wrong_alpha=0.3),
    VariantCase("alpha-precision", "float16", 0.2, {"slope_dtype": "float16"}),
    VariantCase("alpha-precision", "bfloat16", 0.3, {"slope_dtype": "bfloat16"}, "backward"),
    VariantCase("subnormal-flush", "float16", 1.0, {"flush_subnormals": True}),
    VariantCase("subnormal-flush", "bfloat16", 0.5, {"flush_subnormals": True}, "backward"),
    VariantCase("saturation", "float16", 1.5, {"saturate": True}),
    VariantCase("saturation", "bfloat16", 0.2, {"saturate": True}),
    VariantCase("grad-at-zero", "float16", 0.2, {"grad_rule": "ge"}, "backward"),
    VariantCase("nan-gradient", "float16", 0.2, {"nan_grad": "zero"}, "backward"),
    VariantCase("nan-gradient", "bfloat16", 0.3, {"nan_grad": "dy"}, "backward"),
]


def _inputs(case: VariantCase) -> tuple[np.ndarray, Optional[np.ndarray]]:
    x = all_patterns(case.dtype)
    dy = np.random.default_rng(7).permutation(x) if case.direction == "backward" else None
    return x, dy


def _variant(case: VariantCase, x: np.ndarray, dy: Optional[np.ndarray], **rule) -> np.ndarray:
    alpha = case.wrong_alpha if case.wrong_alpha is not None else case.alpha
    if case.direction == "forward":
        return ref.leaky_relu(x, alpha, **rule)
    return ref.leaky_relu_backward(dy, x, alpha, **rule)


@pytest.mark.parametrize("case", VARIANT_CASES, ids=str)
def test_golden_variant_is_named_with_its_exact_count(case: VariantCase) -> None:
    x, dy = _inputs(case)
    actual = _variant(case, x, dy, **case.rule)
    exact = ref.leaky_relu(x, case.alpha) if dy is None else ref.leaky_relu_backward(dy, x, case.alpha)
    expected = differs(actual, exact)
    assert expected > 0, "the defect must change something"
    row = judge(x, actual, case.alpha, direction=case.direction, dy=dy)
    assert counts(row) == {case.category: expected}
    assert row.metrics.mismatches == expected


def test_alpha_mismatch_reports_effective_alpha_and_frameworks() -> None:
    row = judge(F16, ref.leaky_relu(F16, 0.01), 0.2)
    (finding,) = row.findings
    assert finding.detail["effective_alpha"] == 0.01
    assert {"torch", "ONNX", "JAX", "Paddle"} <= set(finding.detail["default_of"])
    assert "0.01" in finding.summary and row.verdict == "fail"


def test_alpha_mismatch_to_cann_default_zero() -> None:
    row = judge(F16, ref.leaky_relu(F16, 0.0), 0.2)
    (finding,) = row.findings
    assert finding.detail["effective_alpha"] == 0.0
    assert finding.detail["default_of"] == ["CANN"]


def test_alpha_precision_summary_names_the_rounded_slope() -> None:
    row = judge(F16, ref.leaky_relu(F16, 0.2, slope_dtype="float16"), 0.2)
    assert row.findings[0].summary == "slope rounded to float16 (0.199951171875) before multiplying"


def test_lost_nan_is_not_saturation_when_infinities_are_kept() -> None:
    """max/min that prefer numbers turn NaN into 0 but keep ±inf: lost-nan, not saturation."""
    exact = ref.leaky_relu(F16, 0.2)
    actual = np.where(is_nan(F16), np.float16(0), exact)
    row = judge(F16, actual, 0.2)
    assert counts(row) == {"lost-nan": int(is_nan(F16).sum())}


def _edit(exact: np.ndarray, index: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    out = exact.copy()
    out[index] = fn(out[index])
    return out


def _finite_normal(a: np.ndarray) -> np.ndarray:
    w = a.astype(np.float64)
    return np.flatnonzero(np.isfinite(w) & (np.abs(w) >= info(a.dtype).smallest_normal) & (w != 0))


@dataclass(frozen=True)
class EditCase:
    """A defect made by editing the bits of chosen elements."""

    category: str
    pick: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    edit: Callable[[np.ndarray], np.ndarray] = field(repr=False)

    def __str__(self) -> str:
        return self.category


def _every(k: int) -> Callable[[np.ndarray], np.ndarray]:
    return lambda exact: _finite_normal(exact)[::k]


EDIT_CASES = [
    EditCase("overflow", _every(97), lambda v: np.copysign(np.inf, v.astype(np.float64)).astype(v.dtype)),
    EditCase("spurious-nan", _every(89), lambda v: np.full_like(v, np.nan)),
    EditCase("lost-nan", lambda e: np.flatnonzero(is_nan(e))[::3], lambda v: np.ones_like(v)),
    EditCase("signed-zero", lambda e: np.flatnonzero(e.astype(np.float64) == 0),
             lambda v: from_bits(to_bits(v) ^ info(v.dtype).sign_mask, v.dtype)),
    EditCase("rounding", _every(41), lambda v: from_bits(to_bits(v) + 1, v.dtype)),
    EditCase("unexplained", _every(37), lambda v: from_bits(to_bits(v) ^ 0x0100, v.dtype)),
]


@pytest.mark.parametrize("case", EDIT_CASES, ids=str)
def test_bit_edit_is_named_with_the_number_of_edited_elements(case: EditCase) -> None:
    exact = ref.leaky_relu(F16, 0.2)
    index = case.pick(exact)
    actual = _edit(exact, index, case.edit)
    edited = differs(actual, exact)
    assert edited == index.size > 0
    row = judge(F16, actual, 0.2)
    assert counts(row) == {case.category: edited}


def test_signed_zero_warns_unless_strict() -> None:
    exact = ref.leaky_relu(F16, 0.2)
    zeros = np.flatnonzero(exact.astype(np.float64) == 0)
    actual = _edit(exact, zeros, np.negative)
    assert judge(F16, actual, 0.2).verdict == "warn"
    strict = GateConfig(strict_zeros=True)
    assert judge(F16, actual, 0.2, config=strict).verdict == "fail"


def _layout(numel: int, *, cores: int, tile: int) -> TileLayout:
    """Contiguous core ranges; each core's last tile is a shorter tail tile."""
    per = numel // cores
    spans = []
    for core in range(cores):
        start, stop = core * per, (core + 1) * per if core < cores - 1 else numel
        starts = list(range(start, stop, tile))
        spans += [TileSpan(core, t, s, min(tile, stop - s), is_tail=(t == len(starts) - 1))
                  for t, s in enumerate(starts)]
    return TileLayout(tile, tuple(spans), 16)


def _garbage_in(exact: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, int]:
    index = np.arange(start, stop)
    index = index[np.isfinite(exact[index].astype(np.float64))]
    actual = _edit(exact, index, lambda v: from_bits(to_bits(v) ^ 0x0300, v.dtype))
    return actual, differs(actual, exact)


def test_errors_confined_to_tail_tiles_are_tail_block() -> None:
    layout = _layout(F16.size, cores=4, tile=5000)
    tail = next(s for s in layout.spans if s.is_tail and s.core == 2)
    exact = ref.leaky_relu(F16, 0.2)
    actual, edited = _garbage_in(exact, tail.start, tail.stop)
    row = judge(F16, actual, 0.2, layout=layout)
    assert counts(row) == {"tail-block": edited}
    detail = row.findings[0].detail
    assert detail["regions"] == [{"core": 2, "tile": tail.tile, "start": tail.start,
                                  "stop": tail.stop}]
    assert row.findings[0].examples[0].core == 2


def test_errors_outside_tail_tiles_are_not_tail_block() -> None:
    layout = _layout(F16.size, cores=4, tile=5000)
    body = next(s for s in layout.spans if not s.is_tail)
    exact = ref.leaky_relu(F16, 0.2)
    actual, _ = _garbage_in(exact, body.start, body.stop)
    assert "tail-block" not in counts(judge(F16, actual, 0.2, layout=layout))


def test_out_of_bounds_write_is_found_even_when_values_match() -> None:
    exact = ref.leaky_relu(F16, 0.2)
    written = [-2, -1, F16.size, F16.size + 5]
    hazards = tuple(Hazard("out-of-bounds-write", i, (3,)) for i in written)
    row = judge(F16, exact, 0.2, hazards=hazards)
    assert counts(row) == {"out-of-bounds-write": len(written)}
    assert row.verdict == "fail" and row.findings[0].detail["before"] == 2


def test_write_race_counts_raced_elements_and_explains_their_mismatches() -> None:
    exact = ref.leaky_relu(F16, 0.2)
    raced = np.arange(1000, 1016)
    wrong = raced[::2]
    actual = _edit(exact, wrong, lambda v: from_bits(to_bits(v) ^ 0x0300, v.dtype))
    hazards = tuple(Hazard("write-race", int(i), (0, 1)) for i in raced)
    row = judge(F16, actual, 0.2, hazards=hazards)
    assert counts(row) == {"write-race": raced.size}
    assert row.findings[0].detail["mismatching"] == differs(actual, exact)


def test_rejected_input_is_one_finding_over_every_element() -> None:
    result = BackendResult(None, rejected="alpha must be >= 0 when the result is reused")
    row = evaluate(F16, -0.5, result, direction="forward", backend="cann", config=CONFIG)
    assert counts(row) == {"rejected-input": F16.size}
    assert row.verdict == "fail"


def test_each_mismatch_gets_exactly_one_category_when_defects_mix() -> None:
    exact = ref.leaky_relu(F16, 0.2, slope_dtype="float16")
    normal = _finite_normal(exact)
    actual = _edit(exact, normal[::53], lambda v: from_bits(to_bits(v) ^ 0x0100, v.dtype))
    actual = _edit(actual, normal[7::211], lambda v: np.full_like(v, np.nan))
    row = judge(F16, actual, 0.2)
    assert sum(counts(row).values()) == row.metrics.mismatches
    assert set(counts(row)) == {"alpha-precision", "spurious-nan", "unexplained"}


# ----------------------------------------------------------------------------- real frameworks

def test_tensorflow_fp16_alpha_02_is_all_alpha_precision() -> None:
    tf = tensorflow()
    actual = tf.nn.leaky_relu(tf.constant(F16), alpha=0.2).numpy()
    row = judge(F16, actual, 0.2, backend="tensorflow")
    assert row.metrics.mismatches > 0
    assert counts(row) == {"alpha-precision": row.metrics.mismatches}
    assert row.verdict == "warn"


def test_tensorflow_float32_random_bits_flushes_subnormals() -> None:
    tf = tensorflow()
    x = np.random.default_rng(3).integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
    x = x.view(np.float32)
    actual = tf.nn.leaky_relu(tf.constant(x), alpha=0.01).numpy()
    exact = ref.leaky_relu(x, 0.01)
    tiny = is_subnormal(x) | is_subnormal(exact)
    flushed = int((tiny & ~match_mask(actual, exact)).sum())
    slope32 = int((~tiny & ~match_mask(ref.leaky_relu(x, 0.01, slope_dtype="float32"), exact)).sum())
    row = judge(x, actual, 0.01, backend="tensorflow")
    found = counts(row)
    assert flushed > 0 and found["subnormal-flush"] == flushed
    assert found == {"subnormal-flush": flushed, "alpha-precision": slope32} and row.verdict == "warn"


def test_torch_fp16_alpha_001_is_only_rounding() -> None:
    import torch

    actual = from_torch(torch.nn.functional.leaky_relu(to_torch(F16), 0.01), "float16")
    exact = ref.leaky_relu(F16, 0.01)
    expected = differs(ref.leaky_relu(F16, 0.01, opmath="float32"), exact)
    row = judge(F16, actual, 0.01, backend="torch")
    assert expected > 0
    assert counts(row) == {"rounding": expected}


# ----------------------------------------------------------------------------- seeded kernel variants

EDGES = np.array([-1e6, 1e6, -7e4, 7e4, -65504, -6000, np.inf, 0.0, -np.inf, np.nan, -0.0,
                  1e-40, -1e-40], dtype=np.float32)


def _variant_inputs(src: str) -> np.ndarray:
    """All 16-bit patterns, or float32 random bits plus the docs/domain.md edges."""
    if src != "float32":
        return all_patterns(src)
    bits = np.random.default_rng(11).integers(0, 2 ** 32, 30000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bits.view(np.float32), EDGES])


def _variant_dy(x: np.ndarray) -> np.ndarray:
    """Moderate finite gradients (so every rule of x shows in dx), every third one
    taken from a shuffle of x (so NaN, inf and subnormal gradients occur too)."""
    rng = np.random.default_rng(5)
    dy = rng.uniform(-4, 4, x.size).astype(x.dtype)
    dy[::3] = rng.permutation(x)[::3]
    with np.errstate(over="ignore"):  # 1e6 is inf in 16-bit dtypes, on purpose
        dy[-EDGES.size:] = EDGES[::-1].astype(x.dtype)  # x = inf meets dy = inf, x = 0 meets dy = 0
    return dy


def _variant_params():
    for name, v in VARIANTS.items():
        for pair in v.dtypes:
            for direction in v.directions:
                yield pytest.param(name, pair, direction, id=f"{name}-{pair}-{direction}")


@pytest.mark.parametrize("name,pair,direction", list(_variant_params()))
def test_seeded_kernel_variant_is_caught_and_named(name: str, pair: str, direction: str) -> None:
    src, _, out = pair.partition("->")
    out = out or src
    x = _variant_inputs(src)
    dy = _variant_dy(x) if direction == "backward" else None
    backend = CannBackend(variant=name)
    result = backend.forward(x, 0.2, out_dtype=out) if dy is None else backend.backward(dy, x, 0.2, out_dtype=out)
    row = evaluate(x, 0.2, result, direction=direction, dy=dy, out_dtype=out, backend="cann",
                   variant=name, config=CONFIG)
    expected = set(VARIANTS[name].expected)
    if not expected:  # float32 opmath: 1-ULP residue, proved as the float32 slope where it is one
        assert row.verdict != "fail" and set(counts(row)) <= {"rounding", "alpha-precision"}, row.message
        assert all(f.allowed for f in row.findings), row.message
    else:
        assert row.verdict != "pass" and expected & set(counts(row)), row.message
        assert "unexplained" not in counts(row), row.message


def fp16_normal_float32(n: int, *, seed: int) -> np.ndarray:
    """float32 values of both signs whose magnitudes stay inside fp16's normal range."""
    rng = np.random.default_rng(seed)
    mags = np.ldexp(rng.uniform(1.0, 2.0, n), rng.integers(-14, 15, n))
    return (mags * rng.choice([-1.0, 1.0], n)).astype(np.float32)


@pytest.mark.parametrize("narrow", ("float16", "bfloat16"))
def test_inputs_narrowed_before_computing_are_input_precision(narrow: str) -> None:
    x = fp16_normal_float32(20_000, seed=11)
    actual = ref.leaky_relu(x, 0.3, input_dtype=narrow)
    expected = differs(actual, ref.leaky_relu(x, 0.3))
    assert expected > 0
    row = judge(x, actual, 0.3)
    assert counts(row) == {"input-precision": expected}
    assert narrow in row.findings[0].summary


def test_operands_that_overflow_when_narrowed_stay_overflow() -> None:
    x = np.concatenate([fp16_normal_float32(1_000, seed=12), np.float32([7e4, -9e4, 1e6])])
    actual = ref.leaky_relu(x, 1.0, input_dtype="float16")
    golden = ref.leaky_relu(x, 1.0)
    beyond = int((np.abs(x) > info("float16").max).sum())
    found = counts(judge(x, actual, 1.0))
    assert found["overflow"] == beyond
    assert found["input-precision"] == differs(actual, golden) - beyond
