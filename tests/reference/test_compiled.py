"""The compiled golden loop, ULP distance and metric pass reproduce the numpy paths bit for bit.

Every 16-bit pattern (float16 and bfloat16 as input), edge and random float32/float64
bit patterns (subnormals, both zeros, NaN payloads, infinities, huge values, and every
16-bit value widened, which puts products on the output's rounding midpoints), every
supported dtype pair, forward and backward, every slope class and every variant the
compiled loop covers.  Variants it does not cover go to the numpy path.

The variants' proofs run every variant on every dtype pair; of their slopes the default run
keeps one per variant and pair, in turn (:func:`_slopes_in_turn`), and ``make test-exhaustive``
the others.  The loop's code is chosen by the variant and the dtype pair, which the sample
keeps whole; a slope only changes its operand, and each slope class (a negative slope, one
whose products underflow, a long significand) still meets every variant on two or more pairs
and every pair on several variants, so a variant or a pair the loop computes wrongly for some
slope class fails the default run.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from conformance.dtypes import all_patterns, info, to_bits, ulp_distance
from conformance.metrics.exact import compare
from conformance.records import Tolerance
from conformance.reference import golden
from conformance.reference.exact import SUPPORTED_PAIRS, narrowed_by_formula
from conformance.reference.semantics import _CHOICES, Semantics
from tests.helpers import sampled

compiled = pytest.importorskip("conformance.reference.compiled", reason="numba (the fast extra) is not installed")

#: 0.3: a product on an fp16 midpoint; -3e38, 1e-40 and 1e300: slopes no float32 holds, whose products
#: overflow or underflow (5e-324: a subnormal slope)
ALPHAS = (0.0, 1.0, -0.5, 1.5, 1 / 3, 1e-30, 5e-324, 0.2, 0.3, -3e38, 1e-40, 1e300)
#: Variants (the exact golden is proved at every slope by test_forward/backward_matches_the_numpy_path).
COVERED = (Semantics(predicate="ge"), Semantics(slope=0.3), Semantics(slope_dtype="float16"),
           Semantics(slope_dtype=("float32", "bfloat16")), Semantics(grad_rule="ge"), Semantics(nan_grad="dy"),
           Semantics(grad_rule="ge", nan_grad="dy", slope_dtype="float32"), Semantics(daz=True), Semantics(ftz=True),
           Semantics(daz=True, ftz=True, slope_dtype=("float32", "bfloat16")),
           Semantics(daz=True, ftz=True, predicate="ge", grad_rule="ge"),
           Semantics(formulation="scale", nan_grad="dy"),
           # applied around the loop: flushes on every read and of the result, narrowed operands
           Semantics(flush_inputs=True), Semantics(daz=True, ftz=True, flush_output=True),
           Semantics(daz=True, ftz=True, flush_output=True, flush_inputs=True),
           Semantics(input_dtype="float16"), Semantics(input_dtype="bfloat16", daz=True, ftz=True),
           Semantics(input_dtype="float32", slope_dtype="float32"),
           # saturation, the opmath product, dx at x = NaN and the branch sum, in the loop
           Semantics(saturate=True), Semantics(saturate="inf", daz=True),
           Semantics(saturate=True, saturate_inputs=True), Semantics(saturate_inputs=True, input_dtype="float16"),
           Semantics(opmath="float32"),
           Semantics(opmath="float16", input_dtype="float16"), Semantics(opmath="bfloat16", daz=True),
           Semantics(opmath="float32", slope_dtype="float16", saturate="inf"), Semantics(nan_grad="zero"),
           Semantics(nan_grad="dy*0", opmath="float32"), Semantics(nan_grad="nan", saturate="inf"),
           Semantics(nan_grad="nan", saturate=True), Semantics(grad_form="sum"),
           Semantics(grad_form="sum", daz=True, ftz=True, nan_grad="dy*0"),
           Semantics(grad_form="sum", nan_grad="dy", saturate=True, slope_dtype="bfloat16"),
           # an opmath product flushed, a directed final conversion (a float64 input refuses it)
           Semantics(opmath="float32", ftz=True), Semantics(opmath="bfloat16", daz=True, ftz=True),
           Semantics(opmath="float16", ftz=True, input_dtype="float16"), Semantics(rounding="rtz"),
           Semantics(rounding="rna"), Semantics(rounding="rtz", opmath="float32", daz=True, ftz=True),
           Semantics(rounding="rna", opmath="bfloat16", saturate=True),
           Semantics(rounding="rtz", grad_form="sum", nan_grad="dy", saturate="inf"),
           Semantics(rounding="rna", nan_grad="zero", daz=True, predicate="ge", grad_rule="ge"),
           # the gradient of max: every step rounded (and flushed), with the other gradient settings
           Semantics(grad_rule="max"), Semantics(grad_rule="max", daz=True, ftz=True),
           Semantics(grad_rule="max", grad_form="sum", opmath="float32", ftz=True),
           Semantics(grad_rule="max", rounding="rtz", saturate=True, nan_grad="dy*0"),
           Semantics(grad_rule="max", input_dtype="bfloat16", daz=True, nan_grad="dy"),
           # the fused branch sum
           Semantics(grad_form="fma"), Semantics(grad_form="fma", daz=True, ftz=True, grad_rule="ge"),
           Semantics(grad_form="fma", rounding="rtz", opmath="bfloat16", nan_grad="dy*0", saturate=True),
           # the result rounded to result_dtype, then converted to the output dtype, after every other setting
           Semantics(result_dtype="float16"), Semantics(result_dtype="bfloat16", opmath="float32", ftz=True),
           Semantics(result_dtype="bfloat16", input_dtype="bfloat16", flush_inputs=True, flush_output=True),
           Semantics(result_dtype="float16", saturate_inputs=True, daz=True, ftz=True, grad_rule="max"),
           # the gradient selected on the result, and the step function of a positive subnormal x
           Semantics(grad_rule="result"),
           Semantics(grad_rule="result", daz=True, ftz=True, nan_grad="dy", saturate=True),
           Semantics(grad_rule="result", slope_dtype="float16", grad_form="fma", rounding="rna"),
           Semantics(grad_rule="step"), Semantics(grad_rule="step", grad_form="sum", opmath="float32", rounding="rtz"),
           Semantics(grad_rule="step", nan_grad="dy*0", input_dtype="float16", daz=True, result_dtype="bfloat16"))
#: Forward formulations the compiled loop covers (the backward computes them as its select).
FORWARD_FORMULATIONS = (Semantics(formulation="relu"), Semantics(formulation="relu", saturate=True),
                        Semantics(formulation="max"), Semantics(formulation="min", daz=True, ftz=True),
                        Semantics(formulation="max_or_min"), Semantics(formulation="max_or_min", nan_operand="x"),
                        Semantics(formulation="max", nan_operand="x", daz=True, opmath="float32"),
                        Semantics(formulation="merge", predicate="ge"),
                        Semantics(formulation="merge", opmath="float16", saturate=True, daz=True),
                        Semantics(formulation="max", rounding="rtz"),
                        Semantics(formulation="relu", rounding="rna", saturate="inf"),
                        Semantics(formulation="merge", rounding="rtz", opmath="float32", ftz=True),
                        Semantics(formulation="scale", rounding="rna", daz=True),
                        # the select applied to its own (unsaturated) result
                        Semantics(formulation="twice"),
                        Semantics(formulation="twice", daz=True, ftz=True, saturate=True),
                        Semantics(formulation="twice", rounding="rtz", opmath="float32", flush_output=True),
                        Semantics(formulation="twice", result_dtype="float16", slope_dtype="float16",
                                  input_dtype="bfloat16", saturate_inputs=True),
                        # max(x,0) + a*min(x,0) and x*m + a*x*(1-m): their zero terms, NaN and inf*0
                        Semantics(formulation="maxmin"),
                        Semantics(formulation="maxmin", daz=True, ftz=True, saturate=True),
                        Semantics(formulation="maxmin", opmath="bfloat16", rounding="rna", saturate="inf"),
                        Semantics(formulation="mask-multiply"),
                        Semantics(formulation="mask-multiply", opmath="bfloat16", ftz=True, flush_inputs=True),
                        Semantics(formulation="mask-multiply", opmath="float16", daz=True, ftz=True, predicate="ge"),
                        Semantics(formulation="mask-multiply", opmath="float32", rounding="rtz", saturate=True))
#: Backward formulations the compiled loop covers (the forward-only ones are its select).
BACKWARD_ONLY = (Semantics(formulation="swap_branches", nan_grad="dy"), Semantics(formulation="swap_operands"),
                 Semantics(formulation="max", daz=True), Semantics(formulation="merge", grad_rule="ge"),
                 Semantics(formulation="swap_operands", rounding="rtz", grad_form="sum"),
                 Semantics(formulation="swap_branches", rounding="rna", opmath="float32"),
                 Semantics(formulation="swap_operands", grad_rule="max", grad_form="sum", daz=True, ftz=True),
                 Semantics(formulation="swap_branches", grad_rule="result", slope_dtype="float16"),
                 Semantics(formulation="swap_operands", grad_rule="step"),
                 Semantics(formulation="scale", grad_rule="step", saturate="inf"))
PAIRS = sorted(SUPPORTED_PAIRS)
RELU = (Semantics(formulation="relu"), Semantics(formulation="relu", grad_rule="step"))  # backward: numpy


def _edges(name: str) -> np.ndarray:
    """Edge bit patterns of a 32/64-bit dtype, every 16-bit value widened, and random bits."""
    rec = info(name)
    m, top = rec.mant_bits, (1 << rec.exp_bits) - 1
    specials = [0, 1, 2, 3, rec.mant_mask, 1 << m, (1 << m) + 1, rec.exp_mask - 1, rec.exp_mask,
                rec.exp_mask | 1, rec.exp_mask | (1 << (m - 1)), rec.exp_mask | rec.mant_mask,
                rec.exp_mask | (1 << (m - 2)) | 5, (top - 1) << m, ((top - 1) << m) | rec.mant_mask,
                (rec.bias << m), (rec.bias << m) | 1, (2 << m) - 1, (2 << m) - 2, (2 << m) + 1, (4 << m) - 1]
    bits = np.array(specials, dtype=np.uint64)
    bits = np.concatenate([bits, bits | np.uint64(rec.sign_mask)]).astype(rec.uint)
    widened = [all_patterns(d).astype(np.float64).astype(rec.dtype) for d in ("float16", "bfloat16")]
    random = np.random.default_rng(7).integers(0, 1 << rec.bits, 1 << 15, dtype=np.uint64).astype(rec.uint)
    with np.errstate(invalid="ignore"):
        return np.concatenate([bits.view(rec.dtype), *widened, random.view(rec.dtype)])


def _inputs(name: str) -> np.ndarray:
    return all_patterns(name) if info(name).bits == 16 else _edges(name)


def _operand_sets(x: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(dy, x) pairs that send every dy pattern down both branches, NaN x included."""
    flipped = (to_bits(x) ^ np.array(info(x.dtype).sign_mask, dtype=to_bits(x).dtype)).view(x.dtype)
    return [(x, x), (x, flipped), (x, x[::-1].copy())]


