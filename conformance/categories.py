"""THE registry of triage categories: name, group, order, kind, summary, where each is
defined and which test proves it; and how each finding-detail field merges when two claims
or findings of one category are joined.

Triage claims only categories registered here; the gate's policy, the merge
order, the JSON schema enum, selftest's expectations and docs/reference/categories.md are
derived from or checked against this table.  An unknown name is an error
(:func:`check`), never a silent drop.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Optional

from conformance.errors import UnknownCategory

Group = Literal["refused", "hazards", "semantics", "location", "value class", "residue"]
Merge = Literal["sum", "max", "any", "first"]
Kind = Literal["refusal", "hazard", "proved by recomputation", "proved by confinement",
               "value class", "residue"]


@dataclass(frozen=True)
class Category:
    """One triage category; ``order`` is its place in the triage and in every report.

    ``defined`` is the repository path of the module whose rule claims the category;
    ``proved`` the pytest node id (``tests/<path>.py::<test>``) of a test that builds the
    category's defect and asserts the category is named."""

    name: str
    group: Group
    order: int
    kind: Kind
    summary: str
    defined: str
    proved: str


# name, group, kind, summary, defined, proved
_TABLE: tuple[tuple[str, Group, Kind, str, str, str], ...] = (
    ("rejected-input", "refused", "refusal", "the backend refused the input",
     "conformance/judge/evaluate.py",
     "tests/triage/test_attribution.py::test_rejected_input_is_one_finding_over_every_element"),
    ("out-of-bounds-write", "hazards", "hazard",
     "the kernel wrote outside the output tensor (emulator red zones)",
     "conformance/triage/hazards.py",
     "tests/triage/test_hazards.py::test_out_of_bounds_write_is_found_even_when_values_match"),
    ("write-race", "hazards", "hazard", "two cores wrote the same element",
     "conformance/triage/hazards.py",
     "tests/triage/test_hazards.py::test_write_race_counts_raced_elements_and_explains_their_mismatches"),
    ("input-modified", "hazards", "hazard",
     "the backend wrote into its input (x or dy differed after the call); golden uses an untouched copy",
     "conformance/guard.py",
     "tests/safety/test_gate_fooling.py::test_golden_is_computed_from_an_untouched_copy"),
    ("input-precision", "semantics", "proved by recomputation",
     "operands narrowed (e.g. fp32 cast to fp16) before computing, or a 16-bit result widened",
     "conformance/triage/rules.py",
     "tests/triage/test_rules_real_world.py::test_fp32_computed_in_fp16_is_input_precision"),
    ("alpha-mismatch", "semantics", "proved by recomputation",
     "negative side computed with another slope (effective_alpha; whose default it is)",
     "conformance/triage/rules.py",
     "tests/triage/test_rules_real_world.py::test_plain_relu_gradient_is_alpha_mismatch_zero"),
    ("alpha-precision", "semantics", "proved by recomputation",
     "slope rounded to the compute dtype before multiplying",
     "conformance/triage/rules.py",
     "tests/triage/test_rules.py::test_a_bfloat16_slope_in_an_fp16_kernel_is_alpha_precision"),
    ("formulation", "semantics", "proved by recomputation",
     ("another formula: max(x, a*x), min(x, a*x), max(x,0)+a*min(x,0), mask-multiply, "
      "the gradient of maximum(a*x, x), applied twice, x >= 0, swapped branches or operands, "
      "a gradient selected on y"),
     "conformance/triage/rules.py",
     "tests/triage/test_rules_real_world.py::test_forgotten_select_is_a_formulation"),
    ("subnormal-flush", "semantics", "proved by recomputation",
     "subnormal inputs read as zero (DAZ) and/or subnormal results flushed (FTZ)",
     "conformance/triage/rules.py",
     "tests/triage/test_rules_homogeneous.py::test_a_chunk_of_flushed_subnormals_is_subnormal_flush"),
    ("saturation", "semantics", "proved by recomputation",
     ("NaN became 0 and/or ±inf became ±max (saturation mode), or results clamped to ±L for a "
      "limit L the data shows (another dtype's finite max, a fused clamp)"),
     "conformance/triage/rules.py",
     "tests/triage/test_rules.py::test_infinities_clamped_while_nan_is_kept_is_saturation_of_the_infinities"),
    ("grad-at-zero", "semantics", "proved by recomputation",
     "backward at x == 0 used slope 1 instead of alpha (or the reverse)",
     "conformance/triage/rules.py",
     "tests/triage/test_rules_real_world.py::test_grad_at_zero_on_zero_heavy_tensors_is_not_a_slope"),
    ("nan-gradient", "semantics", "proved by recomputation",
     "backward at x = NaN gave 0, dy*0, dy or NaN instead of alpha*dy",
     "conformance/triage/rules.py",
     "tests/triage/test_rules.py::test_golden_variant_is_named_with_its_exact_count"),
    ("grad-step", "semantics", "proved by recomputation",
     ("backward as a step function of x (the TBE pre-v200 kernel): a positive subnormal x got "
      "a fraction of dy instead of dy"),
     "conformance/triage/rules.py",
     "tests/triage/test_rules_kernel_formulas.py::test_a_hand_built_defect_is_named_with_its_exact_count"),
    ("tail-block", "location", "proved by confinement",
     ("the remaining errors all lie in the tail (tail tiles, the last partial block, or the "
      "last k elements) and the rest is clean"),
     "conformance/triage/location.py",
     "tests/triage/test_location.py::test_errors_confined_to_tail_tiles_are_tail_block"),
    ("stale-block", "location", "proved by confinement",
     ("the remaining errors fill one block or every k-th element away from the tail (a tile, a row, "
      "a stride), the same kinds of input elsewhere are right, or the output is shifted by k "
      "elements: stale, unwritten or misplaced data"),
     "conformance/triage/location.py",
     "tests/triage/test_regions.py::test_a_core_holding_another_cores_output_is_stale_block"),
    ("layout", "location", "proved by recomputation",
     ("the output is golden in another memory layout read back flat: an axis permutation "
      "(NCHW read as NHWC, a transpose) or a packed NC1HWC0 layout with zero padding"),
     "conformance/triage/layout.py",
     "tests/triage/test_layout.py::test_a_transposed_gradient_is_layout"),
    ("overflow", "value class", "value class", "golden finite, actual ±inf",
     "conformance/triage/value_classes.py",
     "tests/triage/test_value_classes.py::test_operands_that_overflow_when_narrowed_stay_overflow"),
    ("spurious-nan", "value class", "value class", "actual NaN, golden not",
     "conformance/triage/value_classes.py",
     "tests/triage/test_value_classes.py::test_bit_edit_is_named_with_the_number_of_edited_elements"),
    ("lost-nan", "value class", "value class", "golden NaN, actual not (and not saturation)",
     "conformance/triage/value_classes.py",
     "tests/triage/test_value_classes.py::test_lost_nan_is_not_saturation_when_infinities_are_kept"),
    ("signed-zero", "value class", "value class", "both zero, sign differs",
     "conformance/triage/value_classes.py",
     "tests/triage/test_value_classes.py::test_bit_edit_is_named_with_the_number_of_edited_elements"),
    ("rounding", "residue", "residue",
     "within 1 ULP of the exact result (proved when another rounding mode reproduces it)",
     "conformance/triage/value_classes.py",
     "tests/triage/test_value_classes.py::test_bit_edit_is_named_with_the_number_of_edited_elements"),
    ("unexplained", "residue", "residue", "none of the above",
     "conformance/triage/value_classes.py",
     "tests/triage/test_value_classes.py::test_bit_edit_is_named_with_the_number_of_edited_elements"),
    ("requantization", "semantics", "proved by recomputation",
     ("quantized codes requantized by another arithmetic: float32 scales (a division by s_out or a "
      "multiply by its float32 reciprocal, the zero point added before rounding), or a Q31 (double "
      "rounding) or Q8 fixed-point multiplier"),
     "conformance/triage/quantized.py",
     "tests/quantized/test_quantized.py::test_quantized_command_reports_code_differences_as_json"),
    ("quant-params", "semantics", "proved by recomputation",
     "quantized codes computed with another scale or zero point (s_in, z_in, s_out or z_out) than declared",
     "conformance/triage/quantized.py",
     "tests/quantized/test_triage.py::test_defects_made_outside_the_models_are_named"),
    ("code-saturation", "semantics", "proved by recomputation",
     "quantized codes wrapped around the code range instead of saturating at it, or saturated at the narrow range",
     "conformance/triage/quantized.py",
     "tests/quantized/test_triage.py::test_wrapping_instead_of_saturating_is_code_saturation"),
    ("position-split", "location", "proved by recomputation",
     ("the result depends on the element's position: a vector body before a boundary and a scalar "
      "tail after it, each reproduced by its own requantization rule"),
     "conformance/triage/quantized.py",
     "tests/quantized/test_triage.py::test_the_torch_split_is_named_with_its_boundary"),
    ("reduction-order", "semantics", "proved by recomputation",
     ("a sum (PReLU's dweight) added in another order or accumulator: shares rounded to the input dtype, "
      "a float32 or float64 accumulator, sequential, pairwise or per tile of a plan"),
     "conformance/triage/prelu.py",
     "tests/prelu/test_triage.py::test_a_float32_sequential_dweight_is_reduction_order"),
)

