"""What one exhaustive sweep covers: a frozen spec, its pattern space and its chunk plan.

A sweep walks a *pattern space* ``[0, size)``; pattern ``p`` names one element:

- fp32 forward: x has the bits ``p`` (2^32 patterns); backward: dy has them, against a
  fixed x class (:data:`X_CLASSES`);
- fp16/bf16: the same over 2^16 patterns; with ``sweep_alpha`` the slope is swept too:
  ``p >> 16`` picks the slope among the format's finite patterns and ``p & 0xffff`` is x
  (forward) or dy (backward), so the space has ``finite slopes * 2^16`` patterns.

Chunks are aligned to multiples of the chunk size in that space, so sweeps over
different ranges with the same chunk size share their stored chunks.
"""
from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

import numpy as np

from conformance.dtypes import from_bits, info, to_bits

KEY_VERSION = 1  # bump when a stored chunk's meaning changes
LOW_BITS = 16  # the x (or dy) bits of a 16-bit slope sweep's pattern
DIRECTIONS = ("forward", "backward")
MIN_CHUNK = 1 << 8  # patterns per chunk: below it the per-chunk overhead dominates
MAX_CHUNK = 1 << 24  # above it one chunk's arrays and judging temporaries reach gigabytes
MAX_CHUNKS = 1 << 16  # chunks in one plan (a full fp32 space at 2^16 patterns per chunk)


@dataclass(frozen=True)
class XClass:
    """A fixed x of the backward dy sweep: a readable id and how to build it in a dtype."""

    id: str
    sign: int  # 0 or 1
    kind: str  # "one", "zero", "nan", "inf", "subnormal"

    def bits(self, dtype: str) -> int:
        rec = info(dtype)
        magnitude = {"one": rec.bias << rec.mant_bits, "zero": 0, "inf": rec.exp_mask,
                     "nan": rec.exp_mask | (1 << (rec.mant_bits - 1)), "subnormal": 1}[self.kind]
        return (self.sign << (rec.bits - 1)) | magnitude

    def value(self, dtype: str) -> np.ndarray:
        """A one-element array of ``dtype`` holding the class's x."""
        return from_bits(np.array([self.bits(dtype)]), dtype)


X_CLASSES: tuple[XClass, ...] = (
    XClass("-1", 1, "one"), XClass("-0", 1, "zero"), XClass("+0", 0, "zero"), XClass("1", 0, "one"),
    XClass("nan", 0, "nan"), XClass("+inf", 0, "inf"), XClass("-inf", 1, "inf"),
    XClass("-subnormal", 1, "subnormal"), XClass("+subnormal", 0, "subnormal"),
)
X_CLASS_IDS = tuple(c.id for c in X_CLASSES)


def x_class(name: str) -> XClass:
    """The class with id ``name`` (a ValueError naming the ids otherwise)."""
    for c in X_CLASSES:
        if c.id == name:
            return c
    raise ValueError(f"unknown x class {name!r}; choose from {', '.join(X_CLASS_IDS)}")


@functools.cache
def finite_slopes(dtype: str) -> np.ndarray:
    """Every finite bit pattern of a 16-bit dtype, in bit order, as that dtype (read-only)."""
    rec = info(dtype)
    if rec.bits != 16:
        raise ValueError(f"the slope sweep needs a 16-bit dtype, not {rec.name}")
    patterns = from_bits(np.arange(1 << rec.bits, dtype=np.uint32), dtype)
    kept = patterns[(to_bits(patterns) & rec.exp_mask) != rec.exp_mask]
    kept.flags.writeable = False
    return kept


