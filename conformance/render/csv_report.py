"""``--csv``: msprobe's two-dump workflow as a CSV file, one row per call and direction.

msprobe's own compare columns (``Cosine`` ... ``Five Thousandths Err Ratio``, with its
names and its values, device against benchmark: ``metrics.msprobe_columns``) stand beside
this tool's: whether the two outputs have the same bits and how many differ, each side's
mismatches against the golden, greatest ULP error, categories (``name=count``, ``;``
between) and verdict, and why the pair is what it is.  An interrupted run's file ends
with a row saying so.  The file is written atomically (``render.files.write_atomic``).
"""
from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Optional

from conformance.judge.call_pairs import CallPair
from conformance.metrics.msprobe_columns import HEADERS as MSPROBE_HEADERS
from conformance.metrics.msprobe_columns import cells
from conformance.records import Row
from conformance.render.files import write_atomic

HEADER = ("NPU Name", "Bench Name", "direction", "matched", "NPU Dtype", "Bench Dtype", "elements",
          *MSPROBE_HEADERS, "same bits", "differing",
          "device mismatches", "device max ULP", "device categories", "device verdict",
          "benchmark mismatches", "benchmark max ULP", "benchmark categories", "benchmark verdict", "why")
INTERRUPTED = "interrupted: the calls after the row above were not compared"


def categories(row: Row) -> str:
    """``alpha-precision=9;signed-zero=2``: the row's finding counts by category."""
    counts: dict[str, int] = {}
    for finding in row.findings:
        counts[finding.category] = counts.get(finding.category, 0) + finding.count
    return ";".join(f"{c}={n}" for c, n in sorted(counts.items()))


def _side(row: Optional[Row]) -> list[str]:
    if row is None:
        return ["", "", "", ""]
    return [str(row.metrics.mismatches), str(row.metrics.max_ulp), categories(row), row.verdict]


def _cells(pair: CallPair) -> list[str]:
    either = pair.device or pair.benchmark
    assert either is not None
    same = "" if pair.same_bits is None else "yes" if pair.same_bits else "no"
    differing = "" if pair.differing is None else str(pair.differing)
    return [pair.name if pair.device else "", pair.benchmark_name or (pair.name if pair.benchmark else ""),
            pair.direction, pair.matched, pair.device.out_dtype if pair.device else "",
            pair.benchmark.out_dtype if pair.benchmark else "", str(either.metrics.elements),
            *(cells(pair.columns) if pair.columns else [""] * len(MSPROBE_HEADERS)), same, differing,
            *_side(pair.device), *_side(pair.benchmark), pair.why]


def pairs_csv(pairs: Sequence[CallPair], *, complete: bool = True) -> bytes:
    """The CSV document: the header, a row per pair, and a last row when ``complete`` is False."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(_cells(p) for p in pairs)
    if not complete:
        writer.writerow(["(interrupted)", *[""] * (len(HEADER) - 2), INTERRUPTED])
    return out.getvalue().encode("utf-8")


def write_pairs_csv(pairs: Sequence[CallPair], path: str, *, complete: bool = True) -> None:
    """The CSV at ``path``, all at once; a failed write is a UsageError (exit 2, one line)."""
    write_atomic(path, pairs_csv(pairs, complete=complete), flag="--csv")
