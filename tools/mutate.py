"""``make mutate``: mutmut over the modules that decide a verdict, each group of modules against
the plain tests that state its behaviour, then the report (``tools/mutation_report.py``).

Each group runs in a directory of its own, ``mutants/<group>/``, holding links to the tree and a
``pyproject.toml`` whose ``[tool.mutmut]`` names the group's modules and tests (mutmut reads its
settings from the working directory and keeps one test selection per copy).  mutmut then makes its
mutated copy in ``mutants/<group>/mutants/`` and runs, for each mutant, only the selected tests that
call the mutated function, fastest first, stopping at the first failure.  One worker process; the
numpy paths only (``CONFORMANCE_COMPILED=0``), so a mutant is killed by a plain test and never by a
comparison of the compiled and numpy paths, none of which is selected.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "mutants"
LINKED = ("conformance", "tests", "docs", "examples", "README.md", "Makefile")
TIMINGS = WORK / "timings.json"


@dataclass(frozen=True)
class Group:
    """Modules mutated together, and the tests that state what they decide."""

    name: str
    modules: tuple[str, ...]
    tests: tuple[str, ...]


GROUPS = (
    Group("gate", ("conformance/judge/gate.py",),
          ("tests/judge/test_gate.py", "tests/judge/test_gate_verdicts.py", "tests/judge/test_gate_profiles.py",
           "tests/safety/test_gate_fooling.py", "tests/safety/test_internal_errors.py")),
    Group("guard", ("conformance/guard.py",),
          ("tests/safety/test_guard.py", "tests/safety/test_gate_fooling.py", "tests/safety/test_internal_errors.py",
           "tests/npu/test_kernel_failures.py")),
    Group("ingest", ("conformance/ingest/arrays.py",),
          ("tests/ingest/test_arrays.py", "tests/ingest/test_ingest.py", "tests/safety/test_hostile_files.py")),
    Group("attribution", ("conformance/triage/attribution.py",),
          ("tests/triage/test_attribution.py", "tests/triage/test_attribution_findings.py",
           "tests/triage/test_attribution_ownership.py", "tests/triage/test_attribution_paths.py",
           "tests/triage/test_attribution_regions.py", "tests/triage/test_attribution_rounds.py",
           "tests/triage/test_claims.py", "tests/triage/test_search.py", "tests/triage/test_rules.py")),
    Group("emulator", ("conformance/npu_impl/tiling.py", "conformance/npu_impl/kernel.py"),
          ("tests/npu/test_tiling.py", "tests/npu/test_tiling_splits.py", "tests/npu/test_chips.py",
           "tests/npu/test_fidelity.py", "tests/npu/test_kernel.py", "tests/npu/test_formulations.py",
           "tests/npu/test_variants.py", "tests/npu/test_kernel_failures.py", "tests/npu/test_tiling_records.py",
           "tests/npu/test_tiling_article_budget.py", "tests/npu/test_roofline.py",
           "tests/npu/test_instruction_count.py", "tests/npu/test_kernel_pipeline.py")),
    Group("metrics", ("conformance/metrics/exact.py",),
          ("tests/metrics/test_metrics.py", "tests/metrics/test_metric_rules.py", "tests/judge/test_gate.py",
           "tests/triage/test_hazards.py")),
    Group("golden", ("conformance/reference/exact.py", "conformance/reference/golden.py"),
          ("tests/reference", "tests/metrics/test_metrics.py")),
    Group("triage", ("conformance/triage/search.py", "conformance/triage/rules.py"),
          ("tests/triage/test_search.py", "tests/triage/test_rules.py", "tests/triage/test_attribution.py",
           "tests/triage/test_claims.py", "tests/triage/test_rules_homogeneous.py",
           "tests/triage/test_rules_kernel_formulas.py", "tests/triage/test_rules_catalogue.py",
           "tests/triage/test_search_selector.py", "tests/triage/test_search_bound.py",
           "tests/triage/test_rules_flush_alternatives.py")),
)


def group_pyproject(group: Group, *, base: str) -> str:
    """The repository's ``pyproject.toml`` with the group's modules and tests in ``[tool.mutmut]``."""
    header = "[tool.mutmut]\n"
    if header not in base:
        raise SystemExit("mutate: pyproject.toml has no [tool.mutmut] table")
    keys = (f"only_mutate = {json.dumps(list(group.modules))}\n"
            f"pytest_add_cli_args_test_selection = {json.dumps(list(group.tests))}\n")
    return base.replace(header, header + keys, 1)


def prepare(group: Group) -> Path:
    """A fresh ``mutants/<group>/``: links to the tree and the group's ``pyproject.toml``."""
    where = WORK / group.name
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    for name in LINKED:
        (where / name).symlink_to(ROOT / name)
    (where / "pyproject.toml").write_text(group_pyproject(group, base=(ROOT / "pyproject.toml").read_text()))
    return where


def run_group(group: Group) -> float:
    """mutmut over one group, in one worker process; the seconds it took."""
    where = prepare(group)
    env = {**os.environ, "CONFORMANCE_COMPILED": "0", "CONFORMANCE_THREADS": "1"}
    start = time.monotonic()
    print(f"mutate: {group.name} ({', '.join(group.modules)})", flush=True)
    subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", "1"], cwd=where, env=env, check=True)
    return time.monotonic() - start


def record(name: str, seconds: float) -> None:
    """Keep how long a group took, for the report."""
    timings = json.loads(TIMINGS.read_text()) if TIMINGS.exists() else {}
    timings[name] = round(seconds)
    TIMINGS.write_text(json.dumps(timings, indent=1))


def chosen(names: Sequence[str]) -> list[Group]:
    """The groups named (all when none is), refusing a name no group has."""
    unknown = sorted(set(names) - {g.name for g in GROUPS})
    if unknown:
        raise SystemExit(f"mutate: no group {', '.join(unknown)}; the groups are "
                         f"{', '.join(g.name for g in GROUPS)}")
    return [g for g in GROUPS if not names or g.name in names]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups", nargs="*", help="groups to run (all by default)")
    parser.add_argument("--min-score", type=float, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "mutation.md")
    args = parser.parse_args(argv)
    groups = chosen(args.groups)
    if not args.groups:
        shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(exist_ok=True)
    for group in groups:
        record(group.name, run_group(group))
    sys.path.insert(0, str(ROOT / "tools"))
    from mutation_report import report

    return report(GROUPS, out=args.out, min_score=args.min_score, timings=TIMINGS)


if __name__ == "__main__":
    sys.exit(main())
