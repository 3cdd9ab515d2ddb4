"""CI baselines: what changed between two reports, finding by finding.

Both ``conformance run --baseline OLD`` and ``conformance diff OLD NEW`` use
:func:`compare` on the rows of two JSON reports (``render.baseline`` reads and shows them).
Findings are matched by row (backend, dtype, out_dtype,
direction, alpha bits) and category.  A run has one profile and one variant per
backend, so the profile and variant are not part of the match: a baseline made
on ``--profile ascend910b1`` compares with a run on ``ascend310p3`` (the row
names both).  Reports whose rows would collide so (merged by hand) are matched
with profile and variant too.  Each change is one of:

- ``new``: the category is in the new row, not in the old one (or the row is new);
- ``fixed``: it was in the old row and the new row no longer has it;
- ``grown``: its ``count`` or its ``violations`` (elements outside tolerance) grew;
- ``shrunk``: neither grew and at least one of them shrank;
- ``now-fails``: the same numbers, but the finding fails its row where it was allowed.

A change **gates** (exit 1) when it is ``new``, ``grown`` or ``now-fails`` and the
finding is not allowed (it fails its row).  A failure already in the baseline at the
same or a smaller size does not gate.  Rows present in only one report are listed
(``rows_only_in_old`` do not gate: a row that did not run is not fixed).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional

from conformance.records import Row, backend_label, pair_text

DIFF_SCHEMA = "leakyrelu-conformance-diff/1"
STATUSES = ("new", "grown", "now-fails", "shrunk", "fixed")
GATING = ("new", "grown", "now-fails")
_KEY = ("backend", "dtype", "out_dtype", "direction")
_FULL_KEY = ("backend", "profile", "variant", "dtype", "out_dtype", "direction")


@dataclass(frozen=True)
class Size:
    """A finding's size in one report."""

    count: int
    violations: int
    allowed: bool

    def as_dict(self) -> dict:
        return {"count": self.count, "violations": self.violations, "allowed": self.allowed}


@dataclass(frozen=True)
class Change:
    """One category of one row that differs between the reports."""

    row: str  # the row's spelling, e.g. "cann[ascend910b1/reference] fp16 forward alpha=0.2"
    category: str
    status: str
    old: Optional[Size]
    new: Optional[Size]
    key: tuple[tuple[str, Any], ...] = ()  # the new row's identifying fields (alpha as its value object)

    @property
    def gates(self) -> bool:
        return self.status in GATING and self.new is not None and not self.new.allowed

    def as_dict(self) -> dict:
        return {"row": self.row, "key": dict(self.key), "category": self.category, "status": self.status,
                "gates": self.gates,
                "old": None if self.old is None else self.old.as_dict(),
                "new": None if self.new is None else self.new.as_dict()}


@dataclass(frozen=True)
class Diff:
    """Every change, and the rows that only one report has."""

    changes: tuple[Change, ...]
    only_old: tuple[str, ...]
    only_new: tuple[str, ...]

    @property
    def gating(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.gates)

    @property
    def verdict(self) -> str:
        return "fail" if self.gating else "pass"

    def tally(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.changes) for s in STATUSES}

    def as_dict(self, *, old: str, new: str) -> dict:
        return {"schema": DIFF_SCHEMA, "old": old, "new": new, "verdict": self.verdict,
                "counts": self.tally(), "changes": [c.as_dict() for c in self.changes],
                "rows_only_in_old": list(self.only_old), "rows_only_in_new": list(self.only_new)}


# ----------------------------------------------------------------------------- reading

def row_key(row: dict, *, full: bool = False) -> tuple:
    return (*(row[k] for k in (_FULL_KEY if full else _KEY)), row["alpha"]["bits"])


def _who(row: dict) -> str:
    """The brackets' words of a row's label (``ascend910b1/reference``), as ``backend_label`` writes them."""
    return backend_label("", row["profile"], row["variant"]).strip("[]")