def _same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    differ = np.flatnonzero(to_bits(a).ravel() != to_bits(b).ravel())
    assert differ.size == 0, f"{differ.size} elements differ, first at {differ[:5]}"


def _agrees(direction: str, x: np.ndarray, alpha: float, *, dy=None, out: str, semantics: Semantics) -> None:
    """The loop and the numpy path give the same bits, or refuse the call with the same error
    (``saturate_inputs`` reads a float64 operand as float32, which has no float64 result)."""
    def outcome(fn):
        try:
            return fn(direction, x, alpha, dy=dy, out_dtype=out, semantics=semantics)
        except ValueError as error:
            return str(error)

    got, expected = outcome(compiled.compute), outcome(golden.reference_compute)
    if isinstance(expected, str):
        assert got == expected
    else:
        _same_bits(got, expected)


@pytest.fixture(scope="module")
def inputs() -> dict[str, np.ndarray]:
    return {name: _inputs(name) for name in ("float16", "bfloat16", "float32", "float64")}


@pytest.mark.parametrize("pair", PAIRS, ids="->".join)
@pytest.mark.parametrize("alpha", ALPHAS, ids=repr)
def test_forward_matches_the_numpy_path(inputs, pair, alpha):
    src, out = pair
    x = inputs[src]
    _same_bits(compiled.compute("forward", x, alpha, out_dtype=out, semantics=golden.EXACT),
               golden.reference_compute("forward", x, alpha, out_dtype=out))


