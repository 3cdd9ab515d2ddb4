"""The golden reference against exact rational arithmetic (``tests/exact_oracle.py``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from conformance.dtypes import all_patterns, from_bits, info, to_bits
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from tests.exact_oracle import exact_backward, exact_leaky_relu, exact_round, exact_round_array, exact_scale
from tests.helpers import assert_same_bits

ALPHAS = (0.0, 0.01, 0.1, 0.2, 0.3, 1 / 3, 1.0, 1.5)


@dataclass(frozen=True)
class Sweep:
    """One exhaustive sweep: every pattern of ``dtype`` into ``out_dtype`` at ``alpha``."""

    dtype: str
    out_dtype: str
    alpha: float

    def __str__(self) -> str:
        arrow = self.dtype if self.dtype == self.out_dtype else f"{self.dtype}->{self.out_dtype}"
        return f"{arrow}-alpha={self.alpha:.6g}"


SWEEPS = [Sweep(d, d, a) for d in ("float16", "bfloat16") for a in ALPHAS] + [
    Sweep(d, "float32", a) for d in ("float16", "bfloat16") for a in (0.01, 0.3, 1 / 3, 1.5)
]


@pytest.mark.parametrize("sweep", SWEEPS, ids=str)
def test_all_16bit_patterns_match_exact_arithmetic(sweep: Sweep) -> None:
    x = all_patterns(sweep.dtype)
    expected = exact_leaky_relu(x, sweep.alpha, out_dtype=sweep.out_dtype)
    actual = golden.forward(x, sweep.alpha, out_dtype=sweep.out_dtype)
    assert actual.dtype == info(sweep.out_dtype).dtype
    assert_same_bits(actual, expected, what=str(sweep))


def float32_cases(n: int, *, seed: int) -> np.ndarray:
    """``n`` random float32 bit patterns plus the float32 edge values."""
    rec = info("float32")
    bits = np.random.default_rng(seed).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0.0, -0.0, rec.smallest_subnormal, -rec.smallest_subnormal, rec.smallest_normal,
                      -rec.smallest_normal, rec.max, -rec.max, np.inf, -np.inf, np.nan, 1.0, -1.0,
                      -(2.0 ** -126 - 2.0 ** -149)], dtype=np.float32)
    return np.concatenate([bits.view(np.float32), edges])


@pytest.mark.parametrize("alpha,n", ((0.01, 200_000), (1 / 3, 200_000), (1.5, 50_000), (-0.7, 50_000)),
                         ids=lambda v: f"{v:.6g}")
def test_random_float32_matches_exact_arithmetic(alpha: float, n: int) -> None:
    x = float32_cases(n, seed=7)
    assert_same_bits(golden.forward(x, alpha), exact_leaky_relu(x, alpha, out_dtype="float32"),
                     what=f"float32 alpha={alpha}")


def fp16_range_float32(n: int, *, seed: int) -> np.ndarray:
    """float32 values whose magnitudes span the fp16 subnormal-to-overflow range, both signs."""
    rng = np.random.default_rng(seed)
    exponents = rng.integers(-28, 18, n)
    significands = rng.integers(1 << 23, 1 << 24, n)
    signs = rng.choice([-1.0, 1.0], n)
    return (signs * np.ldexp(significands.astype(np.float64), exponents - 23)).astype(np.float32)


@pytest.mark.parametrize("out_dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("alpha", (0.01, 0.3, 1.5), ids=lambda a: f"alpha={a:g}")
def test_float32_to_narrow_matches_exact_arithmetic(out_dtype: str, alpha: float) -> None:
    x = np.concatenate([fp16_range_float32(30_000, seed=3), float32_cases(10_000, seed=4)])
    assert_same_bits(golden.forward(x, alpha, out_dtype=out_dtype),
                     exact_leaky_relu(x, alpha, out_dtype=out_dtype), what=f"float32->{out_dtype}")


EDGE_DY = (0.0, -0.0, 1.0, -1.0, 3.0e-8, -6.0e-8, 65504.0, -65504.0, 1.0e-3, np.inf, -np.inf, np.nan)


@pytest.mark.parametrize("dtype", ("float16", "bfloat16", "float32"))
@pytest.mark.parametrize("alpha", (0.0, 0.2, 1 / 3, 1.5), ids=lambda a: f"alpha={a:.6g}")
def test_backward_matches_exact_arithmetic(dtype: str, alpha: float) -> None:
    x_values = np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 1e-40, -1e-40, -2.5], dtype=np.float64)
    xs, dys = np.meshgrid(x_values, np.array(EDGE_DY), indexing="ij")
    rec = info(dtype)
    x, dy = golden.round_float64(xs.ravel(), rec), golden.round_float64(dys.ravel(), rec)
    assert_same_bits(golden.backward(dy, x, alpha), exact_backward(dy, x, alpha, out_dtype=dtype),
                     what=f"backward {dtype}")


def test_backward_on_all_fp16_dy_patterns() -> None:
    dy = all_patterns("float16")
    x = np.resize(np.array([-1.0, 0.0, -0.0, np.nan, 2.0], dtype=np.float16), dy.size)
    assert_same_bits(golden.backward(dy, x, 0.3), exact_backward(dy, x, 0.3, out_dtype="float16"),
                     what="backward fp16 all dy")


def test_named_vector_fp16_half_way_case() -> None:
    x = from_bits([0x8005], "float16")
    naive = (x.astype(np.float64) * 0.3).astype(np.float16)
    assert to_bits(naive)[0] == 0x8002  # the trap the reference must avoid
    assert to_bits(golden.forward(x, 0.3))[0] == 0x8001


def test_named_vector_bf16_single_rounding() -> None:
    v = np.array([1 + 2.0 ** -8 + 2.0 ** -30])
    assert float(golden.round_float64(v, info("bfloat16"))[0]) == 1.0078125
    assert float(v.astype(info("bfloat16").dtype)[0]) == 1.0  # ml_dtypes rounds twice


@dataclass(frozen=True)
class Special:
    """A special-value rule: ``leaky_relu(x, alpha) -> expected`` in ``dtype``."""

    dtype: str
    x: float
    alpha: float
    expected: float

    def __str__(self) -> str:
        return f"leaky_relu(x={self.x!r}, alpha={self.alpha}) -> {self.expected!r} [{self.dtype}]"


SPECIALS = [
    Special("float16", np.nan, 0.2, np.nan), Special("float16", np.inf, 0.2, np.inf),
    Special("float16", -np.inf, 0.2, -np.inf), Special("float16", -np.inf, 0.0, np.nan),
    Special("float16", -np.inf, -0.5, np.inf), Special("float16", -0.0, 0.2, -0.0),
    Special("float16", -0.0, -0.2, 0.0), Special("float16", -65504.0, 1.5, -np.inf),
    Special("bfloat16", -3.0, 0.0, -0.0), Special("float32", -1e-45, 0.01, -0.0),
    Special("float64", -1.0, 1e300, -1e300),
]


@pytest.mark.parametrize("case", SPECIALS, ids=str)
def test_special_values(case: Special) -> None:
    rec = info(case.dtype)
    y = golden.forward(golden.round_float64(np.array([case.x]), rec), case.alpha).astype(np.float64)[0]
    if np.isnan(case.expected):
        assert np.isnan(y)
    else:
        assert y == case.expected and np.signbit(y) == np.signbit(case.expected)


def _bf16_midpoints() -> np.ndarray:
    """Exact bf16 midpoints and their float64 neighbours, the hard cases of bf16 rounding."""
    base = all_patterns("bfloat16").astype(np.float64)
    base = base[np.isfinite(base)]
    mids = (base[:-1] + base[1:]) / 2
    probes = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)])
    return probes[np.isfinite(probes)]


def test_round_float64_matches_oracle_on_bf16_midpoints() -> None:
    probes = _bf16_midpoints()
    expected = exact_round_array(probes, info("bfloat16")).astype(info("bfloat16").dtype)
    assert_same_bits(golden.round_float64(probes, info("bfloat16")), expected, what="bf16 midpoints")


def _one_at_a_time(v: np.ndarray, alpha: float, out: str) -> np.ndarray:
    """The element-at-a-time oracle's ``leaky_relu`` of float64 ``v``, as float64."""
    rec = info(out)
    return np.array([exact_round(t, rec) if t > 0 else exact_scale(t, alpha, rec) for t in v.tolist()])


