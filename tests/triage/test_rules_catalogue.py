"""The catalogue as data: each rule is named by the cause its golden variant models, its
summary and detail say what that variant computes, and the slopes it tries are the
framework defaults and the estimate's short spellings, away from the slope asked for."""
from __future__ import annotations

import re
from typing import Optional

import ml_dtypes
import numpy as np
import pytest

import conformance.triage.rules as built
from conformance.dtypes import all_patterns, info
from conformance.metrics.exact import match_mask
from conformance.reference import golden as ref
from conformance.reference.defaults import DEFAULTS
from conformance.reference.semantics import FORWARD_ONLY
from conformance.triage.claims import Batch
from conformance.triage.rules import Rule, catalogue, slope_dtypes
from conformance.triage.sampling import scope_of
from conformance.triage.search import Selector

DTYPE_PAIRS = [("float16", "float16"), ("float16", "float32"), ("bfloat16", "bfloat16"),
               ("bfloat16", "float32"), ("float32", "float32"), ("float32", "float16"),
               ("float64", "float64"), ("float64", "float32")]
SETTINGS = [(alpha, direction, pair) for alpha in (0.2, 0.0, -0.5) for direction in ("forward", "backward")
            for pair in DTYPE_PAIRS]
ESTIMATE = 0.123456789


@pytest.fixture(autouse=True)
def _built_afresh() -> None:
    """Each test reads the rules as built for it, not as cached per setting by an earlier one."""
    built._fixed_rules.cache_clear()
    built._cached_alpha_rules.cache_clear()


def _catalogue(alpha: float, direction: str, pair: tuple[str, str]) -> list[Rule]:
    return catalogue(alpha=alpha, direction=direction, dtypes=pair, estimates=[ESTIMATE])


def _every_rule() -> list[tuple[tuple[float, str, tuple[str, str]], Rule]]:
    return [(setting, r) for setting in SETTINGS for r in _catalogue(*setting)]


def _named_by(settings: dict, *, alpha: float, out_dtype: str) -> Optional[str]:
    """The category a golden variant proves (docs/reference/categories.md): the narrowest
    cause it models first; float32 opmath alone on a 16-bit output is neutral context, and
    plain ReLU is slope 0 unless slope 0 was asked for."""
    if "slope" in settings or settings.get("formulation") == "relu" and alpha != 0:
        return "alpha-mismatch"
    if settings.keys() & {"daz", "ftz", "flush_inputs", "flush_output"}:
        return "subnormal-flush"
    if "saturate" in settings:
        return "saturation"
    if "nan_grad" in settings:
        return "nan-gradient"
    if settings.get("grad_rule") in ("step", "ge"):
        return "grad-step" if settings["grad_rule"] == "step" else "grad-at-zero"
    if "rounding" in settings:
        return "rounding"
    if settings == {"opmath": "float32"} and info(out_dtype).bits == 16:
        return None
    if settings.keys() & {"input_dtype", "result_dtype", "opmath"}:
        return "input-precision"
    if settings.keys() == {"slope_dtype"}:
        return "alpha-precision"
    return "formulation"


def test_every_rule_is_named_by_the_cause_its_variant_models() -> None:
    for (alpha, _, pair), r in _every_rule():
        assert r.category == _named_by(r.semantics.settings(), alpha=alpha, out_dtype=pair[1]), r.summary


def test_a_16_bit_output_has_float32_opmath_as_its_one_neutral_rule() -> None:
    for (_, _, pair), r in _every_rule():
        if r.category is None:
            assert info(pair[1]).bits == 16 and r.semantics.settings() == {"opmath": "float32"}
    for setting in SETTINGS:
        neutral = [r for r in _catalogue(*setting) if r.category is None]
        assert len(neutral) == (1 if info(setting[2][1]).bits == 16 else 0), setting


@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_every_rule_has_a_summary_of_its_own(setting: tuple[float, str, tuple[str, str]]) -> None:
    summaries = [r.summary for r in _catalogue(*setting)]
    assert all(isinstance(s, str) and s.strip() == s and s for s in summaries)
    assert len(set(summaries)) == len(summaries)