@pytest.mark.parametrize("pair", PAIRS, ids="->".join)
@pytest.mark.parametrize("alpha", ALPHAS, ids=repr)
def test_backward_matches_the_numpy_path(inputs, pair, alpha):
    src, out = pair
    for dy, x in _operand_sets(inputs[src]):
        _same_bits(compiled.compute("backward", x, alpha, dy=dy, out_dtype=out, semantics=golden.EXACT),
                   golden.reference_compute("backward", x, alpha, dy=dy, out_dtype=out))


def _slopes_in_turn(variants: Sequence[Semantics], slopes: Sequence[float]) -> list:
    """Every (variant, dtype pair, slope) as parameter sets: the default run keeps one slope
    per variant and pair, the slopes in turn, so each variant meets every slope on as many
    pairs as the slopes allow and each pair meets every slope; ``exhaustive`` marks the rest."""
    turn = {(v, p): slopes[(i + j) % len(slopes)] for i, v in enumerate(variants) for j, p in enumerate(PAIRS)}
    cases = [(v, p, a) for v in variants for p in PAIRS for a in slopes]
    return sampled(cases, default=lambda v, p, a: turn[v, p] == a)


def _case_id(value: object) -> str:
    if isinstance(value, tuple):
        return "->".join(value)
    return f"alpha={value!r}" if isinstance(value, float) else str(value)


