"""Do two backends give the same bits on the same inputs?

Computed after the pipeline, from two rows' actual outputs and their two
triages against golden, never inside a backend.  Bits are compared in the
output dtype's unsigned view: any NaN equals any NaN, and +0 differs from -0.
Only batches whose inputs are bit-identical on both sides are compared; a
backend's own boundary sizes that the other side did not run are left out.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from conformance.dtypes import is_nan, to_bits
from conformance.records import Row, RowKey

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
class Agreement(RowKey):
    """How one backend's row (its key) compares, bit for bit, with the reference backend's row."""

    reference: str
    identical: bool
    differing: int
    elements: int
    why: str
    causes: tuple[str, ...] = ()  # categories whose counts differ between the two sides, largest gap first

    @property
    def cause(self) -> str:
        """The difference in a word: the first cause, ``identical`` or ``not comparable``."""
        if not self.elements:
            return "not comparable"
        return "identical" if self.identical else (self.causes or ("unexplained",))[0]


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
        for category, n in _categories_of(out.row).items():
            counts[category] = counts.get(category, 0) + n
    return counts


def _categories_of(row: Row) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in row.findings:
        counts[f.category] = counts.get(f.category, 0) + f.count
    return counts


def _phrase(counts: dict[str, int]) -> str:
    return ", ".join(f"{c} ×{n:,}" for c, n in sorted(counts.items())) or "exact there"


def why(reference: str, backend: str, *, ref_counts: dict[str, int], counts: dict[str, int]) -> str:
    """One phrase from both sides' triage against golden of the compared batches."""
    if ref_counts and ref_counts.keys() == counts.keys():
        return f"both: {', '.join(sorted(counts))}"
    return f"{backend}: {_phrase(counts)}; {reference}: {_phrase(ref_counts)}"


def causes(*, ref_counts: dict[str, int], counts: dict[str, int]) -> tuple[str, ...]:
    """The categories whose counts differ between the two sides' triage against golden, the
    largest gap first (ties by name); when no count differs, every category either side shows."""
    gaps = {c: abs(counts.get(c, 0) - ref_counts.get(c, 0)) for c in {*counts, *ref_counts}}
    ranked = sorted(gaps, key=lambda c: (-gaps[c], c))
    return tuple(c for c in ranked if gaps[c]) or tuple(ranked)


def agree(reference: Sequence[Output], other: Sequence[Output]) -> Agreement:
    """``other``'s row against ``reference``'s row on the batches they share."""
    pairs = shared(reference, other)
    diff = sum(int(differing(r.actual, o.actual).sum()) for r, o in pairs)  # type: ignore[arg-type]
    return judged(reference[0].row, other[0].row, differing=diff, elements=sum(o.actual.size for _, o in pairs),  # type: ignore[union-attr]
                  ref_counts=_categories([r for r, _ in pairs]), counts=_categories([o for _, o in pairs]))


def judged(ref_row: Row, row: Row, *, differing: int, elements: int, ref_counts: dict[str, int],
           counts: dict[str, int], names: Optional[tuple[str, str]] = None) -> Agreement:
    """The agreement of two rows from the count of differing elements over ``elements`` compared
    (0: nothing comparable) and both sides' finding counts there; ``names`` (reference, other)
    stand for the rows' backends in the text."""
    ref_name, name = names or (ref_row.backend, row.backend)
    found: tuple[str, ...] = ()
    if not elements:
        text = NOT_COMPARABLE
    elif differing == 0:
        text = "identical"
    else:
        text = why(ref_name, name, ref_counts=ref_counts, counts=counts)
        found = causes(ref_counts=ref_counts, counts=counts)
    return Agreement(name, row.profile, row.variant, row.dtype, row.out_dtype, row.direction, row.alpha, op=row.op,
                     reference=ref_name, identical=bool(elements) and differing == 0, differing=differing,
                     elements=elements, why=text, causes=found)


def from_chunks(pairs: Iterable[tuple[np.ndarray, np.ndarray]], *, ref_row: Row, row: Row,
                names: tuple[str, str]) -> Agreement:
    """Two whole outputs of the same inputs, read as consecutive (reference, other) chunks, each
    judged against golden as ``ref_row`` and ``row`` (a device's dump against another's)."""
    diff = elements = 0
    for ref, mine in pairs:
        diff += int(differing(ref, mine).sum())
        elements += int(np.asarray(mine).size)
    return judged(ref_row, row, differing=diff, elements=elements, ref_counts=_categories_of(ref_row),
                  counts=_categories_of(row), names=names)


