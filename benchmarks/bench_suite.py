"""Wall time of the default conformance suite, and of its exhaustive 16-bit part.

Run: ``.venv/bin/python -m benchmarks.bench_suite`` (``--part sweep`` for the 16-bit part only).
Targets (2 cores): the whole default suite <= 120 s after set-up; the
exhaustive 16-bit part <= 10 s.  The 16-bit part is timed on its own: every
16-bit row of the default suite fed only its 65,536-pattern sweep batch,
judged with ``report.evaluate`` (framework imports are warmed up first, so
the figure is the sweep work itself).
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Optional

from conformance import suite
from conformance.cases.edges import edge_pool
from conformance.dtypes import info


def _warm_up(specs: list[suite.RowSpec]) -> None:
    """One tiny call per backend, so framework imports (TensorFlow takes seconds) are not timed."""
    config = suite.Options().config
    for spec in {(s.backend, s.profile, s.variant): s for s in specs}.values():
        tiny = suite.InputBatch("warm-up", edge_pool(spec.dtype).values[:4])
        suite.run_batch(replace(spec, direction="forward"), tiny, config=config)


def sweep_part(selection: suite.Selection) -> tuple[float, dict[str, float], int]:
    """Seconds for every 16-bit row's sweep batch (total, per backend, rows)."""
    specs = [s for s in suite.plan(selection)[0] if info(s.dtype).bits == 16]
    _warm_up(specs)
    inputs = suite.Inputs(seed=0, max_examples=0, alphas=selection.alphas)
    per_backend: dict[str, float] = defaultdict(float)
    start = time.perf_counter()
    for spec in specs:
        t = time.perf_counter()
        suite.run_batch(spec, inputs.sweep(spec.dtype, spec.direction), config=suite.Options().config)
        per_backend[spec.backend] += time.perf_counter() - t
    return time.perf_counter() - start, dict(per_backend), len(specs)


def whole_suite(selection: suite.Selection) -> tuple[float, int, str]:
    """Seconds for the default suite as `make conformance` runs it (imports included), rows, verdict."""
    start = time.perf_counter()
    result = suite.run_suite(selection, suite.Options(results_dir=None))
    verdict = "fail" if any(r.verdict == "fail" for r in result.rows) else "pass"
    return time.perf_counter() - start, len(result.rows), verdict


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("all", "sweep", "suite"), default="all")
    args = parser.parse_args(argv if argv is not None else [])
    selection = suite.Selection()
    if args.part in ("all", "suite"):
        seconds, rows, verdict = whole_suite(selection)
        print(f"default suite: {rows} rows in {seconds:.1f} s wall ({verdict}; target <= 120 s)")
    if args.part in ("all", "sweep"):
        seconds, per_backend, rows = sweep_part(selection)
        detail = ", ".join(f"{b} {t:.1f} s" for b, t in per_backend.items())
        print(f"exhaustive 16-bit part: {rows} rows x 65,536 patterns in {seconds:.1f} s "
              f"({detail}; target <= 10 s)")


if __name__ == "__main__":
    main(sys.argv[1:])
