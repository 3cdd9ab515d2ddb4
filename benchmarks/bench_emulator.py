"""Emulator forward throughput on 16M float32 elements, as a ratio to torch in the same run.

Run: ``.venv/bin/python -m benchmarks.bench_emulator`` (``--numel``, ``--repeat``).
The emulator and torch are timed in alternation (the same load for both), the compiled loops
on and off (``CONFORMANCE_COMPILED=0``: the numpy instructions).  Also prints a 65,536-element
fp16 call, the size of an exhaustive 16-bit sweep, and the ascend950 fp16 build (cast to fp32).
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np

from benchmarks.timing import alternated


def _numpy_path(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` with the compiled loops off."""
    def run() -> object:
        before = os.environ.get("CONFORMANCE_COMPILED")
        os.environ["CONFORMANCE_COMPILED"] = "0"
        try:
            return fn()
        finally:
            if before is None:
                os.environ.pop("CONFORMANCE_COMPILED")
            else:
                os.environ["CONFORMANCE_COMPILED"] = before
    return run


def main(argv: Optional[Sequence[str]] = None) -> None:
    import torch

    from conformance import jit
    from conformance.dtypes import all_patterns
    from conformance.npu_impl import leaky_relu

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--numel", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv if argv is not None else [])
    x = np.random.default_rng(0).standard_normal(args.numel).astype(np.float32)
    tx, x16, sweep = torch.from_numpy(x), x.astype(np.float16), all_patterns("float16")
    emulated = lambda: leaky_relu(x, 0.01)  # noqa: E731
    for warm in (emulated, lambda: leaky_relu(sweep, 0.2), lambda: leaky_relu(x16, 0.2, profile="ascend950")):
        warm()  # compile or load the loops outside the timing
    t_torch, t_emu, t_sweep, t_950 = alternated(
        lambda: torch.nn.functional.leaky_relu(tx, 0.01), emulated, lambda: leaky_relu(sweep, 0.2),
        lambda: leaky_relu(x16, 0.2, profile="ascend950"), rounds=args.repeat)
    (t_numpy,) = alternated(_numpy_path(emulated), rounds=max(1, args.repeat // 2))
    print(f"torch.nn.functional.leaky_relu: {args.numel:,} fp32 in {t_torch * 1e3:.1f} ms "
          f"({args.numel / t_torch / 1e6:.0f} M elements/s, {torch.get_num_threads()} threads)")
    print(f"emulated CANN kernel (ascend910b1, 48 cores, compiled loops {'on' if jit.enabled() else 'off'}): "
          f"{t_emu * 1e3:.1f} ms ({args.numel / t_emu / 1e6:.0f} M elements/s)")
    print(f"ratio emulator / torch: {t_emu / t_torch:.1f}x (target: 2x or less)")
    print(f"numpy instructions (CONFORMANCE_COMPILED=0): {t_numpy * 1e3:.1f} ms ({t_numpy / t_torch:.1f}x torch)")
    print(f"ascend950 fp16 (cast to fp32 and back), {args.numel:,} elements: {t_950 * 1e3:.1f} ms")
    print(f"exhaustive fp16 sweep call (65,536 elements): {t_sweep * 1e3:.1f} ms")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
