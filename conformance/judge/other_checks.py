"""What other tools' default checks would say about a row's output against the golden.

A row's output is bit-compared here; users know other checks. For each of them this module says
whether it would pass the same output, as the tool itself computes it (no framework is imported:
each is restated on numpy, in the dtype the tool does its arithmetic in):

- ``torch.assert_close`` (``torch/testing/_comparison.py``): ``torch.isclose(actual, expected)``,
  ``|a - e| <= atol + |rtol * e|`` with each step rounded to the tensor's dtype (a 16-bit type
  through float32), ``equal_nan=False``: NaN against NaN fails, equal infinities pass.
- ``onnx-backend-test`` (``onnx/backend/test/runner/__init__.py``, ``assert_similar_outputs``):
  ``np.testing.assert_allclose(output, reference)``; bfloat16 upcast to float32 with rtol at least 2^-6.
- ``tf.test`` (``tensorflow/python/framework/test_util.py``, ``assertAllCloseAccordingToType(expected,
  actual)``): ``np.testing.assert_allclose(expected, actual, equal_nan=True)``, so rtol scales the
  actual value; bfloat16 upcast to float32.
- ``jax.test`` (``jax/_src/test_util.py`` ``assertAllClose(actual, desired)`` with
  ``jax/_src/public_test_util.py`` ``_default_tolerance``): ``np.testing.assert_allclose``;
  bfloat16 upcast to float32; float64 under ``jax_enable_x64`` (without it there is no float64).
- ``msprobe`` (mindstudio-probe ``pytorch/api_accuracy_checker/compare/compare.py``
  ``_compare_float_tensor``, the status a row gets): cosine <= 0.99 is an error; a max abs error
  below 0.001 passes; then for fp16/bf16 the share of relative errors below 0.01 must exceed 99%
  (else error) and below 0.001 exceed 99.9% (else warning); for fp32/fp64 below 0.001 exceed 99.9%
  (else error) and below 0.0001 exceed 99.99% (else warning). Only its "pass" passes here.

Elements that match bit for bit pass every check, so only a row's mismatches are computed on; the
golden's NaN and infinities are counted over the whole batch (a matching NaN fails torch's check,
a matching NaN or infinity makes msprobe's errors NaN).  A batch's counts travel in each
:class:`OtherCheck`'s ``tally`` so that merged batches are judged on the whole row.  A dump
judged in chunks with float32 or float64 output has its counts taken by the compiled pass that
judges its mismatches (:func:`loop_tolerances` in, :func:`loop_tally` out), the same as
:func:`tally`'s.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from conformance import jit
from conformance.dtypes import DTYPES, bfloat16, from_bits, info, is_nan
from conformance.judge.gate import TORCH_TOLERANCES
from conformance.records import Metrics, OtherCheck

TORCH, ONNX, TF, JAX, MSPROBE = "torch.assert_close", "onnx-backend-test", "tf.test", "jax.test", "msprobe"
NAMES = (TORCH, MSPROBE, ONNX, TF, JAX)  # the order a row lists them in
SHORT = {TORCH: "torch.assert_close", MSPROBE: "msprobe", ONNX: "onnx", TF: "tf", JAX: "jax"}


@dataclass(frozen=True)
class Closeness:
    """One check's tolerance for one dtype, and where it is written."""

    rtol: float
    atol: float
    source: str


_TORCH_SRC = "torch/testing/_comparison.py _DTYPE_PRECISIONS"
_ONNX_SRC = "onnx/backend/test/case/node/__init__.py (rtol=1e-3, atol=1e-7); runner/__init__.py (bf16 rtol >= 2^-6)"
_TF_SRC = "tensorflow/python/framework/test_util.py assertAllCloseAccordingToType"
_JAX_SRC = "jax/_src/public_test_util.py _default_tolerance (rtol = atol)"

