"""Edge pools per dtype, built only from the dtype table.

Every value in a pool carries the label of its edge class (``EDGE_CLASSES``),
so meta-tests can count which classes a generator produced.  Classes that
depend on the slope (around max/alpha, rounding midpoints, underflowing
products) are built for each alpha in ``alphas``; the default covers slopes
below, at and above 1 so that every class is non-empty.  A pool is built once per
(dtype, out_dtype, slopes) in a process (``cases.memo``); every caller gets its own copy.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Optional

import numpy as np

from conformance.cases.memo import Memo, read_only, slopes_key
from conformance.dtypes import DTypeInfo, DTypeLike, from_bits, info, to_bits

EDGE_CLASSES: tuple[str, ...] = (
    "zero", "min-subnormal", "max-subnormal", "min-normal", "max", "inf",
    "quiet-nan", "signalling-nan", "one", "around-max-over-alpha", "rounding-midpoint",
    "underflow", "huge-negative", "beyond-fp16", "testfloat",
)
#: Slopes the alpha-dependent classes are built for when none are given.
DEFAULT_EDGE_ALPHAS: tuple[float, ...] = (0.01, 0.2, 0.3, 1 / 3, 1.5)
_HUGE_NEGATIVES = (-6000.0, -65504.0)
_BEYOND_FP16 = (65520.0, 70000.0, 1e5, 1e10, 1e30, 3.0e38)  # fp16 max is 65504; 65520 rounds to inf
_NEIGHBOURS = 2  # ulps either side of a constructed target


@dataclass(frozen=True)
class EdgePool:
    """Edge values of one dtype, each with its edge-class label."""

    dtype: DTypeInfo
    values: np.ndarray  # 1-D, of ``dtype``
    labels: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.labels)

    def classes(self) -> frozenset[str]:
        return frozenset(self.labels)

    def of(self, label: str) -> np.ndarray:
        """The values labelled ``label`` (empty for an unknown label)."""
        return self._by_class.get(label, self.values[:0])

    @cached_property
    def _by_class(self) -> dict[str, np.ndarray]:
        labels = np.array(self.labels)
        return {lab: self.values[labels == lab] for lab in set(self.labels)}


def _bits(rec: DTypeInfo, patterns: Iterable[int]) -> np.ndarray:
    return from_bits(np.array(list(patterns), dtype=np.uint64), rec)


def _signed(rec: DTypeInfo, magnitudes: Iterable[int]) -> np.ndarray:
    """Both signs of each magnitude bit pattern."""
    mags = list(magnitudes)
    return _bits(rec, mags + [m | rec.sign_mask for m in mags])


def _nans(rec: DTypeInfo, *, quiet: bool) -> np.ndarray:
    """Quiet or signalling NaNs, both signs, with small, large and single-bit payloads."""
    quiet_bit = 1 << (rec.mant_bits - 1)
    payload_mask = quiet_bit - 1
    candidates = {1, 2, payload_mask, payload_mask >> 1, 1 << (rec.mant_bits // 2)}
    payloads = sorted(p for p in candidates if 0 < p <= payload_mask)
    base = rec.exp_mask | (quiet_bit if quiet else 0)
    mags = [base | p for p in payloads] + ([base] if quiet else [])
    return _signed(rec, mags)


def _round_to(values: Iterable[float], rec: DTypeInfo) -> np.ndarray:
    """float64 values rounded to ``rec`` (inf where out of range), NaN-free input assumed."""
    from conformance.reference.golden import round_float64

    with np.errstate(over="ignore"):
        return round_float64(np.asarray(list(values), dtype=np.float64), rec)


def _finite(values: np.ndarray) -> np.ndarray:
    """Mask of finite elements (any table dtype, bfloat16 included, without cast warnings)."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(values.astype(np.float64))


def _around(values: np.ndarray, *, ulps: int = _NEIGHBOURS) -> np.ndarray:
    """Each finite value and its finite neighbours up to ``ulps`` away in magnitude (sign kept)."""
    rec = info(values.dtype)
    bits = to_bits(values[_finite(values)]).astype(np.uint64)
    sign = bits & np.uint64(rec.sign_mask)
    mag = (bits ^ sign).astype(np.int64)  # at most 63 bits: fits int64
    near = mag[:, None] + np.arange(-ulps, ulps + 1, dtype=np.int64)[None, :]
    ok = (near >= 0) & (near < rec.exp_mask)
    out = near.astype(np.uint64) | np.broadcast_to(sign[:, None], near.shape)
    return from_bits(out[ok], rec)