@pytest.mark.parametrize(("src", "alpha", "out"), [("float16", 0.3, "float16"), ("bfloat16", 1 / 3, "bfloat16"),
                                                   ("float16", -0.7, "float32"), ("float32", 0.01, "float16"),
                                                   ("float32", 1e-30, "float32"), ("float32", 1.5, "float32")])
def test_the_array_oracle_is_the_element_at_a_time_oracle(src: str, alpha: float, out: str) -> None:
    """The oracle's integer-array form against its plain-integer form: products on an output
    midpoint (fp16 at 0.3), long significands, underflow, overflow, both zeros, inf and NaN."""
    x = all_patterns(src) if src != "float32" else float32_cases(20_000, seed=9)
    v = x.astype(np.float64)
    expected = _one_at_a_time(v, alpha, out).astype(info(out).dtype)
    assert_same_bits(exact_leaky_relu(x, alpha, out_dtype=out), expected, what=f"{src}->{out} alpha={alpha}")


def test_the_array_rounding_is_the_element_at_a_time_rounding() -> None:
    rng = np.random.default_rng(11)
    v = np.concatenate([_bf16_midpoints()[::7], rng.standard_normal(5_000) * 2.0 ** rng.integers(-160, 160, 5_000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e308, -5e-324, 65520.0, -65519.99]])
    for out in ("bfloat16", "float16", "float32"):
        rec = info(out)
        expected = np.array([exact_round(t, rec) for t in v.tolist()])
        assert_same_bits(exact_round_array(v, rec), expected, what=f"rounding to {out}")


def test_the_array_oracle_refuses_operands_it_cannot_multiply_exactly() -> None:
    with pytest.raises(ValueError, match="at most 24 bits"):
        exact_leaky_relu(np.array([-(1 + 2.0 ** -40)]), 0.3, out_dtype="float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("semantics", [Semantics(), Semantics(slope_dtype="float16"), Semantics(daz=True, ftz=True),
                                       Semantics(formulation="max_or_min", nan_operand="x"), Semantics(saturate=True)],
                         ids=str)
def test_a_large_16_bit_forward_read_from_the_pattern_table_is_the_numpy_golden(dtype: str, semantics) -> None:
    from conformance import jit

    x = np.random.default_rng(2).integers(0, 1 << 16, golden.TABLE_MIN + 77, dtype=np.uint16).view(info(dtype).dtype)
    x = x.reshape(-1, 7) if x.size % 7 == 0 else x
    assert golden._tabled(x) == jit.enabled()
    for alpha in (0.2, 0.01, -0.5, 1.5):
        for out in (None, "float32"):
            got = golden.compute("forward", x, alpha, out_dtype=out, semantics=semantics)
            want = golden.reference_compute("forward", x, alpha, out_dtype=out, semantics=semantics)
            assert got.shape == x.shape and got.dtype == want.dtype
            assert np.array_equal(to_bits(got), to_bits(want)), (alpha, out)
