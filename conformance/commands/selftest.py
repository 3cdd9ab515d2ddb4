"""`conformance selftest`: every seeded kernel defect must be caught and named.

Each variant of ``conformance.npu_impl.variants.VARIANTS`` runs through the suite on the cann
backend (``conformance.selftest`` has the rules an outcome is judged by); a confusion table and a
verdict line are printed.  With ``--generated N``, defects planted into N generated cases are
triaged instead (``conformance.selftest_generated``) and a confusion matrix is printed.
"""
from __future__ import annotations

import argparse
from collections import Counter
from typing import Optional

from rich.table import Table

from conformance import categories as cats
from conformance import selftest_generated as generated
from conformance.cases.selftest_expectations import applicable_names
from conformance.commands.args import parse_int
from conformance.commands.output import add_view_options, view_from
from conformance.errors import UsageError
from conformance.render import console as show
from conformance.selftest import Outcome, run_selftest, variant_lines

HELP = ("prove the harness catches every seeded kernel defect (or, with --generated N, every planted defect) "
        "with the right category")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", help="cann chip profile (default ascend910b1)")
    parser.add_argument("--seed", default="0", help="seed for random inputs (default 0)")
    parser.add_argument("--variant", action="append", help="only these variants (repeatable; reference always runs)")
    parser.add_argument("--strict", action="store_true",
                        help="also fail a variant that reports categories beside its expected one")
    add_view_options(parser, details=False)
    parser.add_argument("--generated", metavar="N",
                        help="instead, plant random defects into N generated cases and print the "
                             "confusion matrix (fails below 99.9%% named right or on any false finding)")


def _profile(name: Optional[str]) -> Optional[str]:
    """--profile, a chip profile of the emulated kernel."""
    from conformance.npu_impl.chips import PROFILES

    if name is not None and name not in PROFILES:
        raise UsageError(f"--profile {name!r} is unknown; choose from {', '.join(PROFILES)}")
    return name


def _names(args: argparse.Namespace) -> list[str]:
    """The --variant names (default: every variant)."""
    from conformance.npu_impl.variants import VARIANTS

    names = args.variant or list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise UsageError(f"unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    return names


def execute(args: argparse.Namespace) -> int:
    if args.generated is not None:
        count = parse_int(args.generated, flag="--generated")
        if count < 1:
            raise UsageError(f"--generated must be at least 1, got {count}")
        return execute_generated(count, seed=parse_int(args.seed, flag="--seed"), quiet=view_from(args).quiet)
    console, quiet = show.make_console(), view_from(args).quiet
    names = _names(args)
    profile = _profile(args.profile)
    with console.status("selftest") as status, \
            variant_lines(console, applicable_names(names, profile=profile), quiet=quiet) as lines:
        def started(name: str) -> None:
            status.update(f"selftest: {name}")
            lines(name)

        outcomes = run_selftest(names, profile=profile, seed=parse_int(args.seed, flag="--seed"),
                                strict=args.strict, on_variant=started)
    from conformance.npu_impl.chips import get_profile

    chip = get_profile(profile).name
    if not quiet:
        console.print(confusion_table(outcomes))
        for line in not_applicable_lines(outcomes, chip=chip):
            console.print(line, markup=False, highlight=False)
    console.print(verdict_line(outcomes, chip=chip), markup=False, highlight=False)
    return 0 if all(o.ok for o in outcomes) else 1


def execute_generated(count: int, *, seed: int, quiet: bool = False) -> int:
    """``selftest --generated``: the confusion matrix and the verdict line; the exit code."""
    console = show.make_console()
    with generated.case_progress(console, count, quiet=quiet) as scored_one:
        scored, share, false = generated.run_generated(count, seed=seed, on_case=scored_one)
    if not quiet:
        console.print(generated_matrix(scored))
    planted = sum(len(s.pairs) for s in scored)
    ok = generated.passes(share, false)
    console.print(f"selftest --generated: {planted} planted elements in {count} cases, "
                  f"{100 * share:.3f}% named right (need {100 * generated.GENERATED_REQUIRED:.1f}%), "
                  f"{false} cases with findings where nothing was planted: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


# ----------------------------------------------------------------------------- rendering

def confusion_table(outcomes: list[Outcome]) -> Table:
    """One line per variant: expected and found categories, rows, and whether it was caught."""
    table = Table(title="selftest: seeded kernel defects")
    for column in ("variant", "expected category", "categories found", "rows", "caught"):
        table.add_column(column)
    for o in outcomes:
        style = "dim" if not o.applies else "green" if o.ok else "bold red"
        wanted = "(not applicable)" if not o.applies else ", ".join(o.expected) or "(none: must pass)"
        table.add_row(o.variant, wanted, ", ".join(o.reported) or "-", str(o.rows), f"[{style}]{o.status}[/]")
    return table


def verdict_line(outcomes: list[Outcome], *, chip: str) -> str:
    """The final line: applicable variants caught, those not applicable on ``chip``, what failed."""
    run = [o for o in outcomes if o.applies]
    bad = [o.variant for o in run if not o.ok]
    skipped = [o.variant for o in outcomes if not o.applies]
    return (f"selftest: {len(run) - len(bad)}/{len(run)} variants caught and named"
            + (f"; {len(skipped)} not applicable on {chip} ({', '.join(skipped)})" if skipped else "")
            + (f"; FAILED: {', '.join(bad)}" if bad else ""))


def not_applicable_lines(outcomes: list[Outcome], *, chip: str) -> list[str]:
    """One line per variant that seeds nothing on ``chip``: ``NAME: not applicable on CHIP: WHY``."""
    return [f"{o.variant}: not applicable on {chip}: {o.not_applicable}" for o in outcomes if not o.applies]


def generated_matrix(scored: list[generated.Scored]) -> Table:
    """Per planted category: its elements, the share named right, and what the others were
    named (most first): a long table, as narrow as the longest category name."""
    planted: Counter = Counter(p for s in scored for p, _, _ in s.pairs)
    right: Counter = Counter(p for s in scored for p, _, ok in s.pairs if ok)
    wrong: Counter = Counter((p, n) for s in scored for p, n, ok in s.pairs if not ok)
    table = Table(title=f"generated defects: {len(scored)} cases", title_justify="left")
    for column, justify in (("planted", "left"), ("elements", "right"), ("named right", "right"),
                            ("named otherwise", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    for p in cats.ordered(planted):
        others = ", ".join(f"{n} ×{k}" for (q, n), k in wrong.most_common() if q == p)
        table.add_row(p, f"{planted[p]:,}", f"{100 * right[p] / planted[p]:.3f}%", others or "-")
    return table
