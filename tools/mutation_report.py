"""The report of ``make mutate``: mutmut's results over the modules that decide a verdict.

``tools/mutate.py`` writes it after its runs; ``.venv/bin/python tools/mutation_report.py`` writes
it again from the results left in ``mutants/<group>/mutants/``.

The score is killed / non-equivalent mutants: a mutant listed in ``tools/mutation_equivalent/``
(changes no behaviour any input can show, with the reason) is left out; one whose function no
selected test calls (mutmut's "no tests": code only the compiled paths run, which the target
leaves out) is counted apart, as unreached, and its functions listed; a timeout counts as killed.

Mutants are named by a stable key, not by mutmut's numbers (which shift whenever a function gains
a mutation point): ``path::function: removed => added``, the changed source lines of the mutant's
diff, with ``#2``, ``#3`` appended when one function has the same change twice.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import sys
import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mutmut.mutation.data import MutantLineSpans, SourceFileMutationData
from mutmut.mutation.diff_apply import generated_function_names
from mutmut.stats import status_by_exit_code
from mutmut.utils.format_utils import orig_function_and_class_names_from_key

if TYPE_CHECKING:
    from mutate import Group

EQUIVALENT = Path(__file__).with_name("mutation_equivalent")
KILLED = frozenset({"killed", "timeout", "segfault", "caught by type check"})
NOT_RUN = frozenset({"not checked", "check was interrupted by user", "skipped"})
UNREACHED = "no tests"


@dataclass(frozen=True)
class Mutant:
    """One mutant: where it is, its stable key, its diff and what the tests did to it."""

    path: str
    name: str
    key: str
    diff: str
    status: str
    seconds: float


def load_equivalent(folder: Path, *, table: str = "equivalent") -> dict[str, str]:
    """A curated table from every ``*.toml`` in ``folder`` (one per group): stable key -> why.
    ``equivalent``: no input can tell the mutant from the original; ``compiled_only``: the mutated
    line runs only on the compiled paths."""
    entries = [e for path in sorted(folder.glob("*.toml")) for e in tomllib.loads(path.read_text()).get(table, [])]
    return {e["mutant"]: e["why"] for e in entries}


def changed_lines(diff: str) -> tuple[str, str]:
    """The removed and the added source lines of a unified diff, each stripped and joined."""
    body = [line for line in diff.splitlines() if not line.startswith(("---", "+++", "@@"))]
    removed = " / ".join(line[1:].strip() for line in body if line.startswith("-"))
    added = " / ".join(line[1:].strip() for line in body if line.startswith("+"))
    return removed, added


def function_of(name: str) -> str:
    """``Class.method`` or ``function`` from a mutmut mutant name."""
    function, cls = orig_function_and_class_names_from_key(name)
    return f"{cls}.{function}" if cls else function


def mutants_of(path: str) -> list[Mutant]:
    """Every mutant of ``path`` with its status and diff (the mutated file read once)."""
    data = SourceFileMutationData(path=path)
    data.load()
    names = sorted(data.exit_code_by_key, key=_number)
    diffs = _diffs(path, names)
    seen: Counter[str] = Counter()
    found = []
    for name in names:
        removed, added = changed_lines(diffs[name])
        key = f"{path}::{function_of(name)}: {removed} => {added}"
        seen[key] += 1
        key = key if seen[key] == 1 else f"{key} #{seen[key]}"
        found.append(Mutant(path, name, key, diffs[name], status_by_exit_code[data.exit_code_by_key[name]],
                            float(data.durations_by_key.get(name, 0.0))))
    return found


def _diffs(path: str, names: Sequence[str]) -> dict[str, str]:
    """Each mutant's unified diff against its function, from mutmut's index of the mutated file."""
    spans = MutantLineSpans.load(path)
    if spans is None:
        raise SystemExit(f"mutation report: no index of mutants/{path}; run `make mutate` again")
    pairs = {name: generated_function_names(name) for name in names}
    wanted = sorted({generated for pair in pairs.values() for generated in pair})
    source = dict(zip(wanted, spans.read_function_sources(wanted)))
    diffs = {}
    for name, (orig, mutant) in pairs.items():
        plain = orig_function_and_class_names_from_key(name)[0]
        before = source[orig].replace(orig, plain, 1).splitlines()
        after = source[mutant].replace(mutant, plain, 1).splitlines()
        diffs[name] = "\n".join(difflib.unified_diff(before, after, path, path, lineterm=""))
    return diffs


def _number(name: str) -> tuple[str, int]:
    stem, _, number = name.rpartition("__mutmut_")
    return stem, int(number) if number.isdigit() else 0


@dataclass(frozen=True)
class Tally:
    """What happened to one module's mutants."""

    total: int
    killed: int
    survived: int
    equivalent: int
    not_run: int
    unreached: int
    seconds: float

    @property
    def judged(self) -> int:
        """Non-equivalent mutants that ran: the score's denominator."""
        return self.total - self.equivalent - self.not_run - self.unreached

    @property
    def score(self) -> float:
        return 100.0 * self.killed / self.judged if self.judged else 100.0