def _fixed_classes(rec: DTypeInfo) -> dict[str, np.ndarray]:
    """The slope-independent classes of ``rec``."""
    top_sub = rec.mant_mask
    return {
        "zero": _signed(rec, [0]),
        "min-subnormal": _signed(rec, [1]),
        "max-subnormal": _signed(rec, [top_sub]),
        "min-normal": _signed(rec, [1 << rec.mant_bits]),
        "max": _signed(rec, [rec.exp_mask - (1 << rec.mant_bits) + top_sub]),
        "inf": _signed(rec, [rec.exp_mask]),
        "quiet-nan": _nans(rec, quiet=True),
        "signalling-nan": _nans(rec, quiet=False),
        "one": _round_to([1.0, -1.0], rec),
        "huge-negative": _round_to(_HUGE_NEGATIVES, rec),
        "beyond-fp16": _beyond_fp16(rec),
        "testfloat": exponent_significand_patterns(rec),
    }


def _beyond_fp16(rec: DTypeInfo) -> np.ndarray:
    """Finite values of ``rec`` outside the float16 range (empty for float16 itself)."""
    vals = _round_to([s * v for v in _BEYOND_FP16 for s in (-1.0, 1.0)], rec)
    return vals[_finite(vals) & (np.abs(vals.astype(np.float64)) > info("float16").max)]


