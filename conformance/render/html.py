"""The HTML report: one self-contained page, offline, of at most about 1 MB.

:func:`render_html` takes the report document ``render.export.report_dict(..., plots=True)``
builds and writes the page: a header that says what was run (the command, the rows with
their verdicts, backends, dtypes, directions, slopes, the seed, the policy, the versions),
the folded table, the agreement table when the document has one, then a section per
failing or warning row: its counts and findings, the table of its offending elements (the
findings' examples, as the console lists them) and its figures (``render.figures``: the
transfer picture, the ULP distances, the input value classes, the cell maps), drawn as
inline SVG.  The page holds no script and loads nothing.

A page has a budget (:data:`PAGE_BUDGET`): every shown row gets its section and table
first, most important first (failing rows, then each folded group's worst alpha); the
figures are added in that order while the budget lasts.  Rows left out are counted.

The header and each row's section are lists of parts (:data:`HEADER_PARTS`,
:data:`ROW_PARTS`): a function of the document (or of one row) to an HTML fragment, empty
when it has nothing to say.  A new part is one function added to its list.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import Any

from conformance.judge.gate import CATEGORIES
from conformance.records import DEFAULT_OP, RowKey, pair_text
from conformance.reference.quantized import QDTYPES
from conformance.render.console import plural
from conformance.render.figures import row_figures
from conformance.render.files import write_atomic
from conformance.render.labels import panel_title, setting_line, short_label
from conformance.render.page_style import STYLE
from conformance.render.svg import colour
from conformance.render.text import index_text, percent, short_float, short_int

PAGE_BUDGET = 950_000  # bytes a page may take; figures go to the most important rows first
WARNED_EXAMPLES = 2  # offenders per finding a warning row's table lists (a failing row's: all the finding keeps)
TABLES_SHARE = 0.75  # of what the header and tables leave, the most the rows' sections take before figures
_DIRECTION = {"forward": "fwd", "backward": "bwd"}
_RANK = {"pass": 0, "warn": 1, "fail": 2}


# ----------------------------------------------------------------------------- values from the document

def number(value: Any) -> float:
    """A number of the document: plain, or a value object (``{"hex", "bits", "decimal"}``)."""
    return float(value["decimal"]) if isinstance(value, dict) else float(value)


def row_key(row: dict) -> RowKey:
    """The row's identity, read back from the document."""
    return RowKey(row["backend"], row.get("profile"), row.get("variant"), row["dtype"], row["out_dtype"],
                  row["direction"], number(row["alpha"]), op=row.get("op", DEFAULT_OP))


def row_title(row: dict) -> str:
    """The row's spelling as the console's panel gives it: ``cann[ascend910b1/tail-dropped] fp16 forward alpha=0.2``."""
    return panel_title(row_key(row))


def _group_label(row: dict) -> tuple[str, str, str]:
    """(short label with the operator when not the default, dtypes, direction) of the row's folded group."""
    key = row_key(row)
    who = short_label(key) + ("" if key.op == DEFAULT_OP else f" {key.op}")
    return who, pair_text(row["dtype"], row["out_dtype"]), _DIRECTION[row["direction"]]


def _verdict(verdict: str) -> str:
    return f'<span class="{verdict}">{verdict}</span>'


# ----------------------------------------------------------------------------- the header

def _run_facts(report: dict) -> list[tuple[str, str]]:
    """(name, text) of what was run."""
    rows, summary = report["rows"], report.get("summary") or {}
    counts = summary.get("verdicts") or {v: sum(r["verdict"] == v for r in rows) for v in _RANK}
    tally = f"{plural(len(rows), 'row')}: {counts.get('pass', 0):,} passed, {counts.get('warn', 0):,} warned, " \
            f"{counts.get('fail', 0):,} failed" + (f"; {counts['skipped']:,} skipped" if counts.get("skipped") else "")
    facts = [("command", " ".join(summary["command"])) if summary.get("command") else None,
             ("rows", tally),
             ("backends", ", ".join(dict.fromkeys(short_label(row_key(r)) for r in rows))),
             ("dtypes", ", ".join(dict.fromkeys(pair_text(r["dtype"], r["out_dtype"]) for r in rows))),
             ("directions", ", ".join(dict.fromkeys(r["direction"] for r in rows))),
             ("α", ", ".join(dict.fromkeys(short_float(number(r["alpha"])) for r in rows))),
             ("seed", str(report["seed"])) if report.get("seed") is not None else None,
             ("policy", summary["config"]) if summary.get("config") else None,
             ("versions", ", ".join(f"{k} {v}" for k, v in (report.get("versions") or {}).items()))]
    return [(k, v) for k, v in (f for f in facts if f) if v]


