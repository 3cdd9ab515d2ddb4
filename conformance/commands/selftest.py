"""`conformance selftest`: every seeded kernel defect must be caught and named.

Each variant of ``conformance.npu_impl.variants.VARIANTS`` runs through the
suite on the cann backend, restricted to the directions and dtypes where it is
visible and to ``SELFTEST_ALPHAS``.

Rules:
- ``reference`` must not fail any row.  The categories it shows as allowed
  findings in each (dtype, out_dtype, direction) row (e.g. 1-ULP ``rounding``,
  or the float32 slope of fp32 rows) are that row's *baseline*.
- A defect's *reported* categories are those of failing findings, plus allowed
  findings outside the baseline (a defect within tolerance, such as an fp16
  slope, still shows as a named warning).
- A defect is *caught* when one of its expected categories is reported, and
  *mis-named* when something is reported but none of the expected categories.
  Other categories reported beside an expected one are listed; with
  ``--strict`` they make the variant fail too.
- A defect that seeds nothing on the chip (``variants.CHIP_FITS``: it perturbs an instruction
  the chip's kernel model does not have, or it is that kernel) is *not applicable* there, with
  the reason: it is not run and counts neither as caught nor as missed.  Where a chip shows a
  defect under other categories, ``CHIP_FITS`` names them.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

from rich.console import Console
from rich.table import Table

from conformance.commands.args import add_view_options, parse_int, view_from
from conformance.config import load_config
from conformance.errors import UsageError
from conformance.records import Row
from conformance.render import console as show
from conformance.suite import Options, Selection, run_suite

HELP = ("prove the harness catches every seeded kernel defect (or, with --generated N, every planted defect) "
        "with the right category")
SELFTEST_ALPHAS = (0.2,)  # visible for every defect: not 0, not 0.01, not representable in fp16
SELFTEST_EXAMPLES = 20


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


@dataclass(frozen=True)
class Outcome:
    """What the suite found for one variant, and the verdict under the module's rules."""

    variant: str
    expected: tuple[str, ...]
    reported: tuple[str, ...]
    rows: int
    strict: bool = False
    not_applicable: str = ""  # why the variant seeds nothing on the chip; such a variant is not run

    @property
    def applies(self) -> bool:
        return not self.not_applicable

    @property
    def caught(self) -> bool:
        return not self.reported if not self.expected else bool(set(self.expected) & set(self.reported))

    @property
    def others(self) -> tuple[str, ...]:
        return tuple(c for c in self.reported if c not in self.expected)

    @property
    def ok(self) -> bool:
        return self.caught and not (self.strict and self.others)

    @property
    def status(self) -> str:
        if not self.applies:
            return "n/a"
        if self.ok:
            return "yes"
        if self.caught:
            return "extra categories"
        return "mis-named" if self.reported else "MISSED"


def categories(rows: list[Row], *, allowed: bool) -> tuple[str, ...]:
    """Categories of findings with the given ``allowed`` flag over ``rows``, in first-seen order."""
    seen: dict[str, None] = {}
    for row in rows:
        for finding in row.findings:
            if finding.allowed == allowed:
                seen.setdefault(finding.category, None)
    return tuple(seen)


def variant_rows(name: str, *, profile: Optional[str], seed: int) -> list[Row]:
    """The suite's rows for variant ``name`` where its defect is visible."""
    from conformance.npu_impl.variants import VARIANTS

    v = VARIANTS[name]
    selection = Selection(backends=("cann",), dtypes=tuple(v.dtypes), alphas=SELFTEST_ALPHAS,
                          directions=tuple(v.directions), profile=profile, variant=name)  # type: ignore[arg-type]
    options = Options(config=load_config(), seed=seed, max_examples=SELFTEST_EXAMPLES, results_dir=None)
    result = run_suite(selection, options)
    if result.interruption is not None:  # the CLI exits 130 (Ctrl-C) or 143 (SIGTERM)
        raise result.interruption
    return result.rows


Baseline = dict[tuple[str, str, str], frozenset[str]]


def _key(row: Row) -> tuple[str, str, str]:
    return row.dtype, row.out_dtype, row.direction


