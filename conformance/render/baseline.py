"""A baseline report read, and the changes against it shown: a table, a summary line, a JSON file.

``conformance.judge.baseline`` finds the changes; this module reads the report they are
measured against (checked against the JSON schema) and shows what it found.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from conformance.errors import UsageError
from conformance.judge.baseline import Diff, Size
from conformance.render import export
from conformance.render.files import write_atomic


def load_report(path: str, *, flag: str) -> dict:
    """A JSON report, checked against ``export.SCHEMA``; a UsageError (exit 2) otherwise."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{flag} {path} does not exist; pass a report written by 'conformance run --json'") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{flag} {path}: cannot read it ({exc}); pass a readable report") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} {path} is not JSON ({exc.msg} at line {exc.lineno}); "
                         "pass a report written by 'conformance run --json'") from None
    except RecursionError:
        raise UsageError(f"{flag} {path} nests too deeply to be a report; "
                         "pass a report written by 'conformance run --json'") from None
    errors = export.validate(doc, export.SCHEMA)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise UsageError(f"{flag} {path} is not a {export.SCHEMA_ID} report: {errors[0]}{more}")
    return doc


def _size_text(size: Optional[Size]) -> str:
    if size is None:
        return "-"
    return f"{size.count} ({size.violations} out of tol{'' if size.allowed else ', fails'})"


def table(diff: Diff) -> Any:
    """A rich table of the changes: row, category, status, old and new size, whether it gates."""
    from rich.table import Table
    from rich.text import Text

    out = Table(title="changes against the baseline", title_justify="left")
    for name in ("row", "category", "change", "old", "new", "gate"):
        out.add_column(name, overflow="fold")
    for c in diff.changes:
        cells = (c.row, c.category, c.status, _size_text(c.old), _size_text(c.new), "FAIL" if c.gates else "")
        out.add_row(*map(Text, cells))  # plain text: "cann[...]" is no markup
    return out


def summary(diff: Diff, *, against: str) -> str:
    """One line: the counts per status and the gate's verdict."""
    counts = ", ".join(f"{n} {s}" for s, n in diff.tally().items())
    rows = ""
    if diff.only_old or diff.only_new:
        rows = f"; rows only in the baseline: {len(diff.only_old)}, only in this run: {len(diff.only_new)}"
    gate = f"{len(diff.gating)} new or grown failing" if diff.gating else "nothing new or grown fails"
    return f"against {against}: {counts}{rows}; {gate}: {diff.verdict.upper()}"


def render(diff: Diff, *, console: Any, against: str, quiet: bool = False) -> None:
    """The table (when anything changed and not quiet), the rows only one side has, the summary."""
    if not quiet:
        if diff.changes:
            console.print(table(diff))
        for label, titles in (("only in the baseline", diff.only_old), ("only in the new report", diff.only_new)):
            if titles:
                console.print(f"{len(titles)} row(s) {label}, e.g. {titles[0]}", markup=False, soft_wrap=True)
    console.print(summary(diff, against=against), markup=False, soft_wrap=True)


def write_json(diff: Diff, path: str, *, old: str, new: str, flag: str = "--json") -> None:
    write_atomic(path, (json.dumps(diff.as_dict(old=old, new=new), indent=2) + "\n").encode(), flag=flag)