def run_section(report: dict) -> str:
    """What was run, as a list of facts."""
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in _run_facts(report))
    return f'<section class="run"><dl>{items}</dl></section>'


def _state(value: Any) -> str:
    return "unknown" if value is None else "on" if value else "off"


def _machine_text(env: dict) -> str:
    """A machine's platform, CPU and floating-point state in one line (what ``environment`` holds)."""
    where = " ".join(str(v) for v in (env.get("platform"), env.get("machine"), env.get("cpu")) if v)
    flags = " ".join(map(str, env.get("cpu_flags") or ()))
    state = f"FTZ {_state(env.get('flush_to_zero'))}, DAZ {_state(env.get('denormals_are_zero'))}"
    device = f"device {env['device']}" if env.get("device") else ""
    return "; ".join(part for part in (where, flags, state, device) if part)


def environment_section(report: dict) -> str:
    """The machine the bits were made on, and each worker's own (empty when the report has none)."""
    env = report.get("environment") or {}
    if not env:
        return ""
    facts = [("machine", _machine_text(env)),
             *((f"worker {name}", _machine_text(own)) for name, own in (env.get("workers") or {}).items())]
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts)
    return f'<section class="environment"><dl>{items}</dl></section>'


HEADER_PARTS: list[Callable[[dict], str]] = [run_section, environment_section]


def header(report: dict) -> str:
    """The title with the verdict, then every header part."""
    partial = ' <span class="fail">(partial: the run was cut short)</span>' if report.get("partial") else ""
    return (f"<header><h1>LeakyReLU conformance: {_verdict(report['verdict'])}{partial}</h1>"
            + "".join(part(report) for part in HEADER_PARTS) + "</header>")


# ----------------------------------------------------------------------------- the folded table

def fold(rows: Sequence[dict]) -> list[list[dict]]:
    """Rows grouped by everything but alpha, in first-seen order."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        key = (row["backend"], row.get("profile"), row.get("variant"), row.get("op"), row["dtype"], row["out_dtype"],
               row["direction"])
        groups.setdefault(key, []).append(row)
    return list(groups.values())


def _summed(group: Sequence[dict]) -> list[tuple[str, int, bool]]:
    """(category, count summed over alphas, allowed in every alpha), in registry order."""
    counts: dict[str, list] = {}
    for f in (f for r in group for f in r["findings"]):
        entry = counts.setdefault(f["category"], [0, True])
        entry[0] += f["count"]
        entry[1] = entry[1] and f["allowed"]
    return [(c, *counts[c]) for c in CATEGORIES if c in counts]


def _category(name: str, *, allowed: bool) -> str:
    """The category's name with its colour's mark; red when not allowed."""
    known = f" c{CATEGORIES.index(name)}" if name in CATEGORIES else ""
    return f'<span class="cat{known} {"allowed" if allowed else "refused"}">{escape(name)}</span>'


def category_style() -> str:
    """One rule per category of the registry giving its colour to its marks (``.c3 { --c: ... }``)."""
    return "".join(f".c{i}{{--c:{colour(name)}}}" for i, name in enumerate(CATEGORIES))


def _findings_cell(found: Sequence[tuple[str, int, bool]]) -> str:
    return ", ".join(f"{_category(c, allowed=ok)} ×{n:,}" for c, n, ok in found)


def _not_passing(group: Sequence[dict]) -> str:
    fail = [r for r in group if r["verdict"] == "fail"]
    warn = [r for r in group if r["verdict"] == "warn"]

    def span(chosen: Sequence[dict]) -> str:
        return "all" if len(chosen) == len(group) else " ".join(short_float(number(r["alpha"])) for r in chosen)

    return "; ".join(([span(fail)] if fail else []) + ([f"warn {span(warn)}"] if warn else []))


def folded_table(rows: Sequence[dict]) -> str:
    """One line per (backend, dtype→out, direction), the alphas folded in."""
    head = "".join(f"<th>{h}</th>" for h in ("backend", "dtype→out", "dir", "max ULP", "findings (summed)",
                                             "α not passing", "verdict"))
    lines = []
    for group in fold(rows):
        verdict = max((r["verdict"] for r in group), key=_RANK.__getitem__)
        cells = [*map(escape, _group_label(group[0])), short_int(max(r["max_ulp"] for r in group)),
                 _findings_cell(_summed(group)), escape(_not_passing(group)), _verdict(verdict)]
        lines.append("<tr>" + "".join(f'<td{" class=num" if i == 3 else ""}>{c}</td>'
                                      for i, c in enumerate(cells)) + "</tr>")
    return f'<table class="folded"><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table>'


# ----------------------------------------------------------------------------- agreement

def agreement_table(agreement: Sequence[dict]) -> str:
    """Backends down, (dtype pair, direction) across: how many elements differ bit for bit from
    the reference backend's output, summed over the alphas (green: none)."""
    def where(a: dict) -> tuple[str, str]:
        return (short_label(RowKey(a["backend"], a.get("profile"), None, a["dtype"], a["out_dtype"],
                                   a["direction"], 0.0)),
                f"{pair_text(a['dtype'], a['out_dtype'])} {_DIRECTION[a['direction']]}")

    sums: dict[tuple[str, str], list[int]] = {}
    for a in agreement:
        entry = sums.setdefault(where(a), [0, 0])
        entry[0], entry[1] = entry[0] + a["differing"], entry[1] + a["elements"]
    who, cols = list(dict.fromkeys(w for w, _ in sums)), list(dict.fromkeys(c for _, c in sums))

    def cell(key: tuple[str, str]) -> str:
        if key not in sums:
            return "<td></td>"
        k, n = sums[key]
        shade = "same" if k == 0 else ("some" if k < n / 100 else "many")
        return f'<td class="agree {shade}">{k:,} of {n:,} differ ({percent(k, n)})</td>'

    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = "".join(f"<tr><th>{escape(w)}</th>" + "".join(cell((w, c)) for c in cols) + "</tr>" for w in who)
    return (f'<p>Against <b>{escape(agreement[0]["reference"])}</b>, bit for bit, on the same inputs.</p>'
            f'<table class="agreement"><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>')


