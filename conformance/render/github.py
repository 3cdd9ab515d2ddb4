"""GitHub Actions: a markdown summary for the job page, and annotations for the rows that did not pass.

When ``GITHUB_STEP_SUMMARY`` names a file, :func:`publish` appends the verdict, the folded
table and the failing rows to it (GitHub shows the file on the run's summary page).  When
``GITHUB_ACTIONS`` is ``true``, it prints one ``::error`` workflow command per failing row
and one ``::warning`` per warned row, which GitHub shows as annotations.  Outside GitHub
Actions it does nothing.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Optional, TextIO

from conformance.dtypes import info as dtype_info
from conformance.records import Row
from conformance.render.console import Folded, fold, summary_line
from conformance.render.junit import failure_line, warning_message
from conformance.render.labels import row_label
from conformance.render.summary import RunInfo
from conformance.render.text import short_int

MAX_FAILING = 50  # failing rows listed in the summary; the rest are counted


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _group_line(group: Folded) -> str:
    first = group.rows[0]
    pair = f"{dtype_info(first.dtype).short}→{dtype_info(first.out_dtype).short}"
    found = ", ".join(f"{c} ×{short_int(n)}" for c, n, _ in group.categories())
    cells = [row_label(first), pair, first.direction,
             short_int(group.max_ulp), found, group.not_passing(), f"**{group.verdict}**"]
    return "| " + " | ".join(map(_cell, cells)) + " |"


def markdown(rows: Sequence[Row], *, info: RunInfo, interrupted: bool = False) -> str:
    """The step summary: the verdict line, the folded table, the failing rows with their message."""
    lines = [f"## LeakyReLU conformance: {summary_line(rows, interrupted=interrupted).rsplit(': ', 1)[1]}",
             "", summary_line(rows, interrupted=interrupted)
             + (f"; {len(info.skipped)} skipped (not supported by the backend)" if info.skipped else ""), ""]
    if rows:
        lines += ["| backend | dtype→out | direction | max ULP | findings (summed over α) | α not passing "
                  "| verdict |", "|---|---|---|---:|---|---|---|", *map(_group_line, fold(rows)), ""]
    failing = [r for r in rows if r.verdict == "fail"]
    if failing:
        lines += ["### Failing rows", ""] + [f"- {_cell(failure_line(r))}" for r in failing[:MAX_FAILING]]
        if len(failing) > MAX_FAILING:
            lines.append(f"- … and {len(failing) - MAX_FAILING} more (see the JSON or JUnit report)")
        lines.append("")
    return "\n".join(lines) + "\n"


def _escape(text: str, *, prop: bool = False) -> str:
    """A workflow command's data (or property, which also escapes ``:`` and ``,``)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def annotations(rows: Sequence[Row]) -> list[str]:
    """``::error`` per failing row, ``::warning`` per warned row, in row order."""
    found = []
    for row in rows:
        if row.verdict == "fail":
            found.append(f"::error title={_escape(str(row), prop=True)}::{_escape(failure_line(row))}")
        elif row.verdict == "warn":
            found.append(f"::warning title={_escape(str(row), prop=True)}::{_escape(warning_message(row))}")
    return found


def publish(rows: Sequence[Row], *, info: RunInfo, interrupted: bool = False,
            environ: Optional[Mapping[str, str]] = None, out: Optional[TextIO] = None) -> None:
    """The step summary and the annotations, as far as the environment asks for them."""
    env = os.environ if environ is None else environ
    summary_path = env.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        try:
            with open(summary_path, "a", encoding="utf-8") as handle:
                handle.write(markdown(rows, info=info, interrupted=interrupted))
        except OSError as exc:
            print(f"warning: GITHUB_STEP_SUMMARY {summary_path}: cannot append ({exc.strerror})",
                  file=sys.stderr)
    if env.get("GITHUB_ACTIONS") == "true":
        stream = sys.stdout if out is None else out
        for line in annotations(rows):
            print(line, file=stream)
        stream.flush()
