"""``conformance compare`` on large dumps, as ratios to the golden alone on the same data.

Targets:
- 16M fp32, clean dump: compare at most 2x the golden-alone time;
- 16M fp32, torch-default-slope defect (made with alpha 0.01, checked at 0.2): at most 2x;
- peak RSS of a compare process at most 3x the input files plus 300 MB;
- a 256M-element fp16 dump (512 MB per file) completes under 1.5 GB peak RSS.

Compare is timed in-process (``cli.main``, output discarded), so neither side pays for
interpreter start-up, by wall time and by CPU time (``time.process_time``: the load of a
shared machine stretches the first, hardly the second; and the calling thread's CPU time,
what bounds the wall time when the other threads keep up), alternately with the golden alone,
and the load average is printed with them; peak RSS is measured on a separate
``python -m conformance compare`` process.  The data is written to a temporary directory
that is removed afterwards.
Run: ``make bench`` or ``.venv/bin/python -m benchmarks.bench_compare`` (``--fp32``: the
16M fp32 cases only).
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import numpy as np
from numpy.lib.format import open_memmap

from benchmarks.timing import best_time
from conformance import cli
from conformance.reference import golden

N = 16 * 1024 * 1024
BIG = 256 * 1024 * 1024
_MB = 1 << 20
_RSS = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
        "stderr=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
        "sys.exit(done.returncode if done.returncode > 1 else 0)")  # a verdict (0, 1) is fine, an error is not


def _compare_args(d: Path, x: str, y: str) -> list[str]:
    return ["compare", "--x", str(d / x), "--y", str(d / y), "--alpha", "0.2"]


def _compare_in_process(args: list[str]) -> int:
    """``conformance compare`` in this process; an exit code that is no verdict (2, 3) stops the
    benchmark, which would otherwise time an error."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(args)
    if code not in (0, 1):
        raise RuntimeError(f"compare exited {code}: {err.getvalue().strip()[-300:]}")
    return code


def peak_rss_mb(args: list[str]) -> float:
    """Peak resident memory of ``python -m conformance <args>``, in MB (Linux: KB units)."""
    out = subprocess.run([sys.executable, "-c", _RSS, sys.executable, "-m", "conformance", *args],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) / 1024


def _write_fp32(d: Path) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", golden.forward(x, 0.2))
    np.save(d / "y_torch_default.npy", golden.forward(x, 0.01))
    return x


def _write_big_fp16(d: Path, *, step: int = 1 << 24) -> None:
    """256M fp16 x and its exact y, written a piece at a time (never whole in memory)."""
    x = open_memmap(d / "xb.npy", mode="w+", dtype=np.float16, shape=(BIG,))
    y = open_memmap(d / "yb.npy", mode="w+", dtype=np.float16, shape=(BIG,))
    rng = np.random.default_rng(1)
    for lo in range(0, BIG, step):
        part = rng.standard_normal(step).astype(np.float16)
        x[lo:lo + step], y[lo:lo + step] = part, golden.forward(part, 0.2)
    x.flush(), y.flush()
    del x, y


def _timed(fn: Callable[[], object]) -> tuple[float, float, float]:
    """Wall, CPU and calling-thread CPU seconds of one call."""
    wall, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - thread


def side_by_side(first: Callable[[], object], second: Callable[[], object], *,
                 rounds: int = 3) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Best (wall, CPU, calling-thread CPU) times of two calls measured in alternation, so both
    see the same load."""
    times = [(_timed(first), _timed(second)) for _ in range(rounds)]
    return tuple(tuple(min(t[k][j] for t in times) for j in (0, 1, 2)) for k in (0, 1))  # type: ignore[return-value]


def _fp32_cases(d: Path) -> None:
    x = _write_fp32(d)
    inputs_mb = 2 * x.nbytes / _MB
    for name, y, target in (("clean", "y.npy", 2), ("torch-default-slope defect", "y_torch_default.npy", 2)):
        args = _compare_args(d, "x.npy", y)
        _compare_in_process(args)  # the first call loads the compiled loops: not timed
        load = os.getloadavg()[0]
        alone, took = side_by_side(lambda: golden.forward(x, 0.2), lambda a=args: _compare_in_process(a))
        rss = peak_rss_mb(args)
        print(f"16M fp32, {name:<27} compare {took[0]:6.2f} s   golden alone {alone[0]:5.2f} s   "
              f"ratio {took[0] / alone[0]:5.1f}x wall, {took[1] / alone[1]:5.1f}x CPU "
              f"({took[1]:.2f} s / {alone[1]:.2f} s), {took[2] / alone[1]:4.1f}x on the calling thread "
              f"(target <= {target}x)   load {load:.1f}   "
              f"peak RSS {rss:6.0f} MB (target <= {3 * inputs_mb + 300:.0f} MB = 3x inputs + 300)", flush=True)


def _big_case(d: Path) -> None:
    _write_big_fp16(d)
    args = _compare_args(d, "xb.npy", "yb.npy")
    rss = peak_rss_mb(args)
    took = best_time(lambda: _compare_in_process(args), repeat=1)
    print(f"256M fp16 clean dump (2 x 512 MB): compare {took:6.1f} s   peak RSS {rss:6.0f} MB "
          "(target < 1536 MB)", flush=True)


def main(argv: Optional[list[str]] = None) -> None:
    with tempfile.TemporaryDirectory(prefix="bench_compare_") as tmp:
        _fp32_cases(Path(tmp))
    if "--fp32" in (sys.argv[1:] if argv is None else argv):
        return
    with tempfile.TemporaryDirectory(prefix="bench_compare_") as tmp:
        _big_case(Path(tmp))


if __name__ == "__main__":
    main()