# ----------------------------------------------------------------------------- a row's section

def counts_part(row: dict) -> str:
    """The differing elements, the greatest ULP distance, the findings and the row's notes."""
    counts = (f"{row['mismatches']:,} of {row['elements']:,} elements differ "
              f"({percent(row['mismatches'], row['elements'])}), max ULP {short_int(row['max_ulp'])}")
    setting = setting_line(row_key(row))
    items = "".join(f'<li>{_category(f["category"], allowed=f["allowed"])} ×{f["count"]:,}'
                    f' ({"allowed" if f["allowed"] else "not allowed"}): {escape(f["summary"])}</li>'
                    for f in row["findings"])
    notes = "".join(f"<li>{escape(n)}</li>" for n in row.get("notes", ()))
    return (f"<p>{counts}</p>" + (f"<p>{escape(setting)}</p>" if setting else "")
            + f'<ul class="findings">{items}</ul>' + (f'<ul class="notes">{notes}</ul>' if notes else ""))


def _index(example: dict) -> str:
    """The offender's index as the console prints it (``[8]``, ``[1, 5, 2, 3]``), its part and place."""
    pos = example.get("position")
    where = index_text(example["index"], None) if not pos or len(pos) < 2 else "[" + ", ".join(map(str, pos)) + "]"
    where += f" of {example['part']}" if example.get("part") else ""
    if example.get("core") is not None:
        where += f" (core {example['core']}" + (f", tile {example['tile']})" if example.get("tile") is not None
                                                 else ")")
    return escape(where)


def _decimal(value: dict | None, *, codes: bool) -> str:
    if value is None:
        return "—"
    return str(int(float(value["decimal"]))) if codes else escape(value["decimal"])


def _offender_line(number: int, example: dict, *, names: Sequence[str], codes: bool, finding: str) -> str:
    """One table line: the number, the finding's cell (on its first line), the index, the values
    in decimal, then their bits."""
    if example["x"] is None:
        cells = ["written outside the tensor"] + [""] * (len(names) - 1)
    else:
        cells = [_decimal(example[k], codes=codes) for k in names]
    bits = "" if codes else "<td class=b>" + " · ".join(
        escape(example[k]["bits"]) if example.get(k) else "—" for k in names) + "</td>"
    return (f"<tr><td>{number}</td>{finding}<td class=i>{_index(example)}</td>"
            + "".join(f"<td>{c}</td>" for c in cells) + bits + "</tr>")