# Names a summary spells with capitals: acronyms, frameworks and functions.
PROPER = {"TBE", "DAZ", "FTZ", "NaN", "ReLU", "LeakyReLU", "LeakyRelu", "MindSpore", "MaximumGrad", "Add",
          "ONNX", "XLA", "CPU", "JAX", "CANN", "Paddle", "Runtime", "Where", "Keras", "C"}
_LOWERED = {"tbe", "daz", "ftz", "nan", "relu", "leakyrelu", "mindspore", "maximumgrad", "onnx", "xla", "cpu",
            "jax", "cann", "paddle", "keras", "c"}  # "where", "add" and "runtime" are words too


def _badly_spelled(text: str, *, names_kept: bool) -> list[str]:
    """Words of ``text`` that are neither lowercase prose, a capitalised sentence start nor a
    proper name (nor, with ``names_kept``, a proper name spelled in lowercase)."""
    bad = []
    for word in re.findall(r"[A-Za-z]+", text):
        if word in PROPER or word.islower() and not (names_kept and word in _LOWERED):
            continue
        if len(word) > 1 and word[0].isupper() and word[1:].islower() and word.lower() not in _LOWERED:
            continue
        bad.append(word)
    return bad


def test_summaries_are_prose_that_keeps_every_name_spelled_as_its_owner_does() -> None:
    for _, r in _every_rule():
        assert _badly_spelled(r.summary, names_kept=True) == [], r.summary


def test_details_are_lowercase_keys_with_prose_or_number_values() -> None:
    for _, r in _every_rule():
        for key, value in r.detail.items():
            assert re.fullmatch(r"[a-z]+(_[a-z]+)*", key), (key, r.summary)
            words = " ".join(value) if isinstance(value, list) else value
            if isinstance(words, str) and key != "default_of":
                assert _badly_spelled(words, names_kept=False) == [], (key, value, r.summary)


# How a detail spells a setting the variant computes with.
SPELLED = {"rounding": {"rtz": "toward zero", "rna": "half away from zero"},
           "predicate": {"ge": "x >= 0"}, "rule": {"ge": "x >= 0", "step": "step"},
           "form": {"sum": ("branch sum", "a*d1 + d2"),
                    "fma": ("fused branch sum", "branch sum fused into one multiply-add")}}
# The formula a detail shows, as the settings the variant computes it with (conformance/reference/semantics.py).
FORMULAS = {"max(x, a*x)": {"formulation": "max"}, "min(x, a*x)": {"formulation": "min"},
            "max(x, 0) + a*min(x, 0)": {"formulation": "maxmin"},
            "x*m + a*x*(1-m) with m = (x > 0)": {"formulation": "mask-multiply"},
            "a*x on both sides (no select)": {"formulation": "scale"}, "a*dy": {"formulation": "scale"},
            "max(x, a*x), min for a > 1": {"formulation": "max_or_min", "nan_operand": "x"},
            "where(x >= 0, x, a*x)": {"predicate": "ge"}, "x >= 0 ? x : a*x": {"predicate": "ge"},
            "where(x < 0, a*x, x)": {"predicate": "ge", "formulation": "merge"},
            "f(f(x))": {"formulation": "twice"}, "max(x, 0)": {"formulation": "relu"},
            "d maximum(a*x, x)": {"grad_rule": "max"},
            "where(x > 0, dy, 0) + a*where(x > 0, 0, dy)": {"grad_form": "sum"},
            "x > 0 ? a*dy : dy": {"formulation": "swap_branches"}, "dy > 0 ? x : a*x": {"formulation": "swap_operands"},
            "y > 0 ? dy : a*dy": {"grad_rule": "result"}}
SAME = ("daz", "ftz", "flush_inputs", "flush_output", "input_dtype", "result_dtype", "opmath", "nan_grad")


