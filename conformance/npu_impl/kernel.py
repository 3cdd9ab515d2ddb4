"""The LeakyRelu kernel in Ascend C's shape: Init, then Process (CopyIn / Compute / CopyOut).

Each core runs one :class:`LeakyReluKernel` over its tiles with two buffers per
queue: tile ``i + 1`` is copied in before tile ``i`` is copied out, which is
what double buffering allows (ping-pong slot ``i & 1``).  Cores run round-robin,
one tile per turn, highest core id first within a turn, so a late overlapping
write lands on top of a neighbour's.

Formulations: ``select`` (Compare + Select, ops-nn arch35 and the TBE v200+
backward), ``maxmin`` (``max(x,0) + alpha*min(x,0)``), ``vlrelu`` (the LeakyRelu
instruction, the TBE forward), ``step`` (the TBE pre-v200 backward: a step function
of x times dy) and ``mask-multiply`` (a seeded defect).  ``maxmin`` and ``vlrelu`` are
forward-only rules; backward uses the chip's backward for them.  The chip profile
picks the kernel (``forward_kernel``/``backward_kernel``) and its compute dtype; a
variant overrides what it seeds.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Literal, Optional, Union

import numpy as np

from conformance.dtypes import DTypeLike, info
from conformance.npu_impl.chips import BUFFER_NUM, ChipProfile, get_profile, supported_pairs
from conformance.npu_impl.fusion import fusion_for, lanes_for, run_launch, run_tile
from conformance.npu_impl.memory import GmInput, GmTensor, UbArena
from conformance.npu_impl.spec import KernelSpec, Window
from conformance.npu_impl.tiling import ComputeParams, CoreRange, Tile, TilingPlan, UbBuffer, make_plan
from conformance.npu_impl.variants import Variant, get_variant
from conformance.npu_impl.vector import RoundMode, VectorUnit, copy_in, copy_out
from conformance.records import Direction, Hazard, TilePlan

if TYPE_CHECKING:
    from conformance.npu_impl.compiled import Lanes

Gm = Union[GmInput, GmTensor]
Temps = dict[str, np.ndarray]


_TEMPS: dict[str, tuple[tuple[str, str], ...]] = {
    "select": (("mask", "bool"), ("prod", "compute")),
    "maxmin": (("t0", "compute"), ("t1", "compute")),
    "vlrelu": (),
    "step": (("r", "compute"), ("t", "compute")),
    "mask-multiply": (("mask", "bool"), ("m", "compute"), ("om", "compute"),
                      ("t0", "compute"), ("t1", "compute")),
}


_OPS = {"select": 3, "maxmin": 4, "vlrelu": 1, "step": 7, "mask-multiply": 9}  # step: plus one Muls per lift (_STEP)


def buffer_spec(spec: KernelSpec) -> tuple[UbBuffer, ...]:
    """Every tile-sized UB buffer the kernel allocates in Init: the queues and the cast results.

    The formulation's intermediates (masks, products) live in vector registers
    (``MicroAPI::RegTensor``/``MaskReg`` in ops-nn ``op_kernel/arch35/leaky_relu_dag.h``),
    so they take no UB and do not count in the tiling's ``BufferNum``."""
    c = spec.compute.name
    bufs = [UbBuffer(f"in{i}", spec.src.name, BUFFER_NUM) for i in range(spec.inputs)]
    bufs.append(UbBuffer("out", spec.kernel_out.name, BUFFER_NUM))
    if spec.variant.cast_input_to:
        bufs += [UbBuffer(f"narrow{i}", spec.variant.cast_input_to) for i in range(spec.inputs)]
    if spec.widened:
        bufs += [UbBuffer(f"wide{i}", c) for i in range(spec.inputs)]
    if spec.compute != spec.kernel_out:
        bufs.append(UbBuffer("result", c))
    return tuple(bufs)


def register_temps(spec: KernelSpec) -> tuple[UbBuffer, ...]:
    """The formulation's intermediates, held in vector registers (one tile's worth each)."""
    c = spec.compute.name
    return tuple(UbBuffer(name, c if kind == "compute" else "bool") for name, kind in _TEMPS[spec.formulation])


