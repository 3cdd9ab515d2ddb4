"""The exact quantized LeakyReLU: per-tensor affine int8/uint8 codes in, codes out.

``real = s_in*(q - z_in)``; ``y = real`` if ``real >= 0`` else ``alpha*real``;
``q_out = clamp(round_half_even(y/s_out) + z_out)`` to the code range.  Scales and the slope
are taken as their exact binary64 values and the whole chain is computed in integers (each
binary64 is a ratio of integers), so a quotient that sits on a tie is seen as a tie and one
that misses it by 2**-50 is not.  Every code of a dtype is computed once, into a table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: quantized dtype name -> (numpy storage dtype, lowest code, highest code)
QDTYPES: dict[str, tuple[type, int, int]] = {
    "qint8": (np.int8, -128, 127),
    "quint8": (np.uint8, 0, 255),
}


@dataclass(frozen=True)
class QuantParams:
    """Per-tensor affine quantization of a LeakyReLU's input and output."""

    s_in: float
    z_in: int
    s_out: float
    z_out: int
    dtype: str = "qint8"

    def __post_init__(self) -> None:
        if self.dtype not in QDTYPES:
            raise ValueError(f"dtype must be one of {', '.join(QDTYPES)}, got {self.dtype!r}")
        for name in ("s_in", "s_out"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite scale > 0, got {value!r}")
        lo, hi = self.code_range
        for name in ("z_in", "z_out"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, (int, np.integer)) and lo <= value <= hi):
                raise ValueError(f"{name} must be an integer code in {lo}..{hi} for {self.dtype}, got {value!r}")

    @property
    def code_range(self) -> tuple[int, int]:
        """The lowest and highest code of the dtype."""
        return QDTYPES[self.dtype][1], QDTYPES[self.dtype][2]

    @property
    def storage(self) -> np.dtype:
        """The numpy dtype that holds the codes (int8 or uint8)."""
        return np.dtype(QDTYPES[self.dtype][0])

    def __str__(self) -> str:
        return f"{self.dtype}(s_in={self.s_in!r}, z_in={self.z_in}, s_out={self.s_out!r}, z_out={self.z_out})"


def all_codes(params: QuantParams) -> np.ndarray:
    """Every code of the dtype, lowest first, in its storage dtype."""
    lo, hi = params.code_range
    return np.arange(lo, hi + 1).astype(params.storage)


def round_half_even(numerator: int, denominator: int) -> int:
    """``numerator/denominator`` (denominator > 0) rounded to the nearest integer, ties to even."""
    quotient, remainder = divmod(numerator, denominator)
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient % 2):
        return quotient + 1
    return quotient


def _exact_code(q: int, *, alpha: float, params: QuantParams) -> int:
    """One output code, from the integer ratios of the binary64 scales and slope."""
    a, b = float(params.s_in).as_integer_ratio()
    e, f = float(params.s_out).as_integer_ratio()
    c, d = float(alpha).as_integer_ratio() if q < params.z_in else (1, 1)
    # y/s_out = (a/b)*(q - z_in)*(c/d)*(f/e); real < 0 exactly when q < z_in (s_in > 0)
    rounded = round_half_even(a * (q - params.z_in) * c * f, b * d * e)
    lo, hi = params.code_range
    return min(hi, max(lo, rounded + params.z_out))


def exact_table(alpha: float, *, params: QuantParams) -> np.ndarray:
    """The exact output code of every input code, indexed by ``code - lowest code``."""
    if not math.isfinite(alpha):
        raise ValueError(f"alpha must be finite, got {alpha!r}")
    lo, hi = params.code_range
    return np.array([_exact_code(q, alpha=alpha, params=params) for q in range(lo, hi + 1)],
                    dtype=params.storage)


def lookup(table: np.ndarray, codes: np.ndarray, *, params: QuantParams) -> np.ndarray:
    """``table`` applied to ``codes`` (any shape, the dtype's storage)."""
    codes = np.asarray(codes)
    if codes.dtype != params.storage:
        raise ValueError(f"codes must be {params.storage} for {params.dtype}, got {codes.dtype}")
    return table[codes.astype(np.int64) - params.code_range[0]]


def leaky_relu_quantized(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """The exact quantized LeakyReLU of ``codes``."""
    return lookup(exact_table(alpha, params=params), codes, params=params)
