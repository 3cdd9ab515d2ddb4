"""Triage cost per judged batch, for the rows that have mismatches.

Run: ``.venv/bin/python -m benchmarks.bench_triage``.  Each line times ``evaluate``
(golden, metrics, triage, gate) of one batch whose output differs from golden the
way a real framework's does, best of 3, next to the same batch with a correct output
(golden only: the cost without triage).  Most rows of `make conformance` have no
mismatch, so this per-batch ratio bounds triage's share of the suite's time from above.
"""
from __future__ import annotations

import numpy as np

from benchmarks.timing import best_time
from conformance.dtypes import all_patterns
from conformance.records import BackendResult
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.report.evaluate import evaluate
from conformance.report.gate import GateConfig


def _cases() -> list[tuple[str, np.ndarray, np.ndarray, float]]:
    f16, bf16 = all_patterns("float16"), all_patterns("bfloat16")
    bits = np.random.default_rng(0).integers(0, 2 ** 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    f32 = bits.view(np.float32)
    return [
        ("tf fp16 alpha 0.2 (slope in fp16)", f16,
         ref.forward(f16, 0.2, semantics=Semantics(slope_dtype="float16")), 0.2),
        ("tf bf16 alpha 0.2 (slope + flush)", bf16,
         ref.forward(bf16, 0.2, semantics=Semantics(slope_dtype="bfloat16", daz=True, ftz=True)), 0.2),
        ("jax fp32 1M alpha 0.3 (DAZ, FTZ, x >= 0)", f32,
         ref.forward(f32, 0.3, semantics=Semantics(slope_dtype="float32", daz=True, ftz=True, predicate="ge")), 0.3),
        ("torch fp16 alpha 0.01 (1-ULP rounding)", f16,
         ref.forward(f16, 0.01, semantics=Semantics(opmath="float32")), 0.01),
    ]


def main() -> None:
    config = GateConfig()
    for name, x, actual, alpha in _cases():
        def judged(y: np.ndarray = actual, x: np.ndarray = x, alpha: float = alpha) -> object:
            return evaluate(x, alpha, BackendResult(y), direction="forward", backend="dump", config=config)

        with_triage = best_time(judged, repeat=3)
        clean = best_time(lambda judged=judged, x=x, alpha=alpha: judged(ref.forward(x, alpha)), repeat=3)
        print(f"{name}: {with_triage:.3f} s judged with triage, {clean:.3f} s clean "
              f"({with_triage / clean:.1f}x)")


if __name__ == "__main__":
    main()