class Collector:
    """Keeps the reference backends' outputs per row and compares every later row of another
    backend with each of them: ``references`` in the order their rows arrive, which must be
    before the rows compared with them.  With every backend a reference, each pair is compared
    once (the later backend against the earlier).  Rows arrive grouped by (dtype, out_dtype,
    direction, alpha): a row of another group releases the kept outputs."""

    def __init__(self, references: Sequence[str]):
        self.references = tuple(references)
        self.kept: dict[tuple, list[list[Output]]] = {}
        self.found: list[Agreement] = []

    def add(self, outputs: Sequence[Output]) -> None:
        """Compare one row's outputs (the batches every backend ran) with the kept references'."""
        if not outputs:
            return
        row = outputs[0].row
        key = (row.dtype, row.out_dtype, row.direction, row.alpha)
        if key not in self.kept:
            self.kept.clear()
        earlier = [kept for kept in self.kept.get(key, []) if kept[0].row.backend != row.backend]
        self.found += [agree(kept, outputs) for kept in earlier]
        if row.backend in self.references:
            self.kept.setdefault(key, []).append(list(outputs))



# ----------------------------------------------------------------------------- the matrix

@dataclass(frozen=True)
class Cell:
    """Two backends on one (dtype, out_dtype, direction), over every alpha both ran."""

    dtype: str
    out_dtype: str
    direction: str
    first: str
    second: str
    differing: int
    elements: int
    rows: int  # the alphas compared
    causes: tuple[str, ...]  # by differing elements, largest first; "not comparable" for a row with no shared batch

    @property
    def identical(self) -> bool:
        return self.elements > 0 and self.differing == 0 and "not comparable" not in self.causes

    @property
    def cause(self) -> str:
        return "identical" if self.identical else (self.causes or ("unexplained",))[0]


def cells(found: Sequence[Agreement]) -> list[Cell]:
    """One cell per (dtype, out_dtype, direction, pair of backends), in the order first seen."""
    groups: dict[tuple, list[Agreement]] = {}
    for a in found:
        groups.setdefault((a.dtype, a.out_dtype, a.direction, a.reference, a.backend), []).append(a)
    return [_cell(key, group) for key, group in groups.items()]


def _cell(key: tuple, group: Sequence[Agreement]) -> Cell:
    weight: dict[str, int] = {}
    for a in group:
        if not a.identical:
            weight[a.cause] = weight.get(a.cause, 0) + max(a.differing, 1)
    ranked = tuple(sorted(weight, key=lambda c: (-weight[c], c)))
    return Cell(*key, differing=sum(a.differing for a in group), elements=sum(a.elements for a in group),
                rows=len(group), causes=ranked)


# ----------------------------------------------------------------------------- a migration

@dataclass(frozen=True)
class Migration:
    """Does ``target`` give ``source``'s bits?  ``outcome``: identical, within or differs."""

    source: str
    target: str
    outcome: str
    categories: tuple[str, ...]  # every cause of a difference, sorted
    outside: tuple[str, ...]  # the causes not among the accepted categories
    differing: int
    elements: int
    rows: int
    rows_differing: int

    @property
    def line(self) -> str:
        """The one-line verdict."""
        counts = (f"{self.differing:,} of {self.elements:,} elements differ in {self.rows_differing} of "
                  f"{self.rows} rows")
        head = f"{self.source} → {self.target}: "
        if self.outcome == "identical":
            return head + f"identical ({self.elements:,} elements in {self.rows} rows, bit for bit)"
        if self.outcome == "within":
            return head + f"differs within {', '.join(self.categories)} ({counts})"
        return head + f"differs: {', '.join(self.outside)} ({counts})"


def migration(found: Sequence[Agreement], *, source: str, target: str,
              accepted: frozenset[str] = frozenset()) -> Migration:
    """The verdict of moving from ``source`` to ``target``: identical, differs only by ``accepted``
    categories (``within``), or differs otherwise (a row with no shared batch differs)."""
    mine = [a for a in found if {a.reference, a.backend} == {source, target}]
    off = [a for a in mine if not a.identical]
    categories = tuple(sorted({c for a in off for c in (a.causes or (a.cause,))}))
    outside = tuple(c for c in categories if c not in accepted)
    outcome = "identical" if not off else "within" if not outside else "differs"
    return Migration(source, target, outcome, categories, outside, differing=sum(a.differing for a in mine),
                     elements=sum(a.elements for a in mine), rows=len(mine), rows_differing=len(off))
