"""What a report says about the run beside its rows: counts, skipped rows, command, timings,
and each backend's agreement with a reference in a line.

:class:`RunInfo` is handed from the command to the report writers.  Everything in it but
the timings is the same on every run of one command and seed; the timings are kept
apart (:func:`durations`, a row's ``seconds``) so a tool can mask them and compare the
rest of two reports byte for byte.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from conformance.judge.gate import CATEGORIES, VERDICTS, GateConfig
from conformance.records import Skip

if TYPE_CHECKING:
    from conformance.judge.agreement import Agreement
    from conformance.records import Row


@dataclass(frozen=True)
class RunInfo:
    """The run around the rows.  ``seconds`` maps a row's key to the seconds it took."""

    command: Optional[tuple[str, ...]] = None
    versions: Mapping[str, str] = field(default_factory=dict)  # of the frameworks that ran
    environment: Mapping[str, Any] = field(default_factory=dict)  # the machine and FTZ/DAZ (conformance.machine)
    skipped: tuple[Skip, ...] = ()
    seconds: Mapping[tuple, float] = field(default_factory=dict)
    total_seconds: Optional[float] = None

    def seconds_of(self, row: Row) -> Optional[float]:
        found = self.seconds.get(row.key)
        return None if found is None else round(float(found), 6)


def command_line(argv: Optional[Sequence[str]] = None) -> tuple[str, ...]:
    """``conformance`` and the arguments this process was given (``sys.argv`` by default)."""
    args = sys.argv[1:] if argv is None else argv
    return ("conformance", *args)


def _label(row: Row) -> str:
    return row.label


def _verdict_counts(rows: Sequence[Row], skipped: Sequence[Skip]) -> dict[str, int]:
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    return {**counts, "skipped": len(skipped)}


def _by_backend(rows: Sequence[Row], skipped: Sequence[Skip]) -> dict[str, dict[str, int]]:
    labels = dict.fromkeys([*map(_label, rows), *(s.label for s in skipped)])
    return {label: _verdict_counts([r for r in rows if _label(r) == label],
                                   [s for s in skipped if s.label == label]) for label in labels}


def _by_category(rows: Sequence[Row]) -> dict[str, dict[str, int]]:
    """Per category, in registry order: rows with it, its elements summed, rows where it is not allowed."""
    found: dict[str, dict[str, int]] = {}
    for f in (f for r in rows for f in r.findings):
        entry = found.setdefault(f.category, {"rows": 0, "elements": 0, "not_allowed_rows": 0})
        entry["rows"] += 1
        entry["elements"] += f.count
        entry["not_allowed_rows"] += f.gated
    return {c: found[c] for c in CATEGORIES if c in found}


def _skip_reasons(skipped: Sequence[Skip]) -> list[dict]:
    groups: dict[tuple[str, str], int] = {}
    for s in skipped:
        groups[(s.label, s.reason)] = groups.get((s.label, s.reason), 0) + 1
    return [{"backend": b, "reason": why, "rows": n} for (b, why), n in groups.items()]


def durations(rows: Sequence[Row], info: RunInfo) -> dict:
    """Every timing of the report but the rows' own ``seconds``: the whole run, the rows summed,
    each backend's rows summed (null where the command did not time them)."""
    timed = [(r, info.seconds_of(r)) for r in rows]
    per_backend: dict[str, float] = {}
    for row, s in timed:
        if s is not None:
            per_backend[_label(row)] = per_backend.get(_label(row), 0.0) + s
    total_rows = sum(s for _, s in timed if s is not None) if per_backend else None
    return {"total_seconds": None if info.total_seconds is None else round(info.total_seconds, 6),
            "rows_seconds": None if total_rows is None else round(total_rows, 6),
            "backends": [{"backend": b, "seconds": round(s, 6)} for b, s in per_backend.items()]}


def summary_dict(rows: Sequence[Row], info: RunInfo, *, config: Optional[GateConfig] = None) -> dict:
    """The report's ``summary``: counts by verdict, category and backend, the skipped rows' reasons,
    the command line, the configuration that judged the rows, and the durations."""
    return {"rows": len(rows), "verdicts": _verdict_counts(rows, info.skipped),
            "categories": _by_category(rows), "backends": _by_backend(rows, info.skipped),
            "skipped": _skip_reasons(info.skipped),
            "command": None if info.command is None else list(info.command),
            "config": None if config is None else config.described,
            "durations": durations(rows, info)}


NO_INFO = RunInfo()  # a report written without word of its run: no command, no timings, nothing skipped


@dataclass(frozen=True)
class AgreementTally:
    """One backend's agreement with a reference backend: its compared rows, how many have the same
    bits, the differing elements summed, and the rows per cause (largest first)."""

    backend: str  # the label: ``cann[ascend910b1]``
    rows: int
    identical: int
    differing: int  # elements, over every row
    causes: tuple[tuple[str, int], ...]  # (cause in a word, rows)

    @property
    def differing_rows(self) -> int:
        return self.rows - self.identical


def agreement_by_backend(found: Sequence[Agreement]) -> list[AgreementTally]:
    """Per backend (with its profile), in first-seen order, the tally of its agreement rows."""
    groups: dict[str, list[Agreement]] = {}
    for a in found:
        groups.setdefault(a.backend + (f"[{a.profile}]" if a.profile else ""), []).append(a)
    return [_tally(label, rows) for label, rows in groups.items()]


def _tally(label: str, rows: Sequence[Agreement]) -> AgreementTally:
    causes: dict[str, int] = {}
    for a in rows:
        if not a.identical:
            causes[a.cause] = causes.get(a.cause, 0) + 1
    ranked = tuple(sorted(causes.items(), key=lambda kv: -kv[1]))
    return AgreementTally(label, len(rows), sum(a.identical for a in rows),
                          sum(a.differing for a in rows), ranked)
