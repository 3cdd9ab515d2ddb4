"""Selftest of generated defects (``selftest --generated``): defects planted into generated cases
(``conformance.cases.regional_defects``: LeakyReLU's float outputs and quantized codes, PReLU's y, dx
and dweight), each case triaged element by element, and the planted category scored against the named
one; it passes when at least ``GENERATED_REQUIRED`` of the planted elements are named right and no case
has findings where nothing was planted."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console

from conformance.errors import UsageError
from conformance.render import console as show

GENERATED_REQUIRED = 0.999  # share of planted elements triage must name right


@dataclass(frozen=True)
class Scored:
    """Triage of one generated case: per planted element, planted vs named category."""

    case: object
    pairs: tuple[tuple[str, str, bool], ...]  # (planted, named, correct) per planted element
    false_findings: tuple[str, ...]  # categories named on elements nothing was planted in


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


def name_generated(case) -> Scored:
    """Triage a generated case (``conformance.cases.defects.Planted``) element by element."""
    named: dict[int, str] = {}
    also: dict[int, tuple] = {}  # categories triage reported as equally good for the element
    for index, category, alternatives in _claimed(case):
        for i in index.tolist():
            named[i] = category
            also[i] = alternatives
    pairs = []
    for i in sorted(case.accept):
        name, planted = named.get(i, "unexplained"), case.accept[i]
        right = name in planted or bool(set(also.get(i, ())) & set(planted))
        pairs.append((name if name in planted else planted[0], name, right))
    false = tuple(sorted({c for i, c in named.items() if i not in case.accept}))
    return Scored(case, tuple(pairs), false)


def _claimed(case) -> list[tuple]:
    """(flat indices, category, categories as good) of each of triage's claims on a generated case."""
    import numpy as np

    if case.prelu is not None:
        return [(np.flatnonzero(c.mask.reshape(-1)), c.category, ()) for c in prelu_claims(case)]
    return [(c.index, c.category, tuple(c.detail.get("alternative_categories", ()))) for c in _claims(case)]


def prelu_claims(case) -> list:
    """PReLU triage of a generated PReLU case's part: dweight's sums, or y's or dx's elements."""
    from conformance.triage.prelu import Operands, triage_dweight, triage_elementwise

    s = case.prelu
    if s.part == "dweight":
        return triage_dweight(case.dy, case.x, s.weight, case.golden, case.actual, channel_axis=s.channel_axis,
                              tile=s.tile)
    operand = case.x if s.part == "y" else case.dy
    return triage_elementwise(Operands(case.x, operand, s.weight, s.channel_axis), case.golden, case.actual,
                              forward=s.part == "y")


def _claims(case) -> list:
    """Triage's claims on a generated case: its codes' (a quantized case) or its elements'."""
    import numpy as np

    if case.params is not None:
        from conformance.triage.quantized import QuantBatch, triage_quantized

        return triage_quantized(QuantBatch(case.x, case.alpha, case.params, case.golden, case.actual))
    from conformance.metrics.exact import match_mask
    from conformance.triage import Batch, triage

    mis = np.flatnonzero(~match_mask(case.actual, case.golden))
    batch = Batch(case.x.reshape(-1), None if case.dy is None else case.dy.reshape(-1), case.alpha,
                  case.direction, case.out_dtype, case.golden, case.actual, shape=case.x.shape)
    return triage(batch, mismatches=mis, tile_plan=case.tile_plan)


def tally(scored: list[Scored]) -> tuple[float, int]:
    """The share of planted elements named right, and the cases with findings where nothing
    was planted."""
    total = sum(len(s.pairs) for s in scored)
    right = sum(ok for s in scored for _, _, ok in s.pairs)
    return (right / total if total else 1.0), sum(bool(s.false_findings) for s in scored)


def passes(share: float, false: int) -> bool:
    """Enough planted elements named right, and no case with findings where nothing was planted."""
    return share >= GENERATED_REQUIRED and not false


def profile_plan(src: str, out: str, direction: str, numel: int, rng) -> object:
    """The reference kernel's tiling plan on a chip profile drawn by ``rng`` (None where the
    profile has no kernel for the pair)."""
    from conformance.ingest.dumps import kernel_plan_fn
    from conformance.npu_impl.chips import PROFILES

    try:
        return kernel_plan_fn(str(rng.choice(sorted(PROFILES))), None, dtypes=(src, out), direction=direction)(numel)
    except UsageError:
        return None


@contextmanager
def case_progress(console: Console, count: int, *, quiet: bool) -> Iterator[Callable[[], None]]:
    """A spinner on a terminal; on a pipe, :class:`LineProgress` lines on stderr (every few seconds
    and at the end); the callable counts one more case scored."""
    if console.is_terminal:
        with console.status(f"selftest: {count} generated cases"):
            yield lambda: None
        return
    with show.LineProgress(disable=quiet) as progress:
        task = progress.add_task("selftest --generated", total=count, unit="case")
        yield lambda: progress.update(task, advance=1)