def _exponents(rec: DTypeInfo) -> list[int]:
    """Biased exponents TestFloat-style: all of them for narrow formats, the interesting ones for wide."""
    top = (1 << rec.exp_bits) - 1
    if rec.exp_bits <= 8:
        return list(range(top + 1))
    picks = {0, 1, 2, rec.bias - 2, rec.bias - 1, rec.bias, rec.bias + 1, rec.bias + 2,
             top - 2, top - 1, top}
    return sorted(picks | set(range(0, top, max(1, top // 16))))


def _significands(rec: DTypeInfo) -> list[int]:
    """0, 1, all ones, all ones minus one, and every single bit."""
    ones = rec.mant_mask
    return sorted({0, 1, ones, ones - 1} | {1 << i for i in range(rec.mant_bits)})


def exponent_significand_patterns(dtype: DTypeLike | DTypeInfo) -> np.ndarray:
    """TestFloat-style exponent x significand patterns, both signs."""
    rec = info(dtype)
    mags = [(e << rec.mant_bits) | s for e in _exponents(rec) for s in _significands(rec)]
    return _signed(rec, mags)


def _max_over_alpha(rec: DTypeInfo, out: DTypeInfo, alpha: float) -> np.ndarray:
    """Inputs at and around out.max/|alpha| (the negative side overflows past it when |alpha| > 1)."""
    if alpha == 0:
        return np.empty(0, rec.dtype)
    target = min(out.max / abs(alpha), rec.max)
    return _around(_round_to([-target, target], rec))


def _midpoints(out: DTypeInfo) -> list[Fraction]:
    """A spread of exact rounding midpoints of ``out``: normal (small, 1, large) and subnormal."""
    def normal(e: int, k: int) -> Fraction:
        return Fraction(2) ** e * (1 + Fraction(2 * k + 1, 2 ** (out.mant_bits + 1)))

    exps = [out.emin, 0, 1, out.bias // 2, out.bias - 1]
    tiny = Fraction(2) ** (out.emin - out.mant_bits)
    return [normal(e, k) for e in exps for k in (0, 1, 3)] + [(k + Fraction(1, 2)) * tiny for k in (0, 1, 2, 5)]


def _rounding_midpoints(rec: DTypeInfo, out: DTypeInfo, alpha: float) -> np.ndarray:
    """Negative inputs whose product with alpha lands on (or nearest to) a midpoint of ``out``.

    Targets are ``-m/|alpha|`` for exact midpoints ``m`` (rational arithmetic), rounded to
    ``rec``, with their 1-ulp neighbours; 16-bit inputs add the patterns whose float64
    product sits exactly on a midpoint (the double-rounding trap of docs/domain.md).
    """
    if alpha == 0:
        return np.empty(0, rec.dtype)
    slope = Fraction(abs(alpha))
    targets = [float(-m / slope) for m in _midpoints(out) if m / slope <= Fraction(rec.max)]
    near = _around(_round_to(targets, rec), ulps=1)
    exact = _scan_midpoints(rec, out, alpha) if rec.bits == 16 else np.empty(0, rec.dtype)
    return np.concatenate([exact, near])


def _scan_midpoints(rec: DTypeInfo, out: DTypeInfo, alpha: float, *, limit: int = 16) -> np.ndarray:
    """16-bit negative-side inputs whose float64 product with alpha is a midpoint of ``out``
    (a scan of all 65,536 patterns, made once per (dtype, out_dtype, alpha) in a process)."""
    key = (rec.name, out.name, slopes_key([alpha]), limit)
    return SCANNED.get(key, lambda: read_only(_scanned_midpoints(rec, out, alpha, limit=limit)))


def _scanned_midpoints(rec: DTypeInfo, out: DTypeInfo, alpha: float, *, limit: int) -> np.ndarray:
    from conformance.dtypes import all_patterns

    x = all_patterns(rec)
    with np.errstate(all="ignore"):
        p = np.abs(x.astype(np.float64) * alpha)
        _, e = np.frexp(p)
        twice = np.ldexp(p, 1 + out.mant_bits - np.maximum(e - 1, out.emin))  # 2 * p / ulp
        odd = (twice == np.floor(twice)) & (np.fmod(twice, 2.0) == 1.0)
        hit = odd & (p <= out.max) & (x.astype(np.float64) < 0)
    return x[np.flatnonzero(hit)[:limit]]


def _underflow(rec: DTypeInfo, out: DTypeInfo, alpha: float) -> np.ndarray:
    """Negative inputs whose product with alpha underflows to a subnormal or zero of ``out``."""
    scale = abs(alpha) if alpha != 0 else 1.0
    fractions = (0.75, 0.5, 2.0 ** -out.mant_bits, 2.0 ** -(out.mant_bits + 1), 2.0 ** -(out.mant_bits + 3))
    with np.errstate(over="ignore"):
        vals = _round_to([-out.smallest_normal * f / scale for f in fractions], rec)
    return vals[_finite(vals) & (vals.astype(np.float64) != 0)]


_SLOPE_CLASSES: dict[str, Callable[[DTypeInfo, DTypeInfo, float], np.ndarray]] = {
    "around-max-over-alpha": _max_over_alpha,
    "rounding-midpoint": _rounding_midpoints,
    "underflow": _underflow,
}


def _nbytes(pool: EdgePool) -> int:
    return pool.values.nbytes


POOLS: Memo[EdgePool] = Memo(entries=512, budget=64 << 20, weight=_nbytes)
SCANNED: Memo[np.ndarray] = Memo(entries=512, budget=1 << 20, weight=lambda found: found.nbytes)


def edge_pool(dtype: DTypeLike | DTypeInfo, *, out_dtype: Optional[DTypeLike] = None,
              alphas: Optional[Iterable[float]] = None) -> EdgePool:
    """Every edge class for ``dtype`` (slope classes for each of ``alphas``), labelled: a copy of
    the pool built once per (dtype, out_dtype, alphas) in a process."""
    rec = info(dtype)
    out = info(out_dtype) if out_dtype is not None else rec
    slopes = tuple(DEFAULT_EDGE_ALPHAS if alphas is None else alphas)
    kept = POOLS.get((rec.name, out.name, slopes_key(slopes)), lambda: built_pool(rec, out, slopes))
    return EdgePool(kept.dtype, kept.values.copy(), kept.labels)


def built_pool(rec: DTypeInfo, out: DTypeInfo, slopes: tuple[float, ...]) -> EdgePool:
    """The pool of :func:`edge_pool`, built now (no memo)."""
    parts = list(_fixed_classes(rec).items())
    parts += [(name, fn(rec, out, a)) for name, fn in _SLOPE_CLASSES.items() for a in slopes]
    values = read_only(np.concatenate([v.astype(rec.dtype) for _, v in parts]))
    labels = tuple(name for name, v in parts for _ in range(v.size))
    return EdgePool(rec, values, labels)
