"""`conformance selftest`: every seeded kernel defect must be caught and named.

Each variant of ``conformance.npu_impl.variants.VARIANTS`` runs through the
suite on the cann backend, restricted to the directions and dtypes where it is
visible and to ``SELFTEST_ALPHAS``.  A defect is *caught* when one of its
expected categories fails a row; it is *mis-named* when a failing row shows a
category it does not expect.  ``reference`` must not fail at all.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

from rich.table import Table

from conformance.commands.run import make_console
from conformance.errors import UsageError
from conformance.report.evaluate import Row
from conformance.report.gate import load_config
from conformance.suite import Options, Selection, run_suite

HELP = "prove the harness catches every seeded kernel defect with the right category"
SELFTEST_ALPHAS = (0.2,)  # visible for every defect: not 0, not 0.01, not representable in fp16
SELFTEST_EXAMPLES = 20


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", help="cann chip profile (default ascend910b1)")
    parser.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    parser.add_argument("--variant", action="append", help="only these variants (repeatable)")


@dataclass(frozen=True)
class Outcome:
    """What the suite found for one variant."""

    variant: str
    expected: tuple[str, ...]
    found: tuple[str, ...]  # categories of failing findings, in report order
    rows: int

    @property
    def caught(self) -> bool:
        if not self.expected:
            return not self.found
        return bool(set(self.expected) & set(self.found))

    @property
    def misnamed(self) -> tuple[str, ...]:
        return tuple(c for c in self.found if c not in self.expected)

    @property
    def ok(self) -> bool:
        return self.caught and not self.misnamed


def failing_categories(rows: list[Row]) -> tuple[str, ...]:
    """Categories of not-allowed findings over ``rows``, first occurrence order."""
    seen: dict[str, None] = {}
    for row in rows:
        for finding in row.findings:
            if not finding.allowed:
                seen.setdefault(finding.category, None)
    return tuple(seen)


def check_variant(name: str, *, profile: str | None, seed: int) -> Outcome:
    from conformance.npu_impl.variants import VARIANTS

    v = VARIANTS[name]
    selection = Selection(backends=("cann",), dtypes=tuple(v.dtypes), alphas=SELFTEST_ALPHAS,
                          directions=tuple(v.directions), profile=profile, variant=name)  # type: ignore[arg-type]
    options = Options(config=load_config(), seed=seed, max_examples=SELFTEST_EXAMPLES, results_dir=None)
    result = run_suite(selection, options)
    if result.interrupted:
        raise KeyboardInterrupt
    return Outcome(name, tuple(v.expected), failing_categories(result.rows), len(result.rows))


def confusion_table(outcomes: list[Outcome]) -> Table:
    table = Table(title="selftest: seeded kernel defects")
    for column in ("variant", "expected category", "categories found", "rows", "caught"):
        table.add_column(column)
    for o in outcomes:
        mark = "yes" if o.ok else ("mis-named" if o.caught else "NO")
        style = "green" if o.ok else "bold red"
        table.add_row(o.variant, ", ".join(o.expected) or "(none: must pass)",
                      ", ".join(o.found) or "-", str(o.rows), f"[{style}]{mark}[/]")
    return table


def _names(args: argparse.Namespace) -> list[str]:
    from conformance.npu_impl.variants import VARIANTS

    names = args.variant or list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise UsageError(f"unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    return names


def execute(args: argparse.Namespace) -> int:
    console = make_console()
    outcomes = []
    with console.status("selftest") as status:
        for name in _names(args):
            status.update(f"selftest: {name}")
            outcomes.append(check_variant(name, profile=args.profile, seed=args.seed))
    console.print(confusion_table(outcomes))
    bad = [o.variant for o in outcomes if not o.ok]
    console.print(f"selftest: {len(outcomes) - len(bad)}/{len(outcomes)} variants caught and named"
                  + (f"; FAILED: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0
