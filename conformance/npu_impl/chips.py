"""Ascend chip profiles as data: every knob carries the source of its value.

Facts come from docs/domain.md's hardware section (CANN ``platform_config/*.ini``,
Ascend C ``kernel_utils_constants.h``, ops-nn ``activation/leaky_relu``).  Each profile names
the kernel its chip runs (``forward_kernel``, ``backward_kernel``): the ops-nn Ascend C kernel
registers only for ascend950; the others run the TBE ``leaky_relu.py`` / ``leaky_relu_grad.py``
(read from unofficial mirrors of ``ops/built-in/tbe/impl/dynamic``).
The tiling plan is opbase's elementwise formula on every profile, fed with
``ub_usable_bytes`` (what ``GetCoreMemSize(UB)`` reports) and ``vector_cores``
(``GetCoreNumAiv``); only ascend950 runs it by source, elsewhere the ``tiling``
source says it is assumed.  Semantics the sources leave open are explicit knobs whose source says
"assumed" and why; bandwidth figures are estimates and say so.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Literal

FloatMode = Literal["inf_nan", "saturation"]
SubnormalRule = Literal["keep", "flush"]
MaxMinNan = Literal["propagate", "number"]
#: ``ascendc``: ops-nn arch35 DAG (fp16/bf16 cast to fp32); ``tbe``: ``tbe.vlrelu(x, T(slope))`` in
#: the tensor dtype (bf16 through ``support_bfp16``: computed in fp32).
ForwardKernel = Literal["ascendc", "tbe"]
#: ``ascendc``: compare x, ``Muls<float>``, select; ``tbe-select``: ``vmuls(g, T(slope))``,
#: ``vcmp(x, 0, 'gt')``, ``vsel`` in the tensor dtype; ``tbe-step``: the pre-v200 step function.
BackwardKernel = Literal["ascendc", "tbe-select", "tbe-step"]

BLOCK_BYTES = 32  # DataCopy granule (docs/domain.md "Data movement")
BUFFER_NUM = 2  # double buffering: two buffers per queue
KIB = 1024

_INI_910B = "CANN platform_config/Ascend910B1.ini (docs/domain.md)"
_INI_256K = "CANN platform_config (910A/310P: 256 KiB UB, 248 KiB usable; docs/domain.md)"
_SUBNORMAL_NOTE = "assumed: sources do not say; kept (IEEE) by default, 'flush' is a knob"
_MAXMIN_NOTE = "assumed: sources do not say; NaN-propagating by default, 'number' is a knob"
_NO_BF16 = "ops-nn activation/leaky_relu/docs/aclnnLeakyRelu&aclnnInplaceLeakyRelu.md: BF16 only on 910B/950"
_ELEWISE = ("opbase src/op_common/atvoss/elewise/elewise_tiling.cpp (ElewiseTiling), "
            "pkg_inc/op_common/atvoss/elewise/elewise_tiling.h (DoTiling: bufferDivisor)")
_TILING_ASSUMED = ("assumed: the opbase elementwise formula with this chip's UB and vector cores "
                   "(its AICore LeakyRelu is a TBE kernel whose tiling is not public); " + _ELEWISE)
_TBE_MIRROR = ("unofficial mirror of CANN ops/built-in/tbe/impl/dynamic/")
_TBE_FORWARD = (_TBE_MIRROR + "leaky_relu.py: get_attr_by_cls(negative_slope, ..., dtype) then "
                "tbe.vlrelu(x, slope), so the slope is rounded to the tensor dtype; "
                "support_bfp16=True computes bf16 in fp32 (the cast back assumed round-to-nearest-even)")
_TBE_SELECT = (_TBE_MIRROR + "leaky_relu_grad.py, after_v200(): vmuls(g, T(slope)), vcmp(x, 0.0, 'gt'), "
               "vsel(cmp, g, g*slope) in the tensor dtype (bf16 via support_bfp16, in fp32)")
_TBE_STEP = (_TBE_MIRROR + "leaky_relu_grad.py, before v200: r = vmuls(vmaxs(vmins(x, 2**-126), 0), "
             "2**38 * 2**44 * 2**44) (fp16: 2**-24, 2**12 * 2**12), dx = g * (|r - 1| * slope + r)")
_NO_ACLNN_310P = ("ops-nn activation/leaky_relu/docs/aclnnLeakyRelu&aclnnInplaceLeakyRelu.md: "
                  "Atlas inference products are not supported")
_ACLNN_910B = ("ops-nn activation/leaky_relu_grad/README.md (product support table): Atlas A2/A3 "
               "training and inference products supported")
_ALPHA_PRECISION = "the TBE kernel rounds the slope to fp16 on fp16 tensors (forward_kernel, backward_kernel)"
_FIXTURE_950 = ("ops-nn activation/p_relu/tests/ut/op_host/arch35/test_p_relu_tiling.cpp "
                "(Ascend950 platform fixture; the same figure in the other arch35 tiling tests)")


@dataclass(frozen=True)
class ChipProfile:
    """One chip: UB, cores, float modes, data movement, dtypes, roofline figures."""

    name: str
    ub_bytes: int
    ub_usable_bytes: int
    vector_cores: int
    float_modes: tuple[FloatMode, ...]  # the first is the default
    has_datacopy_pad: bool
    dtypes: tuple[str, ...]
    gm_bytes_per_s: float
    vector_bytes_per_cycle: int
    clock_hz: float
    forward_kernel: ForwardKernel = "ascendc"
    backward_kernel: BackwardKernel = "ascendc"
    aclnn_supported: bool = True
    #: Triage categories the modelled kernel shows by design (the gate warns, not fails).
    allowed: frozenset[str] = frozenset()
    subnormals: SubnormalRule = "keep"
    maxmin_nan: MaxMinNan = "propagate"
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def float_mode(self) -> FloatMode:
        """The mode kernels run in unless told otherwise."""
        return self.float_modes[0]

    def source(self, knob: str) -> str:
        """Where the value of ``knob`` comes from."""
        return self.sources.get(knob, "unknown")

    @property
    def aclnn_note(self) -> str:
        """One line for a chip aclnn does not support ("" when it does)."""
        if self.aclnn_supported:
            return ""
        return (f"{self.name}: aclnnLeakyRelu does not support this chip (Atlas inference products); "
                "its rows run the best-known TBE kernel")

    def with_knobs(self, **knobs: object) -> ChipProfile:
        """A copy with some knobs changed (the sources say they were overridden)."""
        notes = {k: f"overridden to {v!r}" for k, v in knobs.items()}
        return replace(self, **knobs, sources=MappingProxyType({**self.sources, **notes}))


def _profile(name: str, sources: dict[str, str], **values: object) -> ChipProfile:
    shared = {"subnormals": _SUBNORMAL_NOTE, "maxmin_nan": _MAXMIN_NOTE,
              "vector_bytes_per_cycle": "assumed: 256 B per vector repeat, one repeat per cycle",
              "clock_hz": "assumed: ~1.8 GHz AI core clock (not from a CANN source)"}
    merged = MappingProxyType({**shared, **sources})
    return ChipProfile(name=name, sources=merged, **values)  # type: ignore[arg-type]


PROFILES: dict[str, ChipProfile] = {
    "ascend910b1": _profile(
        "ascend910b1",
        {"ub_bytes": _INI_910B, "ub_usable_bytes": _INI_910B,
         "vector_cores": "docs/domain.md: 24 AI cores / 48 vector cores",
         "float_modes": "docs/domain.md: INF_NAN is the default on 910B (A2/A3)",
         "has_datacopy_pad": "docs/domain.md: DataCopyPad on 910B/A2 and later",
         "dtypes": "ops-nn leaky_relu_def.cpp: float16, bfloat16, float32",
         "gm_bytes_per_s": "assumed: ~1.6 TB/s HBM commonly quoted for Atlas 800T A2",
         "forward_kernel": _TBE_FORWARD, "backward_kernel": _TBE_SELECT, "aclnn": _ACLNN_910B,
         "allowed": "alpha-precision: " + _ALPHA_PRECISION,
         "tiling": _TILING_ASSUMED},
        ub_bytes=192 * KIB, ub_usable_bytes=184 * KIB, vector_cores=48,
        float_modes=("inf_nan", "saturation"), has_datacopy_pad=True,
        dtypes=("float16", "bfloat16", "float32"), gm_bytes_per_s=1.6e12,
        vector_bytes_per_cycle=256, clock_hz=1.8e9, forward_kernel="tbe", backward_kernel="tbe-select",
        allowed=frozenset({"alpha-precision"})),
}
PROFILES["ascend910b3"] = replace(
    PROFILES["ascend910b1"], name="ascend910b3", vector_cores=40,
    sources=MappingProxyType({**PROFILES["ascend910b1"].sources,
                              "vector_cores": "docs/domain.md: 910B3 has 20 AI / 40 vector cores"}))
PROFILES["ascend910a"] = _profile(
    "ascend910a",
    {"ub_bytes": _INI_256K, "ub_usable_bytes": _INI_256K,
     "vector_cores": "assumed: 32 AI cores, a vector unit in each",
     "float_modes": "docs/domain.md: 910A supports only saturation mode",
     "has_datacopy_pad": "docs/domain.md: DataCopyPad only from 910B/A2",
     "dtypes": _NO_BF16,
     "gm_bytes_per_s": "assumed: ~1.2 TB/s HBM2 quoted for Ascend 910",
     "forward_kernel": _TBE_FORWARD + " (assumed: Intrinsic_vlrelu as on 910B)",
     "backward_kernel": _TBE_STEP,
     "aclnn": ("ops-nn activation/leaky_relu_grad/README.md lists only Ascend 950 and Atlas A2/A3; "
               "for 910A, aclnn is assumed to launch the TBE kernel"),
     "allowed": "alpha-precision: " + _ALPHA_PRECISION + "; saturation: 910A runs only in saturation mode; "
                "grad-step: the step-function backward gives a positive subnormal x a fraction of dy",
     "tiling": _TILING_ASSUMED},
    ub_bytes=256 * KIB, ub_usable_bytes=248 * KIB, vector_cores=32,
    float_modes=("saturation",), has_datacopy_pad=False, dtypes=("float16", "float32"),
    gm_bytes_per_s=1.2e12, vector_bytes_per_cycle=256, clock_hz=1.8e9, forward_kernel="tbe",
    backward_kernel="tbe-step", allowed=frozenset({"alpha-precision", "saturation", "grad-step"}))
PROFILES["ascend310p3"] = replace(
    PROFILES["ascend910a"], name="ascend310p3", vector_cores=8, gm_bytes_per_s=2.048e11,
    backward_kernel="tbe-select", aclnn_supported=False, allowed=frozenset({"alpha-precision", "saturation"}),
    sources=MappingProxyType({**PROFILES["ascend910a"].sources,
                              "backward_kernel": _TBE_SELECT + " (310P is v200)",
                              "aclnn": _NO_ACLNN_310P,
                              "allowed": "alpha-precision: " + _ALPHA_PRECISION
                                         + "; saturation: 310P runs only in saturation mode",
                              "vector_cores": "assumed: 8 AI cores on 310P3 (Atlas 300I Pro)",
                              "float_modes": "docs/domain.md: 310P supports only saturation mode",
                              "dtypes": _NO_BF16,
                              "gm_bytes_per_s": "assumed: 204.8 GB/s LPDDR4X quoted for Atlas 300I Pro"}))
PROFILES["ascend950"] = replace(
    PROFILES["ascend910b1"], name="ascend950", ub_bytes=256 * KIB, ub_usable_bytes=253952,
    vector_cores=64, float_modes=("inf_nan",), forward_kernel="ascendc", backward_kernel="ascendc",
    allowed=frozenset(),
    sources=MappingProxyType({**PROFILES["ascend910b1"].sources,
                              "ub_bytes": "assumed: 256 KiB UB (arch35), not from a platform ini",
                              "ub_usable_bytes": f'"UB_SIZE": 253952 in {_FIXTURE_950}',
                              "vector_cores": f'"CORE_NUM": 64 in {_FIXTURE_950}',
                              "tiling": _ELEWISE,
                              "float_modes": "assumed: INF_NAN only",
                              "forward_kernel": "ops-nn op_kernel/arch35/leaky_relu_dag.h: cast fp32, "
                                                "Muls/Compare/Select, cast back RINT; registered only for "
                                                "ascend950 (leaky_relu_def.cpp AddConfig)",
                              "backward_kernel": "ops-nn leaky_relu_grad op_kernel/arch35 DAG: compare x GT 0 "
                                                 "in its dtype, Muls<float> on dy cast to fp32, Select, cast back",
                              "aclnn": "ops-nn activation/leaky_relu_grad/README.md: Ascend 950PR/950DT supported",
                              "allowed": "nothing: the kernel computes in fp32 opmath, as torch"}))

DEFAULT_PROFILE = "ascend910b1"


def get_profile(name: str | None) -> ChipProfile:
    """The profile called ``name`` (None -> the default), or a ValueError naming the choices."""
    key = DEFAULT_PROFILE if name is None else name
    if key not in PROFILES:
        raise ValueError(f"unknown profile {key!r}; choose from {', '.join(PROFILES)}")
    return PROFILES[key]


def block_elements(itemsize: int) -> int:
    """Elements of ``itemsize`` bytes in one 32-byte DataCopy block."""
    return BLOCK_BYTES // itemsize


def supported_pairs(profile: ChipProfile) -> frozenset[tuple[str, str]]:
    """(input, output) dtype pairs aclnn runs on ``profile``: the kernel in the input dtype, then
    ``l0op::Cast`` to any supported output dtype (aclnn_leaky_relu.cpp: self must cast to out)."""
    return frozenset((a, b) for a in profile.dtypes for b in profile.dtypes)
