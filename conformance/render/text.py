"""Number and index formatting shared by the console, the failure messages and JUnit.

Every figure a person reads goes through one of these, so that widths stay
bounded (``9.2e18``, not ``9214382429786079232``), percentages of a non-zero
count never print as 0, and an index keeps its array's shape.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

from conformance.records import Shape

EXACT_DIGITS = 7  # integers up to 9,999,999 are printed in full


def _tidy_exponent(text: str) -> str:
    """``1.23e+05`` -> ``1.23e5``, ``1e-07`` -> ``1e-7``."""
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"


def short_int(n: int) -> str:
    """An integer in at most 7 characters: exact below 10**7, else ``9.2e18``."""
    if abs(n) < 10 ** EXACT_DIGITS:
        return str(n)
    return _tidy_exponent(f"{n:.1e}")


def short_float(v: float) -> str:
    """Three significant digits, a compact exponent; ``inf``/``nan`` as words."""
    if math.isnan(v) or math.isinf(v):
        return str(v)
    return _tidy_exponent(f"{v:.3g}")


def percent(count: int, total: int) -> str:
    """``count / total`` as a percentage that is 0 only for 0 and 100 only for all.

    >>> percent(3, 100_000), percent(0, 10), percent(10, 10), percent(1, 3)
    ('0.003%', '0%', '100%', '33.3%')
    """
    if count <= 0 or total <= 0:
        return "0%"
    if count >= total:
        return "100%"
    p = 100 * count / total
    decimals = max(1, 1 - math.floor(math.log10(p)))  # two significant digits below 1%
    text = f"{p:.{decimals}f}"
    while float(text) >= 100:  # 99.96% must not read as 100%
        decimals += 1
        text = f"{p:.{decimals}f}"
    return text.rstrip("0").rstrip(".") + "%"


def position(index: int, shape: Optional[Sequence[int]]) -> Optional[Shape]:
    """The multi-index of a flat (C-order) ``index`` in ``shape``; None when it lies outside."""
    if shape is None:
        return None
    dims = tuple(int(d) for d in shape)
    size = math.prod(dims)
    if not 0 <= index < size:
        return None
    out = []
    for d in reversed(dims):
        index, r = divmod(index, d)
        out.append(r)
    return tuple(reversed(out))


def index_text(index: int, shape: Optional[Sequence[int]]) -> str:
    """The one index style of every line: ``[11, 256]`` for flat 11256 in a (100, 1000) array;
    ``[11256]`` when the shape is 1-D, 0-D, unknown, or does not hold the index."""
    pos = position(index, shape)
    if pos is None or len(pos) < 2:
        return f"[{index}]"
    return "[" + ", ".join(map(str, pos)) + "]"


def hex_float(v: float) -> str:
    """``float.hex`` without the mantissa's trailing zeros: ``0x1.8508p+13``, ``0x1p+0``, ``0x0p+0``."""
    mantissa, exponent = float(v).hex().split("p")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}p{exponent}"


def decimal_and_hex(v: float) -> str:
    """A float decimal first, its exact bits after: ``12449.0 (0x1.8508p+13)``; ``inf``, ``-inf``
    and ``nan`` once, as words."""
    v = float(v)
    if math.isnan(v) or math.isinf(v):
        return str(v)
    return f"{v!r} ({hex_float(v)})"