def test_a_rule_detail_states_the_settings_it_recomputes_with() -> None:
    for (alpha, _, _), r in _every_rule():
        sem, detail = r.semantics, r.detail
        assert detail or r.category in ("saturation", None), r.summary
        for key in SAME:
            if key in detail:
                assert detail[key] == getattr(sem, key), (key, r.summary)
        for key, words in SPELLED.items():
            if key in detail:
                setting = {"rule": sem.grad_rule, "form": sem.grad_form}.get(key) or getattr(sem, key)
                assert detail[key] in (words[setting] if key == "form" else (words[setting],)), (key, r.summary)
        if "formula" in detail:
            settings = sem.settings()
            assert {k: settings.get(k) for k in FORMULAS[detail["formula"]]} == FORMULAS[detail["formula"]], r.summary
        if r.category == "saturation":
            assert detail.get("which") == ("inf" if sem.saturate == "inf" else None), r.summary
            assert detail.get("operands", False) == sem.saturate_inputs, r.summary
        if "nan_product" in detail:
            assert detail["nan_product"] == sem.nan_operand == "x"
        if r.category in ("alpha-mismatch", "alpha-precision"):
            assert detail.get("expected_alpha", detail.get("alpha")) == alpha
        if r.category == "alpha-mismatch":
            effective = 0.0 if sem.slope is None else sem.slope
            assert detail["effective_alpha"] == effective, r.summary
            assert detail["default_of"] == _defaults_of(effective), r.summary


def _defaults_of(slope: float) -> list[str]:
    """The frameworks whose declared default is ``slope``, in the table's order."""
    return list(dict.fromkeys(d.framework for d in DEFAULTS if d.declared == slope))


@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_no_rule_repeats_another_or_the_exact_reference(setting: tuple[float, str, tuple[str, str]]) -> None:
    rules = _catalogue(*setting)
    assert all(r.semantics.settings() for r in rules)
    assert len({(r.semantics, r.reach) for r in rules}) == len(rules)


def test_each_direction_tries_only_the_formulas_it_computes() -> None:
    gradient = {"grad_rule", "nan_grad", "grad_form"}
    for (_, direction, _), r in _every_rule():
        settings = r.semantics.settings()
        if direction == "forward":
            assert not settings.keys() & gradient, r.summary
            assert settings.get("formulation") not in ("swap_branches", "swap_operands"), r.summary
        else:
            assert settings.get("formulation") not in FORWARD_ONLY, r.summary


@pytest.mark.parametrize("alpha", [0.0, 0.2])
def test_plain_relu_is_another_formula_for_slope_zero_and_slope_zero_otherwise(alpha: float) -> None:
    for direction in ("forward", "backward"):
        rules = _catalogue(alpha, direction, ("float32", "float32"))
        relu = [r for r in rules if r.semantics.settings() == {"formulation": "relu"}]
        zero = [r for r in rules if r.semantics.settings() == {"slope": 0.0}]
        if alpha == 0:
            assert [r.category for r in relu] == (["formulation"] if direction == "forward" else []) and not zero
        else:
            assert [r.category for r in relu] == ["alpha-mismatch"] and len(zero) == 1
            assert all("plain ReLU" in r.summary and "CANN" in r.summary for r in relu + zero)


def test_a_default_slope_names_the_frameworks_it_is_the_default_of() -> None:
    for r in _catalogue(0.5, "forward", ("float16", "float16")):
        if r.category == "alpha-mismatch" and r.semantics.slope:
            names = _defaults_of(r.semantics.slope)
            assert all(name in r.summary for name in names) and ("default of" in r.summary) == bool(names)