VARIANT_SLOPES = (0.2, -0.5, 1 / 3, 1e-30)  # below 1, negative, a long significand, products that underflow
BACKWARD_SLOPES = (0.2, -0.5)
FORWARD_SLOPES = (0.2, -0.5, 1.5, 0.0)


@pytest.mark.parametrize(("semantics", "pair", "alpha"), _slopes_in_turn(COVERED, VARIANT_SLOPES), ids=_case_id)
def test_covered_variants_match_the_numpy_path(inputs, semantics, pair, alpha):
    src, out = pair
    x = inputs[src]
    assert compiled.covers("forward", semantics) and compiled.covers("backward", semantics)
    _agrees("forward", x, alpha, out=out, semantics=semantics)
    for dy, xs in _operand_sets(x):
        _agrees("backward", xs, alpha, dy=dy, out=out, semantics=semantics)


@pytest.mark.parametrize(("semantics", "pair", "alpha"), _slopes_in_turn(BACKWARD_ONLY, BACKWARD_SLOPES),
                         ids=_case_id)
def test_covered_backward_formulations_match_the_numpy_path(inputs, semantics, pair, alpha):
    src, out = pair
    assert compiled.covers("backward", semantics)
    for dy, xs in _operand_sets(inputs[src]):
        _agrees("backward", xs, alpha, dy=dy, out=out, semantics=semantics)


@pytest.mark.parametrize(("semantics", "pair", "alpha"), _slopes_in_turn(FORWARD_FORMULATIONS, FORWARD_SLOPES),
                         ids=_case_id)
def test_covered_forward_formulations_match_the_numpy_path(inputs, semantics, pair, alpha):
    src, out = pair
    assert compiled.covers("forward", semantics)
    _agrees("forward", inputs[src], alpha, out=out, semantics=semantics)


def test_the_default_sample_meets_every_slope_on_every_variant_and_pair():
    """The sample the docstring promises: each variant and each pair with every slope."""
    for variants, slopes in ((COVERED, VARIANT_SLOPES), (BACKWARD_ONLY, BACKWARD_SLOPES),
                             (FORWARD_FORMULATIONS, FORWARD_SLOPES)):
        kept = [p.values for p in _slopes_in_turn(variants, slopes) if not p.marks]
        assert sorted((str(v), p) for v, p, _ in kept) == sorted((str(v), p) for v in variants for p in PAIRS)
        for v in variants:
            assert {a for w, _, a in kept if w == v} == set(slopes), v
        for p in PAIRS:
            assert {a for _, q, a in kept if q == p} == set(slopes), p


