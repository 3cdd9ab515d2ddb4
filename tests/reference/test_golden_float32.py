"""The golden of a float32 operand against exact rational arithmetic where its product is
hardest to round once: products whose binary64 rounding lands on a midpoint of the output
while the exact product does not (the double-rounding traps), exact ties, subnormal operands,
underflow to subnormals and zero, overflow to inf, and slopes that no float32 holds (huge,
tiny, subnormal in binary64).  Forward into every output dtype, and backward; every
element's golden is compared with ``tests/exact_oracle.py``, which shares nothing with it.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from conformance.reference import golden
from tests.exact_oracle import exact_backward, exact_leaky_relu
from tests.helpers import assert_same_bits
from tests.reference.test_golden import float32_cases

#: (bits of the midpoint's odd significand M, bits of the operand's odd significand X): the slope
#: M/(2X), inexact in binary64, whose binary64 product with ``X * 2**j`` is ``M * 2**(j-1)``
#: exactly: a midpoint of float32 (M of 25 bits), of float16 (12) or of bfloat16 (9), and at
#: the bottom of the range a midpoint of each one's subnormals (4); an X of 12 bits reaches
#: subnormal operands.
TRAPS = ((25, 24), (25, 12), (12, 24), (9, 24), (4, 24), (4, 12), (9, 12), (12, 12))


def _odd(bits: int, rng: np.random.Generator) -> int:
    """A random odd integer of exactly ``bits`` bits."""
    return int(rng.integers(1 << (bits - 2), 1 << (bits - 1))) * 2 + 1


def _trap(m_bits: int, x_bits: int) -> tuple[float, np.ndarray]:
    """The slope of a trap (see :data:`TRAPS`) and the float32 operands ``±X * 2**j`` for every j
    that keeps them float32: products from below the smallest subnormal to beyond the max."""
    rng = np.random.default_rng(m_bits * 100 + x_bits)
    while True:
        m, x = _odd(m_bits, rng), _odd(x_bits, rng)
        alpha = m / x / 2
        if alpha * x == m / 2 and Fraction(alpha) * x != Fraction(m, 2):
            break
    j = np.arange(-149, 128 - x_bits + 1)
    magnitudes = np.ldexp(float(x), j).astype(np.float32)
    assert np.all(magnitudes.astype(np.float64) * alpha == np.ldexp(m / 2, j))  # on the midpoints
    return alpha, np.concatenate([magnitudes, -magnitudes])


def _operands(x: np.ndarray) -> np.ndarray:
    """``x`` beside random and edge float32 patterns and the same values, scaled into the subnormals."""
    sub = (float32_cases(4_000, seed=13).astype(np.float64) * 2.0 ** -140).astype(np.float32)
    return np.concatenate([x, float32_cases(20_000, seed=12), sub])


#: Slopes beyond what a float32 holds or whose products leave its range: overflow to inf
#: (huge, and one just below float32's max that float32 does not hold), underflow to
#: subnormals and zero (tiny, a binary64 subnormal whose Dekker high half is zero), and the
#: exact ties of 1.5 and 0.75.
EXTREME = (1e30, -3e38, 2.0 ** 100 + 1.0 * 2.0 ** 48, 1e-40, -(2.0 ** -140) * 1.1, 1e-300, 5e-324, -3 * 5e-324,
           1e300, 1.5, -0.75, 1 + 2.0 ** -24, 1 + 2.0 ** -25 + 2.0 ** -52)
SLOPES = [pytest.param(*_trap(*t), id=f"trap-M{t[0]}-X{t[1]}") for t in TRAPS] + [
    pytest.param(a, np.zeros(0, np.float32), id=f"alpha={a!r}") for a in EXTREME]


@pytest.mark.parametrize(("alpha", "trapped"), SLOPES)
@pytest.mark.parametrize("out", ("float32", "float16", "bfloat16"))
def test_forward_matches_exact_arithmetic(alpha: float, trapped: np.ndarray, out: str) -> None:
    x = _operands(trapped)
    assert_same_bits(golden.forward(x, alpha, out_dtype=out), exact_leaky_relu(x, alpha, out_dtype=out),
                     what=f"float32->{out} alpha={alpha!r}")


@pytest.mark.parametrize(("alpha", "trapped"), SLOPES)
def test_backward_matches_exact_arithmetic(alpha: float, trapped: np.ndarray) -> None:
    dy = _operands(trapped)
    for x in (-np.abs(dy), np.roll(dy, 1)):  # every dy scaled, then either branch
        assert_same_bits(golden.backward(dy, x, alpha), exact_backward(dy, x, alpha, out_dtype="float32"),
                         what=f"backward float32 alpha={alpha!r}")

