"""The emulated CANN LeakyReLU kernel, behind an aclnn-like host entry.

``leaky_relu`` and ``leaky_relu_backward`` validate their inputs like the host
side of an aclnn operator (one :class:`HostValidationError` per rejection),
build the tiling plan, launch the per-core kernels on emulated GM/UB, and
return the output with its ``TilingPlan``, that plan's ``TilePlan`` record and memory hazards.

The contract follows ops-nn ``activation/leaky_relu/op_api/aclnn_leaky_relu.cpp`` and
``activation/leaky_relu_grad/op_api/aclnn_leaky_relu_backward.cpp``:
- the slope is not checked (``CheckParams``: null, dtype, shape), so +/-inf and NaN are computed;
- the rank is at most 8 (``OP_CHECK_MAX_DIM``);
- the backward promotes mixed dtypes (``PromoteType(gradOutput, self)`` and ``l0op::Cast``) and
  broadcasts the shapes (``OP_CHECK_BROADCAST_AND_INFER_SHAPE``);
- the kernel writes the input dtype; another output dtype is a separate ``l0op::Cast`` after it;
- DOUBLE is in the supported list but runs on AICPU, not the AICore kernel emulated here
  (:class:`Unsupported`, not a rejection);
- an empty tensor returns at once, without a launch;
- ``aclnnInplaceLeakyRelu`` computes into a fresh buffer and ``ViewCopy``s it back, so
  input and output never alias in GM; aclnn has no in-place backward.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from conformance.dtypes import DTypeInfo, DTypeLike, info
from conformance.errors import HostValidationError, Unsupported
from conformance.npu_impl.chips import DEFAULT_PROFILE, PROFILES, ChipProfile, supported_pairs
from conformance.npu_impl.kernel import KernelSpec, build_spec, plan_for, run, tile_plan_of
from conformance.npu_impl.tiling import TilingPlan
from conformance.npu_impl.variants import DEFAULT_VARIANT, VARIANTS
from conformance.records import Direction, Hazard, TilePlan

MAX_RANK = 8  # OP_CHECK_MAX_DIM in aclnn_leaky_relu.cpp / aclnn_leaky_relu_backward.cpp

__all__ = ["leaky_relu", "leaky_relu_backward", "HostValidationError", "KernelResult", "ForwardResult",
           "BackwardResult", "PROFILES", "VARIANTS", "supported_pairs"]


@dataclass(frozen=True)
class KernelResult:
    """One launch: the output tensor, the ``TilingPlan``, the recorded hazards and the plan's ``TilePlan`` record."""

    value: np.ndarray
    plan: TilingPlan
    hazards: Sequence[Hazard]  # a :class:`conformance.records.Hazards`, or () when there are none
    tile_plan: TilePlan


@dataclass(frozen=True)
class ForwardResult(KernelResult):
    @property
    def y(self) -> np.ndarray:
        return self.value


@dataclass(frozen=True)
class BackwardResult(KernelResult):
    @property
    def dx(self) -> np.ndarray:
        return self.value


def _fail(message: str) -> HostValidationError:
    return HostValidationError(message)


def _check_alpha(alpha: float) -> float:
    """The slope as a float: any value, +/-inf and NaN included, as aclnn computes them."""
    try:
        return float(alpha)
    except (TypeError, ValueError):
        raise _fail(f"alpha must be a number, got {alpha!r}") from None


def _check_arrays(arrays: Sequence[np.ndarray]) -> None:
    for a in arrays:
        if not isinstance(a, np.ndarray):
            raise _fail(f"expected numpy arrays, got {type(a).__name__}")
        if a.ndim > MAX_RANK:
            raise _fail(f"the rank of the input must be at most {MAX_RANK}, got {a.ndim} "
                        f"(aclnn OP_CHECK_MAX_DIM)")


def promote_type(a: DTypeInfo, b: DTypeInfo) -> DTypeInfo:
    """``PromoteType``: the wider float; float16 with bfloat16 promotes to float32 (torch's table)."""
    if a == b:
        return a
    if {a.name, b.name} == {"float16", "bfloat16"}:
        return info("float32")
    return a if a.bits > b.bits else b


def broadcast_shape(dy: np.ndarray, x: np.ndarray) -> tuple[int, ...]:
    """The shape both inputs broadcast to, or the rejection ``OP_CHECK_BROADCAST_AND_INFER_SHAPE`` makes."""
    try:
        return tuple(np.broadcast_shapes(dy.shape, x.shape))
    except ValueError:
        raise _fail(f"gradOutput {dy.shape} and self {x.shape} cannot broadcast to one shape "
                    "(aclnn OP_CHECK_BROADCAST_AND_INFER_SHAPE)") from None


