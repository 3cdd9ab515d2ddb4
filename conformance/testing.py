"""The in-memory API: ``assert_leaky_relu(actual, x, alpha=...)``, in the spirit of
``torch.testing.assert_close``, for outputs already in memory.

The arrays may be numpy arrays (``ml_dtypes.bfloat16`` included), torch tensors, JAX
arrays or TensorFlow tensors; bfloat16 goes through each one's own type, bit for bit.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Optional

import numpy as np

from conformance.config import allowed_categories, with_tolerances
from conformance.dtypes import DTYPES, info
from conformance.errors import UsageError
from conformance.judge.evaluate import evaluate
from conformance.judge.gate import GateConfig
from conformance.records import BackendResult, Row
from conformance.reference.golden import check_alpha
from conformance.render.messages import failure_message

__all__ = ["as_array", "assert_leaky_relu", "judge_leaky_relu"]

SUBJECT = "actual"  # the backend name a row of in-memory arrays carries


def as_array(value: Any, *, name: str) -> np.ndarray:
    """``value`` as a numpy array of the same dtype and bits: a numpy array, a torch tensor
    (bfloat16 through a bit view), a JAX array or a TensorFlow tensor."""
    module = type(value).__module__.split(".")[0]
    if module == "torch":
        from conformance.frameworks.torch_backend import numpy_from_tensor

        return numpy_from_tensor(value)
    if module == "tensorflow" or hasattr(value, "numpy") and callable(value.numpy) and module != "numpy":
        value = value.numpy()
    found = np.asarray(value)
    if found.dtype.kind not in "fV" or found.dtype.name not in {info(d).dtype.name for d in DTYPES}:
        raise UsageError(f"{name} is {found.dtype}; pass a float16, bfloat16, float32 or float64 array")
    return found


def _config(out_dtype: str, *, rtol: Optional[float], atol: Optional[float], max_ulp: Optional[int],
            strict: bool, allow: Iterable[str]) -> GateConfig:
    """torch.testing's tolerances of ``out_dtype`` and max ULP 1, with the ones given; no
    category allowed but ``allow`` (a user's own arrays have no declared policy)."""
    config = GateConfig(strict=strict, allowed=allowed_categories(allow, flag="allow"))
    return with_tolerances(config, rtol=rtol, atol=atol, max_ulp=max_ulp, dtypes=[out_dtype])


def judge_leaky_relu(actual: Any, x: Any, *, alpha: float, dy: Any = None, rtol: Optional[float] = None,
                     atol: Optional[float] = None, max_ulp: Optional[int] = None, strict: bool = False,
                     allow: Iterable[str] = ()) -> Row:
    """The judged row of ``actual`` against the exact LeakyReLU of ``x`` (forward), or of its
    gradient ``dy`` (backward when ``dy`` is given): the arguments as :func:`assert_leaky_relu`."""
    x_arr, act = as_array(x, name="x"), as_array(actual, name="actual")
    dy_arr = None if dy is None else as_array(dy, name="dy")
    if act.shape != x_arr.shape or (dy_arr is not None and dy_arr.shape != x_arr.shape):
        shapes = f"actual {act.shape}, x {x_arr.shape}" + ("" if dy_arr is None else f", dy {dy_arr.shape}")
        raise UsageError(f"the arrays' shapes differ ({shapes}); pass arrays of one shape")
    if dy_arr is not None and dy_arr.dtype != x_arr.dtype:
        raise UsageError(f"dy is {dy_arr.dtype} and x {x_arr.dtype}; pass dy in x's dtype")
    try:
        alpha = check_alpha(alpha)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = info(act.dtype).name
    config = _config(out, rtol=rtol, atol=atol, max_ulp=max_ulp, strict=strict, allow=allow)
    try:
        return evaluate(x_arr, alpha, BackendResult(value=act), direction="forward" if dy_arr is None else "backward",
                        dy=dy_arr, out_dtype=out, backend=SUBJECT, config=config)
    except ValueError as exc:  # a pair the golden does not compute (e.g. float64 -> float16 backward)
        raise UsageError(f"{info(x_arr.dtype).name} -> {out}: {exc}") from None


def assert_leaky_relu(actual: Any, x: Any, *, alpha: float, dy: Any = None, rtol: Optional[float] = None,
                      atol: Optional[float] = None, max_ulp: Optional[int] = None, strict: bool = False,
                      allow: Iterable[str] = (), msg: Optional[str] = None) -> None:
    """Assert that ``actual`` is LeakyReLU of ``x`` with slope ``alpha`` (or, with ``dy``, its
    gradient ``dy * (1 if x > 0 else alpha)``), judged against the exact answer.

    ``actual`` may have another float dtype than ``x`` (a float32 -> float16 kernel); ``x``,
    ``dy`` and ``actual`` are numpy arrays, torch tensors, JAX arrays or TensorFlow tensors.
    Every element that differs from the exact answer is named by the cause that reproduces
    its bits (``alpha-mismatch``, ``alpha-precision``, ``subnormal-flush``, ``rounding``, ...).
    The assertion fails when some element violates the tolerance and its cause is not in
    ``allow``; elements within tolerance pass, as in ``torch.testing.assert_close``. An
    element *violates* when it differs and ``|actual - exact| > atol + rtol * |exact|``, or
    it is more than ``max_ulp`` units in the last place away, or a NaN or infinity sits where
    the exact answer has none (or the reverse). ``strict=True`` fails any bit difference.

    Default tolerances, by ``actual``'s dtype (torch.testing's; ``max_ulp`` 1 for all):

    =========  ========  =====
    dtype      rtol      atol
    =========  ========  =====
    float16    1e-3      1e-5
    bfloat16   1.6e-2    1e-5
    float32    1.3e-6    1e-5
    float64    1e-7      1e-7
    =========  ========  =====

    Raises ``AssertionError`` with ``Mismatched elements: k / N (p%)``, the greatest
    differences and each cause with its first offenders; ``msg`` is put first.  Raises
    ``conformance.errors.UsageError`` for arguments that cannot be judged (shapes that
    differ, an integer array, rtol without atol).
    """
    row = judge_leaky_relu(actual, x, alpha=alpha, dy=dy, rtol=rtol, atol=atol, max_ulp=max_ulp,
                           strict=strict, allow=allow)
    if row.verdict == "fail":
        text = failure_message(row)
        raise AssertionError(f"{msg}\n\n{text}" if msg else text)
