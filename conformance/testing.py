"""The in-memory API: ``assert_leaky_relu(actual, x, alpha=...)``, ``assert_prelu(actual, x, weight)``
and ``assert_rrelu(actual, x)``, in the spirit of ``torch.testing.assert_close``, for outputs already
in memory.

The arrays may be numpy arrays (``ml_dtypes.bfloat16`` included), torch tensors, JAX
arrays or TensorFlow tensors; bfloat16 goes through each one's own type, bit for bit.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from conformance.config import allowed_categories, with_tolerances
from conformance.dtypes import DTYPES, info
from conformance.errors import UsageError
from conformance.judge.evaluate import evaluate, merge_rows
from conformance.judge.gate import GateConfig
from conformance.ops import RRELU_LOWER, RRELU_UPPER
from conformance.prelu_suite import judge_part
from conformance.records import BackendResult, Row, RowKey
from conformance.reference import prelu
from conformance.reference.golden import check_alpha
from conformance.render.messages import failure_message
from conformance.triage.prelu import Operands, triage_dweight, triage_elementwise

__all__ = ["as_array", "assert_leaky_relu", "assert_prelu", "assert_rrelu", "judge_leaky_relu", "judge_prelu",
           "judge_rrelu"]

SUBJECT = "actual"  # the backend name a row of in-memory arrays carries


def as_array(value: Any, *, name: str) -> np.ndarray:
    """``value`` as a numpy array of the same dtype and values, in this machine's byte order: a
    numpy array, a torch tensor (bfloat16 through a bit view), a JAX array or a TensorFlow tensor."""
    module = type(value).__module__.split(".")[0]
    if module == "torch":
        from conformance.frameworks.torch_backend import numpy_from_tensor

        return numpy_from_tensor(value)
    if module == "tensorflow" or hasattr(value, "numpy") and callable(value.numpy) and module != "numpy":
        value = value.numpy()
    found = np.asarray(value)
    if found.dtype.kind not in "fV" or found.dtype.name not in {info(d).dtype.name for d in DTYPES}:
        raise UsageError(f"{name} is {found.dtype}; pass a float16, bfloat16, float32 or float64 array")
    return found if found.dtype.isnative else found.astype(found.dtype.newbyteorder("="))


def _arrays(actual: Any, x: Any, *, dy: Any) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """``actual``, ``x`` and ``dy`` as numpy arrays of one shape, dy in x's dtype; a UsageError otherwise."""
    x_arr, act = as_array(x, name="x"), as_array(actual, name="actual")
    dy_arr = None if dy is None else as_array(dy, name="dy")
    if act.shape != x_arr.shape or (dy_arr is not None and dy_arr.shape != x_arr.shape):
        shapes = f"actual {act.shape}, x {x_arr.shape}" + ("" if dy_arr is None else f", dy {dy_arr.shape}")
        raise UsageError(f"the arrays' shapes differ ({shapes}); pass arrays of one shape")
    if dy_arr is not None and dy_arr.dtype != x_arr.dtype:
        raise UsageError(f"dy is {dy_arr.dtype} and x {x_arr.dtype}; pass dy in x's dtype")
    return act, x_arr, dy_arr


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
    act, x_arr, dy_arr = _arrays(actual, x, dy=dy)
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
    _raise_on_failure(row, msg=msg)


# ----------------------------------------------------------------------------- PReLU and RReLU

@dataclass(frozen=True)
class WeightedCase:
    """What a PReLU or RReLU output is judged on: the arrays, the weight, its axis and the op."""

    x: np.ndarray
    dy: Optional[np.ndarray]
    weight: np.ndarray
    channel_axis: int
    op: str

    def key(self, out_dtype: str) -> RowKey:
        """The judged row's identity: the op, and as its alpha the weight's first element."""
        direction = "forward" if self.dy is None else "backward"
        return RowKey(SUBJECT, None, None, out_dtype, out_dtype, direction, float(self.weight.reshape(-1)[0]),
                      op=self.op)

    def values(self, expected: np.ndarray, actual: np.ndarray) -> Callable[[int], tuple]:
        """An offender's (x, dy, expected, actual) at a flat index of an elementwise part."""
        xs, ds = self.x.reshape(-1), None if self.dy is None else self.dy.reshape(-1)
        return lambda i: (xs[i], None if ds is None else ds[i], expected.reshape(-1)[i], actual.reshape(-1)[i])


def _weight(weight: Any, shape: tuple[int, ...], *, channel_axis: int) -> np.ndarray:
    """``weight`` as an array that fits an input of ``shape``; a UsageError naming both shapes otherwise."""
    w = np.asarray(weight, dtype=np.float64) if isinstance(weight, (int, float, list, tuple)) \
        else as_array(weight, name="weight")
    try:
        prelu.expanded_weight(w, shape, channel_axis=channel_axis)
    except ValueError as exc:
        raise UsageError(f"weight: {exc}") from None
    return w


