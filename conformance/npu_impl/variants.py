"""The reference kernel and each seeded defect, as data the kernel reads.

``expected`` names the triage categories (docs/architecture.md) that prove the
defect; ``directions`` and ``dtypes`` say where it is visible.  ``dtypes``
holds input dtypes for same-dtype calls and ``"src->out"`` for cast pairs.
A variant changes only what it seeds; the rest is the chip's own kernel (the profile's
``forward_kernel``/``backward_kernel``, see :func:`chip_semantics`).  ``semantics`` is the
golden variant whose values the build computes on the Ascend C kernel (ascend950, whose
reference computes in float32, PyTorch's opmath); a defect of where values land (tails,
races) or one no golden variant models has none, and :meth:`Variant.semantics_in` says
where the golden models it.  Where a variant *is* a chip's kernel (``fp16-slope`` on the
TBE chips), or perturbs an instruction the chip's kernel model does not have, it is not
applicable there: :data:`CHIP_FITS` says so per chip, with the reason, and where a chip
shows a defect under other categories (``cast-before-compute`` in saturation mode) it says
which.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from conformance.categories import check
from conformance.npu_impl.chips import ChipProfile, FloatMode, MaxMinNan, SubnormalRule
from conformance.reference.semantics import FORWARD_ONLY, Predicate, Semantics

KernelFormulation = Literal["select", "maxmin", "vlrelu", "step", "mask-multiply"]  # instruction sequences
Precision = Literal["float32", "native"]
TailRule = Literal["exact", "overrun", "dropped"]
SplitRule = Literal["aligned", "even"]

_BOTH = ("forward", "backward")
_ALL = ("float16", "bfloat16", "float32", "float32->float16", "float32->bfloat16")
_OPMATH = Semantics(opmath="float32")  # the reference: fp16/bf16 upcast to fp32, fp32 Muls


@dataclass(frozen=True)
class Variant:
    """One kernel build: the reference or a seeded defect."""

    name: str
    description: str
    expected: tuple[str, ...]
    directions: tuple[str, ...] = _BOTH
    dtypes: tuple[str, ...] = _ALL
    formulation: Optional[KernelFormulation] = None  # None: the chip's own kernel
    precision: Optional[Precision] = None  # None: the chip's own kernel
    slope: Optional[float] = None  # a slope the host uses instead of alpha
    grad_rule: Predicate = "gt"  # the backward's compare: dy where x > 0, or where x >= 0
    tail: TailRule = "exact"
    split: SplitRule = "aligned"
    cast_input_to: Optional[str] = None
    float_mode: Optional[FloatMode] = None  # None: the profile's default mode
    subnormals: Optional[SubnormalRule] = None
    maxmin_nan: Optional[MaxMinNan] = None
    semantics: Optional[Semantics] = _OPMATH

    def __post_init__(self) -> None:
        for name in self.expected:  # selftest's expectations are registry names
            check(name)

    def __str__(self) -> str:
        return self.name

    def semantics_in(self, direction: str) -> Optional[Semantics]:
        """The golden variant this build computes in ``direction``, if the golden models it there."""
        if self.semantics is None or (direction == "backward" and self.semantics.formulation in FORWARD_ONLY):
            return None
        return self.semantics

    @property
    def compare_mode(self) -> Literal["GT", "GE"]:
        """The vector Compare mode of the backward's select (AscendC's CMPMODE names)."""
        return "GE" if self.grad_rule == "ge" else "GT"


_LIST = (
    Variant("reference", "the chip's own kernel (ascend950: fp16/bf16 upcast to fp32, Muls by fp32(alpha), "
            "Compare GT + Select, cast back RINT; TBE chips: vlrelu in the tensor dtype); exact tails "
            "(DataCopyPad or a shifted last copy)", ()),
    Variant("default-slope", "host ignores alpha and uses the CANN op default slope 0.0",
            ("alpha-mismatch",), slope=0.0, semantics=Semantics(slope=0.0, opmath="float32")),
    Variant("torch-default-slope", "host ignores alpha and uses PyTorch's default slope 0.01",
            ("alpha-mismatch",), slope=0.01, semantics=Semantics(slope=0.01, opmath="float32")),
    Variant("fp16-slope", "fp16 computed natively with the LeakyRelu instruction and fp16(alpha)",
            ("alpha-precision",), directions=("forward",), dtypes=("float16",),
            formulation="vlrelu", precision="native", semantics=Semantics(slope_dtype="float16")),
    Variant("tail-overrun", "the tensor's last, shorter tile is copied in and out at full tile length",
            ("out-of-bounds-write", "tail-block"), tail="overrun", semantics=None),
    Variant("tail-dropped", "the tensor's last, shorter tile is never processed (output keeps GM garbage)",
            ("tail-block",), tail="dropped", semantics=None),
    Variant("core-overlap", "per-core ranges deal elements evenly (n // cores, the first n % cores get one "
            "more), not 32-byte aligned; DataCopy rounds each copy up into the next core's range",
            ("write-race",), split="even", semantics=None),
    Variant("cast-before-compute", "fp32 input is cast to fp16 (RINT, no saturation) before multiplying",
            ("overflow",), dtypes=("float32", "float32->float16", "float32->bfloat16"),
            cast_input_to="float16", semantics=Semantics(opmath="float32", input_dtype="float16")),
    Variant("saturation-mode", "the kernel runs in saturation mode: NaN -> 0, +/-inf -> +/-max",
            ("saturation",), float_mode="saturation",
            semantics=Semantics(opmath="float32", saturate=True)),
    Variant("nan-swallowing-max", "max(x,0) + alpha*min(x,0) with number-preferring Max/Min: NaN -> +0 "
            "while +/-inf pass unsaturated", ("lost-nan",), directions=("forward",),
            formulation="maxmin", maxmin_nan="number", semantics=None),
    Variant("grad-at-zero-one", "backward selects dy where x >= 0, so x = +/-0 gets slope 1",
            ("grad-at-zero",), directions=("backward",), grad_rule="ge",
            semantics=Semantics(opmath="float32", grad_rule="ge")),
    Variant("mask-multiply", "x*m + alpha*x*(1-m) with m = (x > 0): inf*0 makes NaN at +/-inf",
            ("formulation", "spurious-nan"), formulation="mask-multiply",
            semantics=Semantics(opmath="float32", formulation="mask-multiply")),
    Variant("flush-subnormals", "subnormal operands read as zero and subnormal results are flushed",
            ("subnormal-flush",), subnormals="flush",
            semantics=Semantics(opmath="float32", daz=True, ftz=True)),
)
VARIANTS: dict[str, Variant] = {v.name: v for v in _LIST}
DEFAULT_VARIANT = "reference"


def chip_semantics(profile: ChipProfile, dtype: str) -> Semantics:
    """The golden variant ``profile``'s own kernel computes on ``dtype`` tensors, either direction:
    fp32 opmath on the Ascend C kernel and for bf16 (``support_bfp16``), the slope rounded to fp16
    on TBE fp16; saturation-only chips saturate.  Not modelled by it: the TBE pre-v200 backward's
    fraction at a positive fp32 subnormal x, and the zero sign the LeakyRelu instruction keeps at
    x = -0 with a negative slope."""
    saturate = profile.float_mode == "saturation"
    if profile.forward_kernel == "tbe" and dtype == "float16":
        return Semantics(slope_dtype="float16", saturate=saturate)
    return Semantics(opmath="float32", saturate=saturate)


@dataclass(frozen=True)
class ChipFit:
    """How one seeded defect meets the chips whose ``trait`` (a :class:`ChipProfile` attribute and
    its value) matches: not applicable there (``expected`` None: the variant builds the chip's own
    kernel, bit for bit, on selftest's inputs), or caught under other categories (``expected``)."""

    variant: str
    trait: tuple[str, object]
    reason: str
    expected: Optional[tuple[str, ...]] = None

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"CHIP_FITS names an unknown variant {self.variant!r}")
        for name in self.expected or ():
            check(name)

    def matches(self, profile: ChipProfile) -> bool:
        attribute, value = self.trait
        return bool(getattr(profile, attribute) == value)


