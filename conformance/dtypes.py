"""One table of dtype facts: float16, bfloat16, float32, float64.

Every other module asks this table (``info``) instead of hard-coding widths,
limits or bit masks.  The records are built from a small table of
(name, exponent bits, mantissa bits), in the style of ml_dtypes.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Union

import ml_dtypes
import numpy as np

from conformance import jit

DTypeLike = Union[str, np.dtype, type]

bfloat16 = np.dtype(ml_dtypes.bfloat16)


@dataclass(frozen=True)
class DTypeInfo:
    """finfo-like facts for one floating format, plus its unsigned bit view."""

    name: str
    dtype: np.dtype
    bits: int
    exp_bits: int
    mant_bits: int
    uint: np.dtype
    sint: np.dtype

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def max(self) -> float:
        return float((2.0 - 2.0 ** -self.mant_bits) * 2.0 ** self.bias)

    @property
    def smallest_normal(self) -> float:
        return float(2.0 ** self.emin)

    @property
    def smallest_subnormal(self) -> float:
        return float(2.0 ** (self.emin - self.mant_bits))

    @property
    def eps(self) -> float:
        return float(2.0 ** -self.mant_bits)

    @property
    def sign_mask(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def exp_mask(self) -> int:
        return ((1 << self.exp_bits) - 1) << self.mant_bits

    @property
    def mant_mask(self) -> int:
        return (1 << self.mant_bits) - 1

    @property
    def short(self) -> str:
        return _SHORT[self.name]

    def __str__(self) -> str:
        return self.name


def short_name(name: str) -> str:
    """``fp16`` for ``float16``: the short name of a float format of the table, or ``name``
    itself (a quantized code type such as ``int8``)."""
    return _SHORT.get(name, name)


#            name        numpy dtype          exp  mant  uint       int
_TABLE = (
    ("float16", np.dtype(np.float16), 5, 10, np.uint16, np.int16),
    ("bfloat16", bfloat16, 8, 7, np.uint16, np.int16),
    ("float32", np.dtype(np.float32), 8, 23, np.uint32, np.int32),
    ("float64", np.dtype(np.float64), 11, 52, np.uint64, np.int64),
)
_SHORT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}

DTYPES: dict[str, DTypeInfo] = {
    name: DTypeInfo(name, dt, 1 + e + m, e, m, np.dtype(u), np.dtype(s))
    for name, dt, e, m, u, s in _TABLE
}
_KNOWN: dict = {}  # what info() was asked, by the argument itself (names, dtypes, types: all hashable)
_ALIASES = {**{v: k for k, v in _SHORT.items()}, "half": "float16", "float": "float32",
            "double": "float64", "bf16": "bfloat16"}


def info(dtype: DTypeLike | DTypeInfo) -> DTypeInfo:
    """The table record for ``dtype`` (a name, alias, numpy dtype or record)."""
    try:  # the golden and triage ask this table hundreds of thousands of times per run
        return _KNOWN[dtype]
    except (KeyError, TypeError):
        pass
    rec = _lookup(dtype)
    try:
        _KNOWN[dtype] = rec
    except TypeError:  # an unhashable argument that still names a dtype: not remembered
        pass
    return rec


def _lookup(dtype: DTypeLike | DTypeInfo) -> DTypeInfo:
    if isinstance(dtype, DTypeInfo):
        return dtype
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
    else:
        name = np.dtype(dtype).name
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    return DTYPES[name]


def to_bits(a: np.ndarray) -> np.ndarray:
    """The unsigned-integer view of a float array (no copy)."""
    a = np.asarray(a)
    return a.view(info(a.dtype).uint)


def from_bits(bits: np.ndarray | int | list, dtype: DTypeLike) -> np.ndarray:
    """Reinterpret unsigned bit patterns as ``dtype``."""
    rec = info(dtype)
    return np.asarray(bits).astype(rec.uint).view(rec.dtype)


def all_patterns(dtype: DTypeLike) -> np.ndarray:
    """Every bit pattern of a 16-bit dtype, in bit order."""
    rec = info(dtype)
    if rec.bits != 16:
        raise ValueError(f"all_patterns needs a 16-bit dtype, not {rec.name}")
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(rec.dtype)


@cache
def widened_patterns(dtype: DTypeLike) -> np.ndarray:
    """Every bit pattern of a 16-bit dtype widened to float64 as numpy/ml_dtypes widen it, in
    bit order: the decode table the compiled loops share (cached: do not write into it)."""
    with np.errstate(invalid="ignore"):  # NaN payloads of bfloat16 warn when widened
        return all_patterns(dtype).astype(np.float64)


def is_nan(a: np.ndarray) -> np.ndarray:
    """NaN mask that also works for bfloat16 (via the bit pattern)."""
    a = np.asarray(a)
    if a.dtype.kind == "f" and (a.dtype.itemsize > 2 or not a.dtype.isnative):  # one vectorised pass
        return np.isnan(a)  # a bit pattern is read in this machine's byte order: not a swapped float16's
    rec = info(a.dtype)  # a 16-bit pattern: numpy's float16 isnan widens each element, 10x slower
    magnitude = to_bits(a) & rec.uint.type(rec.exp_mask | rec.mant_mask)
    return magnitude > rec.exp_mask  # above infinity's pattern: the exponent all ones and a mantissa


def is_subnormal(a: np.ndarray) -> np.ndarray:
    """True where ``a`` is a nonzero subnormal of its own dtype."""
    a = np.asarray(a)
    rec = info(a.dtype)
    bits = to_bits(a)
    return ((bits & rec.exp_mask) == 0) & ((bits & rec.mant_mask) != 0)


def ordered(a: np.ndarray) -> np.ndarray:
    """Map floats onto the ordered-integer line as int64 (+0 and -0 both map to 0)."""
    a = np.asarray(a)
    rec = info(a.dtype)
    bits = to_bits(a).view(np.dtype(f"i{a.dtype.itemsize}"))  # signed: the sign bit makes it negative
    mag = bits & (rec.sign_mask - 1)
    return np.where(bits < 0, -mag, mag).astype(np.int64, copy=False)  # -mag fits: the sign bit is clear


@dataclass(frozen=True)
class UlpDistance:
    """ULP distances on the ordered-integer line.

    ``ulps`` is int64 and is 0 wherever either side is NaN; ``nan`` marks
    those positions, so a NaN is reported separately and never as a number.
    """

    ulps: np.ndarray
    nan: np.ndarray

    def max(self) -> int:
        return int(self.ulps.max()) if self.ulps.size else 0


def ulp_distance(a: np.ndarray, b: np.ndarray) -> UlpDistance:
    """Element-wise ULP distance between two arrays of the same dtype."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        raise ValueError(f"ulp_distance needs equal dtypes, got {a.dtype} and {b.dtype}")
    if jit.enabled() and a.size and a.shape == b.shape:
        from conformance import ulp_loops  # numba, imported on the first compiled call

        rec = info(a.dtype)
        ulps, nan = ulp_loops.ulp_and_nan(to_bits(np.ravel(a)), to_bits(np.ravel(b)), bits=rec.bits,
                                    mant_bits=rec.mant_bits)
        return UlpDistance(ulps.reshape(np.shape(a)), nan.reshape(np.shape(a)))
    nan = is_nan(a) | is_nan(b)
    dist = np.abs(ordered(a) - ordered(b))
    return UlpDistance(np.where(nan, 0, dist), nan)


def hex_value(v: float) -> str:
    """``float.hex`` that also spells inf and nan in a JSON-safe way."""
    v = float(v)
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v.hex()