@dataclass(frozen=True)
class SweepSpec:
    """One backend's exhaustive sweep of one (dtype, out dtype, direction, slope, x class)."""

    backend: str
    dtype: str
    out_dtype: str
    direction: str
    alpha: Optional[float]  # None: the slope is swept (sweep_alpha)
    profile: Optional[str] = None
    variant: Optional[str] = None
    x_class: Optional[str] = None  # backward only: the fixed x
    tolerance: tuple = ()  # (rtol, atol, max_ulp, strict_zeros) the chunks were judged with

    @property
    def sweep_alpha(self) -> bool:
        return self.alpha is None

    @property
    def size(self) -> int:
        """Patterns in the whole space."""
        bits = info(self.dtype).bits
        return len(finite_slopes(self.dtype)) << LOW_BITS if self.sweep_alpha else 1 << bits

    @property
    def key(self) -> str:
        """A stable text key for the store (no Python hash: it is salted per process)."""
        alpha = "swept" if self.alpha is None else float(self.alpha).hex()
        tol = ",".join(repr(t) for t in self.tolerance)
        return (f"v{KEY_VERSION}|{self.backend}|{self.profile or ''}|{self.variant or ''}|{self.dtype}"
                f"|{self.out_dtype}|{self.direction}|alpha={alpha}|x={self.x_class or ''}|tol={tol}")

    @property
    def label(self) -> str:
        """The part label of the sweep's rows (offender locations say ``of <label>``)."""
        what = "x" if self.direction == "forward" else "dy"
        head = f"every {info(self.dtype).short} {what}"
        if self.sweep_alpha:
            head += f" x every finite {info(self.dtype).short} alpha"
        return head + (f" at x={self.x_class}" if self.x_class else "")

    def group(self) -> SweepSpec:
        """The spec with the backend fields blanked: specs of one group share their inputs and golden."""
        return SweepSpec("", self.dtype, self.out_dtype, self.direction, self.alpha, x_class=self.x_class,
                         tolerance=self.tolerance)


@dataclass(frozen=True)
class Segment:
    """A contiguous run of patterns with one slope: inputs for one backend call."""

    start: int  # first pattern (its index in the sweep)
    alpha: float
    x: np.ndarray
    dy: Optional[np.ndarray]


def _patterns(dtype: str, lo: int, hi: int) -> np.ndarray:
    rec = info(dtype)  # 0 <= lo < hi <= 2^bits: the bits fit the unsigned type, no wider pass
    return np.arange(lo, hi, dtype=rec.uint).view(rec.dtype)


def _place(spec: SweepSpec, start: int, alpha: float, low: np.ndarray) -> Segment:
    """``low`` is x (forward) or dy (backward, against the spec's x class)."""
    if spec.direction == "forward":
        return Segment(start, alpha, low, None)
    x = np.repeat(x_class(spec.x_class or "").value(spec.dtype), low.size)
    return Segment(start, alpha, x, low)


def segments(spec: SweepSpec, lo: int, hi: int) -> Iterator[Segment]:
    """The inputs of patterns ``[lo, hi)``, one segment per slope."""
    if not spec.sweep_alpha:
        yield _place(spec, lo, float(spec.alpha), _patterns(spec.dtype, lo, hi))
        return
    slopes = finite_slopes(spec.dtype)
    p = lo
    while p < hi:
        which, low = p >> LOW_BITS, p & ((1 << LOW_BITS) - 1)
        stop = min(hi, (which + 1) << LOW_BITS)
        alpha = float(np.asarray(slopes[which]).astype(np.float64))
        yield _place(spec, p, alpha, _patterns(spec.dtype, low, low + stop - p))
        p = stop


def chunk_plan(size: int, *, start: int, stop: int, chunk: int) -> list[tuple[int, int]]:
    """``[start, stop)`` cut at the multiples of ``chunk`` (aligned, so ranges share chunks)."""
    if not 0 <= start < stop <= size:
        raise ValueError(f"range must satisfy 0 <= start < stop <= {size:#x}, got [{start:#x}, {stop:#x})")
    if not MIN_CHUNK <= chunk <= MAX_CHUNK:
        raise ValueError(f"chunk must be between {MIN_CHUNK:#x} and {MAX_CHUNK:#x} patterns, got {chunk:#x}")
    first = (start // chunk) * chunk
    if -(-(stop - first) // chunk) > MAX_CHUNKS:
        raise ValueError(f"chunk {chunk:#x} cuts [{start:#x}, {stop:#x}) into more than {MAX_CHUNKS:,} chunks; "
                         f"pass a chunk of at least {-(-(stop - first) // MAX_CHUNKS):#x}")
    return [(max(lo, start), min(lo + chunk, stop)) for lo in range(first, stop, chunk)]