@pytest.mark.parametrize("pair", DTYPE_PAIRS, ids="->".join)
def test_inputs_narrow_to_every_narrower_dtype_and_compute_there_or_in_float32(pair: tuple[str, str]) -> None:
    """A 16-bit input narrows to the other 16-bit type (and a 16-bit result widened to float32
    may be rounded to the input dtype first); a wider one to each 16-bit type, float64 also to
    float32 (and its product alone to float32).  In a narrower n: the whole computation, or,
    unless the output is n or the input float64, float32 opmath rounded to n."""
    src, out = pair
    wide = src in ("float32", "float64")
    narrow = ["float16", "bfloat16"] if wide else [n for n in ("float16", "bfloat16") if n != src]
    narrow += ["float32"] if src == "float64" else []
    want = set()
    for n in narrow:
        want |= {(("input_dtype", n),), (("opmath", n), ("input_dtype", n))}
        if out != n and src != "float64":
            want.add((("opmath", "float32"), ("input_dtype", n), ("result_dtype", n)))
    if src == "float64":
        want.add((("opmath", "float32"),))
    if not wide and out == "float32":
        want |= {(("result_dtype", src),), (("opmath", "float32"), ("result_dtype", src)),
                 (("slope_dtype", src), ("result_dtype", src))}
    rules = [r for r in _catalogue(0.2, "forward", pair) if r.category == "input-precision"]
    assert {tuple(r.semantics.settings().items()) for r in rules} == want


def _rounded(c: float, dtype: str) -> float:
    return float(np.array(c).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype))


def test_another_slope_is_a_default_or_a_short_spelling_of_the_estimate_exact_or_rounded() -> None:
    alpha, pair = 0.2, ("float16", "float32")
    rules = [r for r in _catalogue(alpha, "forward", pair) if r.category == "alpha-mismatch"]
    spellings = {float(f"{ESTIMATE:.{k}g}") for k in range(1, 8)} | {ESTIMATE}
    slopes = {d.declared for d in DEFAULTS} | spellings
    exact = {r.semantics.slope for r in rules if r.semantics.slope_dtype is None and r.semantics.slope is not None}
    assert exact == {c for c in slopes if abs(c - alpha) > alpha * 2.0 ** -8}
    for r in rules:
        c, d = r.semantics.slope, r.semantics.slope_dtype
        if c is None:
            continue
        if d is not None:
            assert d in slope_dtypes(pair) and r.detail["slope"] == _rounded(c, d) != c
    rounded = {(r.semantics.slope, r.semantics.slope_dtype) for r in rules if r.semantics.slope_dtype}
    assert rounded == {(c, d) for c in exact for d in slope_dtypes(pair)
                       if _rounded(c, d) != c and abs(_rounded(c, d) - alpha) > alpha * 2.0 ** -8}


def test_a_slope_of_fewer_digits_costs_less_and_every_slope_less_than_a_second_rule() -> None:
    rules = [r for r in _catalogue(0.2, "forward", ("float32", "float32"))
             if r.category == "alpha-mismatch" and r.semantics.slope_dtype is None and r.semantics.slope]
    by_slope = {r.semantics.slope: r.complexity for r in rules}
    digits = {float(f"{ESTIMATE:.{k}g}"): k for k in range(7, 0, -1)}
    for c, k in digits.items():
        assert 1 < by_slope[c] < 1.01
        assert all(by_slope[c] > by_slope[s] for s, j in digits.items() if j < k)
    assert by_slope[ESTIMATE] > max(by_slope[c] for c in digits) and by_slope[0.01] == 1.0
    for r in _catalogue(0.2, "forward", ("float32", "float32")):
        if r.category == "alpha-mismatch" and r.semantics.slope_dtype:
            assert r.complexity == by_slope[r.semantics.slope], r.summary  # rounding it costs nothing more


@pytest.mark.parametrize("pair", DTYPE_PAIRS, ids="->".join)
def test_rounding_modes_and_saturated_operands_are_tried_where_they_are_modelled(pair: tuple[str, str]) -> None:
    """Other rounding modes for inputs of at most 32 bits and outputs narrower than float64;
    saturated operands where a float32 unit reads them (not float64 inputs)."""
    rules = _catalogue(0.2, "forward", pair)
    modes = {r.semantics.rounding for r in rules if r.category == "rounding"}
    assert modes == (set() if "float64" in pair else {"rtz", "rna"})
    operands = [r for r in rules if r.semantics.saturate_inputs]
    assert len(operands) == (0 if pair[0] == "float64" else 1)


