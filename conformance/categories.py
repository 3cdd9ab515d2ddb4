"""THE registry of triage categories: name, group, order, kind, summary; and how each
finding-detail field merges when two claims or findings of one category are joined.

Triage claims only categories registered here; the gate's policy, the merge
order, the JSON schema enum, selftest's expectations and docs/reference/categories.md are
derived from or checked against this table.  An unknown name is an error
(:func:`check`), never a silent drop.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from conformance.errors import UnknownCategory

Group = Literal["refused", "hazards", "semantics", "location", "value class", "residue"]
Merge = Literal["sum", "max", "any"]
Kind = Literal["refusal", "hazard", "proved by recomputation", "proved by confinement",
               "value class", "residue"]


@dataclass(frozen=True)
class Category:
    """One triage category; ``order`` is its place in the triage and in every report."""

    name: str
    group: Group
    order: int
    kind: Kind
    summary: str


_TABLE: tuple[tuple[str, Group, Kind, str], ...] = (
    ("rejected-input", "refused", "refusal", "the backend refused the input"),
    ("out-of-bounds-write", "hazards", "hazard",
     "the kernel wrote outside the output tensor (emulator red zones)"),
    ("write-race", "hazards", "hazard", "two cores wrote the same element"),
    ("input-modified", "hazards", "hazard",
     "the backend wrote into its input (x or dy differed after the call); golden uses an untouched copy"),
    ("input-precision", "semantics", "proved by recomputation",
     "operands narrowed (e.g. fp32 cast to fp16) before computing, or a 16-bit result widened"),
    ("alpha-mismatch", "semantics", "proved by recomputation",
     "negative side computed with another slope (effective_alpha; whose default it is)"),
    ("alpha-precision", "semantics", "proved by recomputation",
     "slope rounded to the compute dtype before multiplying"),
    ("formulation", "semantics", "proved by recomputation",
     ("another formula: max(x, a*x), min(x, a*x), max(x,0)+a*min(x,0), mask-multiply, "
      "the gradient of maximum(a*x, x), applied twice, x >= 0, swapped branches or operands, "
      "a gradient selected on y")),
    ("subnormal-flush", "semantics", "proved by recomputation",
     "subnormal inputs read as zero (DAZ) and/or subnormal results flushed (FTZ)"),
    ("saturation", "semantics", "proved by recomputation",
     ("NaN became 0 and/or ±inf became ±max (saturation mode), or results clamped to ±L for a "
      "limit L the data shows (another dtype's finite max, a fused clamp)")),
    ("grad-at-zero", "semantics", "proved by recomputation",
     "backward at x == 0 used slope 1 instead of alpha (or the reverse)"),
    ("nan-gradient", "semantics", "proved by recomputation",
     "backward at x = NaN gave 0, dy*0, dy or NaN instead of alpha*dy"),
    ("grad-step", "semantics", "proved by recomputation",
     ("backward as a step function of x (the TBE pre-v200 kernel): a positive subnormal x got "
      "a fraction of dy instead of dy")),
    ("tail-block", "location", "proved by confinement",
     ("the remaining errors all lie in the tail (tail tiles, the last partial block, or the "
      "last k elements) and the rest is clean")),
    ("stale-block", "location", "proved by confinement",
     ("the remaining errors fill one block or every k-th element away from the tail (a tile, a row, "
      "a stride), the same kinds of input elsewhere are right, or the output is shifted by k "
      "elements: stale, unwritten or misplaced data")),
    ("layout", "location", "proved by recomputation",
     ("the output is golden in another memory layout read back flat: an axis permutation "
      "(NCHW read as NHWC, a transpose) or a packed NC1HWC0 layout with zero padding")),
    ("overflow", "value class", "value class", "golden finite, actual ±inf"),
    ("spurious-nan", "value class", "value class", "actual NaN, golden not"),
    ("lost-nan", "value class", "value class", "golden NaN, actual not (and not saturation)"),
    ("signed-zero", "value class", "value class", "both zero, sign differs"),
    ("rounding", "residue", "residue",
     "within 1 ULP of the exact result (proved when another rounding mode reproduces it)"),
    ("unexplained", "residue", "residue", "none of the above"),
    ("requantization", "semantics", "proved by recomputation",
     ("quantized codes requantized by another arithmetic: float32 scales (a division by s_out or a "
      "multiply by its float32 reciprocal, the zero point added before rounding), or a Q31 (double "
      "rounding) or Q8 fixed-point multiplier")),
    ("quant-params", "semantics", "proved by recomputation",
     "quantized codes computed with another scale or zero point (s_in, z_in, s_out or z_out) than declared"),
    ("code-saturation", "semantics", "proved by recomputation",
     "quantized codes wrapped around the code range instead of saturating at it, or saturated at the narrow range"),
    ("position-split", "location", "proved by recomputation",
     ("the result depends on the element's position: a vector body before a boundary and a scalar "
      "tail after it, each reproduced by its own requantization rule")),
)

REGISTRY: dict[str, Category] = {
    name: Category(name, group, order, kind, summary)
    for order, (name, group, kind, summary) in enumerate(_TABLE)
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


#: How a finding-detail field combines when two claims (one batch) or two findings (the
#: batches or chunks of one row) of a category merge: counts add up, the greatest ULP is
#: the greater, a confirmation holds when either holds.  A field not listed keeps the
#: first one's value.
DETAIL_MERGE: Mapping[str, Merge] = {
    "before": "sum", "after": "sum", "mismatching": "sum",
    "explained": "sum", "contradicted": "sum",
    "subnormal_inputs": "sum", "subnormal_outputs": "sum", "nan_to_zero": "sum", "inf_to_max": "sum",
    "clamped": "sum", "inf_to_limit": "sum", "nan_to_limit": "sum",
    "max_ulp": "max",
    "confirmed_by_inf": "any",
}


def merge_detail(first: dict, second: dict, *, keep_first: frozenset[str] = frozenset()) -> dict:
    """``first``'s detail joined with ``second``'s by :data:`DETAIL_MERGE`, for the fields
    both hold; the fields ``keep_first`` names, and every unlisted one, keep ``first``'s
    value.  The keys come in ``second``'s order, then ``first``'s others."""
    out = {**second, **first}
    for key in first.keys() & second.keys() - keep_first:
        how = DETAIL_MERGE.get(key)
        if how == "sum":
            out[key] = first[key] + second[key]
        elif how == "max":
            out[key] = max(first[key], second[key])
        elif how == "any":
            out[key] = bool(first[key] or second[key])
    return out


def markdown_table() -> str:
    """The category table of docs/reference/categories.md, generated from the registry."""
    lines = ["| category | group | meaning |", "|---|---|---|"]
    lines += [f"| `{c.name}` | {c.group} | {c.summary} |" for c in REGISTRY.values()]
    return "\n".join(lines)