#: THE table: each rtol/atol check's defaults per output dtype.
TOLERANCES: dict[str, dict[str, Closeness]] = {
    TORCH: {dtype: Closeness(rtol, atol, _TORCH_SRC) for dtype, (rtol, atol) in TORCH_TOLERANCES.items()},
    ONNX: {"float16": Closeness(1e-3, 1e-7, _ONNX_SRC), "bfloat16": Closeness(2.0 ** -6, 1e-7, _ONNX_SRC),
           "float32": Closeness(1e-3, 1e-7, _ONNX_SRC), "float64": Closeness(1e-3, 1e-7, _ONNX_SRC)},
    TF: {"float16": Closeness(1e-3, 1e-3, _TF_SRC), "bfloat16": Closeness(1e-2, 1e-2, _TF_SRC),
         "float32": Closeness(1e-6, 1e-6, _TF_SRC), "float64": Closeness(1e-6, 1e-6, _TF_SRC)},
    JAX: {"float16": Closeness(1e-3, 1e-3, _JAX_SRC), "bfloat16": Closeness(1e-2, 1e-2, _JAX_SRC),
          "float32": Closeness(1e-6, 1e-6, _JAX_SRC), "float64": Closeness(1e-15, 1e-15, _JAX_SRC)},
}

#: msprobe's first-pass thresholds (``core/common/const.py`` CompareConst; ``algorithm.py``).
MSPROBE_COSINE = 0.99
MSPROBE_MAX_ABS = 0.001
MSPROBE_RATIOS = (0.01, 0.001, 0.0001)  # HUNDRED, THOUSAND, TEN_THOUSAND_RATIO_THRESHOLD
MSPROBE_BF16_EPS = 2.0 ** -8  # CompareConst.BFLOAT16_EPS; other dtypes: np.finfo(bench).eps


def applies(out_dtype: str) -> bool:
    """Whether the checks judge outputs of ``out_dtype`` (the float formats of the dtype table)."""
    return out_dtype in DTYPES


# ----------------------------------------------------------------------------- each check, elementwise

def _upcast(v: np.ndarray) -> np.ndarray:
    """bfloat16 as float32, as TF, JAX, ONNX and msprobe cast it before numpy compares."""
    return v.astype(np.float32) if v.dtype == bfloat16 else v


def _torch_close(a: np.ndarray, e: np.ndarray, tol: Closeness) -> np.ndarray:
    """``torch.isclose(a, e, rtol, atol, equal_nan=False)``: each op in the dtype, 16-bit types
    computed in float32 and rounded back (ATen's opmath); atol is first rounded to the dtype
    (checked against torch 2.13 on every fp16/bf16 pattern at several ULP offsets)."""
    op = np.float32 if a.dtype.itemsize <= 4 else np.float64
    a_w, e_w = a.astype(op), e.astype(op)
    atol = np.array(tol.atol).astype(a.dtype).astype(op)
    with np.errstate(all="ignore"):
        scaled = np.abs((op(tol.rtol) * e_w).astype(a.dtype).astype(op))
        allowed = (atol + scaled).astype(a.dtype).astype(op)
        error = np.abs((a_w - e_w).astype(a.dtype).astype(op))
        return (a_w == e_w) | (np.isfinite(error) & (error <= allowed))


def _numpy_failing(x: np.ndarray, y: np.ndarray, tol: Closeness) -> np.ndarray:
    """Elements ``np.testing.assert_allclose(x, y, rtol, atol)`` fails (equal_nan=True): NaN or an
    infinity on one side only, else ``np.isclose`` in numpy's own arithmetic."""
    x, y = _upcast(x), _upcast(y)
    nan_x, nan_y = np.isnan(x), np.isnan(y)
    inf_x, inf_y = np.isinf(x), np.isinf(y)
    placed = (nan_x != nan_y) | (inf_x != inf_y) | (inf_x & inf_y & (x != y))
    rest = ~(nan_x | nan_y | inf_x | inf_y)
    failing = placed.copy()
    with np.errstate(all="ignore"):  # fp16 differences overflow to inf as numpy's own do
        failing[rest] = ~np.isclose(x[rest], y[rest], rtol=tol.rtol, atol=tol.atol)
    return failing


_ORDER: dict[str, Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    ONNX: lambda actual, golden: (actual, golden),  # assert_allclose(outputs[i], ref_outputs[i])
    TF: lambda actual, golden: (golden, actual),  # assertAllClose(a=expected, b=actual)
    JAX: lambda actual, golden: (actual, golden),  # assertAllClose(actual, desired)
}