def compute_params(spec: KernelSpec) -> ComputeParams:
    """The DAG's tiling inputs: forward fp32 gives BufferNum 4 (in, out, ping-pong) and fp16/bf16
    6 (plus the fp32 cast results), maxDtypeBits 32 (opbase ``DoTiling``, ops-nn
    ``op_host/arch35/leaky_relu_tiling_arch35.cpp``).  The backward runs ``BroadcastBaseTiling``;
    its plan here is assumed to be the same elementwise one over its own buffers."""
    return ComputeParams.of(buffer_spec(spec), gm_bits=(spec.src.bits, spec.kernel_out.bits))


def vector_ops(spec: KernelSpec) -> int:
    """Vector instructions per element (casts included), for the roofline estimate."""
    casts = spec.inputs * (spec.widened + (spec.variant.cast_input_to is not None))
    lifts = len(_STEP[spec.compute.name][1]) if spec.formulation == "step" else 0
    return _OPS[spec.formulation] + lifts + casts + (spec.compute != spec.kernel_out)


def build_spec(direction: Direction, src: DTypeLike, out: DTypeLike, *, profile: Optional[str] = None,
               variant: Optional[str] = None, slope: float = 0.0, check_pair: bool = True) -> KernelSpec:
    """One kernel build (default: the reference kernel on the default chip).  ValueError, with
    the choices, for an unknown profile, variant or dtype, or (with ``check_pair``) a pair the
    chip does not run; without it the spec only sizes a plan, e.g. for other backends' shapes."""
    chip, build = get_profile(profile), get_variant(variant)
    s, o = info(src), info(out)
    pairs = supported_pairs(chip)
    if check_pair and (s.name, o.name) not in pairs:
        raise ValueError(f"{s.name}->{o.name} is not supported by the LeakyRelu kernel on {chip.name}; "
                         f"supported: {', '.join(f'{a}->{b}' for a, b in sorted(pairs))}")
    return KernelSpec(direction, s, o, slope, build, chip)


_PLANS: dict[tuple[object, ...], tuple[ChipProfile, TilingPlan]] = {}
_TILE_PLANS: dict[int, tuple[TilingPlan, TilePlan]] = {}
_CACHE_SIZE = 64