REGISTRY: dict[str, Category] = {
    name: Category(name, group, order, kind, summary, defined, proved)
    for order, (name, group, kind, summary, defined, proved) in enumerate(_TABLE)
}
NAMES: tuple[str, ...] = tuple(REGISTRY)
SEMANTIC: tuple[str, ...] = tuple(c.name for c in REGISTRY.values() if c.group == "semantics")


def check(name: str) -> Category:
    """The registry entry for ``name``; an unknown name raises."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownCategory(f"unknown triage category {name!r}; registered: "
                              f"{', '.join(NAMES)}") from None


def order(name: str) -> int:
    """Sort key of a category (raises for an unknown name)."""
    return check(name).order


def ordered(names: Iterable[str]) -> list[str]:
    """Distinct ``names`` in registry order (raises for an unknown name)."""
    return sorted(set(names), key=order)


#: How a finding-detail field combines when two claims of a category merge within one batch
#: (``claims``) or two findings merge across the batches or chunks of one row (``findings``):
#: counts add up, the greatest ULP is the greater, a confirmation holds when either holds,
#: ``first`` keeps the first one's value.  A field not listed keeps the first one's value.
#: - ``max_ulp`` within a batch: a rounding rule's claim comes before the residue's ``rounding``
#:   and keeps the greatest ULP of the elements the rule proves, not the residue's (at most 1).
#: - ``confirmed_by_inf`` across batches: whether some batch refutes a saturation is judged on
#:   every batch's own value (:func:`merge_findings`) before the findings merge, and the
#:   merged detail reports the first batch's.
DETAIL_MERGE: Mapping[str, tuple[Merge, Merge]] = {
    **dict.fromkeys(("before", "after", "mismatching", "explained", "contradicted", "subnormal_inputs",
                     "subnormal_outputs", "nan_to_zero", "inf_to_max", "clamped", "inf_to_limit",
                     "nan_to_limit"), ("sum", "sum")),
    "max_ulp": ("first", "max"),
    "confirmed_by_inf": ("any", "first"),
}
Scope = Literal["claims", "findings"]


def merge_detail(first: dict, second: dict, *, scope: Scope) -> dict:
    """``first``'s detail joined with ``second``'s by :data:`DETAIL_MERGE` for ``scope``, for the
    fields both hold; every other one keeps ``first``'s value.  The keys come in ``second``'s
    order, then ``first``'s others."""
    out = {**second, **first}
    for key in first.keys() & second.keys():
        how = DETAIL_MERGE.get(key, ("first", "first"))[scope == "findings"]
        if how == "sum":
            out[key] = first[key] + second[key]
        elif how == "max":
            out[key] = max(first[key], second[key])
        elif how == "any":
            out[key] = bool(first[key] or second[key])
    return out


