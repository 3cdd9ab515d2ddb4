"""Compile time of the compiled paths: cold (an empty numba cache) and warm (the cache filled).

Each figure is a fresh interpreter that imports the package and makes the first golden
forward and backward call of every dtype pair and one metric pass, with
``NUMBA_CACHE_DIR`` pointing at a temporary directory: the first process compiles and
writes the cache, the second loads it (both include importing numba, which the package
itself does not import).  The package's import is timed the same way.
Run: ``make bench`` or ``.venv/bin/python -m benchmarks.bench_compile``.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

_FIRST_CALLS = """
import time
t0 = time.perf_counter()
import numpy as np
from conformance.dtypes import info, ulp_distance
from conformance import jit
from conformance.reference import golden
from conformance.reference.exact import SUPPORTED_PAIRS
from conformance.report.metrics import Tolerance, compare
t1 = time.perf_counter()
if {calls}:
    for src, out in sorted(SUPPORTED_PAIRS):
        x = np.linspace(-2, 2, 64).astype(info(src).dtype)
        golden.forward(x, 0.2, out_dtype=out)
        golden.backward(x, x, 0.2, out_dtype=out)
    y = golden.forward(np.float32([1, -1]), 0.2)
    compare(y, y[::-1].copy(), tolerance=Tolerance(1e-3, 1e-5))
    ulp_distance(y, y[::-1].copy())
print(t1 - t0, time.perf_counter() - t1, jit.enabled())
"""


def _timed(cache: str, *, calls: bool) -> tuple[float, float, bool]:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", _FIRST_CALLS.format(calls=calls)], env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1]), out[2] == "True"


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench_compile_") as cache:
        imported, _, enabled = _timed(cache, calls=False)
        if not enabled:
            print("numba missing or CONFORMANCE_COMPILED=0: nothing is compiled")
            return
        _, cold, _ = _timed(cache, calls=True)
        _, warm, _ = _timed(cache, calls=True)
    print(f"import {imported:5.2f} s; first calls (16 golden loops, the metric pass, the ULP distance): "
          f"cold {cold:5.2f} s (compiled, cache written), warm {warm:5.2f} s (cache loaded)")


if __name__ == "__main__":
    main()
