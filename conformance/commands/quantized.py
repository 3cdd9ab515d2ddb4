"""`conformance quantized`: each framework's int8/uint8 LeakyReLU against the exact golden.

Every framework runs all 256 codes of every setting of the fixed grid
(:func:`conformance.cases.quantized.quant_grid`); a row counts the codes that differ from
the exact result and the largest code difference.  The default tolerance is 1 code: each
framework requantizes with its own rounding rule (float32 scales, a reciprocal multiply, a
Q31 or Q8 fixed-point multiplier), which moves a code by at most one step.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
from typing import Any

import numpy as np

from conformance.cases.quantized import quant_grid
from conformance.commands.args import ascii_int, items
from conformance.errors import UsageError
from conformance.extras import install_hint
from conformance.reference.quantized import QuantParams, all_codes, exact_table
from conformance.triage.quantized import QuantBatch, triage_quantized

HELP = "run the frameworks' quantized (int8/uint8) LeakyReLU over all codes and compare with the exact golden"
MAX_SETTINGS = 1000


def _runners() -> dict[str, Any]:
    from conformance.frameworks.quantized_backends import RUNNERS

    return RUNNERS


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--framework", action="append", default=None,
                        help="framework[profile] to run, repeatable or comma-separated "
                             "(default: every installed one; see docs/explanation/quantized.md)")
    parser.add_argument("--tolerance", type=ascii_int, default=1,
                        help="largest code difference from exact that passes (default 1)")
    parser.add_argument("--settings", type=ascii_int, default=12,
                        help="how many settings of the fixed grid to run (default 12)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _selected(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The frameworks to run, and those skipped with the reason."""
    runners = _runners()
    asked = items(args.framework, flag="--framework")
    for name in asked or ():
        if name not in runners:
            raise UsageError(f"--framework {name!r} is not one of {', '.join(runners)}")
        if not _installed(runners[name][1]):
            raise UsageError(f"--framework {name}: {runners[name][1]} is not installed; "
                             f"{install_hint(runners[name][1])}")
    names = list(asked or runners)
    skipped = {n: f"{runners[n][1]} is not installed" for n in names if not _installed(runners[n][1])}
    return [n for n in names if n not in skipped], skipped


def _row(name: str, *, params: QuantParams, alpha: float, tolerance: int) -> dict[str, Any]:
    used, out = _runners()[name][0](alpha, params)
    diff = np.abs(out.astype(np.int64) - exact_table(alpha, params=used).astype(np.int64))
    worst = int(diff.max())
    return {"framework": name, "dtype": used.dtype, "s_in": used.s_in, "z_in": used.z_in,
            "s_out": used.s_out, "z_out": used.z_out, "alpha": alpha, "codes": int(diff.size),
            "differing": int(np.count_nonzero(diff)), "max_code_diff": worst,
            "rules": _rules(all_codes(used), out, alpha, params=used),
            "verdict": "pass" if worst <= tolerance else "fail"}


def _rules(codes: np.ndarray, out: np.ndarray, alpha: float, *, params: QuantParams) -> list[str]:
    """What quantized triage names the differing codes by: ``category: rule`` per claim."""
    golden = exact_table(alpha, params=params)[codes.astype(np.int64) - params.code_range[0]]
    claims = triage_quantized(QuantBatch(codes, alpha, params, golden, out))
    return [f"{c.category}: {c.detail.get('rule', c.summary)}" for c in claims]


def _check(args: argparse.Namespace) -> None:
    if args.tolerance < 0:
        raise UsageError(f"--tolerance must be >= 0 codes, got {args.tolerance}")
    if not 1 <= args.settings <= MAX_SETTINGS:
        raise UsageError(f"--settings must be in 1..{MAX_SETTINGS}, got {args.settings}")


def _render(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table("framework", "setting (s_in/z_in -> s_out/z_out)", "alpha", "differing", "max |Δcode|", "verdict")
    for r in data["rows"]:
        setting = f"{r['dtype']} {r['s_in']:.6g}/{r['z_in']} -> {r['s_out']:.6g}/{r['z_out']}"
        table.add_row(escape(r["framework"]), setting, f"{r['alpha']:.6g}", f"{r['differing']} / {r['codes']}",
                      str(r["max_code_diff"]), r["verdict"])
    console = Console()
    console.print(table)
    for name, reason in data["skipped"].items():
        console.print(f"skipped {escape(name)}: {reason}")
    console.print(f"verdict: {data['verdict']} (up to {data['tolerance']} code(s) allowed)")


def execute(args: argparse.Namespace) -> int:
    _check(args)
    names, skipped = _selected(args)
    if not names:
        raise UsageError("no quantized framework is installed, so nothing runs: "
                         + "; ".join(f"{n}: {install_hint(_runners()[n][1])}" for n in skipped))
    rows = [_row(name, params=params, alpha=alpha, tolerance=args.tolerance)
            for name in names for params, alpha in quant_grid(args.settings)]
    verdict = "fail" if any(r["verdict"] == "fail" for r in rows) else "pass"
    data = {"tolerance": args.tolerance, "verdict": verdict, "rows": rows, "skipped": skipped}
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        _render(data)
    return 1 if verdict == "fail" else 0