def test_a_slope_within_sixteen_bit_rounding_of_alpha_is_not_another_slope() -> None:
    alpha = 0.5
    near, far = alpha * (1 + 2.0 ** -8), alpha * (1 + 2.0 ** -7)
    rules = catalogue(alpha=alpha, direction="forward", dtypes=("float32", "float32"), estimates=[near, far])
    slopes = {r.semantics.slope for r in rules if r.category == "alpha-mismatch"}
    assert far in slopes and near not in slopes
    assert not [r for r in rules if r.category == "alpha-precision"]  # 0.5 is exact in every dtype


def test_the_slope_is_held_in_either_16_bit_dtype_and_in_float32_for_wider_tensors() -> None:
    assert slope_dtypes(("float16", "float16")) == ["float16", "bfloat16"]
    assert slope_dtypes(("bfloat16", "float32")) == ["float16", "bfloat16", "float32"]
    assert slope_dtypes(("float64", "float64")) == ["float16", "bfloat16", "float32"]
    precision = [r for r in catalogue(alpha=0.2, direction="forward", dtypes=("float32", "float32"), estimates=[])
                 if r.category == "alpha-precision"]
    assert {(r.semantics.slope_dtype, r.detail["slope"]) for r in precision} == {
        (d, _rounded(0.2, d)) for d in ("float16", "bfloat16", "float32")}


def test_rules_cost_one_rule_but_the_autodiff_flush_that_stands_for_two() -> None:
    for (_, direction, _), r in _every_rule():
        if r.category == "subnormal-flush" and "grad_rule" in r.semantics.settings():
            assert direction == "backward" and 2 < r.complexity < 3, r.summary
        else:
            assert 1 <= r.complexity < 1.02, r.summary  # a slope's digits: 1e-3 each


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("alpha", [0.2, -0.5, 0.0])
def test_a_rule_changes_only_elements_of_the_kind_it_reaches(direction: str, alpha: float) -> None:
    """The search skips a rule whose reach holds none of the wrong elements (unless the stack
    narrows the operands): that must lose nothing, so every element the rule's variant changes
    is of its kind.  The autodiff flush that stands for a flush and grad-at-zero together
    changes x == 0 too: there, grad-at-zero (which reaches zeros) is the cause named."""
    x = all_patterns("float16")
    dy = np.random.default_rng(2).permutation(x) if direction == "backward" else None
    golden = ref.compute(direction, x, alpha, dy=dy, out_dtype="float16")
    for r in _catalogue(alpha, direction, ("float16", "float16")):
        if r.reach is None:
            continue
        predicted = ref.compute(direction, x, alpha, dy=dy, out_dtype="float16", semantics=r.semantics)
        changed = ~match_mask(predicted, golden)
        if r.category == "subnormal-flush" and r.semantics.grad_rule == "ge":
            changed &= x != 0
        changed = np.flatnonzero(changed)
        batch = Batch(x, dy, alpha, direction, "float16", golden, predicted)
        kind = Selector(batch, scope_of(batch, changed)).kind_masks[r.reach]
        assert kind.all(), (r.summary, np.count_nonzero(~kind))


def test_a_saturation_rule_must_gain_on_the_nans_and_on_the_infinities_apart() -> None:
    """Saturation changes NaN and ±inf separately: each group it changes must gain on its own."""
    before = np.array([np.nan, np.inf, -np.inf, 1.0, 0.0, -np.nan], dtype=np.float16)
    wide = before.astype(np.float64)
    for _, r in _every_rule():
        if r.category == "saturation":
            groups = r.groups(before)
            assert len(groups) == 2, r.summary
            np.testing.assert_array_equal(groups[0], np.isnan(wide))
            np.testing.assert_array_equal(groups[1], np.isinf(wide))
        else:
            assert r.groups is None, r.summary
