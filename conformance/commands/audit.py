"""`conformance audit TARGET [--against TARGET]`: every LeakyReLU, PReLU and RReLU of a model and its slope.

Exit 0 when nothing is wrong; 1 on a slope mismatch with ``--against`` (or on
an implicit default under ``--strict``); 2 on an unreadable target, and on a
target in which none was found (an empty file, a model that cannot be
read, a source without LeakyReLU): an audit that read nothing is no PASS.
"""
from __future__ import annotations

import argparse
from typing import Optional

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from conformance.audit import audit
from conformance.audit.compare import Pair, pair
from conformance.audit.document import document
from conformance.audit.record import DEFAULT, DYNAMIC, Activation, Audit
from conformance.errors import UsageError
from conformance.render import console as render
from conformance.render import files
from conformance.render.export import dumps

HELP = ("list every LeakyReLU, PReLU and RReLU of a model (source, ONNX, Keras, SavedModel, torch, msprobe stats) "
        "and its slope")
_ORIGIN_STYLE = {DEFAULT: "yellow", DYNAMIC: "magenta"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="a .py file or directory, .onnx, .keras, .pt2, a SavedModel "
                                       "directory, an msprobe statistics dump, or package.module:factory")
    parser.add_argument("--against", metavar="TARGET", help="pair the activations with another target's, in order")
    parser.add_argument("--strict", action="store_true", help="an implicit default slope fails (exit 1)")
    parser.add_argument("--json", help="write the leakyrelu-audit/1 JSON report here")


def _slope(a: Activation) -> str:
    origin = f"[{_ORIGIN_STYLE[a.origin]}]{a.origin}[/]" if a.origin in _ORIGIN_STYLE else a.origin
    if a.slope is None and a.weight:  # a PReLU's weight of several values
        return f"{min(a.weight):.7g} to {max(a.weight):.7g} {origin}"
    if a.slope is None:
        return f"[magenta]dynamic[/] {escape(a.expression or '')}"
    same = " =default" if a.origin not in (DEFAULT,) and a.equals_default else ""
    return f"{a.slope:.7g} {origin}{same}"


def _op_note(a: Activation) -> list[str]:
    """What a PReLU or RReLU is: its arguments, where its weight stands, what its slope means."""
    if a.op == "prelu":
        words = "PReLU" + (f" {', '.join(a.arguments)}" if a.arguments else "")
        slope = a.provenance or ("the weight's initial value" if a.entry is not None else "the weight passed")
        return [f"{words}: {slope}"]
    if a.op == "rrelu":
        bounds = f" [{a.bounds[0]:.7g}, {a.bounds[1]:.7g}]" if a.bounds else ""
        if "training=True" in a.arguments:
            return [f"RReLU{bounds}, training=True: samples its slope in the bounds (eval slope shown)"]
        return [f"RReLU{bounds}: eval slope, the bounds' mean (training mode samples one in them)"]
    return []


def _note(a: Activation) -> str:
    parts = _op_note(a) + ([f"default of {a.api}"] if a.origin == DEFAULT else [])
    if a.origin == DYNAMIC and a.op == "leaky_relu":
        parts.append("not a literal: blocks Conv+LeakyReLU fusion")
    if a.stats:
        parts.append("x in [" + ", ".join(f"{a.stats[k]:.4g}" for k in ("Min", "Max") if k in a.stats) + "]")
    parts.extend(f"[red]{escape(h)}[/]" for h in a.hazards)
    return "; ".join(parts)


def audit_table(result: Audit) -> Table:
    table = Table(title=f"LeakyReLU audit: {escape(result.target)} ({result.kind})", title_justify="left")
    typed = any(a.dtype for a in result.activations)  # a dtype column only where the target says it
    for column in ("#", "where", "framework", "slope", *(("dtype",) if typed else ()), "note"):
        table.add_column(column, overflow="fold")
    for i, a in enumerate(result.activations, 1):
        table.add_row(str(i), escape(a.where), escape(a.framework), _slope(a),  # text from the target: no markup
                      *((escape(a.dtype or "-"),) if typed else ()), _note(a))
    return table


def pair_table(mismatched: list[Pair], *, left: Audit, right: Audit) -> Table:
    table = Table(title=f"slope mismatches: {escape(left.target)} vs {escape(right.target)}", title_justify="left")
    for column in ("#", escape(left.target), escape(right.target), "why"):
        table.add_column(column, overflow="fold")
    for p in mismatched:
        table.add_row(str(p.index + 1), escape(p.left.where) if p.left else "-",
                      escape(p.right.where) if p.right else "-", escape(p.reason))
    return table


def _summary(main: Audit, against: Optional[Audit], pairs: list[Pair], *, strict: bool) -> tuple[str, int]:
    audits = [main] + ([against] if against is not None else [])
    implicit = sum(a.implicit for x in audits for a in x.activations)
    hazards = sum(len(a.hazards) for x in audits for a in x.activations)
    bad = sum(p.mismatch for p in pairs)
    parts = [render.plural(sum(len(x.activations) for x in audits), "activation"),
             render.plural(implicit, "implicit default")]
    parts += [render.plural(hazards, "value-range hazard")] if hazards else []
    parts += [f"{bad} of {len(pairs)} pairs differ"] if against is not None else []
    failed = bad > 0 or (strict and implicit > 0)
    return ", ".join(parts), 1 if failed else 0


def nonempty(result: Audit, *, flag: str) -> Audit:
    """``result``, or a UsageError when it found no activation: nothing read is nothing vouched for."""
    if result.activations:
        return result
    raise UsageError(f"{flag} {result.target}: no LeakyReLU, PReLU or RReLU found in this {result.kind} "
                     "target (an empty or unreadable model, or none in it); nothing to audit, so no PASS: point it at "
                     "the model")


def execute(args: argparse.Namespace) -> int:
    inputs = {"TARGET": args.target, "--against": args.against}
    paths = files.prepare(files.ReportPaths(args.json), inputs=inputs)
    main = nonempty(audit(args.target), flag="audit")
    against = nonempty(audit(args.against), flag="--against") if args.against is not None else None
    pairs = pair(main, against) if against is not None else []
    console: Console = render.make_console()
    for result in [main] + ([against] if against is not None else []):
        console.print(audit_table(result))
        for note in result.notes:
            console.print(f"note: {note}", style="dim", markup=False)
    mismatched = [p for p in pairs if p.mismatch]
    if against is not None and mismatched:
        console.print(pair_table(mismatched, left=main, right=against))
    line, code = _summary(main, against, pairs, strict=args.strict)
    verdict = "fail" if code else "pass"
    console.print(f"[{'bold red' if code else 'green'}]{verdict.upper()}[/]: {line}", highlight=False)
    if paths.json is not None:
        doc = document(main, against=against, pairs=pairs, strict=args.strict, verdict=verdict)
        files.write_atomic(paths.json, dumps(doc).encode("utf-8"), flag="--json")
    return code