_SATURATION_ONLY = ("float_modes", ("saturation",))
#: Where a seeded defect meets a chip's kernel model differently; every other (variant, chip) applies
#: as the variant says.  tests/selftest/test_fits.py proves each entry by recomputation.
CHIP_FITS: tuple[ChipFit, ...] = (
    ChipFit("fp16-slope", ("forward_kernel", "tbe"),
            "the TBE forward is tbe.vlrelu(x, fp16(alpha)) on fp16 tensors: the variant is the chip's own kernel"),
    ChipFit("saturation-mode", _SATURATION_ONLY,
            "the chip runs only in saturation mode: the variant is the chip's own kernel"),
    ChipFit("grad-at-zero-one", ("backward_kernel", "tbe-step"),
            "the pre-v200 step-function backward has no compare whose GT could become GE "
            "(x = +/-0 gives r = 0, so alpha*dy either way)"),
    ChipFit("mask-multiply", _SATURATION_ONLY,
            "saturation mode turns every op's NaN into 0, so the mask multiply's inf*0 adds 0 and the "
            "sum is the select's result; a step-function backward has no select to replace"),
    ChipFit("cast-before-compute", _SATURATION_ONLY,
            "saturation mode: the narrowing cast clamps at +/-65504 and turns NaN into 0, and no op "
            "yields inf, so overflow cannot show; the precision the narrowing loses does",
            expected=("input-precision",)),
)


def fit_on(variant: str, profile: ChipProfile) -> Optional[ChipFit]:
    """The entry of :data:`CHIP_FITS` for ``variant`` on ``profile`` (None: it applies as declared)."""
    return next((f for f in CHIP_FITS if f.variant == variant and f.matches(profile)), None)


def not_applicable(variant: str, profile: ChipProfile) -> str:
    """Why ``variant`` seeds nothing on ``profile`` ("" when it applies)."""
    fit = fit_on(variant, profile)
    return fit.reason if fit is not None and fit.expected is None else ""


def expected_on(variant: str, profile: ChipProfile) -> tuple[str, ...]:
    """The categories selftest must see for an applicable ``variant`` on ``profile``."""
    fit = fit_on(variant, profile)
    return fit.expected if fit is not None and fit.expected is not None else get_variant(variant).expected


def get_variant(name: Optional[str]) -> Variant:
    """The variant called ``name`` (None -> reference), or a ValueError naming the choices."""
    key = DEFAULT_VARIANT if name is None else name
    if key not in VARIANTS:
        raise ValueError(f"unknown variant {key!r}; choose from {', '.join(VARIANTS)}")
    return VARIANTS[key]