def row_title(row: dict, *, old: Optional[dict] = None) -> str:
    """The row's one spelling (``str(RowKey)``); ``[old -> new]`` when the baseline row had
    another profile or variant."""
    who = _who(row)
    if old is not None and _who(old) != who:
        who = f"{_who(old) or '-'} -> {who or '-'}"
    name = row["backend"] + (f"[{who}]" if who else "")
    return f"{name} {pair_text(row['dtype'], row['out_dtype'])} {row['direction']} alpha={row['alpha']['decimal']}"


def _sizes(row: dict) -> dict[str, Size]:
    return {f["category"]: Size(f["count"], f["violations"], f["allowed"]) for f in row["findings"]}


# ----------------------------------------------------------------------------- comparing

def status(old: Optional[Size], new: Optional[Size]) -> Optional[str]:
    """How one category changed (None: unchanged)."""
    if old is None:
        return None if new is None else "new"
    if new is None:
        return "fixed"
    if new.count > old.count or new.violations > old.violations:
        return "grown"
    if new.count < old.count or new.violations < old.violations:
        return "shrunk"
    return "now-fails" if old.allowed and not new.allowed else None


def _row_changes(row: dict, before: Optional[dict]) -> list[Change]:
    """The changed categories of ``row`` against its baseline row (None: the row is new)."""
    old, new = (_sizes(before) if before else {}), _sizes(row)
    title, key = row_title(row, old=before), tuple((k, row[k]) for k in (*_FULL_KEY, "alpha"))
    changes = []
    for category in dict.fromkeys([*old, *new]):
        found = status(old.get(category), new.get(category))
        if found is not None:
            changes.append(Change(title, category, found, old.get(category), new.get(category), key))
    return changes


def _by_key(rows: Sequence[dict], *, full: bool) -> dict[tuple, dict]:
    return {row_key(r, full=full): r for r in rows}


def _unique(rows: Sequence[dict]) -> bool:
    return len({row_key(r) for r in rows}) == len(rows)


def compare(old_rows: Sequence[dict], new_rows: Sequence[dict]) -> Diff:
    """The changes from ``old_rows`` to ``new_rows`` (row dicts as the JSON report has them)."""
    full = not (_unique(old_rows) and _unique(new_rows))
    old, new = _by_key(old_rows, full=full), _by_key(new_rows, full=full)
    changes: list[Change] = []
    for key, row in new.items():
        changes += _row_changes(row, old.get(key))
    order = {s: i for i, s in enumerate(STATUSES)}
    return Diff(tuple(sorted(changes, key=lambda c: order[c.status])),
                tuple(row_title(r) for k, r in old.items() if k not in new),
                tuple(row_title(r) for k, r in new.items() if k not in old))


def known_failures(old_rows: Sequence[dict], new_rows: Sequence[dict]) -> list[frozenset[str]]:
    """Per new row, the categories that fail it and do not gate: the baseline has them at the
    same or a larger size (what ``run --baseline`` judges as known, not failing)."""
    full = not (_unique(old_rows) and _unique(new_rows))
    old = _by_key(old_rows, full=full)
    known = []
    for row in new_rows:
        gating = {c.category for c in _row_changes(row, old.get(row_key(row, full=full))) if c.gates}
        known.append(frozenset(f["category"] for f in row["findings"]
                               if not f["allowed"] and f["category"] not in gating))
    return known


def judged_against(rows: Sequence[Row], doc: dict, *, against: str, as_dicts: Sequence[dict]) -> list[Row]:
    """``rows`` judged against the baseline report ``doc``: a row whose every failing finding the
    baseline already has (at the same or a larger size) warns, with a note naming the baseline,
    so the console, the exit code, JSON and JUnit give the one verdict of the baseline gate.
    ``as_dicts`` are ``rows`` as the JSON report writes them (``render.export.row_dict``)."""
    known = known_failures(doc["rows"], as_dicts)
    return [_known(row, cats, against=against) for row, cats in zip(rows, known, strict=True)]


def _known(row: Row, known: frozenset[str], *, against: str) -> Row:
    failing = {f.category for f in row.findings if f.gated}
    if row.verdict != "fail" or not failing or not failing <= known:
        return row
    note = f"fails as in the baseline {against} ({', '.join(sorted(failing))}): not gated"
    return replace(row, verdict="warn", notes=(*row.notes, note))