def _host_inputs(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The kernel's inputs: the backward's promoted (``l0op::Cast``, exact: it only widens) and
    broadcast to one shape; DOUBLE runs on AICPU (:class:`Unsupported`)."""
    _check_arrays(arrays)
    try:
        dtypes = [info(a.dtype) for a in arrays]
    except ValueError as exc:
        raise _fail(str(exc)) from None
    common = dtypes[0] if len(arrays) == 1 else promote_type(dtypes[0], dtypes[1])
    if common.name == "float64":
        raise Unsupported("float64 (DOUBLE) LeakyRelu runs on AICPU, not the emulated AICore kernel")
    if len(arrays) == 1:
        return list(arrays)
    shape = broadcast_shape(arrays[0], arrays[1])
    return [np.broadcast_to(a.astype(common.dtype, copy=False), shape) for a in arrays]


def _build(direction: Direction, arrays: Sequence[np.ndarray], *, profile: Optional[str],
           variant: Optional[str], out_dtype: Optional[DTypeLike]) -> KernelSpec:
    src = arrays[0].dtype
    try:
        if out_dtype is not None and info(out_dtype).name == "float64":
            raise Unsupported("a DOUBLE output is a cast to float64 after the kernel, not emulated here")
        return build_spec(direction, src, src if out_dtype is None else out_dtype, profile=profile,
                          variant=variant)
    except ValueError as exc:
        raise _fail(str(exc)) from None


def _check_cores(prof: ChipProfile, cores: Optional[int]) -> int:
    if cores is None:
        return prof.vector_cores
    if isinstance(cores, bool) or not isinstance(cores, (int, np.integer)) or not 1 <= cores <= prof.vector_cores:
        raise _fail(f"cores must be an integer in 1..{prof.vector_cores} on {prof.name}, got {cores!r}")
    return int(cores)


def _check_inplace(arrays: Sequence[np.ndarray], src: DTypeInfo, out: DTypeInfo) -> None:
    if src != out:
        raise _fail(f"in-place needs the output dtype to equal the input's, got {src.name}->{out.name}")
    if not arrays[0].flags.writeable:
        raise _fail("in-place needs a writeable input array")


def _run(direction: Direction, arrays: Sequence[np.ndarray], alpha: float, *, profile: Optional[str],
         variant: Optional[str], out_dtype: Optional[DTypeLike], cores: Optional[int],
         inplace: bool, self_is_result: bool = False) -> KernelResult:
    """Validate like the host, plan, launch, and collect the output and hazards."""
    arrays = _host_inputs(arrays)
    spec = _build(direction, arrays, profile=profile, variant=variant, out_dtype=out_dtype)
    a = _check_alpha(alpha)
    if self_is_result and a < 0:  # -0.0 and NaN pass this check, as in aclnn
        raise _fail(f"backward from the forward result needs alpha >= 0, got {a!r} "
                    "(aclnn rejects selfIsResult with a negative slope)")
    n_cores = _check_cores(spec.profile, cores)
    if inplace:
        _check_inplace(arrays, spec.src, spec.out)
    slope = a if spec.variant.slope is None else spec.variant.slope
    return _execute(replace(spec, slope=slope), arrays, cores=n_cores, inplace=inplace)


def _execute(spec: KernelSpec, arrays: Sequence[np.ndarray], *, cores: int, inplace: bool) -> KernelResult:
    """Launch into a fresh output tensor; in-place copies it back over the input (``ViewCopy``)."""
    flat = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    plan = plan_for(flat[0].size, spec, cores=cores)
    if flat[0].size == 0:  # aclnn returns at once for an empty tensor
        value = np.empty(arrays[0].shape, spec.out.dtype)
        return KernelResult(arrays[0] if inplace else value, plan, (), plan.tile_plan())
    with np.errstate(all="ignore"):  # inf/NaN/overflow are emulated on purpose
        flat_value, hazards = run(spec, plan, flat)
        value = flat_value.reshape(arrays[0].shape)
    if inplace:
        arrays[0][...] = value
        value = arrays[0]
    return KernelResult(value, plan, hazards, tile_plan_of(plan))


def leaky_relu(x: np.ndarray, alpha: float, *, profile: Optional[str] = DEFAULT_PROFILE,
               variant: Optional[str] = DEFAULT_VARIANT, out_dtype: Optional[DTypeLike] = None,
               cores: Optional[int] = None, inplace: bool = False) -> ForwardResult:
    """``y = x > 0 ? x : alpha*x`` on the emulated chip (``inplace`` writes y over x)."""
    run = _run("forward", [x], alpha, profile=profile, variant=variant, out_dtype=out_dtype,
               cores=cores, inplace=inplace)
    return ForwardResult(**vars(run))


def leaky_relu_backward(dy: np.ndarray, x: np.ndarray, alpha: float, *,
                        profile: Optional[str] = DEFAULT_PROFILE, variant: Optional[str] = DEFAULT_VARIANT,
                        out_dtype: Optional[DTypeLike] = None, cores: Optional[int] = None,
                        self_is_result: bool = False) -> BackwardResult:
    """``dx = x > 0 ? dy : alpha*dy`` (``self_is_result``: ``x`` is the forward output).

    aclnn has no in-place backward (``aclnn_leaky_relu_backward.h`` declares none), so neither has this."""
    run = _run("backward", [dy, x], alpha, profile=profile, variant=variant, out_dtype=out_dtype,
               cores=cores, inplace=False, self_is_result=self_is_result)
    return BackwardResult(**vars(run))
