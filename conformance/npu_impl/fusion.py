"""Where the emulator's compiled loops (``conformance.npu_impl.compiled``) may run, as data.

Three levels, each provably the same as running the instructions one by one:

- ``launch``: one loop over the whole tensor, GM to GM, the host's output cast included.
  Allowed when every window of the plan copies out exactly the lanes it computed, each
  core writes only inside its own range, the cores' writes cover the tensor, and the
  buffers fit in UB.  Then no stale UB lane, red zone, garbage or write order can show,
  there is no hazard to record, and each output element is the lanes' function of its
  input element.
- ``tile``: the emulated launch (GM, UB, ping-pong slots, copies, writer tracking), each
  tile's Compute in one loop.  Always the same as the instructions: they are lane-wise and
  the registers and cast buffers they leave behind are never read again.
- ``instructions``: the numpy path, the reference (``CONFORMANCE_COMPILED=0`` everywhere).

A variant's settings say how far it may go (:data:`FIELD_FUSION`); the plan's windows then
decide whether a ``launch`` build really is one (:func:`fusion_for`).  A lane whose NaN
payload numpy's float32 loops pick by position sends its launch to ``tile`` and its tile
to ``instructions`` (``compiled`` says which lanes).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Optional, Union

import numpy as np

from conformance import jit
from conformance.dtypes import info, to_bits
from conformance.npu_impl.vector import moved_elements, scalar_as

if TYPE_CHECKING:
    from conformance.npu_impl.compiled import Lanes
    from conformance.npu_impl.spec import KernelSpec, Window
    from conformance.npu_impl.tiling import CoreRange, TilingPlan
    from conformance.npu_impl.variants import Variant

Fusion = Literal["instructions", "tile", "launch"]
WindowsOf = Callable[["CoreRange"], Sequence["Window"]]
_ORDER: tuple[Fusion, ...] = ("instructions", "tile", "launch")

#: How far each Variant setting lets the compiled path fuse.  A setting missing here, or a
#: value missing under it, keeps the instruction path (a new setting must be classified).
FIELD_FUSION: Mapping[str, Union[Fusion, Mapping[object, Fusion]]] = {
    # what the build is called and where selftest looks for it: nothing computed
    "name": "launch", "description": "launch", "expected": "launch", "directions": "launch",
    "dtypes": "launch", "semantics": "launch",
    # each lane's instructions, modes and scalars: the compiled lanes run them one by one
    "formulation": "launch", "precision": "launch", "slope": "launch", "grad_rule": "launch",
    "cast_input_to": "launch", "float_mode": "launch", "subnormals": "launch", "maxmin_nan": "launch",
    # where the values land: the copies, the UB and the writer tracking must stay
    "tail": {"exact": "launch", "overrun": "tile", "dropped": "tile"},
    "split": {"aligned": "launch", "even": "tile"},
}
_STEP_CONSTANTS = {"float32": (2.0 ** -126, (2.0 ** 38, 2.0 ** 44, 2.0 ** 44)),
                   "float16": (2.0 ** -24, (2.0 ** 12, 2.0 ** 12))}  # as kernel._STEP


def variant_fusion(variant: Variant) -> Fusion:
    """The furthest ``variant``'s settings let the compiled path fuse (:data:`FIELD_FUSION`)."""
    level = _ORDER.index("launch")
    for name, value in vars(variant).items():
        rule = FIELD_FUSION.get(name, "instructions")
        allowed = rule if isinstance(rule, str) else rule.get(value, "instructions")
        level = min(level, _ORDER.index(allowed))
    return _ORDER[level]


def fusion_for(spec: KernelSpec, plan: TilingPlan, *, windows: WindowsOf, ub_bytes: int) -> Fusion:
    """How this launch runs: its variant's level, ``launch`` only where the plan allows it
    (``windows``: each core's tile windows; ``ub_bytes``: what Init allocates in UB)."""
    if not jit.enabled() or lanes_for(spec, whole=False) is None:
        return "instructions"
    level = variant_fusion(spec.variant)
    if level == "launch" and not _launch_allowed(spec, plan, windows=windows, ub_bytes=ub_bytes):
        return "tile"
    return level


