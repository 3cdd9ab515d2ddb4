"""``conformance sweep`` throughput, extrapolated to all 2^32 fp32 patterns.

Targets, this 2-core machine, one alpha (0.2), backends torch + cann (reference), the exact
golden computed once per chunk and shared by both, and a backend's row derived from the
other's where their bits agree, and no plot data (the sweep's default, without ``--html``):
- forward, all 2^32 x: at most 1 minute;
- backward, all 2^32 dy against x = -1 (the product path): at most 15 minutes;
- backward, all 2^32 dy against each of the 9 x classes: at most 20 minutes.

Each configuration runs 32 chunks of 2^21 patterns (2^26 in all) spread evenly over the
pattern space (one every 2^27, so positives, negatives, subnormals, infinities and NaNs
weigh as in the full sweep) on the embedded Dask cluster with one worker per core, after
warm-up chunks: the first 2^16 patterns of every sampled chunk, as many times over as there are
workers (the imports, and the compiled loops each kind of chunk loads from numba's cache once
per process: a full sweep pays that once per worker, while in 32 sampled chunks it would weigh
64 times over in the extrapolation), and the rate is extrapolated to 2^32 patterns twice: by
wall time (what this machine takes at its present load, printed beside it) and by the CPU
seconds the workers spent on the chunks, divided among the cores (what the cores would take
with nothing else running).
A per-stage breakdown (golden, each backend, judging) of one negative and one positive
chunk in this process says where the time goes.
Run: ``make bench`` or ``.venv/bin/python -m benchmarks.bench_sweep`` (``--only forward``, ``backward``
or ``classes`` runs one configuration and its breakdown alone).
"""
from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Optional

from conformance.backends import call
from conformance.config import default_config
from conformance.judge.evaluate import evaluate
from conformance.reference import golden as ref
from conformance.sweep import run as sweeping
from conformance.sweep import twins
from conformance.sweep.spec import X_CLASS_IDS, SweepSpec, segments

ALL = 1 << 32
CHUNK = 1 << 21
SAMPLES = 32  # chunks, one every 2**27 patterns
BACKENDS = (("torch", None, None), ("cann", "ascend910b1", "reference"))  # golden: once per chunk, shared
CONFIG = default_config()
TOLERANCE = tuple(vars(CONFIG.tolerance("float32")).values())


def specs(direction: str, x_classes: Sequence[str | None]) -> list[SweepSpec]:
    return [SweepSpec(name, "float32", "float32", direction, 0.2, profile, variant, x, TOLERANCE)
            for x in x_classes for name, profile, variant in BACKENDS]


def sampled_tasks(group: Sequence[SweepSpec], *, chunk: int = CHUNK) -> list[sweeping.ChunkTask]:
    """One task per x class and sampled chunk (all backends of the class share it)."""
    by_class: dict[object, list[SweepSpec]] = {}
    for spec in group:
        by_class.setdefault(spec.x_class, []).append(spec)
    return [sweeping.ChunkTask(tuple(members), lo, lo + chunk, CONFIG, plots=False)
            for members in by_class.values() for lo in range(0, ALL, ALL // SAMPLES)]


def timed_sweep(execute: sweeping.Executor, tasks: Sequence[sweeping.ChunkTask]) -> tuple[float, float]:
    """Wall seconds of the tasks, and the CPU seconds their workers spent on them."""
    start, cpu = time.perf_counter(), 0.0
    for done in execute(tasks):
        cpu += done.cpu
    return time.perf_counter() - start, cpu


def stage_times(spec_group: Sequence[SweepSpec], lo: int) -> dict[str, float]:
    """Seconds per stage of one chunk in this process: golden, each backend's call, judging (or
    deriving the row from a backend with the same bits, as the sweep does)."""
    seg = next(segments(spec_group[0], lo, lo + CHUNK))
    out: dict[str, float] = {}
    start = time.perf_counter()
    first = spec_group[0]
    golden = ref.compute(first.direction, seg.x, seg.alpha, dy=seg.dy, out_dtype=first.out_dtype)
    out["golden"] = time.perf_counter() - start
    results = {}
    for spec in spec_group:
        start = time.perf_counter()
        results[spec] = call(sweeping._backend(spec), spec.direction, seg.x, seg.alpha, dy=seg.dy)
        out[f"{spec.backend} call"] = time.perf_counter() - start
    judged: list = []
    for spec in sorted(spec_group, key=lambda s: results[s].tile_plan is None):  # the sweep's order
        start, result = time.perf_counter(), results[spec]
        twin = next(((r, done) for r, done in judged if twins.derivable(r, done, result)), None)
        if twin is not None:
            twins.derived(twin[0], result, backend=spec.backend, profile=spec.profile, variant=spec.variant,
                          config=CONFIG)
            out[f"{spec.backend} derived"] = time.perf_counter() - start
            continue
        judged.append((evaluate(seg.x, seg.alpha, result, direction=spec.direction, dy=seg.dy,
                                backend=spec.backend, profile=spec.profile, config=CONFIG, golden=golden,
                                plots=False),
                       result))
        out[f"{spec.backend} judge"] = time.perf_counter() - start
    return out


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


CONFIGS = ("forward", "backward", "classes")


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=CONFIGS, help="one configuration (default: all three)")
    only = parser.parse_args(argv).only
    workers = os.cpu_count() or 1
    every = [("forward, golden+torch+cann", specs("forward", [None]), 60),
             ("backward dy vs x=-1, same backends", specs("backward", ["-1"]), 15 * 60),
             ("backward dy vs all 9 x classes", specs("backward", X_CLASS_IDS), 20 * 60)]
    configs = [c for name, c in zip(CONFIGS, every) if only in (None, name)]
    breakdown = [("forward", every[0][1], 0xBF000000), ("forward", every[0][1], 0x3F000000),
                 ("backward x=-1", every[1][1], 0x3F000000)]
    for title, group, lo in (b for b in breakdown if only is None or b[0].split()[0] == only):
        sweeping.run_chunk(sweeping.ChunkTask(tuple(group), lo, lo + 1024, CONFIG, plots=False))  # imports, caches
        stages = stage_times(group, lo)
        per = ", ".join(f"{k} {v / CHUNK * 1e9:.1f}" for k, v in stages.items())
        print(f"stages ns/pattern, {title}, chunk at {lo:#010x}, one process: {per}")
    with sweeping.dask_executor(workers=workers) as execute:
        for title, group, target in configs:
            tasks = sampled_tasks(group)
            timed_sweep(execute, [replace(t, hi=t.lo + (1 << 16)) for t in tasks for _ in range(workers)])
            load = os.getloadavg()[0]
            seconds, cpu = timed_sweep(execute, tasks)
            scale = ALL / (SAMPLES * CHUNK)  # each x class sweeps all 2^32 dy
            print(f"{title}: {len(tasks)} chunks of {CHUNK:,} patterns in {seconds:.1f} s on {workers} workers "
                  f"= {len(tasks) * CHUNK / seconds / 1e6:.2f} M patterns/s (golden + 2 backends each), "
                  f"{cpu:.1f} CPU s, load {load:.1f}; all 2^32 patterns, extrapolated: {_minutes(seconds * scale)} "
                  f"by wall, {_minutes(cpu * scale / workers)} by CPU on {workers} free cores "
                  f"(target {_minutes(target)})", flush=True)


if __name__ == "__main__":
    main()
