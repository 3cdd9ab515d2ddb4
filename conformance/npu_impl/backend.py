"""The ``cann`` backend: the emulated kernel behind the :class:`conformance.backends.Backend` protocol."""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Optional

import numpy as np

from conformance.backends import BackendBase
from conformance.dtypes import info
from conformance.errors import Unsupported
from conformance.npu_impl import (
    PROFILES,
    VARIANTS,
    HostValidationError,
    leaky_relu,
    leaky_relu_backward,
    supported_pairs,
)
from conformance.npu_impl.chips import get_profile
from conformance.npu_impl.variants import get_variant
from conformance.records import BackendResult, Direction

_ANNOUNCED: set[str] = set()


class CannBackend(BackendBase):
    """The emulated CANN LeakyRelu kernel on one chip profile, built as one variant."""

    name = "cann"
    default_suite = True
    profiles = tuple(PROFILES)
    variants = tuple(VARIANTS)
    extra_pairs = (("float32", "float16"), ("float32", "bfloat16"))

    def __init__(self, *, profile: Optional[str] = None, variant: Optional[str] = None,
                 cores: Optional[int] = None):
        chip = get_profile(profile)
        self.profile = chip.name
        self.variant = get_variant(variant).name
        self.cores = cores
        self.notes: tuple[str, ...] = (chip.aclnn_note,) if chip.aclnn_note else ()
        if chip.aclnn_note and chip.name not in _ANNOUNCED:  # once per process, on stderr
            _ANNOUNCED.add(chip.name)
            print(f"note: {chip.aclnn_note}", file=sys.stderr)

    @classmethod
    def allowed_on(cls, profile: Optional[str] = None) -> frozenset[str]:
        """What the modelled chip's own kernel shows by design (e.g. the fp16 slope of the 910B TBE
        kernel): its profile's ``allowed``, each with its source."""
        return get_profile(profile).allowed

    def __repr__(self) -> str:
        return f"CannBackend(profile={self.profile!r}, variant={self.variant!r})"

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool:
        """True for the (input, output) pairs this profile's kernel runs, either direction."""
        try:
            pair = (info(dtype).name, info(out_dtype).name)
        except ValueError:
            return False
        return direction in ("forward", "backward") and pair in supported_pairs(get_profile(self.profile))

    def skip_reason(self, dtype: str, out_dtype: str, direction: Direction) -> str:
        return f"the {self.profile} kernel has no {dtype}->{out_dtype}"

    def boundary_sizes(self, dtype: str, out_dtype: str, direction: Direction) -> tuple[int, ...]:
        """This profile's tiling plan edges: core boundaries and k*tile +/- 1."""
        from conformance.npu_impl.boundaries import boundary_sizes

        return boundary_sizes(dtype, profile=self.profile, out_dtype=out_dtype, direction=direction,
                              tiles=True)

    def _check(self, x: np.ndarray, out_dtype: Optional[str], direction: Direction) -> None:
        src = x.dtype.name
        out = src if out_dtype is None else out_dtype
        if not self.supports(src, out, direction):
            raise Unsupported(f"cann/{self.profile} has no {direction} for {x.dtype}->{out}")

    def _call(self, fn: Callable[[], object], attr: str) -> BackendResult:
        try:
            result = fn()
        except HostValidationError as exc:
            return BackendResult(value=None, rejected=str(exc), notes=self.notes)
        return BackendResult(getattr(result, attr), tile_plan=result.tile_plan, hazards=result.hazards,
                             notes=self.notes)

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        self._check(x, out_dtype, "forward")
        return self._call(lambda: leaky_relu(x, alpha, profile=self.profile, variant=self.variant,
                                             out_dtype=out_dtype, cores=self.cores), "y")

    ops = ("leaky_relu", "prelu")

    def prelu(self, direction: Direction, x: np.ndarray, weight: np.ndarray, *,
              dy: Optional[np.ndarray] = None) -> BackendResult:
        """The emulated aclnnPrelu (forward) and its backward (dx, dweight): :mod:`conformance.npu_impl.prelu`."""
        from conformance.npu_impl import prelu

        refused = prelu.check(x, weight, profile=self.profile)
        if refused is not None:
            return BackendResult(value=None, rejected=refused, notes=self.notes)
        if direction == "forward":
            plan = prelu.plan_for(x, profile=self.profile)
            return BackendResult(prelu.forward(x, weight), tile_plan=plan.tile_plan(), notes=self.notes)
        dx, dweight, plan = prelu.backward(dy, x, weight, profile=self.profile)
        return BackendResult(dx, tile_plan=plan.tile_plan(), notes=self.notes, dweight=dweight)

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        self._check(x, out_dtype, "backward")
        return self._call(lambda: leaky_relu_backward(dy, x, alpha, profile=self.profile, variant=self.variant,
                                                      out_dtype=out_dtype, cores=self.cores), "dx")
