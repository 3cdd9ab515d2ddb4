"""Selftest of the seeded kernel defects: each variant of ``conformance.npu_impl.variants.VARIANTS``
runs through the suite on the cann backend, and its rows are judged caught, mis-named or missed.

Each variant runs restricted to the directions and dtypes where it is visible and to
``SELFTEST_ALPHAS`` (``conformance.cases.selftest_expectations``).

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

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

from rich.console import Console

from conformance.cases.selftest_expectations import SELFTEST_ALPHAS, SELFTEST_EXAMPLES, expected_categories
from conformance.config import load_config
from conformance.records import Row
from conformance.render import console as show
from conformance.suite import Options, Selection, run_suite


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


def run_selftest(names: list[str], *, profile: Optional[str], seed: int, strict: bool,
                 on_variant: Callable[[str], None] = lambda name: None) -> list[Outcome]:
    """``reference`` first (it sets the baseline), then each requested defect that applies on the
    chip (``variants.CHIP_FITS``); one that does not is an outcome with its reason, not run."""
    from conformance.npu_impl.chips import get_profile
    from conformance.npu_impl.variants import DEFAULT_VARIANT, not_applicable

    chip = get_profile(profile)
    on_variant(DEFAULT_VARIANT)
    ref_rows = variant_rows(DEFAULT_VARIANT, profile=profile, seed=seed)
    baseline = baseline_of(ref_rows)
    outcomes = [judge(DEFAULT_VARIANT, ref_rows, expected=expected_categories(DEFAULT_VARIANT, chip),
                      baseline=baseline, strict=strict)]
    for name in (n for n in names if n != DEFAULT_VARIANT):
        reason = not_applicable(name, chip)
        if reason:
            outcomes.append(Outcome(name, (), (), 0, strict, not_applicable=reason))
            continue
        on_variant(name)
        rows = variant_rows(name, profile=profile, seed=seed)
        outcomes.append(judge(name, rows, expected=expected_categories(name, chip), baseline=baseline,
                              strict=strict))
    return outcomes


def variant_rows(name: str, *, profile: Optional[str], seed: int) -> list[Row]:
    """The suite's rows for variant ``name`` where its defect is visible."""
    from conformance.npu_impl.variants import VARIANTS

    v = VARIANTS[name]
    selection = Selection(backends=("cann",), dtypes=tuple(v.dtypes), alphas=SELFTEST_ALPHAS,
                          directions=tuple(v.directions), profile=profile, variant=name)  # type: ignore[arg-type]
    options = Options(config=load_config(), seed=seed, max_examples=SELFTEST_EXAMPLES, results_dir=None, plots=False)
    result = run_suite(selection, options)
    if result.interruption is not None:  # the CLI exits 130 (Ctrl-C) or 143 (SIGTERM)
        raise result.interruption
    return result.rows


Baseline = dict[tuple[str, str, str], frozenset[str]]


def _key(row: Row) -> tuple[str, str, str]:
    return row.dtype, row.out_dtype, row.direction


def baseline_of(rows: list[Row]) -> Baseline:
    """The allowed categories ``reference`` shows, per (dtype, out_dtype, direction) row."""
    return {_key(r): frozenset(f.category for f in r.findings if not f.gated) for r in rows}


def judge(name: str, rows: list[Row], *, expected: tuple[str, ...], baseline: Baseline,
          strict: bool) -> Outcome:
    """The outcome of variant ``name`` from its ``rows``: failing categories, then allowed ones
    outside the reference's ``baseline`` of the same row."""
    failing = categories(rows, gated=True)
    extra = (f.category for r in rows for f in r.findings
             if not f.gated and f.category not in baseline.get(_key(r), frozenset()))
    return Outcome(name, expected, failing + tuple(c for c in dict.fromkeys(extra) if c not in failing),
                   len(rows), strict)


def categories(rows: list[Row], *, gated: bool) -> tuple[str, ...]:
    """Categories of the findings that are ``gated`` (or not) over ``rows``, in first-seen order."""
    seen: dict[str, None] = {}
    for row in rows:
        for finding in row.findings:
            if finding.gated == gated:
                seen.setdefault(finding.category, None)
    return tuple(seen)


@contextmanager
def variant_lines(console: Console, names: list[str], *, quiet: bool) -> Iterator[Callable[[str], None]]:
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
