"""Golden throughput on 16M float32 elements, as a ratio to the naive ``np.where`` in the same run.

Target: ratio <= 4, and peak extra memory < 4x the input size.
Run: ``make bench`` or ``.venv/bin/python -m benchmarks.bench_golden``.
"""
from __future__ import annotations

import numpy as np

from benchmarks.timing import best_time, peak_bytes
from conformance.reference import golden

N = 16 * 1024 * 1024


def main() -> None:
    bits = np.random.default_rng(0).integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    for alpha in (0.2, 0.01, 1.0):
        with np.errstate(all="ignore"):
            naive = best_time(lambda a=alpha: np.where(x > 0, x, x * np.float32(a)))
        exact = best_time(lambda a=alpha: golden.forward(x, a))
        print(f"alpha={alpha:<5} naive np.where {naive * 1e3:7.1f} ms   golden {exact * 1e3:7.1f} ms   "
              f"ratio {exact / naive:4.2f}x (target <= 4x)")
    peak = peak_bytes(lambda: golden.forward(x, 0.2))
    print(f"peak traced memory {peak / x.nbytes:4.2f}x the input size (output included; target < 4x)")


if __name__ == "__main__":
    main()
