"""The console's mark on rows that other tools' default checks pass but this tool finds differ.

``torch.assert_close``, msprobe, the ONNX backend tests, ``tf.test`` and ``jax.test`` would all pass
such a row (``judge.other_checks``), a NaN or infinity both sides hold counted as equal: the suite
feeds every special value, which a user's test with these checks leaves out or sets ``equal_nan``
for.  Its verdict cell gets :data:`MARK`, and one legend line under the table says what the mark
means.  The JSON row's ``other_checks`` has each check's literal verdict and detail.
"""
from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from conformance.judge.other_checks import NAMES, SHORT, all_pass_yet_differs
from conformance.records import Row

MARK = "†"


def is_marked(row: Row) -> bool:
    """Every other check passes the row, yet its bits differ from the golden."""
    return all_pass_yet_differs(row.other_checks, mismatches=row.metrics.mismatches)


def marked(verdict: Text, rows: Sequence[Row]) -> Text:
    """A verdict cell of ``rows`` (one row, or the alphas of a folded line), marked when any is."""
    return verdict.append(f" {MARK}", style="bold") if any(map(is_marked, rows)) else verdict


def legend(rows: Sequence[Row]) -> list[str]:
    """The one line that says what :data:`MARK` means (none when no row has it)."""
    if not any(map(is_marked, rows)):
        return []
    names = [SHORT[n] for n in NAMES]
    return [f"{MARK} passes {', '.join(names[:-1])} and {names[-1]} at their defaults (NaN/inf on both sides "
            "equal); differs here"]
