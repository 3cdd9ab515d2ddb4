"""msprobe's compare columns of a device output against a benchmark output, computed the way
mindstudio-probe 26.2.0's two-dump compare computes them (``msprobe/core/compare/npy_compare.py``,
``compare/utils.py`` and ``compare/algorithm/builtin_algorithm/alg_*.py``), so that a report
shows the numbers msprobe would show beside this tool's own:

- tensors are taken as msprobe reads them: bfloat16 widened to float32, then squeezed;
- no numbers when the shapes differ (``shape unmatched``) or when NaN/inf sit at different
  places (``N/A``); NaN/inf at the same places are set to 0 on both sides first;
- Cosine, EucDist and MaxAbsErr are taken in float64; relative errors in the wider of the two
  dtypes and float32, with that type's epsilon added to both sides where the benchmark is 0;
- the one/five-thousandths ratios are the shares of elements whose relative error against
  the benchmark is below 0.001 / 0.005 (``Metrics`` keeps the same shares against the golden);
- a 0-d tensor (a 1-element one, squeezed) gets no Cosine, EucDist or ratios;
- numbers are cut to 12 decimals (a Cosine above 0.9999 to 6), as msprobe's ``format_value`` does.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Optional

import numpy as np

from conformance.records import MsprobeColumns, MsprobeValue

#: msprobe's column headers, in its order (``CompareConst.BUILTIN_COMPARE_COLUMNS``).
HEADERS = ("Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
           "Five Thousandths Err Ratio")
UNSUPPORTED, NAN, NOT_AVAILABLE, SHAPE_UNMATCH = "unsupported", "Nan", "N/A", "shape unmatched"
_EPSILON = float(np.finfo(float).eps)
_COSINE_ROUNDED_ABOVE = 0.9999


def _format(value: float) -> float:
    return float(f"{value:.12f}")


def as_read(values: np.ndarray) -> np.ndarray:
    """An array as msprobe reads a dumped tensor: bfloat16 as float32, squeezed."""
    values = np.asarray(values)
    if values.dtype.name == "bfloat16":
        values = values.astype(np.float32)
    return np.squeeze(values)


def _specials_zeroed(n: np.ndarray, b: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """NaN and inf set to 0 on both sides when they sit at the same places; None when they do not."""
    nf, bf = n.astype(float), b.astype(float)
    n_inf, b_inf, n_nan, b_nan = np.isinf(nf), np.isinf(bf), np.isnan(nf), np.isnan(bf)
    if not (n_inf.any() or n_nan.any() or b_inf.any() or b_nan.any()):
        return n, b
    if not (np.array_equal(n_inf, b_inf) and np.array_equal(n_nan, b_nan)):
        return None
    n, b = n.copy(), b.copy()
    n[n_inf | n_nan] = 0
    b[b_inf | b_nan] = 0
    return n, b


def _relative(n: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|(n - b) / b|`` in the wider of the dtypes and float32, epsilon added where ``b`` is 0."""
    kind = np.result_type(n, b, np.float32)
    n, b = n.astype(kind), b.astype(kind)
    zero = b == 0
    n[zero] += np.finfo(kind).eps
    b[zero] += np.finfo(kind).eps
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(np.divide(n - b, b))


def _cosine(n: np.ndarray, b: np.ndarray) -> MsprobeValue:
    if n.size <= 1:
        return UNSUPPORTED
    n, b = n.reshape(-1).astype(float), b.reshape(-1).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        dot, n_norm, b_norm = np.dot(n, b), np.linalg.norm(n), np.linalg.norm(b)
        if n_norm <= _EPSILON and b_norm <= _EPSILON:
            return 1.0
        if n_norm <= _EPSILON or b_norm <= _EPSILON:
            return NAN
        cos = dot / (n_norm * b_norm)
    if np.isnan(cos):
        return NAN
    value = _format(cos)
    return round(value, 6) if value > _COSINE_ROUNDED_ABOVE else value


def _max_or_nan(values: np.ndarray) -> MsprobeValue:
    top = np.max(values)
    return NAN if np.isnan(top) else _format(float(top))


def _ratio_below(relative: np.ndarray, threshold: float) -> MsprobeValue:
    return _format(float(np.sum(relative < threshold) / relative.size)) if relative.size else NAN


def msprobe_columns(device: np.ndarray, benchmark: np.ndarray) -> MsprobeColumns:
    """msprobe's columns of ``device`` (its "NPU" side) against ``benchmark`` (its "Bench" side)."""
    n, b = as_read(device), as_read(benchmark)
    if n.size == 0 or b.size == 0:
        return MsprobeColumns(*[UNSUPPORTED] * len(HEADERS))
    if n.shape != b.shape:
        return MsprobeColumns(*[SHAPE_UNMATCH] * len(HEADERS))
    if n.ndim:
        zeroed = _specials_zeroed(n, b)
        if zeroed is None:
            return MsprobeColumns(*[NOT_AVAILABLE] * len(HEADERS))
        n, b = zeroed
    wide_n, wide_b = n.reshape(-1).astype(float), b.reshape(-1).astype(float)
    max_abs, relative = _max_or_nan(np.abs(wide_n - wide_b)), _relative(n, b)
    if not n.ndim:
        return MsprobeColumns(UNSUPPORTED, UNSUPPORTED, max_abs, _max_or_nan(relative), UNSUPPORTED, UNSUPPORTED)
    return MsprobeColumns(_cosine(n, b), float(np.linalg.norm(wide_n - wide_b, ord=2)), max_abs,
                          _max_or_nan(relative), _ratio_below(relative, 0.001), _ratio_below(relative, 0.005))


def cells(columns: MsprobeColumns) -> tuple[str, ...]:
    """The columns as msprobe's CSV writes them (``str`` of each value), in ``HEADERS`` order."""
    return tuple(str(getattr(columns, f.name)) for f in fields(columns))
