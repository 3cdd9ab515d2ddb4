"""``conformance compare --quant`` on a large quantized dump: peak memory and time.

A 128M-element qint8 dump (128 MB per file) of PyTorch's quantized LeakyReLU on random codes
(its vector body differs from exact by a code on some inputs: a ``requantization`` finding)
is compared in a separate ``python -m conformance compare --quant`` process.
Target: peak RSS at most the two input files plus 300 MB (the dumps are read a chunk at a
time, so resident memory holds a chunk and the differing codes, not the arrays).
Run: ``.venv/bin/python -m benchmarks.bench_compare_quant``.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
from numpy.lib.format import open_memmap

from benchmarks.bench_compare import peak_rss_mb
from conformance.frameworks import quantized_models as models
from conformance.reference.quantized import QuantParams, all_codes

N = 128 * 1024 * 1024
SETTING = "0.05:0:0.04:-28"
_MB = 1 << 20


def _write(d: Path, *, step: int = 1 << 24) -> None:
    """x and torch's y, written a piece at a time (never whole in memory)."""
    params = QuantParams(0.05, 0, 0.04, -28, "qint8")
    x = open_memmap(d / "x.npy", mode="w+", dtype=np.int8, shape=(N,))
    y = open_memmap(d / "y.npy", mode="w+", dtype=np.int8, shape=(N,))
    rng = np.random.default_rng(3)
    for lo in range(0, N, step):
        part = rng.choice(all_codes(params), step)
        x[lo:lo + step], y[lo:lo + step] = part, models.torch_vector(part, 0.2, params=params)
    x.flush(), y.flush()
    del x, y


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench_compare_quant_") as tmp:
        d = Path(tmp)
        _write(d)
        args = ["compare", "--x", str(d / "x.npy"), "--y", str(d / "y.npy"), "--alpha", "0.2", "--quant", SETTING]
        start = time.perf_counter()
        rss = peak_rss_mb(args)
        took = time.perf_counter() - start
        inputs_mb = 2 * N / _MB
        print(f"128M qint8 torch dump (2 x {N // _MB} MB): compare --quant {took:6.1f} s (process)   "
              f"peak RSS {rss:6.0f} MB (target <= {inputs_mb + 300:.0f} MB = inputs + 300)", flush=True)


if __name__ == "__main__":
    main()
