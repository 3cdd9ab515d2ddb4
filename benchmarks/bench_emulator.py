"""Emulator forward throughput on 16M float32 elements, as a ratio to torch in the same run.

Run: ``.venv/bin/python -m benchmarks.bench_emulator`` (``--numel``, ``--repeat``).
Also prints a 65,536-element fp16 call, the size of an exhaustive 16-bit sweep.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Optional

import numpy as np

from benchmarks.timing import best_time


def main(argv: Optional[Sequence[str]] = None) -> None:
    import torch

    from conformance.dtypes import all_patterns
    from conformance.npu_impl import leaky_relu

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--numel", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv if argv is not None else [])
    x = np.random.default_rng(0).standard_normal(args.numel).astype(np.float32)
    tx = torch.from_numpy(x)
    t_torch = best_time(lambda: torch.nn.functional.leaky_relu(tx, 0.01), repeat=args.repeat)
    t_emu = best_time(lambda: leaky_relu(x, 0.01), repeat=args.repeat)
    sweep = all_patterns("float16")
    t_sweep = best_time(lambda: leaky_relu(sweep, 0.2), repeat=args.repeat)
    print(f"torch.nn.functional.leaky_relu: {args.numel:,} fp32 in {t_torch * 1e3:.1f} ms "
          f"({args.numel / t_torch / 1e6:.0f} M elements/s, {torch.get_num_threads()} threads)")
    print(f"emulated CANN kernel (ascend910b1, 48 cores): {t_emu * 1e3:.1f} ms "
          f"({args.numel / t_emu / 1e6:.0f} M elements/s)")
    print(f"ratio emulator / torch: {t_emu / t_torch:.1f}x (target: 2x or less)")
    print(f"exhaustive fp16 sweep call (65,536 elements): {t_sweep * 1e3:.1f} ms")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
