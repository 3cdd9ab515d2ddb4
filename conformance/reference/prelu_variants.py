"""PReLU as frameworks compute it: the golden's variants that triage recomputes and the framework
models name (:mod:`conformance.reference.prelu` is the exact golden itself).

- :func:`select`: ``x > 0`` or ``x >= 0`` (JAX's ``jnp.where(x >= 0, x, w*x)``), with DAZ/FTZ;
- :func:`forward_relu_difference` / :func:`backward_relu_difference`: Keras's ``relu(x) - w*relu(-x)``
  and its gradient as autograd forms it;
- :func:`select_gradient_sum`: the gradient of ``where(x >= 0, x, w*x)`` as JAX's ``vjp`` adds its branches.
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from conformance.dtypes import info
from conformance.reference.exact import cast_exact, flush_to_zero
from conformance.reference.prelu import products, weight_per_element

Predicate = Literal["gt", "ge", "le"]  # le: the product where x <= 0, so NaN keeps its operand (MindSpore's PReLUGrad)


def select(x: np.ndarray, taken: np.ndarray, weight: np.ndarray, *, channel_axis: int = 1,
           predicate: Predicate = "gt", flush: bool = False) -> np.ndarray:
    """``taken`` where x > 0 (``ge``: x >= 0, so ±0 keep ``taken``; ``le``: where not x <= 0, so NaN keeps
    ``taken``), else ``w * taken`` rounded once; ``flush``:
    subnormals read as zero in the comparison and the product, subnormal products flushed (DAZ/FTZ); a
    selected value keeps its bits (XLA:CPU)."""
    xs, ts = flushed(np.asarray(x), flush=flush), np.asarray(taken)
    out = info(xs.dtype)
    w = weight_per_element(weight, xs.shape, channel_axis=channel_axis)
    with np.errstate(invalid="ignore"):
        take = xs >= 0 if predicate == "ge" else ~(xs <= 0) if predicate == "le" else xs > 0
    return np.where(take, ts, flushed(products(flushed(ts, flush=flush), w, out), flush=flush))


def flushed(v: np.ndarray, *, flush: bool) -> np.ndarray:
    """``v`` with its subnormals read as zeros of their sign (DAZ/FTZ) when ``flush``."""
    return flush_to_zero(v) if flush else v


def forward_relu_difference(x: np.ndarray, weight: np.ndarray, *, channel_axis: int = 1, flush: bool = False,
                            relu_keeps_minus_zero: bool = False) -> np.ndarray:
    """Keras's ``relu(x) + (-w) * relu(-x)`` (``keras/src/layers/activations/prelu.py``), each term as
    written: a zero result's sign is the sum's.  ``relu_keeps_minus_zero``: ``max(-0, 0)`` is -0 (TensorFlow's
    float16 kernel) rather than +0; ``flush``: subnormal inputs read as zero and subnormal products flushed
    (DAZ/FTZ), as TensorFlow's CPU kernels do for float32 and bfloat16."""
    xs = flushed(np.asarray(x), flush=flush)
    out = info(xs.dtype)
    w = weight_per_element(weight, xs.shape, channel_axis=channel_axis)
    with np.errstate(invalid="ignore", over="ignore"):
        wide = xs.astype(np.float64)
        pos, r = _relu(wide, keeps=relu_keeps_minus_zero), _relu(-wide, keeps=relu_keeps_minus_zero)
        neg = flushed(products(cast_exact(r, out), -np.asarray(w), out), flush=flush).astype(np.float64)
        return flushed(cast_exact(pos + neg, out), flush=flush)


def _relu(v: np.ndarray, *, keeps: bool) -> np.ndarray:
    """``max(v, 0)``: v where v > 0 or NaN, else +0 (-0 kept when ``keeps``)."""
    zero = np.where(keeps & (v == 0), v, 0.0)
    return np.where((v > 0) | np.isnan(v), v, zero)


def backward_relu_difference(dy: np.ndarray, x: np.ndarray, weight: np.ndarray, *, channel_axis: int = 1,
                             flush: bool = False) -> np.ndarray:
    """The gradient of ``relu(x) - w * relu(-x)`` as autograd forms it, each relu's gradient a multiply
    by its step (``dy * (x > 0)``): ``dy*[x > 0] - ((-w)*dy)*[-x > 0]``, so dx is a zero at x = ±0 and
    NaN, and NaN where dy is ±inf and the step is 0.  Every product is exact but ``w*dy`` (rounded
    once); ``flush`` as in :func:`forward_relu_difference`."""
    x, dy = np.asarray(x), np.asarray(dy)
    out = info(x.dtype)
    xs, ds = flushed(x, flush=flush), flushed(dy, flush=flush)
    w = weight_per_element(weight, x.shape, channel_axis=channel_axis)
    with np.errstate(invalid="ignore", over="ignore"):
        neg_w_dy = flushed(products(ds, -np.asarray(w), out), flush=flush).astype(np.float64)
        first = ds.astype(np.float64) * (xs > 0)
        second = -(neg_w_dy * (-xs > 0))
        return flushed(cast_exact(first + second, out), flush=flush)


def select_gradient_sum(dy: np.ndarray, x: np.ndarray, weight: np.ndarray, *, channel_axis: int = 1,
                        predicate: Predicate = "ge", flush: bool = False, fused: bool = True) -> np.ndarray:
    """The gradient of ``where(x >= 0, x, w*x)`` as JAX's ``vjp`` forms it: each branch gets its cotangent
    or a +0, and the two are added, ``where(x >= 0, dy, +0) + w * where(x >= 0, +0, dy)``: dy at x = ±0,
    and an exact zero ``w*dy`` becomes +0 (``+0 + -0``).  The product and the sum are float32 (XLA:CPU
    computes 16-bit floats there), so a product that only rounds to a zero keeps its sign; ``flush`` flushes
    the sum, and the product too unless ``fused`` (a fused multiply-add: float32; bfloat16 is not fused)."""
    xs, ds = flushed(np.asarray(x), flush=flush), flushed(np.asarray(dy), flush=flush)
    out = info(xs.dtype)
    w = weight_per_element(weight, xs.shape, channel_axis=channel_axis)
    with np.errstate(invalid="ignore", over="ignore"):
        take = xs >= 0 if predicate == "ge" else xs > 0
        zero = np.zeros((), ds.dtype)
        wide = info("float32") if out.bits <= 32 else out
        second = flushed(products(np.where(take, zero, ds), w, wide), flush=flush and not fused).astype(np.float64)
        return flushed(cast_exact(np.where(take, ds, zero).astype(np.float64) + second, out), flush=flush)
