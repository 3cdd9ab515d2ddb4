"""Do two backends give the same bits on the same inputs?

Computed after the pipeline, from two rows' actual outputs and their two
triages against golden, never inside a backend.  Bits are compared in the
output dtype's unsigned view: any NaN equals any NaN, and +0 differs from -0.
Only batches whose inputs are bit-identical on both sides are compared; a
backend's own boundary sizes that the other side did not run are left out.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from conformance.dtypes import is_nan, to_bits
from conformance.report.evaluate import Row

NOT_COMPARABLE = "not comparable: different inputs"


@dataclass(frozen=True)
class Output:
    """One batch of one row: its inputs, what the backend returned (None: refused), its judged row."""

    label: str
    x: np.ndarray
    dy: Optional[np.ndarray]
    actual: Optional[np.ndarray]
    row: Row


@dataclass(frozen=True)
class Agreement:
    """How one backend's row compares, bit for bit, with the reference backend's row."""

    reference: str
    backend: str
    profile: Optional[str]
    dtype: str
    out_dtype: str
    direction: str
    alpha: float
    identical: bool
    differing: int
    elements: int
    why: str


def differing(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mask of elements whose bits differ; two NaNs of any payload agree."""
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    return (to_bits(a) != to_bits(b)) & ~(is_nan(a) & is_nan(b))


def _same_inputs(a: Output, b: Output) -> bool:
    def same(u: Optional[np.ndarray], v: Optional[np.ndarray]) -> bool:
        if u is None or v is None:
            return u is None and v is None
        return u.dtype == v.dtype and u.shape == v.shape and bool(np.array_equal(to_bits(u), to_bits(v)))
    return same(a.x, b.x) and same(a.dy, b.dy)


def shared(reference: Sequence[Output], other: Sequence[Output]) -> list[tuple[Output, Output]]:
    """The batches both sides ran on identical inputs, and both computed (neither refused)."""
    by_label = {o.label: o for o in reference}
    pairs = [(by_label[o.label], o) for o in other if o.label in by_label]
    return [(r, o) for r, o in pairs if _same_inputs(r, o) and r.actual is not None and o.actual is not None]


def _categories(outputs: Sequence[Output]) -> dict[str, int]:
    """Finding counts by category over some batches of one row."""
    counts: dict[str, int] = {}
    for out in outputs:
        for f in out.row.findings:
            counts[f.category] = counts.get(f.category, 0) + f.count
    return counts


def _phrase(counts: dict[str, int]) -> str:
    return ", ".join(f"{c} ×{n:,}" for c, n in sorted(counts.items())) or "exact there"


def why(reference: str, backend: str, *, ref_counts: dict[str, int], counts: dict[str, int]) -> str:
    """One phrase from both sides' triage against golden of the compared batches."""
    if ref_counts and ref_counts.keys() == counts.keys():
        return f"both: {', '.join(sorted(counts))}"
    return f"{backend}: {_phrase(counts)}; {reference}: {_phrase(ref_counts)}"


def agree(reference: Sequence[Output], other: Sequence[Output]) -> Agreement:
    """``other``'s row against ``reference``'s row on the batches they share."""
    pairs = shared(reference, other)
    ref_row, row = reference[0].row, other[0].row
    diff = sum(int(differing(r.actual, o.actual).sum()) for r, o in pairs)  # type: ignore[arg-type]
    elements = sum(o.x.size for _, o in pairs)
    if not pairs:
        text = NOT_COMPARABLE
    elif diff == 0:
        text = "identical"
    else:
        text = why(ref_row.backend, row.backend, ref_counts=_categories([r for r, _ in pairs]),
                   counts=_categories([o for _, o in pairs]))
    return Agreement(ref_row.backend, row.backend, row.profile, row.dtype, row.out_dtype, row.direction,
                     row.alpha, identical=bool(pairs) and diff == 0, differing=diff, elements=elements,
                     why=text)


class Collector:
    """Keeps the reference backend's outputs per row and compares every other row with them.
    The reference's rows must arrive before the rows compared with them."""

    def __init__(self, reference: str):
        self.reference = reference
        self.kept: dict[tuple, list[Output]] = {}
        self.found: list[Agreement] = []

    def add(self, outputs: Sequence[Output]) -> None:
        row = outputs[0].row
        key = (row.dtype, row.out_dtype, row.direction, row.alpha)
        if row.backend == self.reference:
            self.kept[key] = list(outputs)
        elif key in self.kept:
            self.found.append(agree(self.kept[key], outputs))