def baseline_of(rows: list[Row]) -> Baseline:
    """The allowed categories ``reference`` shows, per (dtype, out_dtype, direction) row."""
    return {_key(r): frozenset(f.category for f in r.findings if f.allowed) for r in rows}


def judge(name: str, rows: list[Row], *, expected: tuple[str, ...], baseline: Baseline,
          strict: bool) -> Outcome:
    failing = categories(rows, allowed=False)
    extra = (f.category for r in rows for f in r.findings
             if f.allowed and f.category not in baseline.get(_key(r), frozenset()))
    return Outcome(name, expected, failing + tuple(c for c in dict.fromkeys(extra) if c not in failing),
                   len(rows), strict)


def confusion_table(outcomes: list[Outcome]) -> Table:
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


def _profile(name: Optional[str]) -> Optional[str]:
    from conformance.npu_impl.chips import PROFILES

    if name is not None and name not in PROFILES:
        raise UsageError(f"--profile {name!r} is unknown; choose from {', '.join(PROFILES)}")
    return name


def _names(args: argparse.Namespace) -> list[str]:
    from conformance.npu_impl.variants import VARIANTS

    names = args.variant or list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise UsageError(f"unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    return names


def run_selftest(names: list[str], *, profile: Optional[str], seed: int, strict: bool,
                 on_variant: Callable[[str], None] = lambda name: None) -> list[Outcome]:
    """``reference`` first (it sets the baseline), then each requested defect that applies on the
    chip (``variants.CHIP_FITS``); one that does not is an outcome with its reason, not run."""
    from conformance.npu_impl.chips import get_profile
    from conformance.npu_impl.variants import DEFAULT_VARIANT, expected_on, not_applicable

    chip = get_profile(profile)
    on_variant(DEFAULT_VARIANT)
    ref_rows = variant_rows(DEFAULT_VARIANT, profile=profile, seed=seed)
    baseline = baseline_of(ref_rows)
    outcomes = [judge(DEFAULT_VARIANT, ref_rows, expected=(), baseline=baseline, strict=strict)]
    for name in (n for n in names if n != DEFAULT_VARIANT):
        reason = not_applicable(name, chip)
        if reason:
            outcomes.append(Outcome(name, (), (), 0, strict, not_applicable=reason))
            continue
        on_variant(name)
        rows = variant_rows(name, profile=profile, seed=seed)
        outcomes.append(judge(name, rows, expected=expected_on(name, chip), baseline=baseline, strict=strict))
    return outcomes


def applicable_names(names: list[str], *, profile: Optional[str]) -> list[str]:
    """``reference`` and the variants of ``names`` selftest runs on ``profile``."""
    from conformance.npu_impl.chips import get_profile
    from conformance.npu_impl.variants import DEFAULT_VARIANT, not_applicable

    chip = get_profile(profile)
    return list(dict.fromkeys([DEFAULT_VARIANT, *(n for n in names if not not_applicable(n, chip))]))


GENERATED_REQUIRED = 0.999  # share of planted elements triage must name right


def execute_generated(count: int, *, seed: int, quiet: bool = False) -> int:
    console = show.make_console()
    with _generated_progress(console, count, quiet=quiet) as scored_one:
        scored, share, false = run_generated(count, seed=seed, on_case=scored_one)
    console.print(generated_matrix(scored))
    planted = sum(len(s.pairs) for s in scored)
    ok = share >= GENERATED_REQUIRED and not false
    console.print(f"selftest --generated: {planted} planted elements in {count} cases, "
                  f"{100 * share:.3f}% named right (need {100 * GENERATED_REQUIRED:.1f}%), "
                  f"{false} cases with findings where nothing was planted: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


@contextmanager
def _generated_progress(console: Console, count: int, *, quiet: bool) -> Iterator[Callable[[], None]]:
    """A spinner on a terminal; on a pipe, :class:`LineProgress` lines on stderr (every few seconds
    and at the end); the callable counts one more case scored."""
    if console.is_terminal:
        with console.status(f"selftest: {count} generated cases"):
            yield lambda: None
        return
    with show.LineProgress(disable=quiet) as progress:
        task = progress.add_task("selftest --generated", total=count, unit="case")
        yield lambda: progress.update(task, advance=1)


@contextmanager
def _lines(console: Console, names: list[str], *, quiet: bool) -> Iterator[Callable[[str], None]]:
    """On a pipe, a line on stderr as each variant finishes (the status spinner shows nothing
    there); the callable takes the variant that starts.  On a terminal, nothing."""
    if console.is_terminal:
        yield lambda name: None
        return
    progress, running = show.LineProgress(disable=quiet), []
    task = progress.add_task("selftest", total=len(names), unit="variant")

    def started(name: str) -> None:
        if running:
            progress.done(task, running.pop())
        running.append(name)

    yield started
    if running:
        progress.done(task, running.pop())


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
            _lines(console, applicable_names(names, profile=profile), quiet=quiet) as lines:
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


# ----------------------------------------------------------------------------- generated defects

@dataclass(frozen=True)
class Scored:
    """Triage of one generated case: per planted element, planted vs named category."""

    case: object
    pairs: tuple[tuple[str, str, bool], ...]  # (planted, named, correct) per planted element
    false_findings: tuple[str, ...]  # categories named on elements nothing was planted in


def name_generated(case) -> Scored:
    """Triage a generated case (``conformance.cases.defects.Planted``) element by element."""
    import numpy as np

    from conformance.metrics.exact import match_mask
    from conformance.triage import Batch, triage

    mis = np.flatnonzero(~match_mask(case.actual, case.golden))
    batch = Batch(case.x.reshape(-1), None if case.dy is None else case.dy.reshape(-1), case.alpha,
                  case.direction, case.out_dtype, case.golden, case.actual, shape=case.x.shape)
    named: dict[int, str] = {}
    also: dict[int, tuple] = {}  # categories triage reported as equally good for the element
    for claim in triage(batch, mismatches=mis, layout=case.layout):
        for i in claim.index.tolist():
            named[i] = claim.category
            also[i] = tuple(claim.detail.get("alternative_categories", ()))
    pairs = []
    for i in sorted(case.accept):
        name, planted = named.get(i, "unexplained"), case.accept[i]
        right = name in planted or bool(set(also.get(i, ())) & set(planted))
        pairs.append((name if name in planted else planted[0], name, right))
    false = tuple(sorted({c for i, c in named.items() if i not in case.accept}))
    return Scored(case, tuple(pairs), false)


def generated_matrix(scored: list[Scored]) -> Table:
    """Confusion matrix over planted elements: planted category (rows) x named (columns)."""
    from collections import Counter

    from conformance import categories as cats

    counts = Counter((p, n) for s in scored for p, n, _ in s.pairs)
    rows = cats.ordered(p for p, _ in counts)
    cols = cats.ordered(n for _, n in counts)
    table = Table(title=f"generated defects: {len(scored)} cases, planted (rows) x named (columns)")
    table.add_column("planted")
    for c in cols:
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(r, *[(f"[green]{counts[r, c]}[/]" if r == c else str(counts[r, c] or "")) for c in cols])
    return table


def run_generated(count: int, *, seed: int,
                  on_case: Callable[[], None] = lambda: None) -> tuple[list[Scored], float, int]:
    """Score ``count`` generated cases: (scores, share of planted elements named right,
    cases with findings where nothing was planted); ``on_case`` hears of each case scored."""
    from conformance.cases.regional_defects import cases

    scored = []
    for case in cases(count, seed=seed, plan=profile_plan):
        scored.append(name_generated(case))
        on_case()
    return (scored, *tally(scored))


def tally(scored: list[Scored]) -> tuple[float, int]:
    """The share of planted elements named right, and the cases with findings where nothing
    was planted."""
    total = sum(len(s.pairs) for s in scored)
    right = sum(ok for s in scored for _, _, ok in s.pairs)
    return (right / total if total else 1.0), sum(bool(s.false_findings) for s in scored)


def profile_plan(src: str, out: str, direction: str, numel: int, rng) -> object:
    """The reference kernel's tiling plan on a chip profile drawn by ``rng`` (None where the
    profile has no kernel for the pair)."""
    from conformance.ingest.dumps import plan_layout
    from conformance.npu_impl.chips import PROFILES

    try:
        return plan_layout(str(rng.choice(sorted(PROFILES))), None, dtypes=(src, out), direction=direction)(numel)
    except UsageError:
        return None