def _elementwise_row(case: WeightedCase, actual: np.ndarray, *, config: GateConfig) -> Row:
    """y (forward) or dx (backward) judged against the exact golden, each mismatch triaged."""
    forward = case.dy is None
    operand = case.x if forward else case.dy
    expected = prelu.forward(case.x, case.weight, channel_axis=case.channel_axis) if forward else \
        prelu.backward(case.dy, case.x, case.weight, channel_axis=case.channel_axis)
    ops = Operands(case.x, operand, case.weight, channel_axis=case.channel_axis)
    return judge_part(case.key(info(actual.dtype).name), expected, actual,
                      lambda: triage_elementwise(ops, expected, actual, forward=forward),
                      values=case.values(expected, actual), config=config, part="y" if forward else "dx")


def _dweight_row(case: WeightedCase, dweight: Any, *, config: GateConfig) -> Row:
    """dweight judged against the exact sum, a mismatching sum named by the way of summing that gives it."""
    assert case.dy is not None
    expected = prelu.dweight(case.dy, case.x, case.weight, channel_axis=case.channel_axis)
    actual = as_array(dweight, name="dweight")
    if actual.size != expected.size or actual.dtype != case.x.dtype:
        raise UsageError(f"dweight is {actual.dtype}{actual.shape}; pass the weight's gradient, "
                         f"{expected.size} elements in x's dtype {case.x.dtype}")
    actual = actual.reshape(expected.shape)
    return judge_part(case.key(info(actual.dtype).name), expected, actual,
                      lambda: triage_dweight(case.dy, case.x, case.weight, expected, actual,
                                             channel_axis=case.channel_axis),
                      values=lambda i: (None, None, expected.reshape(-1)[i], actual.reshape(-1)[i]),
                      config=config, part="dweight")


def _judge_weighted(actual: Any, case: WeightedCase, *, dweight: Any, config: GateConfig) -> Row:
    """The merged row of an elementwise output and, when given, dweight."""
    rows = [_elementwise_row(case, as_array(actual, name="actual"), config=config)]
    if dweight is not None:
        rows.append(_dweight_row(case, dweight, config=config))
    return merge_rows(rows, config=config)


def _case(actual: Any, x: Any, weight: Any, *, dy: Any, channel_axis: int, op: str) -> tuple[WeightedCase, str]:
    """The arrays checked (one shape, actual in x's dtype) as a case, and the output's dtype name."""
    act, x_arr, dy_arr = _arrays(actual, x, dy=dy)
    if act.dtype != x_arr.dtype:
        raise UsageError(f"actual is {act.dtype} and x {x_arr.dtype}; a {op} output has its input's dtype, "
                         "pass actual in x's dtype")
    if not isinstance(channel_axis, int) or not 0 <= channel_axis < max(x_arr.ndim, 1):
        raise UsageError(f"channel_axis={channel_axis!r}: pass an axis of x, 0 to {max(x_arr.ndim - 1, 0)}")
    w = _weight(weight, x_arr.shape, channel_axis=channel_axis)
    return WeightedCase(x_arr, dy_arr, w, channel_axis, op), info(act.dtype).name


def judge_prelu(actual: Any, x: Any, weight: Any, *, dy: Any = None, dweight: Any = None, channel_axis: int = 1,
                rtol: Optional[float] = None, atol: Optional[float] = None, max_ulp: Optional[int] = None,
                strict: bool = False, allow: Iterable[str] = ()) -> Row:
    """The judged row of ``actual`` (and ``dweight``) against the exact PReLU: the arguments as
    :func:`assert_prelu`."""
    if dweight is not None and dy is None:
        raise UsageError("dweight is given without dy; pass dy, the gradient dweight was computed from")
    case, out = _case(actual, x, weight, dy=dy, channel_axis=channel_axis, op="prelu")
    config = _config(out, rtol=rtol, atol=atol, max_ulp=max_ulp, strict=strict, allow=allow)
    return _judge_weighted(actual, case, dweight=dweight, config=config)


