"""The fixed grid of quantized LeakyReLU settings: (QuantParams, alpha) pairs.

Scales are tie-prone decimals (their quotients land on or next to half-codes), zero points
are drawn with a fixed seed, both dtypes alternate, and the slopes include the suite's and
two small enough (0.003, 0.0005) that XNNPACK quantizes the negative slope to one step or
declines the node.  Every setting runs over all 256 codes.
"""
from __future__ import annotations

import numpy as np

from conformance.reference.quantized import QDTYPES, QuantParams

TIE_PRONE_SCALES: tuple[float, ...] = (0.01, 0.04, 0.05, 1 / 255, 0.1, 0.02)
QUANT_ALPHAS: tuple[float, ...] = (0.2, 0.01, 0.1, 0.3, 1 / 3, 1.5, 0.0, 0.003, 0.0005)
GRID_SEED = 20240601


def quant_grid(count: int = 12, *, seed: int = GRID_SEED) -> tuple[tuple[QuantParams, float], ...]:
    """``count`` settings; the first is PyTorch's float32 tie (qint8 0.05/0 -> 0.04/-28, 0.2)."""
    rng = np.random.default_rng(seed)
    out = [(QuantParams(0.05, 0, 0.04, -28, "qint8"), 0.2)]
    for i in range(1, count):
        dtype = ("qint8", "quint8")[i % 2]
        _, lo, hi = QDTYPES[dtype]
        s_in, s_out = (TIE_PRONE_SCALES[int(k)] for k in rng.integers(0, len(TIE_PRONE_SCALES), 2))
        z_in, z_out = (int(z) for z in rng.integers(lo, hi + 1, 2))
        out.append((QuantParams(s_in, z_in, s_out, z_out, dtype), QUANT_ALPHAS[i % len(QUANT_ALPHAS)]))
    return tuple(out)
