"""The catalogue: golden variants, framework slopes, seeded kernel variants, narrowed inputs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import ml_dtypes
import numpy as np
import pytest

from conformance.dtypes import all_patterns, is_subnormal
from conformance.frameworks.tensorflow_backend import tensorflow
from conformance.judge.evaluate import evaluate
from conformance.metrics.exact import match_mask
from conformance.npu_impl.backend import CannBackend
from conformance.npu_impl.variants import VARIANTS
from conformance.reference import golden as ref
from conformance.reference.semantics import EXACT, Semantics
from conformance.render.messages import failure_message
from tests.helpers import CONFIG, F16, counts, differs, from_torch, judge, rotation, sampled, to_torch


@dataclass(frozen=True)
class VariantCase:
    """A defect made by recomputing golden under another rule."""

    category: str
    dtype: str
    alpha: float
    rule: Semantics
    direction: str = "forward"
    wrong_alpha: Optional[float] = None

    def __str__(self) -> str:
        return f"{self.category}-{self.dtype}-{self.direction}-a{self.alpha}"


VARIANT_CASES = [
    VariantCase("alpha-mismatch", "float16", 0.2, EXACT, wrong_alpha=0.01),
    VariantCase("alpha-mismatch", "bfloat16", 0.01, EXACT, wrong_alpha=0.0),
    VariantCase("alpha-mismatch", "float16", 0.01, EXACT, "backward", wrong_alpha=0.3),
    VariantCase("alpha-precision", "float16", 0.2, Semantics(slope_dtype="float16")),
    VariantCase("alpha-precision", "bfloat16", 0.3, Semantics(slope_dtype="bfloat16"), "backward"),
    VariantCase("subnormal-flush", "float16", 1.0, Semantics(daz=True, ftz=True)),
    VariantCase("subnormal-flush", "bfloat16", 0.5, Semantics(daz=True, ftz=True), "backward"),
    VariantCase("saturation", "float16", 1.5, Semantics(saturate=True)),
    VariantCase("saturation", "bfloat16", 0.2, Semantics(saturate=True)),
    VariantCase("grad-at-zero", "float16", 0.2, Semantics(grad_rule="ge"), "backward"),
    VariantCase("nan-gradient", "float16", 0.2, Semantics(nan_grad="zero"), "backward"),
    VariantCase("nan-gradient", "bfloat16", 0.3, Semantics(nan_grad="dy"), "backward"),
]


def _inputs(case: VariantCase) -> tuple[np.ndarray, Optional[np.ndarray]]:
    x = all_patterns(case.dtype)
    dy = np.random.default_rng(7).permutation(x) if case.direction == "backward" else None
    return x, dy


def _variant(case: VariantCase, x: np.ndarray, dy: Optional[np.ndarray]) -> np.ndarray:
    alpha = case.wrong_alpha if case.wrong_alpha is not None else case.alpha
    return ref.compute(case.direction, x, alpha, dy=dy, semantics=case.rule)


@pytest.mark.parametrize("case", VARIANT_CASES, ids=str)
def test_golden_variant_is_named_with_its_exact_count(case: VariantCase) -> None:
    x, dy = _inputs(case)
    actual = _variant(case, x, dy)
    exact = ref.forward(x, case.alpha) if dy is None else ref.backward(dy, x, case.alpha)
    expected = differs(actual, exact)
    assert expected > 0, "the defect must change something"
    row = judge(x, actual, case.alpha, direction=case.direction, dy=dy)
    assert counts(row) == {case.category: expected}
    assert row.metrics.mismatches == expected


def test_alpha_mismatch_reports_effective_alpha_and_frameworks() -> None:
    row = judge(F16, ref.forward(F16, 0.01), 0.2)
    (finding,) = row.findings
    assert finding.detail["effective_alpha"] == 0.01
    assert {"torch", "ONNX", "JAX", "Paddle"} <= set(finding.detail["default_of"])
    assert "0.01" in finding.summary and row.verdict == "fail"


def test_alpha_mismatch_to_cann_default_zero() -> None:
    row = judge(F16, ref.forward(F16, 0.0), 0.2)
    (finding,) = row.findings
    assert finding.detail["effective_alpha"] == 0.0
    assert finding.detail["default_of"] == ["CANN"]


def test_alpha_precision_summary_names_the_rounded_slope() -> None:
    row = judge(F16, ref.forward(F16, 0.2, semantics=Semantics(slope_dtype="float16")), 0.2)
    assert row.findings[0].summary == "slope rounded to float16 (0.199951171875) before multiplying"


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
    exact = ref.forward(x, 0.01)
    tiny = is_subnormal(x) | is_subnormal(exact)
    flushed = int((tiny & ~match_mask(actual, exact)).sum())
    slope32 = int((~tiny & ~match_mask(ref.forward(x, 0.01, semantics=Semantics(slope_dtype="float32")), exact)).sum())
    row = judge(x, actual, 0.01, backend="tensorflow")
    found = counts(row)
    assert flushed > 0 and found["subnormal-flush"] == flushed
    assert found == {"subnormal-flush": flushed, "alpha-precision": slope32} and row.verdict == "warn"


def test_torch_fp16_alpha_001_is_only_rounding() -> None:
    import torch

    actual = from_torch(torch.nn.functional.leaky_relu(to_torch(F16), 0.01), "float16")
    exact = ref.forward(F16, 0.01)
    expected = differs(ref.forward(F16, 0.01, semantics=Semantics(opmath="float32")), exact)
    row = judge(F16, actual, 0.01, backend="torch")
    assert expected > 0
    assert counts(row) == {"rounding": expected}


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


#: Every seeded variant in each direction it runs, on each dtype pair it takes; by default on one
#: of its pairs, the pairs in turn (every pair has a share), the others under `make test-exhaustive`.
VARIANT_CASES = [(name, pair, direction) for name, v in VARIANTS.items() for pair in v.dtypes
                 for direction in v.directions]
_PAIRS = list(dict.fromkeys(pair for _, pair, _ in VARIANT_CASES))
_PAIR_IN_TURN = rotation([f"{name} {direction}" for name, v in VARIANTS.items() for direction in v.directions],
                         _PAIRS, fits=lambda pair, key: pair in VARIANTS[key.split()[0]].dtypes)


def _kept(name: str, pair: str, direction: str) -> bool:
    return _PAIR_IN_TURN(pair, f"{name} {direction}")


def test_the_default_run_takes_every_variant_direction_and_pair() -> None:
    kept = [case for case in VARIANT_CASES if _kept(*case)]
    assert {(n, d) for n, _, d in kept} == {(n, d) for n, _, d in VARIANT_CASES}
    assert {p for _, p, _ in kept} == set(_PAIRS) and len(kept) < len(VARIANT_CASES) / 3


@pytest.mark.parametrize("name,pair,direction", sampled(VARIANT_CASES, default=_kept),
                         ids=["-".join(case) for case in VARIANT_CASES])
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
        assert row.verdict != "fail" and set(counts(row)) <= {"rounding", "alpha-precision"}, failure_message(row)
        assert all(not f.gated for f in row.findings), failure_message(row)
    else:
        assert row.verdict != "pass" and expected & set(counts(row)), failure_message(row)
        assert "unexplained" not in counts(row), failure_message(row)


def fp16_normal_float32(n: int, *, seed: int) -> np.ndarray:
    """float32 values of both signs whose magnitudes stay inside fp16's normal range."""
    rng = np.random.default_rng(seed)
    mags = np.ldexp(rng.uniform(1.0, 2.0, n), rng.integers(-14, 15, n))
    return (mags * rng.choice([-1.0, 1.0], n)).astype(np.float32)


