"""The emulated ``aclnnPrelu`` kernel and its backward, on the opbase elementwise plan.

Forward, as ``hicann/ops-nn`` ``activation/prelu/docs/aclnnPrelu_en.md`` states it:
``max(0, x) + a * min(0, x)``; self and weight FLOAT, FLOAT16 or BFLOAT16 (FLOAT and FLOAT16
on Atlas training and inference products); the weight has 1 element or ``self.shape[1]``
(channels = 1 for a self of rank <= 1); deterministic by default.  The sum is exact (one term
is a zero), so the formula differs from a select only in the zero's sign: x = -0 with a >= 0
gives +0 (``0 + a*0``) where the select gives ``a * -0 = -0``.  bfloat16 is computed in float32
(the product of two 8-bit significands is exact there, so nothing is rounded twice).

Backward: ``dx = x > 0 ? dy : a * dy``; dweight's shares ``x * dy`` are formed in float32
(exact for float16 and bfloat16, rounded for float32), each tile of the plan sums its shares of
each channel by a tree (numpy's pairwise sum stands for the vector unit's halving adds), and
the tiles' partial sums are added in the plan's order, core after core: a fixed order, hence
deterministic, but not the exact sum (:class:`conformance.reference.reductions.Reduction`
with ``tile`` = the plan's tile).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from conformance.dtypes import info
from conformance.npu_impl.chips import get_profile
from conformance.npu_impl.tiling import ComputeParams, TilingPlan, make_plan
from conformance.reference import prelu as golden_prelu
from conformance.reference.exact import cast_exact
from conformance.reference.prelu import expanded_weight, weight_per_element
from conformance.reference.reductions import Reduction, reduce_dweight

DTYPES = ("float32", "float16", "bfloat16")
_BUFFERS = 3  # x, weight (broadcast on chip), y: one maxDtypeBits slot each


def plan_for(x: np.ndarray, *, profile: Optional[str] = None) -> TilingPlan:
    """The opbase elementwise plan for ``x`` (float32 in UB for a bfloat16 input)."""
    bits = 8 * x.dtype.itemsize
    params = ComputeParams(bits, 32 if info(x.dtype).name == "bfloat16" else bits, _BUFFERS)
    return make_plan(x.size, profile=get_profile(profile), params=params, gm_itemsizes=(x.dtype.itemsize,))


def compute_dtype(dtype: str) -> np.dtype:
    """The dtype the vector unit computes ``dtype`` in."""
    return np.dtype(np.float32) if info(dtype).name == "bfloat16" else info(dtype).dtype


def check(x: np.ndarray, weight: np.ndarray, *, profile: Optional[str] = None) -> Optional[str]:
    """The host's refusal (aclnn's ACLNN_ERR_PARAM_INVALID), or None."""
    name = info(x.dtype).name
    if name not in get_profile(profile).dtypes or name not in DTYPES:
        return f"aclnnPrelu: self dtype {name} is not supported on {get_profile(profile).name}"
    channels = x.shape[1] if x.ndim > 1 else 1
    if np.size(weight) not in (1, channels):
        return f"aclnnPrelu: weight has {np.size(weight)} elements; it takes 1 or self.shape[1] = {channels}"
    return None


def forward(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``max(0, x) + a * min(0, x)``, the weight broadcast on axis 1: every product is exact in the
    compute dtype and one term of the sum is a zero, so the golden's ``maxmin`` formulation is it."""
    return golden_prelu.forward(x, weight, formulation="maxmin")


def backward(dy: np.ndarray, x: np.ndarray, weight: np.ndarray, *,
             profile: Optional[str] = None) -> tuple[np.ndarray, np.ndarray, TilingPlan]:
    """(dx, dweight, plan): dx selected on x > 0, dweight summed per tile then in plan order."""
    work = compute_dtype(x.dtype.name)
    a = weight_per_element(np.asarray(weight).astype(work), x.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        dx = np.where(x > 0, dy.astype(work), (a * dy.astype(work)).astype(work))
    plan = plan_for(x, profile=profile)
    shares = "input" if info(x.dtype).name == "float32" else None
    reduction = Reduction("float32", "pairwise", shares, tile=plan.tile_elements)
    w = expanded_weight(weight, x.shape).reshape(np.shape(weight))
    dweight = reduce_dweight(dy, x, w, reduction)
    return cast_exact(dx, info(x.dtype)), dweight, plan