def tally(mutants: Sequence[Mutant], equivalent: Mapping[str, str]) -> Tally:
    """Counts of ``mutants``: killed, surviving (not listed equivalent), equivalent, not run."""
    eq = [m for m in mutants if m.key in equivalent and m.status not in KILLED]
    not_run = [m for m in mutants if m.status in NOT_RUN and m.key not in equivalent and not _unreached(m)]
    unreached = [m for m in mutants if _unreached(m) and m.key not in equivalent]
    killed = [m for m in mutants if m.status in KILLED]
    survived = len(mutants) - len(eq) - len(not_run) - len(unreached) - len(killed)
    return Tally(len(mutants), len(killed), survived, len(eq), len(not_run), len(unreached),
                 sum(m.seconds for m in mutants))


def surviving(mutants: Iterable[Mutant], equivalent: Mapping[str, str]) -> list[Mutant]:
    """Mutants that ran, were not killed and are not listed as equivalent."""
    return [m for m in mutants if m.status not in KILLED | NOT_RUN and not _unreached(m) and m.key not in equivalent]


COMPILED_ONLY = load_equivalent(EQUIVALENT, table="compiled_only")


def _unreached(m: Mutant) -> bool:
    """No selected test calls its function, or its line runs only on the compiled paths."""
    return m.status not in KILLED and (m.status == UNREACHED or m.key in COMPILED_ONLY)


def unreached(mutants: Iterable[Mutant]) -> Counter[str]:
    """Unreached mutants per function."""
    return Counter(f"{m.path}::{function_of(m.name)}" for m in mutants if _unreached(m))


def _row(label: str, t: Tally) -> str:
    return (f"| {label} | {t.total} | {t.killed} | {t.survived} | {t.equivalent} | {t.unreached} | {t.not_run} "
            f"| {t.score:.1f}% | {t.seconds:.0f} |")


def render(by_path: Mapping[str, list[Mutant]], equivalent: Mapping[str, str], *,
           timings: Mapping[str, int]) -> str:
    """The Markdown report: the score per module and overall, each survivor, each equivalent."""
    every = [m for ms in by_path.values() for m in ms]
    overall = tally(every, equivalent)
    lines = ["# Mutation testing", "",
             f"Score: **{overall.score:.1f}%** of {overall.judged} non-equivalent mutants killed "
             f"({overall.killed} killed, {overall.survived} surviving, {overall.equivalent} equivalent, "
             f"{overall.unreached} unreached, {overall.not_run} not run).", "",
             "| module | mutants | killed | surviving | equivalent | unreached | not run | score | seconds in tests |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [_row(f"`{path}`", tally(ms, equivalent)) for path, ms in by_path.items()]
    lines += [_row("**all**", overall), "", "Wall time per group (mutant generation, stats and runs): "
              + ", ".join(f"{name} {seconds} s" for name, seconds in timings.items()) + ".",
              "", "## Surviving mutants", ""]
    for m in surviving(every, equivalent):
        lines += [f"### `{m.key}`", "", f"{m.status} (`{m.name}`)", "", "```diff", m.diff, "```", ""]
    lines += ["## Unreached: no selected plain test calls the function, or the line is on a compiled path only",
              "(tools/mutation_equivalent/, `compiled_only`)", ""]
    lines += [f"- `{where}`: {n} mutants" for where, n in sorted(unreached(every).items())]
    lines += ["", "## Equivalent mutants (tools/mutation_equivalent/)", ""]
    keys = {m.key for m in every}
    lines += [f"- `{key}`: {why}" + ("" if key in keys else " (not among this run's mutants)")
              for key, why in equivalent.items()]
    return "\n".join(lines) + "\n"


def collect(groups: Iterable[Group], *, work: Path) -> dict[str, list[Mutant]]:
    """Every mutated module's mutants, from the groups that have run."""
    by_path = {}
    for where, group in ((work / g.name, g) for g in groups):
        if not where.is_dir():
            continue
        with contextlib.chdir(where):
            by_path.update({p: mutants_of(p) for p in group.modules if Path("mutants", p + ".meta").exists()})
    return by_path


def report(groups: Sequence[Group], *, out: Path, min_score: float | None, timings: Path) -> int:
    """Write the report to ``out``; 1 when the score is under ``min_score``, else 0."""
    by_path = collect(groups, work=timings.parent)
    equivalent = load_equivalent(EQUIVALENT)
    spent = json.loads(timings.read_text()) if timings.exists() else {}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(by_path, equivalent, timings=spent))
    overall = tally([m for ms in by_path.values() for m in ms], equivalent)
    print(f"mutate: {overall.score:.1f}% of {overall.judged} non-equivalent mutants killed "
          f"({overall.survived} surviving, {overall.not_run} not run); report in {out}")
    return 1 if min_score is not None and overall.score < min_score else 0


def main(argv: Sequence[str] | None = None) -> int:
    from mutate import GROUPS, ROOT, TIMINGS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "mutation.md")
    parser.add_argument("--min-score", type=float, default=None,
                        help="exit 1 when fewer than this percentage of non-equivalent mutants are killed")
    args = parser.parse_args(argv)
    return report(GROUPS, out=args.out, min_score=args.min_score, timings=TIMINGS)


if __name__ == "__main__":
    sys.exit(main())