#: Categories whose every element fails the gate, its value within tolerance or not: two cores
#: raced to write it, so the value seen is the luck of one run (writes outside the tensor have
#: no value to compare and count in full too).
VIOLATE_IN_FULL: frozenset[str] = frozenset({"write-race"})


def saturation_refuted(found: Iterable[tuple[str, Mapping]]) -> bool:
    """Across the batches of a row, given each finding's (category, detail): some batch had a NaN
    become a number while no batch saw ±inf saturate (``confirmed_by_inf``)."""
    found = list(found)
    return any(c == "lost-nan" for c, _ in found) and not any(
        c == "saturation" and d.get("confirmed_by_inf") for c, d in found)


def relabelled(category: str, detail: Mapping, *, refuted: bool) -> Optional[tuple[str, str]]:
    """The (category, summary) a finding takes across batches, or None when it keeps its own: a
    saturation no batch confirmed, once refuted, is a lost NaN (a clamp to a limit is proved by
    its values and stays)."""
    if refuted and category == "saturation" and "limit" not in detail:
        return "lost-nan", "a NaN result became a number"
    return None


#: The generated columns of docs/reference/categories.md's table, in order.
TABLE_COLUMNS: tuple[str, ...] = ("category", "group", "meaning", "defined", "proved")


def _doc_link(text: str, path: str) -> str:
    """A markdown link to the repository file ``path``, relative to docs/reference/."""
    return f"[{text}](../../{path})"


def _defined_cell(category: Category) -> str:
    """The ``defined`` cell: the module, named under conformance/, linked."""
    return _doc_link(category.defined.removeprefix("conformance/"), category.defined)


def _proved_cell(category: Category) -> str:
    """The ``proved`` cell: the test, named by its path under tests/ and its function, linked
    to its file."""
    path, _, test = category.proved.partition("::")
    return _doc_link(f"{path.removeprefix('tests/')}::{test}", path)


def markdown_table() -> str:
    """The category table of docs/reference/categories.md, generated from the registry."""
    lines = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    lines += [f"| `{c.name}` | {c.group} | {c.summary} | {_defined_cell(c)} | {_proved_cell(c)} |"
              for c in REGISTRY.values()]
    return "\n".join(lines)
