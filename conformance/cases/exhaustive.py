"""Exhaustive batches: every 16-bit pattern, and float32 bit ranges in chunks (the 2^32 `sweep` command reads them)."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from conformance.dtypes import DTypeInfo, DTypeLike, all_patterns, from_bits, info

FLOAT32_PATTERNS = 1 << 32


def exhaustive16(dtype: DTypeLike | DTypeInfo) -> np.ndarray:
    """All 65,536 patterns of a 16-bit dtype, in bit order."""
    return all_patterns(info(dtype))


def shuffled16(dtype: DTypeLike | DTypeInfo, *, seed: int) -> np.ndarray:
    """All 16-bit patterns in a seeded order (a dy partner for the backward exhaustive16 batch)."""
    patterns = exhaustive16(dtype)
    return patterns[np.random.default_rng(seed).permutation(patterns.size)]


def float32_chunks(*, start: int = 0, stop: int = FLOAT32_PATTERNS,
                   chunk: int = 1 << 22) -> Iterator[np.ndarray]:
    """float32 patterns ``[start, stop)`` in bit order, ``chunk`` at a time."""
    if not 0 <= start <= stop <= FLOAT32_PATTERNS:
        raise ValueError(f"float32 range must satisfy 0 <= start <= stop <= 2**32, got [{start}, {stop})")
    if chunk <= 0:
        raise ValueError(f"chunk must be positive, got {chunk}")
    for lo in range(start, stop, chunk):
        hi = min(lo + chunk, stop)
        yield from_bits(np.arange(lo, hi, dtype=np.uint64), "float32")


def random_bits(dtype: DTypeLike | DTypeInfo, count: int, *, seed: int) -> np.ndarray:
    """``count`` uniformly random bit patterns of ``dtype`` (NaNs and infs included)."""
    rec = info(dtype)
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << rec.bits, size=count, dtype=np.uint64, endpoint=False)
    return from_bits(bits, rec)
