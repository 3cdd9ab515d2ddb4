"""Compile time of the compiled paths: cold (an empty numba cache) and warm (the cache filled).

Each figure is a fresh interpreter that imports the package and makes the first golden
forward and backward call of every dtype pair and one metric pass (and, apart, the
emulator's first calls on three chips), with
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
from conformance.metrics.exact import compare
from conformance.records import Tolerance
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


#: The emulator's first calls: every loop signature the default chips reach (the float32 select
#: and LeakyRelu loop, the plain 16-bit loop, the general loop, a tile with a hazard, output casts).
_EMULATOR_CALLS = """
import time
import numpy as np
from conformance import jit
from conformance.dtypes import all_patterns
from conformance.npu_impl import leaky_relu, leaky_relu_backward
t1 = time.perf_counter()
x32, x16 = np.linspace(-2, 2, 4097).astype(np.float32), all_patterns("float16")
for profile in ("ascend910b1", "ascend910a", "ascend950"):
    for x in (x32, x16):
        leaky_relu(x, 0.2, profile=profile)
        leaky_relu_backward(x, x, 0.2, profile=profile)
    leaky_relu(x32, 0.2, profile=profile, out_dtype="float16")
leaky_relu(x32, 0.2, variant="tail-overrun")
print(0.0, time.perf_counter() - t1, jit.enabled())
"""


def _timed(cache: str, *, calls: bool, script: str = _FIRST_CALLS) -> tuple[float, float, bool]:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", script.format(calls=calls)], env=env,
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
        _, emu_cold, _ = _timed(cache, calls=True, script=_EMULATOR_CALLS)
        _, emu_warm, _ = _timed(cache, calls=True, script=_EMULATOR_CALLS)
    print(f"import {imported:5.2f} s; first calls (16 golden loops, the metric pass, the ULP distance): "
          f"cold {cold:5.2f} s (compiled, cache written), warm {warm:5.2f} s (cache loaded)")
    print(f"emulator first calls (3 chips, fp32/fp16, both directions, an output cast, a tail defect): "
          f"cold {emu_cold:5.2f} s, warm {emu_warm:5.2f} s")


if __name__ == "__main__":
    main()