def assert_prelu(actual: Any, x: Any, weight: Any, *, dy: Any = None, dweight: Any = None, channel_axis: int = 1,
                 rtol: Optional[float] = None, atol: Optional[float] = None, max_ulp: Optional[int] = None,
                 strict: bool = False, allow: Iterable[str] = (), msg: Optional[str] = None) -> None:
    """Assert that ``actual`` is PReLU of ``x`` with ``weight`` (``x if x > 0 else w[c] * x``), or,
    with ``dy``, its gradient ``dy if x > 0 else w[c] * dy``; with ``dweight`` also the weight's
    gradient, per weight element the sum of ``x * dy`` over its elements where x is not positive.

    ``weight`` has 1 element, C on ``channel_axis`` (torch's ``nn.PReLU(C)``: axis 1), the
    input's shape without its batch axis (Keras, with axes of length 1 it is shared along), or
    a shape of the input's rank that broadcasts to it (ONNX).  The golden rounds each exact
    product once and sums dweight exactly; x = ±0 and NaN take the product, as torch.
    ``actual`` and ``dweight`` are in ``x``'s dtype.  Arrays are numpy arrays, torch tensors
    (parameters included), JAX arrays or TensorFlow tensors.

    Every differing element is named by the cause that reproduces its bits: the slope a channel
    used and whose it is (``alpha-mismatch``: "channel 2 used 0.25 (torch's PReLU initial
    value, ...) where the weight held 0.2"), the weight on another axis, a formulation
    (``formulation``, ``grad-at-zero``), ``subnormal-flush``, and for dweight the way of
    summing that gives its bits (``reduction-order``).  The tolerances, ``strict``, ``allow`` and
    ``msg`` are :func:`assert_leaky_relu`'s; no category is allowed unless ``allow`` names it, so a
    dweight summed in another order beyond the tolerance fails unless ``allow=("reduction-order",)``.

    Raises ``AssertionError`` with ``Mismatched elements: k / N (p%)`` over the compared parts
    (y, or dx and dweight) and each cause with its first offenders; ``UsageError`` for
    arguments that cannot be judged (a weight that fits no rule, dweight without dy).
    """
    row = judge_prelu(actual, x, weight, dy=dy, dweight=dweight, channel_axis=channel_axis, rtol=rtol, atol=atol,
                      max_ulp=max_ulp, strict=strict, allow=allow)
    _raise_on_failure(row, msg=msg)


def eval_slope(*, lower: float, upper: float) -> float:
    """RReLU's slope in eval mode, ``(lower + upper) / 2`` (torch's ``rrelu`` in
    ``aten/src/ATen/native/Activation.cpp``), in float64; a UsageError for bounds that are not finite."""
    if not all(isinstance(b, (int, float)) and np.isfinite(b) for b in (lower, upper)) or lower > upper:
        raise UsageError(f"lower={lower!r}, upper={upper!r}: pass finite bounds with lower <= upper")
    return (float(lower) + float(upper)) / 2


def judge_rrelu(actual: Any, x: Any, *, lower: float = RRELU_LOWER, upper: float = RRELU_UPPER, dy: Any = None,
                rtol: Optional[float] = None, atol: Optional[float] = None, max_ulp: Optional[int] = None,
                strict: bool = False, allow: Iterable[str] = ()) -> Row:
    """The judged row of ``actual`` against the exact RReLU in eval mode: the arguments as :func:`assert_rrelu`."""
    slope = np.array([eval_slope(lower=lower, upper=upper)])
    case, out = _case(actual, x, slope, dy=dy, channel_axis=1, op="rrelu")
    config = _config(out, rtol=rtol, atol=atol, max_ulp=max_ulp, strict=strict, allow=allow)
    return _judge_weighted(actual, case, dweight=None, config=config)


def assert_rrelu(actual: Any, x: Any, *, lower: float = RRELU_LOWER, upper: float = RRELU_UPPER, dy: Any = None,
                 rtol: Optional[float] = None, atol: Optional[float] = None, max_ulp: Optional[int] = None,
                 strict: bool = False, allow: Iterable[str] = (), msg: Optional[str] = None) -> None:
    """Assert that ``actual`` is RReLU of ``x`` in eval mode (``x if x > 0 else s * x`` with
    ``s = (lower + upper) / 2``, torch's bounds 1/8 and 1/3 by default, so s = 11/48), or, with
    ``dy``, its gradient.  Training mode samples a slope per element and has no golden.  A slope
    held narrower than float64 is ``alpha-precision``; the rest as :func:`assert_prelu`.
    """
    row = judge_rrelu(actual, x, lower=lower, upper=upper, dy=dy, rtol=rtol, atol=atol, max_ulp=max_ulp,
                      strict=strict, allow=allow)
    _raise_on_failure(row, msg=msg)


def _raise_on_failure(row: Row, *, msg: Optional[str]) -> None:
    """An AssertionError with the row's failure message (``msg`` first) when the row fails."""
    if row.verdict == "fail":
        text = failure_message(row)
        raise AssertionError(f"{msg}\n\n{text}" if msg else text)
