"""A tile's Compute, instruction by instruction: ``kernel.vector_ops`` (the roofline's vector
instructions per element) is the number of instructions it issues (the formulation's, the input
casts and the cast of the result back to the kernel's output dtype), and like every Ascend C vector
op given a count, it writes the tile's lanes only, in every UB buffer; on every chip's own kernel
and every seeded defect in the directions and dtypes it declares."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from conformance.dtypes import info
from conformance.npu_impl.chips import PROFILES
from conformance.npu_impl.kernel import KernelSpec, LeakyReluKernel, plan_for, vector_ops
from conformance.npu_impl.variants import VARIANTS
from conformance.npu_impl.vector import VectorUnit


class CountingUnit:
    """A vector unit that counts the instructions issued to it."""

    def __init__(self, unit: VectorUnit) -> None:
        self.unit, self.issued = unit, 0

    def __getattr__(self, name: str) -> Callable[..., None]:
        op = getattr(self.unit, name)

        def issue(*args: object, **kwargs: object) -> None:
            self.issued += 1
            op(*args, **kwargs)

        return issue


def _kernel(spec: KernelSpec) -> LeakyReluKernel:
    """One core's kernel after Init, its UB holding garbage (Compute needs no GM here)."""
    plan = plan_for(64, spec)
    kernel = LeakyReluKernel(plan.cores[0], spec=spec, plan=plan, inputs=(), output=None)  # type: ignore[arg-type]
    kernel.init()
    return kernel


def issued(spec: KernelSpec) -> int:
    """Instructions one tile's Compute issues (the lanes' values do not matter here)."""
    kernel = _kernel(spec)
    counter = CountingUnit(kernel.vec)
    kernel.vec = counter  # type: ignore[assignment]
    with np.errstate(all="ignore"):
        kernel.instructions(0, 16)
    return counter.issued


def _specs(variant: str) -> list[KernelSpec]:
    v = VARIANTS[variant]
    pairs = [d.partition("->")[0] for d in v.dtypes]
    return [KernelSpec(direction, info(src), info(src), 0.2, v, profile)
            for profile in PROFILES.values() for direction in v.directions
            for src in sorted(set(pairs)) if src in profile.dtypes]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_vector_ops_is_the_instructions_a_tile_issues(variant: str) -> None:
    wrong = [(s.profile.name, s.direction, s.src.name, vector_ops(s), issued(s)) for s in _specs(variant)
             if vector_ops(s) != issued(s)]
    assert not wrong, f"(chip, direction, dtype, vector_ops, issued): {wrong}"


@pytest.mark.parametrize("profile, direction, dtype, expected", [
    ("ascend950", "forward", "float16", 5),  # cast up, Compare + Muls + Select, cast back
    ("ascend950", "forward", "float32", 3),
    ("ascend910b1", "forward", "float16", 1),  # the LeakyRelu instruction in fp16
    ("ascend910b1", "forward", "bfloat16", 3),  # cast up, LeakyRelu in fp32, cast back
    ("ascend910b1", "backward", "float16", 3),  # Compare + Muls + Select in fp16
    ("ascend950", "backward", "bfloat16", 6),  # two inputs cast up, Compare + Muls + Select, cast back
    ("ascend910a", "backward", "float32", 10),  # the step function: Mins, Maxs, 3 lifts, Adds, Abs, Muls, Add, Mul
    ("ascend910a", "backward", "float16", 9),  # the step function lifts twice in fp16
])
def test_vector_ops_by_hand(profile: str, direction: str, dtype: str, expected: int) -> None:
    spec = KernelSpec(direction, info(dtype), info(dtype), 0.2, VARIANTS["reference"], PROFILES[profile])
    assert vector_ops(spec) == expected


def _fill_distinctly(kernel: LeakyReluKernel) -> None:
    """Every UB buffer and register its own byte pattern (masks all set), so a lane an instruction
    writes from another buffer changes."""
    arrays = [b for bufs in kernel.buf.values() for b in bufs] + list(kernel.temps.values())
    for i, a in enumerate(arrays):
        if a.dtype == np.bool_:
            a[:] = True
        else:
            a.view(np.uint8)[:] = 0x11 + 7 * i


def lanes_written_past(spec: KernelSpec, n: int) -> list[str]:
    """The UB buffers whose lanes from ``n`` on one tile's Compute of ``n`` lanes changed."""
    kernel = _kernel(spec)
    _fill_distinctly(kernel)
    before = {(name, k): b.view(np.uint8).copy() for name, bufs in kernel.buf.items() for k, b in enumerate(bufs)}
    with np.errstate(all="ignore"):
        kernel.instructions(1, n)
    width = {name: bufs[0].itemsize for name, bufs in kernel.buf.items()}
    return [f"{name}[{k}]" for (name, k), old in before.items()
            if not np.array_equal(kernel.buf[name][k].view(np.uint8)[n * width[name]:], old[n * width[name]:])]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_compute_writes_only_the_tiles_lanes(variant: str) -> None:
    written = [(s.profile.name, s.direction, s.src.name, lanes_written_past(s, 21)) for s in _specs(variant)]
    wrong = [w for w in written if w[-1]]
    assert not wrong, f"(chip, direction, dtype, buffers written past lane 21): {wrong}"