def offenders_part(row: dict) -> str:
    """The findings' example elements: index, x (dy), expected, actual in decimal, then their bits."""
    limit = None if row["verdict"] == "fail" else WARNED_EXAMPLES
    findings = [{**f, "examples": f["examples"][:limit]} for f in row["findings"] if f["examples"]]
    if not findings:
        return ""
    kept = "" if limit is None or all(len(f["examples"]) <= limit for f in row["findings"]) else \
        f"; a warning row lists {limit} per finding, the --json report more"
    codes = row["dtype"] in QDTYPES
    backward = any(e.get("dy") is not None for f in findings for e in f["examples"])
    names = ["x", *(["dy"] if backward else []), "expected", "actual"]
    head = "".join(f"<th>{h}</th>" for h in ("#", "finding", "index", *names)) + \
        ("" if codes else f"<th>bits: {' · '.join(names)}</th>")
    lines, number = [], 0
    for f in findings:
        cell = f'<td class=f rowspan={len(f["examples"])}>{_category(f["category"], allowed=f["allowed"])}</td>'
        for k, example in enumerate(f["examples"]):
            number += 1
            lines.append(_offender_line(number, example, names=names, codes=codes, finding="" if k else cell))
    return (f'<table class="offenders"><caption>Offending elements (the first of each finding{kept})</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>")


def other_checks_part(row: dict) -> str:
    """What other tools' default checks say of the row's output (``judge.other_checks``)."""
    checks = row.get("other_checks") or ()
    if not checks:
        return ""
    lines = "".join(
        f'<tr><td>{escape(c["name"])}</td><td class="{"pass" if c["passes"] else "fail"}">'
        f'{"passes" if c["passes"] else "fails"}</td><td>{escape(c["detail"])}'
        + ("" if c.get("passes_if_shared_equal", c["passes"]) == c["passes"]
           else " (passes when a NaN or inf both sides hold counts as equal)") + "</td></tr>"
        for c in checks)
    return ('<table class="checks"><caption>other tools\' checks at their defaults</caption>'
            f"<thead><tr><th>check</th><th>verdict</th><th>detail</th></tr></thead><tbody>{lines}</tbody></table>")


ROW_PARTS: list[Callable[[dict], str]] = [counts_part, offenders_part, other_checks_part]


def figures_part(row: dict) -> str:
    """The row's figures, each with its key."""
    found = row_figures(row)
    return "" if not found else '<div class="plots">' + "".join(
        f'<figure>{svg}{key}</figure>' for svg, key in found) + "</div>"


def row_section(row: dict, *, figures: bool) -> str:
    """A row's section: its title and verdict, every row part, and its figures when asked."""
    body = "".join(part(row) for part in ROW_PARTS) + (figures_part(row) if figures else "")
    return (f'<section class="row-panel {row["verdict"]}-row"><h3>{escape(row_title(row))} '
            f'{_verdict(row["verdict"])}</h3>{body}</section>')


# ----------------------------------------------------------------------------- the budget

def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def priority(rows: Sequence[dict]) -> list[int]:
    """Positions of ``rows`` most important first: failing before warning; in each folded group
    the alpha with most differing elements first, so every group comes before any second alpha."""
    rank: dict[int, int] = {}
    for group in fold(rows):
        for place, row in enumerate(sorted(group, key=lambda r: -r["mismatches"])):
            rank[id(row)] = place
    return sorted(range(len(rows)), key=lambda i: (-_RANK[rows[i]["verdict"]], rank[id(rows[i])], i))


def row_sections(rows: Sequence[dict], *, budget: int) -> tuple[list[str], int]:
    """The sections of ``rows`` (fail and warn) in their order within ``budget`` bytes, and how
    many were left out: every section first, then figures, most important rows first."""
    order, chosen, spent = priority(rows), {}, 0
    for i in order:
        text = row_section(rows[i], figures=False)
        if spent + _size(text) > budget * TABLES_SHARE:
            break
        chosen[i], spent = text, spent + _size(text)
    for i in (i for i in order if i in chosen and rows[i].get("plots")):
        full = row_section(rows[i], figures=True)
        extra = _size(full) - _size(chosen[i])
        if spent + extra > budget:
            break  # the rows after it are less important, and their figures about as large
        chosen[i], spent = full, spent + extra
    return [chosen[i] for i in range(len(rows)) if i in chosen], len(rows) - len(chosen)


# ----------------------------------------------------------------------------- the page

def page(report: dict, *, budget: int = PAGE_BUDGET) -> str:
    """The whole HTML document for ``report``, within about ``budget`` bytes."""
    rows = report["rows"]
    shown = [r for r in rows if r["verdict"] == "fail"] + [r for r in rows if r["verdict"] == "warn"]
    top = [header(report), "<h2>Rows, α folded</h2>", folded_table(rows)]
    if report.get("agreement"):
        top += ["<h2>Agreement</h2>", agreement_table(report["agreement"])]
    sections, left_out = row_sections(shown, budget=budget - sum(map(_size, top)) - _size(STYLE) - 400)
    top.append(f"<h2>Failing and warning rows ({len(shown):,})</h2>")
    if left_out:
        top.append(f'<p class="left-out">{plural(left_out, "row")} not shown here to keep the page small: '
                   f"the --json report holds every row.</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>LeakyReLU conformance report</title>"
            f"<style>{STYLE}{category_style()}</style></head><body>" + "\n".join(top + sections) + "</body></html>\n")


def render_html(report: dict, path: str | Path, *, flag: str = "--html") -> None:
    """Write the page for ``report`` (a ``report_dict(..., plots=True)`` document) to ``path``,
    atomically (see ``render.files``)."""
    write_atomic(path, page(report).encode("utf-8"), flag=flag)