@pytest.mark.parametrize("narrow", ("float16", "bfloat16"))
def test_inputs_narrowed_before_computing_are_input_precision(narrow: str) -> None:
    x = fp16_normal_float32(20_000, seed=11)
    actual = ref.forward(x, 0.3, semantics=Semantics(input_dtype=narrow))
    expected = differs(actual, ref.forward(x, 0.3))
    assert expected > 0
    row = judge(x, actual, 0.3)
    assert counts(row) == {"input-precision": expected}
    assert narrow in row.findings[0].summary


def test_a_bfloat16_slope_in_an_fp16_kernel_is_alpha_precision() -> None:
    """A kernel templated on a bfloat16 scalar: fp16 data, the slope held as bf16, float32 math."""
    slope = np.float32(ml_dtypes.bfloat16(0.2))
    with np.errstate(all="ignore"):
        actual = np.where(F16 > 0, F16, (F16.astype(np.float32) * slope).astype(np.float16))
    row = judge(F16, actual, 0.2)
    assert counts(row) == {"alpha-precision": differs(actual, ref.forward(F16, 0.2))}
    assert "bfloat16" in row.findings[0].summary


def test_infinities_clamped_while_nan_is_kept_is_saturation_of_the_infinities() -> None:
    """A saturating cast or clamp: ±inf become ±65504, NaN stays NaN."""
    exact = ref.forward(F16, 0.2)
    actual = np.clip(exact, np.float16(-65504), np.float16(65504))
    row = judge(F16, actual, 0.2)
    assert counts(row) == {"saturation": differs(actual, exact)}
    assert "NaN kept" in row.findings[0].summary


def test_gradients_read_with_subnormal_dy_flushed_on_both_sides_are_subnormal_flush() -> None:
    """A backward kernel that flushes subnormal dy as it loads it (the pass-through side too),
    and keeps its results."""
    dy = np.random.default_rng(3).permutation(F16)
    w = dy.astype(np.float64)
    read = np.where((np.abs(w) < 2.0 ** -14) & (w != 0), np.copysign(np.float16(0), dy), dy)
    with np.errstate(all="ignore"):
        actual = np.where(F16 > 0, read, (read.astype(np.float32) * np.float32(0.2)).astype(np.float16))
    row = judge(F16, actual, 0.2, direction="backward", dy=dy)
    assert counts(row) == {"subnormal-flush": differs(actual, ref.backward(dy, F16, 0.2))}
