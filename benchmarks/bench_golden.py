"""Golden throughput on 16M float32 elements, as ratios to the naive ``np.where`` in the same run.

Each slope times, in alternation, the naive ``np.where(x > 0, x, x*a)``, the golden
(its compiled loop when numba is installed) and the golden's numpy path
(``CONFORMANCE_COMPILED=0``), so the three see the same machine load.
Targets: golden <= 1.5x naive at every slope; peak extra memory < 4x the input size.
Run: ``make bench`` or ``.venv/bin/python -m benchmarks.bench_golden``.
"""
from __future__ import annotations

import numpy as np

from benchmarks.timing import alternated, peak_bytes
from conformance import jit
from conformance.reference import golden

N = 16 * 1024 * 1024


def _naive(x: np.ndarray, alpha: float) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(x > 0, x, x * np.float32(alpha))


def main() -> None:
    bits = np.random.default_rng(0).integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    golden.forward(x[:16], 0.2)  # the compiled loop loaded (bench_compile times that)
    path = "compiled" if jit.enabled() else "numpy (numba missing or CONFORMANCE_COMPILED=0)"
    print(f"golden path: {path}")
    for alpha in (0.2, 0.01, 1.0):
        naive, fast, ref = alternated(lambda a=alpha: _naive(x, a), lambda a=alpha: golden.forward(x, a),
                                      lambda a=alpha: golden.reference_compute("forward", x, a))
        print(f"alpha={alpha:<5} naive np.where {naive * 1e3:6.1f} ms   golden {fast * 1e3:6.1f} ms "
              f"ratio {fast / naive:4.2f}x (target <= 1.5x)   numpy path {ref * 1e3:6.1f} ms "
              f"ratio {ref / naive:4.2f}x", flush=True)
    peak = peak_bytes(lambda: golden.forward(x, 0.2))
    print(f"peak traced memory {peak / x.nbytes:4.2f}x the input size (output included; target < 4x)")


if __name__ == "__main__":
    main()