def _msprobe_errors(actual: np.ndarray, golden: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """msprobe's absolute and relative errors (``get_abs_err``, ``get_rel_err_origin``), in
    its arithmetic: bfloat16 as float32 with eps 2^-8, others in their dtype with finfo eps."""
    eps = MSPROBE_BF16_EPS if golden.dtype == bfloat16 else np.finfo(golden.dtype).eps
    a, g = _upcast(actual), _upcast(golden)
    with np.errstate(all="ignore"):
        abs_err = np.abs(a - g)
        return abs_err, np.abs(abs_err / (np.abs(g) + eps))


# ----------------------------------------------------------------------------- one batch's counts

Tally = tuple[tuple[str, float], ...]


def _tallied(failing: dict[str, int], *, max_abs: float, nonfinite: int, not_below: Sequence[int], nan_both: int,
             inf_both: int) -> dict[str, Tally]:
    """Each check's tally from its counts over the mismatches: the elements each rtol/atol check
    fails, msprobe's largest absolute error (NaN: inf), the pairs not both finite and the relative
    errors not below each threshold; and the NaN and infinities both sides hold (each fails torch's
    equal_nan=False and makes msprobe's errors NaN: its max, and a relative error that is not below
    any threshold)."""
    out = {TORCH: (("failing", float(failing[TORCH] + nan_both)), ("nan_both", float(nan_both)))}
    out.update({name: (("failing", float(failing[name])),) for name in _ORDER})
    out[MSPROBE] = (("max_abs", float("inf") if np.isnan(max_abs) else max_abs), ("nonfinite", float(nonfinite)),
                    ("shared", float(nan_both + inf_both)),
                    *((f"not_below_{t}", float(n)) for t, n in zip(MSPROBE_RATIOS, not_below, strict=True)))
    return out


def tally(actual: np.ndarray, golden: np.ndarray, *, golden_nan: int, golden_inf: int) -> dict[str, Tally]:
    """Each check's counts over a batch's mismatching elements (``actual`` and ``golden`` of one
    dtype); ``golden_nan``/``golden_inf``: the NaN and infinities of the whole batch's golden (where
    an element matches, the output holds the same)."""
    nan_both, inf_both = _shared(golden, golden_nan=golden_nan, golden_inf=golden_inf)
    return mismatch_tally(actual, golden, nan_both=nan_both, inf_both=inf_both)


def _shared(golden: np.ndarray, *, golden_nan: int, golden_inf: int) -> tuple[int, int]:
    """How many matching elements are NaN and how many an infinity: the whole batch's golden
    ones (``golden_nan``, ``golden_inf``) less those at the mismatches (``golden``)."""
    return (golden_nan - int(np.count_nonzero(is_nan(golden))),
            golden_inf - int(np.count_nonzero(np.isinf(_upcast(golden)))))


def mismatch_tally(actual: np.ndarray, golden: np.ndarray, *, nan_both: int, inf_both: int) -> dict[str, Tally]:
    """:func:`tally` given how many matching elements are NaN and how many an infinity."""
    failing = {TORCH: int(np.count_nonzero(~_torch_close(actual, golden, _tol(TORCH, golden))))}
    for name, order in _ORDER.items():
        failing[name] = int(np.count_nonzero(_numpy_failing(*order(actual, golden), _tol(name, golden))))
    abs_err, rel = _msprobe_errors(actual, golden)
    nonfinite = ~(np.isfinite(_upcast(actual)) & np.isfinite(_upcast(golden)))
    return _tallied(failing, max_abs=float(np.max(abs_err)) if abs_err.size else 0.0,
                    nonfinite=int(np.count_nonzero(nonfinite)),
                    not_below=[int(np.count_nonzero(~(rel < t))) for t in MSPROBE_RATIOS],
                    nan_both=nan_both, inf_both=inf_both)


LOOP_DTYPES = ("float32", "float64")  # outputs whose counts a compiled pass takes (in their own arithmetic)


def loop_tolerances(out_dtype: str) -> tuple[np.floating, ...]:
    """What a compiled pass counts the checks by (``metrics._compiled.check_loops.Closeness``), for
    an output in :data:`LOOP_DTYPES`: each rtol/atol check's (rtol, atol) in the order torch, ONNX,
    TF, JAX, msprobe's eps and its thresholds, each as the dtype's scalar (as numpy casts them)."""
    word = info(out_dtype).dtype.type
    pairs = [(TOLERANCES[name][out_dtype].rtol, TOLERANCES[name][out_dtype].atol) for name in (TORCH, *_ORDER)]
    return tuple(word(v) for v in (*(v for pair in pairs for v in pair), np.finfo(word).eps, *MSPROBE_RATIOS))


def loop_tally(counts: Sequence[int], *, max_abs: float, nan_both: int, inf_both: int) -> dict[str, Tally]:
    """:func:`tally` from a compiled pass's counts over the mismatches (``check_loops.COUNTS``
    order: failing per check, pairs not both finite, relative errors not below each threshold)
    and the largest absolute error."""
    failing = dict(zip((TORCH, *_ORDER), (int(c) for c in counts[:4]), strict=True))
    return _tallied(failing, max_abs=max_abs, nonfinite=int(counts[4]), not_below=[int(c) for c in counts[5:8]],
                    nan_both=nan_both, inf_both=inf_both)


def _tol(name: str, golden: np.ndarray) -> Closeness:
    return TOLERANCES[name][info(golden.dtype).name]


def specials(golden: np.ndarray) -> tuple[int, int]:
    """The NaN and infinities of a golden array (counted over every element)."""
    return int(np.count_nonzero(is_nan(golden))), int(np.count_nonzero(np.isinf(_upcast(golden))))


# ----------------------------------------------------------------------------- the verdicts

def _count_text(n: int, elements: int) -> str:
    share = 100.0 * n / elements if elements else 0.0
    return f"{n:,} / {elements:,} ({share:.3g}%)"


def _closeness_check(name: str, counts: dict[str, float], *, out_dtype: str, elements: int) -> OtherCheck:
    """An rtol/atol check's verdict; torch's also without its NaN == NaN failures (equal_nan=True)."""
    tol = TOLERANCES[name][out_dtype]
    failing, nan_both = int(counts["failing"]), int(counts.get("nan_both", 0))
    limits = f"rtol={tol.rtol:g}, atol={tol.atol:g}"
    if not failing:
        return OtherCheck(name, True, f"every element within {limits}", passes_if_shared_equal=True)
    nan = f"; {nan_both:,} of them NaN on both sides (equal_nan=False)" if nan_both else ""
    return OtherCheck(name, False, f"mismatched elements: {_count_text(failing, elements)} at {limits}{nan}",
                      passes_if_shared_equal=failing == nan_both)


def _msprobe_status(counts: dict[str, float], *, out_dtype: str, metrics: Metrics,
                    shared_equal: bool) -> tuple[str, str]:
    """msprobe's status and why; ``shared_equal``: as if the NaN and infinities both sides hold
    were not there (msprobe itself counts each as an error that is not small)."""
    shared = 0 if shared_equal else int(counts["shared"])
    n = metrics.elements - (int(counts["shared"]) if shared_equal else 0)
    cosine = _msprobe_cosine(metrics, nonfinite=int(counts["nonfinite"]) + shared, elements=n)
    if cosine is not None:
        return "error", cosine
    biggest = float("inf") if shared else counts["max_abs"]
    if biggest < MSPROBE_MAX_ABS:
        return "pass", f"max abs error {biggest:.3g} < {MSPROBE_MAX_ABS:g}"
    ratio = {t: 1.0 - (counts[f"not_below_{t}"] + shared) / n if n else 1.0 for t in MSPROBE_RATIOS}
    hundredth, thousandth, ten_thousandth = MSPROBE_RATIOS
    steps = ((hundredth, "error"), (thousandth, "warning")) if info(out_dtype).bits == 16 else \
        ((thousandth, "error"), (ten_thousandth, "warning"))
    for t, status in steps:
        if not ratio[t] > 1.0 - t:
            return status, f"{ratio[t]:.4%} of relative errors below {t:g} (needs > {1.0 - t:.2%})"
    t = steps[-1][0]
    return "pass", f"{ratio[t]:.4%} of relative errors below {t:g}"


def _msprobe_cosine(metrics: Metrics, *, nonfinite: int, elements: int) -> Optional[str]:
    """Why msprobe's cosine check errs (None: it passes).  A NaN or inf makes the cosine NaN,
    which msprobe lets through, as it does one element and two all-zero sides; the cosine of the
    finite pairs (the row's) is msprobe's when every pair is finite."""
    if nonfinite or elements <= 1:
        return None
    if metrics.cosine is None:
        both_zero = metrics.cos_aa <= 0.0 and metrics.cos_gg <= 0.0
        return None if both_zero else "one side is all zero (no cosine)"
    return None if metrics.cosine > MSPROBE_COSINE else f"cosine {metrics.cosine:.6f} <= {MSPROBE_COSINE}"


def _msprobe_check(counts: dict[str, float], *, out_dtype: str, metrics: Metrics) -> OtherCheck:
    status, why = _msprobe_status(counts, out_dtype=out_dtype, metrics=metrics, shared_equal=False)
    shared = int(counts["shared"])
    alone = status if not shared else \
        _msprobe_status(counts, out_dtype=out_dtype, metrics=metrics, shared_equal=True)[0]
    said = f"; {shared:,} NaN/inf on both sides count as errors" if shared and status != "pass" else ""
    return OtherCheck(MSPROBE, status == "pass", f"{status}: {why}{said}", passes_if_shared_equal=alone == "pass")


def decided(tallies: dict[str, Tally], *, out_dtype: str, metrics: Metrics) -> tuple[OtherCheck, ...]:
    """Each check's verdict on a row from its counts (one batch's, or several merged)."""
    out = []
    for name in NAMES:
        counts = dict(tallies[name])
        check = _msprobe_check(counts, out_dtype=out_dtype, metrics=metrics) if name == MSPROBE else \
            _closeness_check(name, counts, out_dtype=out_dtype, elements=metrics.elements)
        out.append(replace(check, tally=tallies[name]))
    return tuple(out)


def of_batch(actual: np.ndarray, golden: np.ndarray, *, mismatch_index: np.ndarray,
             metrics: Metrics) -> tuple[OtherCheck, ...]:
    """Every check's verdict on one batch (flat ``actual`` and ``golden``, the row's mismatches);
    the counts of a float32 or float64 output taken by the compiled pass when there is one."""
    out_dtype = info(golden.dtype).name
    nan, inf = specials(golden)
    a, g = actual[mismatch_index], golden[mismatch_index]
    if jit.enabled() and out_dtype in LOOP_DTYPES and a.dtype == g.dtype:
        nan_both, inf_both = _shared(g, golden_nan=nan, golden_inf=inf)
        counts, max_abs = loop_counts(a, g)
        return decided(loop_tally(counts, max_abs=max_abs, nan_both=nan_both, inf_both=inf_both),
                       out_dtype=out_dtype, metrics=metrics)
    return decided(tally(a, g, golden_nan=nan, golden_inf=inf), out_dtype=out_dtype, metrics=metrics)


def loop_counts(actual: np.ndarray, golden: np.ndarray) -> tuple[np.ndarray, float]:
    """The compiled pass's counts (``check_loops.COUNTS``) over the mismatching pairs, in their
    float32 or float64 arithmetic, and the largest absolute error."""
    from conformance.metrics._compiled.check_loops import COUNTS, Closeness, check_run  # numba

    a, g = np.ascontiguousarray(actual), np.ascontiguousarray(golden)
    counts, errs = np.zeros(len(COUNTS), dtype=np.int64), np.empty(a.size, dtype=a.dtype)
    check_run(a, g, a.size, Closeness(*loop_tolerances(info(a.dtype).name)), counts, errs,
              errs.view(np.int32 if a.dtype.itemsize == 4 else np.int64))
    return counts, float(from_bits([int(counts[-1])], a.dtype)[0])  # the largest error's bits, as a float


def _merged_tally(name: str, parts: Sequence[Tally]) -> Tally:
    keys = [k for k, _ in parts[0]]
    sums = {k: 0.0 for k in keys}
    for part in parts:
        for k, v in part:
            sums[k] = max(sums[k], v) if k == "max_abs" else sums[k] + v
    return tuple((k, sums[k]) for k in keys)


def merged(rows: Sequence[tuple[OtherCheck, ...]], *, out_dtype: str, metrics: Metrics) -> tuple[OtherCheck, ...]:
    """The checks of several batches of one row, judged on the whole row (none when a batch has
    none: a refused batch has no output to judge)."""
    if not rows or any(len(r) != len(NAMES) for r in rows):
        return ()
    tallies = {name: _merged_tally(name, [dict((c.name, c.tally) for c in r)[name] for r in rows]) for name in NAMES}
    return decided(tallies, out_dtype=out_dtype, metrics=metrics)


def all_pass_yet_differs(checks: Sequence[OtherCheck], *, mismatches: int) -> bool:
    """Every other check passes a row in which this tool finds a difference, a NaN or infinity
    both sides hold counted as equal (torch's ``equal_nan=True``; msprobe without those elements):
    the suite feeds every special value, which a user's own test of these checks would leave out."""
    return bool(checks) and mismatches > 0 and all(c.passes_if_shared_equal for c in checks)