def _single_settings() -> list[Semantics]:
    """Every value of every setting alone, and each under DAZ and FTZ."""
    values = {**{name: choices for name, choices in _CHOICES.items()},
              **{flag: (True,) for flag in ("daz", "ftz", "flush_inputs", "saturate_inputs", "flush_output")},
              "opmath": ("float16", "bfloat16", "float32"), "input_dtype": ("float16", "bfloat16"),
              "result_dtype": ("float16",), "slope_dtype": ("float16",), "slope": (0.3,)}
    singles = [Semantics(**{name: v}) for name, options in values.items() for v in options]
    return singles + [s.combined(Semantics(daz=True, ftz=True)) for s in singles]


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_every_variant_covers_claims_is_the_numpy_paths(inputs, direction):
    """Whatever ``covers`` claims, the loop computes as the numpy path does."""
    claimed = [s for s in _single_settings() if compiled.covers(direction, s)]
    assert len(claimed) > 20
    for semantics in claimed:
        for (src, out), alpha in ((("float16", "float16"), -0.5), (("float32", "bfloat16"), 1.5)):
            x = inputs[src]
            dy = None if direction == "forward" else np.roll(x, 1)
            _agrees(direction, x, alpha, dy=dy, out=out, semantics=semantics)


@pytest.mark.parametrize("semantics", RELU, ids=str)
def test_relus_backward_takes_the_numpy_path_and_its_forward_the_loop(semantics, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the compiled loop ran a variant it does not cover")

    assert compiled.covers("forward", semantics) and not compiled.covers("backward", semantics)
    monkeypatch.setattr(compiled, "compute", refuse)
    x = all_patterns("float16")
    golden.compute("backward", x, 0.2, dy=x, semantics=semantics)


def test_golden_dispatches_to_the_compiled_loop_unless_disabled(monkeypatch):
    calls = []
    real = compiled.compute
    monkeypatch.setattr(compiled, "compute", lambda *a, **k: calls.append(a) or real(*a, **k))
    x = all_patterns("bfloat16").reshape(256, 256)
    y = golden.forward(x, 0.2)
    assert len(calls) == 1 and y.shape == x.shape
    monkeypatch.setenv("CONFORMANCE_COMPILED", "0")
    _same_bits(golden.forward(x, 0.2), y)
    assert len(calls) == 1


@pytest.mark.parametrize("name", ["float32", "float16"])
def test_the_bits_do_not_depend_on_the_threads(name, monkeypatch):
    """The select loops and the 16-bit pattern table split large work a range per thread; one
    thread, two and three give the numpy path's bits, forward and backward."""
    rng = np.random.default_rng(5)
    rec = info(name)
    x = rng.integers(0, 1 << rec.bits, 3 * compiled.SPLIT + 5, dtype=np.uint64).astype(rec.uint).view(rec.dtype)
    dy = np.roll(x, 7)
    want = {d: golden.reference_compute(d, x, 0.3, dy=dy) for d in ("forward", "backward")}
    for count in ("1", "2", "3"):
        monkeypatch.setenv("CONFORMANCE_THREADS", count)
        for direction, expected in want.items():
            _same_bits(golden.compute(direction, x, 0.3, dy=dy), expected)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("semantics", [Semantics(), Semantics(grad_rule="ge", nan_grad="dy"),
                                       Semantics(daz=True, ftz=True, slope_dtype="float16"),
                                       Semantics(formulation="swap_branches", nan_grad="dy"),
                                       Semantics(formulation="scale"), Semantics(formulation="swap_operands")], ids=str)
def test_a_large_16_bit_backward_decided_per_pattern_is_the_numpy_paths(name, semantics):
    """From 2**17 elements a 16-bit select's backward reads each x pattern's choice and each dy
    pattern's product from tables of every pattern: the numpy path's bits, NaN payloads included."""
    rec = info(name)
    rng = np.random.default_rng(8)
    x, dy = (rng.integers(0, 1 << 16, compiled.TABLED + 3, dtype=np.uint64).astype(np.uint16).view(rec.dtype)
             for _ in range(2))
    for alpha in (0.3, -1.5, 1e-30):
        _agrees("backward", x, alpha, dy=dy, out=name, semantics=semantics)


def test_a_golden_computed_inside_a_split_does_not_split_again(monkeypatch):
    """compare splits a chunk's golden over the threads itself: a golden called so, or on a pool
    thread, runs on its thread alone (a second split would wait for the threads the first holds)."""
    from conformance import jit

    monkeypatch.setenv("CONFORMANCE_THREADS", "2")
    x = np.random.default_rng(6).standard_normal(2 * compiled.SPLIT).astype(np.float32)
    split_sizes: list[int] = []
    real = jit.ranges
    monkeypatch.setattr(jit, "ranges", lambda lo, hi, *, least: split_sizes.append(hi - lo) or real(lo, hi,
                                                                                                   least=least))
    halves = jit.in_parallel([lambda: golden.forward(x[: compiled.SPLIT], 0.3),
                              lambda: golden.forward(x[compiled.SPLIT:], 0.3)])
    assert split_sizes == []
    _same_bits(np.concatenate(halves), golden.reference_compute("forward", x, 0.3))
    golden.forward(x, 0.3)
    assert split_sizes == [x.size]


def _midpoints(name: str, to: str) -> np.ndarray:
    """Every midpoint of two neighbouring finite ``to`` values (the overflow threshold too) and
    its neighbours in ``name``, both signs: where narrowing rounds a tie, or just misses one."""
    w = np.unique(np.abs(all_patterns(to).astype(np.float64)))
    w = w[np.isfinite(w)]
    mids = np.concatenate([(w[:-1] + w[1:]) / 2, [w[-1] + (w[-1] - w[-2]) / 2]]).astype(name)
    near = [mids, np.nextafter(mids, np.inf), np.nextafter(mids, 0)]
    return np.concatenate([*near, *(-v for v in near)])


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("to", ["float16", "bfloat16"])
def test_an_operand_narrowed_in_one_pass_is_the_numpy_paths(inputs, name, to):
    v = np.concatenate([inputs[name], _midpoints(name, to)])
    got = compiled._narrowed(v.reshape(2, -1), Semantics(input_dtype=to))
    assert got.shape == (2, v.size // 2)
    _same_bits(got.reshape(-1), narrowed_by_formula(v, to))


def test_only_a_wide_operand_to_a_16_bit_dtype_unsaturated_takes_the_narrowing_loop(monkeypatch):
    taken = []
    loop = compiled.narrowed_loop
    monkeypatch.setattr(compiled, "narrowed_loop", lambda *a: taken.append(a[0].dtype.name) or loop(*a))
    for dtype, s in ((np.float32, Semantics(input_dtype="bfloat16")), (np.float64, Semantics(input_dtype="float16")),
                     (np.float32, Semantics(input_dtype="float16", saturate_inputs=True)),
                     (np.float32, Semantics(input_dtype="float32")), (np.float16, Semantics(input_dtype="bfloat16")),
                     (np.float32, Semantics())):
        compiled._narrowed(np.ones(4, dtype=dtype), s)
    compiled._narrowed(np.float32(1.0), Semantics(input_dtype="float16"))  # a scalar stays one
    assert taken == ["float32", "float64"]


def test_strided_and_empty_inputs(inputs):
    x = inputs["float32"][: 2 * 4096].reshape(64, 128)[:, ::2]
    _same_bits(golden.forward(x, 0.3, out_dtype="float16"), golden.reference_compute("forward", x, 0.3,
                                                                                      out_dtype="float16"))
    empty = np.zeros((0, 3), dtype=np.float16)
    assert golden.backward(empty, empty, 0.2).shape == (0, 3)


def test_errors_are_the_numpy_path_errors():
    with pytest.raises(ValueError, match="unsupported dtype pair"):
        golden.forward(np.ones(3, np.float16), 0.2, out_dtype="bfloat16")
    with pytest.raises(ValueError, match="alpha must be finite"):
        golden.forward(np.ones(3, np.float32), float("nan"))
    with pytest.raises(ValueError, match="dy and x must match"):
        golden.backward(np.ones(3, np.float32), np.ones(4, np.float32), 0.2)


def _numpy_path(monkeypatch, fn):
    with monkeypatch.context() as m:
        m.setenv("CONFORMANCE_COMPILED", "0")
        return fn()


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_ulp_distance_matches_the_numpy_path(inputs, name, monkeypatch):
    a = inputs[name]
    b = np.roll(a, 1)
    compiled_ulps = ulp_distance(a, b)
    reference = _numpy_path(monkeypatch, lambda: ulp_distance(a, b))
    assert np.array_equal(compiled_ulps.ulps, reference.ulps) and np.array_equal(compiled_ulps.nan, reference.nan)
    assert compiled_ulps.ulps.dtype == reference.ulps.dtype == np.int64


TOLERANCES = (Tolerance(1e-3, 1e-5), Tolerance(0.0, 0.0, max_ulp=0, strict_zeros=True),
              Tolerance(1.3e-6, 1e-5, max_ulp=3))


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("tolerance", TOLERANCES, ids=str)
def test_the_metric_pass_matches_the_numpy_path(inputs, name, tolerance, monkeypatch):
    x = inputs[name]
    for actual, expected in ((np.roll(x, 3), x), (golden.forward(x, 0.01), golden.forward(x, 0.2))):
        got = compare(actual, expected, tolerance=tolerance, part="p", offset=11)
        ref = _numpy_path(monkeypatch, lambda a=actual, e=expected: compare(a, e, tolerance=tolerance, part="p",
                                                                               offset=11))
        assert got.metrics == ref.metrics
        assert np.array_equal(got.mismatch_index, ref.mismatch_index) and np.array_equal(got.violating, ref.violating)
        _same_bits(got.actual, ref.actual)


def test_without_numba_every_path_is_the_numpy_path(monkeypatch):
    from conformance import jit

    x = all_patterns("float16")
    compiled_y = golden.forward(x, 0.3)
    compiled_cmp = compare(compiled_y, golden.forward(x, 0.2), tolerance=TOLERANCES[0])
    monkeypatch.setattr(jit, "available", lambda: False)

    def refuse(*args, **kwargs):
        raise AssertionError("a compiled loop ran without numba")

    monkeypatch.setattr(compiled, "compute", refuse)
    assert not jit.enabled()
    _same_bits(golden.forward(x, 0.3), compiled_y)
    assert compare(compiled_y, golden.forward(x, 0.2), tolerance=TOLERANCES[0]).metrics == compiled_cmp.metrics


def _triage_batches(x: np.ndarray) -> list:
    """Forward and backward batches of ``x`` whose actual output is another slope's, with
    some elements exact, 1 ULP off and replaced by other patterns (NaN and inf among them)."""
    from conformance.triage.claims import Batch

    out = []
    other = np.roll(x, 5)
    for direction in ("forward", "backward"):
        dy = None if direction == "forward" else np.roll(x, 11)
        g = golden.compute(direction, x, 0.2, dy=dy)
        a = golden.compute(direction, x, 0.01, dy=dy)
        a[::7] = g[::7]
        a[1::9] = np.nextafter(g[1::9].astype(np.float64), np.inf).astype(g.dtype)
        a[2::13] = other[2::13]
        out.append(Batch(x, dy, 0.2, direction, x.dtype.name, g, a))
    return out


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_the_triage_passes_match_the_numpy_path(inputs, name, monkeypatch):
    from conformance.judge.plots import _class_counts, _ulp_counts
    from conformance.triage.claims import beyond_rounding, observed_slopes

    for batch in _triage_batches(inputs[name]):
        index = np.flatnonzero(to_bits(batch.actual) != to_bits(batch.golden))
        passes = (lambda b=batch, i=index: beyond_rounding(b, i), lambda b=batch, i=index: observed_slopes(b, i),
                  lambda b=batch: (_ulp_counts(b.actual, b.golden), _class_counts(b.x)))
        for run in passes:
            got, ref = run(), _numpy_path(monkeypatch, run)
            if isinstance(got, np.ndarray):
                got, ref = (got,), (ref,)
            for g, r in zip(got, ref, strict=True):
                if isinstance(g, dict):
                    assert g == r
                else:
                    assert g.dtype == r.dtype and np.array_equal(to_bits(g) if g.dtype.kind == "f" else g,
                                                                 to_bits(r) if r.dtype.kind == "f" else r)


@pytest.mark.parametrize("semantics", (Semantics(), Semantics(grad_form="sum"), Semantics(opmath="float32")),
                         ids=str)
def test_a_zero_slope_keeps_its_sign_from_call_to_call(semantics):
    """+0.0 and -0.0 are one key of a cache of dicts; the loop's rules must still tell them apart."""
    x = np.array([-1.0, -2.0, 3.0, -0.0], dtype=np.float16)
    dy = np.array([1.0, -1.0, 2.0, 1.0], dtype=np.float16)
    for alpha in (0.0, -0.0, 0.0, -0.0):
        _agrees("forward", x, alpha, out="float16", semantics=semantics)
        _agrees("backward", x, alpha, dy=dy, out="float16", semantics=semantics)