def plan_for(numel: int, spec: KernelSpec, *, cores: Optional[int] = None,
             usable_fraction: Optional[float] = None) -> TilingPlan:
    """The tiling plan this kernel build uses for ``numel`` elements (built once per shape and build)."""
    params, itemsizes = compute_params(spec), (spec.src.bits // 8, spec.kernel_out.bits // 8)
    key = (numel, id(spec.profile), params, itemsizes, cores, usable_fraction, spec.variant.split)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is spec.profile:
        return hit[1]
    plan = make_plan(numel, profile=spec.profile, params=params, gm_itemsizes=itemsizes, cores=cores,
                     usable_fraction=usable_fraction, split=spec.variant.split)
    if len(_PLANS) >= _CACHE_SIZE:
        _PLANS.clear()
    _PLANS[key] = (spec.profile, plan)
    return plan


def tile_plan_of(plan: TilingPlan) -> TilePlan:
    """``plan.tile_plan()``, built once per plan."""
    hit = _TILE_PLANS.get(id(plan))
    if hit is not None and hit[0] is plan:
        return hit[1]
    if len(_TILE_PLANS) >= _CACHE_SIZE:
        _TILE_PLANS.clear()
    _TILE_PLANS[id(plan)] = (plan, plan.tile_plan())
    return _TILE_PLANS[id(plan)][1]


# ---------------------------------------------------------------------------- formulations
Rule = Literal["GT", "GE"]
FormulationFn = Callable[[VectorUnit, np.ndarray, np.ndarray, np.ndarray, float, Temps, int, Rule], None]


def _select(vec: VectorUnit, dst: np.ndarray, v: np.ndarray, g: np.ndarray, slope: float,
            tmp: Temps, n: int, rule: Rule) -> None:
    """dst = g > 0 ? v : slope * v  (Compare + Muls + Select)."""
    vec.compare_scalar(tmp["mask"], g, 0.0, mode=rule, count=n)
    vec.muls(tmp["prod"], v, slope, n)
    vec.select(dst, tmp["mask"], v, tmp["prod"], n)


def _maxmin(vec: VectorUnit, dst: np.ndarray, v: np.ndarray, g: np.ndarray, slope: float,
            tmp: Temps, n: int, rule: Rule) -> None:
    """dst = max(v, 0) + slope * min(v, 0)  (the TBE formulation)."""
    vec.maxs(tmp["t0"], v, 0.0, n)
    vec.mins(tmp["t1"], v, 0.0, n)
    vec.muls(tmp["t1"], tmp["t1"], slope, n)
    vec.add(dst, tmp["t0"], tmp["t1"], n)


def _vlrelu(vec: VectorUnit, dst: np.ndarray, v: np.ndarray, g: np.ndarray, slope: float,
            tmp: Temps, n: int, rule: Rule) -> None:
    """dst = LeakyRelu(v, T(slope))  (the instruction)."""
    vec.leaky_relu(dst, v, slope, n)


# The TBE pre-v200 backward's constants per dtype: (the clamp, the multipliers that lift it to 1).
_STEP = {"float32": (2.0 ** -126, (2.0 ** 38, 2.0 ** 44, 2.0 ** 44)),
         "float16": (2.0 ** -24, (2.0 ** 12, 2.0 ** 12))}


def _step(vec: VectorUnit, dst: np.ndarray, v: np.ndarray, g: np.ndarray, slope: float,
          tmp: Temps, n: int, rule: Rule) -> None:
    """dst = v * (|r - 1| * slope + r), r = max(min(g, tiny), 0) * 1/tiny: 1 for g >= tiny, 0 for
    g <= 0, a fraction for 0 < g < tiny (a positive fp32 subnormal); every op rounds in its dtype."""
    tiny, lifts = _STEP[dst.dtype.name]
    r, t = tmp["r"], tmp["t"]
    vec.mins(r, g, tiny, n)
    vec.maxs(r, r, 0.0, n)
    for lift in lifts:
        vec.muls(r, r, lift, n)
    vec.adds(t, r, -1.0, n)
    vec.abs(t, t, n)
    vec.muls(t, t, slope, n)
    vec.add(t, t, r, n)
    vec.mul(dst, v, t, n)


def _mask_multiply(vec: VectorUnit, dst: np.ndarray, v: np.ndarray, g: np.ndarray, slope: float,
                   tmp: Temps, n: int, rule: Rule) -> None:
    """dst = v*m + (slope*v)*(1-m) with m = (g > 0) as 1.0/0.0."""
    vec.compare_scalar(tmp["mask"], g, 0.0, mode=rule, count=n)
    vec.duplicate(tmp["t0"], 1.0, n)
    vec.duplicate(tmp["t1"], 0.0, n)
    vec.select(tmp["m"], tmp["mask"], tmp["t0"], tmp["t1"], n)
    vec.select(tmp["om"], tmp["mask"], tmp["t1"], tmp["t0"], n)
    vec.mul(tmp["t0"], v, tmp["m"], n)
    vec.muls(tmp["t1"], v, slope, n)
    vec.mul(tmp["t1"], tmp["t1"], tmp["om"], n)
    vec.add(dst, tmp["t0"], tmp["t1"], n)


FORMULATIONS: dict[str, FormulationFn] = {
    "select": _select, "maxmin": _maxmin, "vlrelu": _vlrelu, "step": _step, "mask-multiply": _mask_multiply}


# ---------------------------------------------------------------------------- tile windows
def exact_window(tile: Tile, *, plan: TilingPlan, has_pad: bool) -> Window:
    """A tile copied at its real length: aligned DataCopy, DataCopyPad, shifted last block or scalar."""
    align, end = plan.align_elements, tile.start + tile.length
    if tile.length % align == 0:
        return Window(tile.start, tile.length, tile.length, "block")
    if has_pad:
        return Window(tile.start, tile.length, tile.length, "pad")
    if plan.numel < align:  # less than one block in the whole tensor: scalar GetValue/SetValue
        return Window(tile.start, tile.length, tile.length, "scalar")
    if tile.length < align:  # the block reaches back into this core's previous tile
        return Window(end - align, align, align, "block")
    bulk = tile.length // align * align
    return Window(tile.start, bulk, tile.length, "block", last_block=(end - align, tile.length - align, align))


def tile_windows(core: CoreRange, *, plan: TilingPlan, variant: Variant, has_pad: bool) -> list[Window]:
    """The windows one core processes, with the variant's tail and split defects applied."""
    windows = []
    final_core = core.start + core.length == plan.numel
    for i, tile in enumerate(core.tiles):
        tensor_tail = final_core and i == len(core.tiles) - 1 and tile.length < plan.tile_elements
        if tensor_tail and variant.tail == "dropped":
            continue
        if tensor_tail and variant.tail == "overrun":
            windows.append(Window(tile.start, plan.tile_elements, plan.tile_elements, "block"))
        elif variant.split == "even":
            windows.append(Window(tile.start, tile.length, tile.length, "block"))
        else:
            windows.append(exact_window(tile, plan=plan, has_pad=has_pad))
    return windows


# ---------------------------------------------------------------------------- the kernel
class LeakyReluKernel:
    """One core's kernel instance: ``init()`` then iterate ``process()`` (one step per tile)."""

    def __init__(self, core: CoreRange, *, spec: KernelSpec, plan: TilingPlan,
                 inputs: tuple[Gm, ...], output: GmTensor, lanes: Optional[Lanes] = None):
        self.core, self.spec, self.plan = core, spec, plan
        self.inputs, self.output, self.lanes = inputs, output, lanes
        self.vec = spec.vector_unit()
        self.buf: dict[str, list[np.ndarray]] = {}
        self.temps: Temps = {}

    def init(self) -> None:
        """Init: carve the queues and temporaries out of this core's UB."""
        ub = UbArena(self.spec.profile.ub_usable_bytes)
        for b in buffer_spec(self.spec):
            self.buf[b.name] = [ub.alloc(_np(b.dtype), self.plan.tile_elements, name=f"{b.name}[{k}]")
                                for k in range(b.count)]
        self.temps = {name: bufs[0] for name, bufs in self.buf.items()}
        for reg in register_temps(self.spec):
            self.temps[reg.name] = np.empty(self.plan.tile_elements, dtype=_np(reg.dtype))

    def process(self) -> Iterator[None]:
        """Process: CopyIn(i+1) overlaps Compute(i) and CopyOut(i) (two buffers per queue)."""
        windows = tile_windows(self.core, plan=self.plan, variant=self.spec.variant,
                               has_pad=self.spec.profile.has_datacopy_pad)
        if windows:
            self.copy_in(0, windows[0])
        for i, window in enumerate(windows):
            if i + 1 < len(windows):
                self.copy_in((i + 1) % BUFFER_NUM, windows[i + 1])
            self.compute(i % BUFFER_NUM, window)
            self.copy_out(i % BUFFER_NUM, window)
            yield

    def copy_in(self, slot: int, w: Window) -> None:
        """CopyIn: GM -> the input queues' ``slot`` (and the shifted last block, if any)."""
        pad = self.spec.profile.has_datacopy_pad
        for i, gm in enumerate(self.inputs):
            ub = self.buf[f"in{i}"][slot]
            copy_in(ub, gm, w.start, w.copy, how=w.how, has_pad=pad)
            if w.last_block:
                start, lane, count = w.last_block
                copy_in(ub[lane:], gm, start, count, how="block", has_pad=pad)

    def copy_out(self, slot: int, w: Window) -> None:
        """CopyOut: the output queue's ``slot`` -> GM (the last block shifted back, if any)."""
        pad, ub, core = self.spec.profile.has_datacopy_pad, self.buf["out"][slot], self.core.core
        copy_out(self.output, w.start, ub, w.copy, core=core, how=w.how, has_pad=pad)
        if w.last_block:
            start, lane, count = w.last_block
            copy_out(self.output, start, ub[lane:], count, core=core, how="block", has_pad=pad)

    def compute(self, slot: int, w: Window) -> None:
        """Compute: widen, apply the formulation, cast the result back (RINT); in one compiled
        loop when the kernel has lanes (``fusion``), unless a lane needs the instructions."""
        n = w.compute
        ins = [self.buf[f"in{i}"][slot][:n] for i in range(self.spec.inputs)]
        if self.lanes is None or not run_tile(ins[0], ins[-1], self.buf["out"][slot][:n], self.lanes):
            self.instructions(slot, n)

    def instructions(self, slot: int, n: int) -> None:
        """Compute as the vector unit's instructions, one by one over the tile."""
        spec = self.spec
        wide = [self._widen(i, slot, n) for i in range(spec.inputs)]
        out = self.buf["out"][slot]
        result = out if spec.compute == spec.kernel_out else self.buf["result"][0]
        FORMULATIONS[spec.formulation](self.vec, result, wide[0], wide[-1], spec.slope, self.temps, n,
                                       spec.variant.compare_mode)
        if result is not out:
            self.vec.cast(out, result, mode=RoundMode.RINT, count=n)

    def _widen(self, i: int, slot: int, n: int) -> np.ndarray:
        """Input ``i`` in the compute dtype (through the narrowing cast when the variant has one)."""
        lanes = self.buf[f"in{i}"][slot]
        if self.spec.variant.cast_input_to:
            self.vec.cast(self.buf[f"narrow{i}"][0], lanes, mode=RoundMode.RINT, count=n)
            lanes = self.buf[f"narrow{i}"][0]
        if lanes.dtype != self.spec.compute.dtype:
            self.vec.cast(self.buf[f"wide{i}"][0], lanes, mode=RoundMode.NONE, count=n)
            lanes = self.buf[f"wide{i}"][0]
        return lanes


def _np(dtype: str) -> np.dtype:
    return np.dtype(np.bool_) if dtype == "bool" else info(dtype).dtype


def launch(spec: KernelSpec, plan: TilingPlan, *, inputs: tuple[Gm, ...], output: GmTensor,
           lanes: Optional[Lanes] = None) -> None:
    """Run every core's kernel: Init on all, then round-robin tiles, highest core first."""
    kernels = [LeakyReluKernel(core, spec=spec, plan=plan, inputs=inputs, output=output, lanes=lanes)
               for core in plan.cores]
    for kernel in kernels:
        kernel.init()
    running = [kernel.process() for kernel in reversed(kernels)]
    while running:
        running = [proc for proc in running if next(proc, StopIteration) is not StopIteration]


def run(spec: KernelSpec, plan: TilingPlan, inputs: Sequence[np.ndarray]) -> tuple[np.ndarray, Sequence[Hazard]]:
    """The launch's output (flat, in the output dtype, after the host's cast) and its hazards:
    one compiled loop, the emulated launch with compiled tiles, or the instructions (``fusion``)."""
    has_pad = spec.profile.has_datacopy_pad
    level = fusion_for(spec, plan, windows=partial(tile_windows, plan=plan, variant=spec.variant, has_pad=has_pad),
                       ub_bytes=sum(b.bytes_for(plan.tile_elements) for b in buffer_spec(spec)))
    if level == "launch":
        value = run_launch(spec, tuple(inputs))
        if value is not None:
            return value, ()
    zone = plan.tile_elements + plan.align_elements
    output = GmTensor(plan.numel, spec.kernel_out.dtype, red_zone=zone)
    gm = tuple(GmInput(a, red_zone=zone) for a in inputs)
    lanes = None if level == "instructions" else lanes_for(spec, whole=False)
    launch(spec, plan, inputs=gm, output=output, lanes=lanes)
    return cast_output(output.body, spec), output.hazards()


def cast_output(values: np.ndarray, spec: KernelSpec) -> np.ndarray:
    """The kernel's output (in the input dtype) converted to the requested dtype by a separate
    ``l0op::Cast``, as aclnn does after the kernel; its rounding is assumed round-to-nearest-even
    (RINT; ops-nn does not state it) and it saturates in saturation mode like every vector op."""
    if spec.out == spec.kernel_out:
        return values
    out = np.empty(values.size, spec.out.dtype)
    spec.vector_unit().cast(out, values.reshape(-1), mode=RoundMode.RINT, count=values.size)
    return out