def lanes_for(spec: KernelSpec, *, whole: bool) -> Optional[Lanes]:
    """The compiled lane program of ``spec`` (``whole``: the host's output cast too), or None
    where the lanes do not compute it (then the instructions run, and raise where they do)."""
    from conformance.npu_impl.compiled import FORMULATION_IDS, KINDS, Lanes

    narrow = spec.variant.cast_input_to
    names = (spec.src.name, spec.compute.name, spec.kernel_out.name, spec.out.name, narrow or "float32")
    if not set(names) <= KINDS.keys() or (spec.formulation == "step" and spec.compute.name not in _STEP_CONSTANTS):
        return None
    unit, c = spec.vector_unit(), spec.compute.dtype
    tiny, lifts = _STEP_CONSTANTS.get(spec.compute.name, (0.0, ()))
    lift = [np.float32(scalar_as(v, c)) for v in (*lifts, 1.0, 1.0, 1.0)][:3]
    daz = unit.daz_dtype or spec.compute.name
    return Lanes(KINDS[spec.src.name], KINDS[narrow] if narrow else -1, KINDS[spec.compute.name],
                 KINDS[spec.kernel_out.name], KINDS[spec.out.name if whole else spec.kernel_out.name],
                 FORMULATION_IDS[spec.formulation], spec.variant.compare_mode == "GE",
                 unit.float_mode == "saturation", unit.subnormals == "flush", unit.maxmin_nan == "number",
                 KINDS.get(unit.ftz_dtype or "", -1), float(info(daz).smallest_normal),
                 np.float32(scalar_as(spec.slope, c)), np.float32(scalar_as(tiny, c)), *lift, len(lifts))


def run_tile(v: np.ndarray, g: np.ndarray, sink: np.ndarray, lanes: Lanes) -> bool:
    """One tile's Compute into ``sink``; False when a lane needs the instruction path."""
    from conformance.npu_impl.compiled import run_lanes

    return run_lanes(_flat_bits(v), _flat_bits(g), _flat_bits(sink), lanes) < 0


def run_launch(spec: KernelSpec, inputs: tuple[np.ndarray, ...]) -> Optional[np.ndarray]:
    """The whole launch and the host's output cast in one loop (see the module doc), or None
    when a lane needs the instruction path."""
    lanes = lanes_for(spec, whole=True)
    assert lanes is not None
    out = np.empty(inputs[0].size, dtype=spec.out.dtype)
    if not run_tile(inputs[0], inputs[-1], out, lanes):
        return None
    return out


def _flat_bits(a: np.ndarray) -> np.ndarray:
    """What the loops read and write: float32 as it is, a 16-bit dtype as its bits."""
    return a if a.dtype == np.float32 else to_bits(a)


# ---------------------------------------------------------------------------- is a launch one loop?
_ALLOWED: dict[tuple[object, ...], tuple[TilingPlan, bool]] = {}
_CACHE_SIZE = 64


def _launch_allowed(spec: KernelSpec, plan: TilingPlan, *, windows: WindowsOf, ub_bytes: int) -> bool:
    """:func:`launch_is_elementwise` with the buffers fitting in UB, remembered per plan
    (plans are built once per shape)."""
    key = (id(plan), spec.variant.tail, spec.variant.split, spec.profile.has_datacopy_pad,
           spec.profile.ub_usable_bytes, ub_bytes)
    hit = _ALLOWED.get(key)
    if hit is not None and hit[0] is plan:
        return hit[1]
    if len(_ALLOWED) >= _CACHE_SIZE:
        _ALLOWED.clear()
    allowed = ub_bytes <= spec.profile.ub_usable_bytes and launch_is_elementwise(spec, plan, windows=windows)
    _ALLOWED[key] = (plan, allowed)
    return allowed


def launch_is_elementwise(spec: KernelSpec, plan: TilingPlan, *, windows: WindowsOf) -> bool:
    """Every core copies out only lanes it computed from the same elements, inside its own range,
    and the cores together write every element once or more (by the same core)."""
    has_pad, itemsize = spec.profile.has_datacopy_pad, spec.kernel_out.bits // 8
    covered = 0
    for core in plan.cores:
        if core.start != covered:
            return False
        spans = [_span(w, itemsize=itemsize, has_pad=has_pad) for w in windows(core)]
        if any(s is None for s in spans) or not _covers(core, spans):  # type: ignore[arg-type]
            return False
        covered = core.start + core.length
    return covered == plan.numel


def _span(w: Window, *, itemsize: int, has_pad: bool) -> Optional[tuple[int, int]]:
    """The GM range a window writes, when each lane it writes is one it computed from that element."""
    if w.how == "pad" and not has_pad:
        return None
    moved = moved_elements(w.copy, itemsize, how=w.how, has_pad=has_pad)
    if w.last_block is None:
        return (w.start, w.start + w.compute) if moved == w.compute else None
    start, lane, count = w.last_block  # the shifted last block holds the lanes after the bulk copy
    if start != w.start + lane or not lane <= moved <= w.compute or lane + count != w.compute:
        return None
    return w.start, w.start + w.compute


def _covers(core: CoreRange, spans: list[tuple[int, int]]) -> bool:
    """The spans lie inside the core's range and cover it."""
    end, reach = core.start + core.length, core.start
    for lo, hi in sorted(spans):
        if lo < core.start or hi > end or lo > reach:
            return False
        reach = max(reach, hi)
    return reach == end
