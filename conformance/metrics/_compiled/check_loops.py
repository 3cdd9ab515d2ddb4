"""What other tools' default checks count of mismatching pairs, compiled with numba.

The counts :func:`conformance.judge.other_checks.tally` takes with numpy over a row's
mismatches (torch's ``isclose``, ``np.testing.assert_allclose`` of the ONNX, TF and JAX tests,
msprobe's errors), taken here a run of pairs at a time while the chunk scan judges the same
pairs (:func:`conformance.metrics._compiled.scan_loops.judge_range`), in the output's own
float32 or float64 arithmetic, each step as numpy rounds it.  One loop without branches
(vectorised); the largest absolute error is taken by its bits (at least +0, a NaN above every
number), as :func:`conformance.metrics._compiled.metric_loops.taken` takes its maxima.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numba
import numpy as np
from numba.extending import overload

__all__ = ["COUNTS", "Closeness", "as_bits", "check_run"]

#: What ``counts`` holds, in order: elements each check fails (torch, ONNX, TF, JAX), pairs not
#: both finite, relative errors not below each of msprobe's three thresholds, and the bits of the
#: largest absolute error (a maximum, not a sum).
COUNTS = ("torch", "onnx", "tf", "jax", "nonfinite", "not_below_0", "not_below_1", "not_below_2", "max_abs_bits")


class Closeness(NamedTuple):
    """Each check's rtol and atol, msprobe's eps and its three thresholds, in the output's dtype
    (float32 or float64): as numpy casts a Python float it computes with."""

    torch_rtol: Any
    torch_atol: Any
    onnx_rtol: Any
    onnx_atol: Any
    tf_rtol: Any
    tf_atol: Any
    jax_rtol: Any
    jax_atol: Any
    eps: Any
    hundredth: Any
    thousandth: Any
    ten_thousandth: Any


def as_bits(values):  # pragma: no cover - typed by the overload below
    raise NotImplementedError


@overload(as_bits)
def _as_bits_typed(values):
    """The float32 or float64 array ``values`` viewed as signed integers of its width."""
    word = np.int32 if values.dtype.bitwidth == 32 else np.int64
    return lambda values: values.view(word)


@numba.njit(cache=True, inline="always")
def _failing(err, x, y, placed, rest, rtol, atol):
    """``np.testing.assert_allclose(x, y)`` fails the pair: NaN or an infinity on one side only
    (``placed``), else, both finite (``rest``), not ``|x - y| <= atol + rtol * |y|`` nor equal."""
    close = (err <= atol + rtol * abs(y)) | (x == y)
    return placed | (rest & (close == False))  # noqa: E712 - a select, not a branch


@numba.njit(cache=True, nogil=True, error_model="numpy")
def check_run(a, g, n, tol, counts, errs, err_bits):
    """Add the checks' counts (:data:`COUNTS`) of the pairs ``a[:n]`` (actual), ``g[:n]`` (golden)
    to ``counts``; ``errs`` is room for the run's absolute errors and ``err_bits`` the same
    memory as integers."""
    c0, c1, c2, c3, c4, c5, c6, c7 = 0, 0, 0, 0, 0, 0, 0, 0
    for k in range(n):
        x, y = a[k], g[k]
        err = abs(x - y)
        errs[k] = err
        nan_x, nan_y, inf_x, inf_y = x != x, y != y, abs(x) == np.inf, abs(y) == np.inf
        finite = (abs(x) < np.inf) & (abs(y) < np.inf)
        placed = (nan_x != nan_y) | (inf_x != inf_y) | (inf_x & inf_y & (x != y))
        torch_close = (x == y) | ((err < np.inf) & (err <= tol.torch_atol + abs(tol.torch_rtol * y)))
        rel = abs(err / (abs(y) + tol.eps))
        c0 += torch_close == False  # noqa: E712
        c1 += _failing(err, x, y, placed, finite, tol.onnx_rtol, tol.onnx_atol)
        c2 += _failing(err, y, x, placed, finite, tol.tf_rtol, tol.tf_atol)  # assertAllClose(expected, actual)
        c3 += _failing(err, x, y, placed, finite, tol.jax_rtol, tol.jax_atol)
        c4 += finite == False  # noqa: E712
        c5 += (rel < tol.hundredth) == False  # noqa: E712 - a NaN is not below
        c6 += (rel < tol.thousandth) == False  # noqa: E712
        c7 += (rel < tol.ten_thousandth) == False  # noqa: E712
    top = counts[8]
    for k in range(n):
        top = max(top, np.int64(err_bits[k]))
    counts[0] += c0
    counts[1] += c1
    counts[2] += c2
    counts[3] += c3
    counts[4] += c4
    counts[5] += c5
    counts[6] += c6
    counts[7] += c7
    counts[8] = top
