"""What one launch of the emulated kernel is built from: its spec (dtypes, slope, variant, chip)
and the window each tile moves.  ``kernel`` runs them; ``fusion`` picks how."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from conformance.dtypes import DTypeInfo, info
from conformance.npu_impl.chips import ChipProfile
from conformance.npu_impl.variants import KernelFormulation, Precision, Variant
from conformance.npu_impl.vector import CopyHow, VectorUnit
from conformance.records import Direction


@dataclass(frozen=True)
class KernelSpec:
    """What every core of one launch shares (the kernel's 'tiling data' and build)."""

    direction: Direction
    src: DTypeInfo
    out: DTypeInfo
    slope: float
    variant: Variant
    profile: ChipProfile

    @property
    def inputs(self) -> int:
        return 1 if self.direction == "forward" else 2

    @property
    def compute(self) -> DTypeInfo:
        """fp32 on the Ascend C kernel (and for bf16 on TBE, ``support_bfp16``), else the tensor dtype."""
        precision = self.variant.precision or chip_precision(self.profile, self.direction, self.src)
        return info("float32") if precision == "float32" else self.src

    @property
    def formulation(self) -> KernelFormulation:
        chosen, own = self.variant.formulation, chip_formulation(self.profile, self.direction)
        if chosen is None or (chosen in ("maxmin", "vlrelu") and self.direction == "backward"):
            return own
        return own if own == "step" else chosen  # the step backward has no select a variant could replace

    @property
    def kernel_out(self) -> DTypeInfo:
        """What the kernel writes: the input dtype; another output dtype is a separate ``l0op::Cast``."""
        return self.src

    @property
    def widened(self) -> bool:
        return self.compute != self.src or self.variant.cast_input_to is not None

    def vector_unit(self) -> VectorUnit:
        v, p = self.variant, self.profile
        return VectorUnit(float_mode=v.float_mode or p.float_mode, subnormals=v.subnormals or p.subnormals,
                          maxmin_nan=v.maxmin_nan or p.maxmin_nan, daz_dtype=self.src.name,
                          ftz_dtype=self.out.name)


def chip_precision(chip: ChipProfile, direction: Direction, src: DTypeInfo) -> Precision:
    """The compute precision of ``chip``'s own kernel for ``src`` tensors."""
    kernel = chip.forward_kernel if direction == "forward" else chip.backward_kernel
    return "float32" if kernel == "ascendc" or src.name == "bfloat16" else "native"


def chip_formulation(chip: ChipProfile, direction: Direction) -> KernelFormulation:
    """The instruction sequence of ``chip``'s own kernel in ``direction``."""
    if direction == "forward":
        return "vlrelu" if chip.forward_kernel == "tbe" else "select"
    return "step" if chip.backward_kernel == "tbe-step" else "select"


@dataclass(frozen=True)
class Window:
    """What one tile really moves: ``copy`` elements at ``start`` (``how``), ``compute`` lanes.

    ``last_block`` is the shifted-back final copy of an unaligned tail without
    DataCopyPad: ``(gm_start, ub_lane, elements)``, a whole block ending exactly
    at the tensor's end and overlapping elements this tile already holds.
    """

    start: int
    copy: int
    compute: int
    how: CopyHow
    last_block: Optional[tuple[int, int, int]] = None
