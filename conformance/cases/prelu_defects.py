"""Generated PReLU defects: a per-channel slope (random, or a framework's default), the weight on the
wrong axis, a clip of the weight to bounds, another formulation (aclnnPrelu's ``max(0,x) + w*min(0,x)``,
JAX's ``x >= 0`` select) or dweight summed in another order, planted into the exact output of a random
case: rank 1 to 5, the channel on axis 1 or the last one, float32, float16 or bfloat16.

Each case is a :class:`conformance.cases.defects.Planted` whose ``prelu`` setting holds the weight, its
axis, the compared part and the tile a dweight was summed by, so ``selftest --generated`` scores it as any
other.  The planted category of every changed element comes from the planting, never from triage; a case
whose planting changes no element is drawn again.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from conformance.cases.defects import Defect, Planted, PreluSetting
from conformance.dtypes import info, to_bits
from conformance.ops import OP_DEFAULTS
from conformance.reference import prelu, prelu_variants
from conformance.reference.defaults import default_slopes
from conformance.reference.reductions import CATALOGUE, Reduction, reduce_dweight

Part = Literal["y", "dx", "dweight"]
DTYPES = ("float32", "float16", "bfloat16")
ELEMENTS_MAX = 3000  # elements per case at most
DEFAULT_SLOPES = tuple(dict.fromkeys((*(d.slope for d in OP_DEFAULTS), *default_slopes())))


@dataclass(frozen=True)
class PreluCase:
    """What a PReLU output is computed from: x, dy (dx and dweight), the weight and its channel axis."""

    x: np.ndarray
    dy: np.ndarray
    weight: np.ndarray
    channel_axis: int

    def golden(self, part: Part, weight: Optional[np.ndarray] = None, *, axis: Optional[int] = None) -> np.ndarray:
        """The exact ``part`` under ``weight`` (default the declared one) on ``axis`` (default the channel's)."""
        w = self.weight if weight is None else weight
        at = self.channel_axis if axis is None else axis
        if part == "y":
            return prelu.forward(self.x, w, channel_axis=at)
        if part == "dx":
            return prelu.backward(self.dy, self.x, w, channel_axis=at)
        return prelu.dweight(self.dy, self.x, w, channel_axis=at)


def _shape(rng: np.random.Generator) -> tuple[tuple[int, ...], int]:
    """A shape of rank 1 to 5 of at most :data:`ELEMENTS_MAX` elements, and its channel axis (1 or the last)."""
    rank = int(rng.integers(1, 6))
    longest = {1: 200, 2: 40, 3: 12}.get(rank, 8)
    while True:
        shape = tuple(int(rng.integers(1, longest + 1)) for _ in range(rank))
        axis = prelu.channel_axis_of(rank, channel_axis=int(rng.choice([1, rank - 1])))
        if shape[axis] >= 2 and 16 <= int(np.prod(shape)) <= ELEMENTS_MAX:
            return shape, axis


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Random normal values with a few ±0 among them (where formulations differ)."""
    v = rng.normal(size=shape)
    v.reshape(-1)[rng.random(v.size) < 0.05] = 0.0
    v.reshape(-1)[rng.random(v.size) < 0.05] = -0.0
    return v.astype(info(dtype).dtype)


def _case(rng: np.random.Generator) -> PreluCase:
    shape, axis = _shape(rng)
    dtype = str(rng.choice(DTYPES))
    weight = rng.uniform(-0.5, 0.6, size=shape[axis]).astype(info(dtype).dtype)
    return PreluCase(_values(rng, shape, dtype), _values(rng, shape, dtype), weight, axis)


def _slope(rng: np.random.Generator, dtype: np.dtype) -> tuple[float, str]:
    """A wrong slope: a framework's default, or a random one, held in the weight's dtype."""
    if rng.random() < 0.5:
        slope = float(rng.choice(DEFAULT_SLOPES))
        return float(np.asarray(slope).astype(dtype)), f"a default ({slope!r})"
    slope = float(np.asarray(rng.uniform(-0.5, 0.6)).astype(dtype))
    return slope, f"a random slope ({slope!r})"


def _per_channel(rng: np.random.Generator, case: PreluCase, part: Part) -> tuple[np.ndarray, str, str]:
    """One or two channels with a wrong slope each."""
    weight = case.weight.copy()
    channels = rng.choice(weight.size, size=min(weight.size, int(rng.integers(1, 3))), replace=False)
    names = []
    for c in channels.tolist():
        weight[c], words = _slope(rng, weight.dtype)
        names.append(f"channel {c} used {words}")
    return case.golden(part, weight), "alpha-mismatch", "; ".join(names)


def _wrong_axis(rng: np.random.Generator, case: PreluCase, part: Part) -> Optional[tuple[np.ndarray, str, str]]:
    """The (C,) weight applied on another axis of length C, when the shape has one."""
    others = [k for k, n in enumerate(case.x.shape) if k != case.channel_axis and n == case.weight.size]
    if not others:
        return None
    axis = int(rng.choice(others))
    return case.golden(part, axis=axis), "alpha-mismatch", f"the weight on axis {axis}"


def _clip(rng: np.random.Generator, case: PreluCase, part: Part) -> tuple[np.ndarray, str, str]:
    """The weight clipped to bounds (seed 000's adaptive LeakyReLU: [0.01, 0.5]; or random ones)."""
    bounds = (0.01, 0.5) if rng.random() < 0.5 else tuple(sorted(rng.uniform(-0.3, 0.4, size=2)))
    lo, hi = (float(np.asarray(b).astype(case.weight.dtype)) for b in bounds)
    clipped = np.clip(case.weight.astype(np.float64), lo, hi).astype(case.weight.dtype)
    return case.golden(part, clipped), "alpha-mismatch", f"the weight clipped to [{lo!r}, {hi!r}]"


def _formulation(rng: np.random.Generator, case: PreluCase, part: Part) -> tuple[np.ndarray, str, str]:
    """aclnnPrelu's max(0,x) + w*min(0,x) (forward), or JAX's x >= 0 select (forward; dx: grad-at-zero)."""
    if part == "y" and rng.random() < 0.5:
        return (prelu.forward(case.x, case.weight, channel_axis=case.channel_axis, formulation="maxmin"),
                "formulation", "max(0,x) + w*min(0,x)")
    taken = case.x if part == "y" else case.dy
    ge = prelu_variants.select(case.x, taken, case.weight, channel_axis=case.channel_axis, predicate="ge")
    return ge, "formulation" if part == "y" else "grad-at-zero", "x >= 0 selects"


def _reduction(rng: np.random.Generator, case: PreluCase) -> tuple[np.ndarray, str, str, Optional[int]]:
    """dweight summed in another order or accumulator, per tile of a plan or not."""
    way = CATALOGUE[int(rng.integers(0, len(CATALOGUE)))]
    tile = int(rng.integers(16, 257)) if rng.random() < 0.4 else None
    if tile is not None:
        way = Reduction(way.accumulator, way.order, way.terms, tile)
    summed = reduce_dweight(case.dy, case.x, case.weight, way, channel_axis=case.channel_axis)
    return summed, "reduction-order", str(way), tile


Planter = Callable[[np.random.Generator, PreluCase, Part], Optional[tuple[np.ndarray, str, str]]]
PLANTERS: tuple[Planter, ...] = (_per_channel, _wrong_axis, _clip, _formulation)


def generate_prelu(seed: int) -> Planted:
    """One planted case of ``seed``, drawn again (same generator) until its defect changes an element."""
    rng = np.random.default_rng(seed)
    while True:
        case = _case(rng)
        made = _plant(rng, case)
        planted = None if made is None else _planted(seed, case, *made)
        if planted is not None and planted.accept:
            return planted


def _plant(rng: np.random.Generator, case: PreluCase) -> Optional[tuple]:
    """(part, golden, actual, category, name, tile) of one drawn defect, None when it does not apply."""
    kind = int(rng.integers(0, len(PLANTERS) + 1))
    if kind == len(PLANTERS):
        actual, category, name, tile = _reduction(rng, case)
        return "dweight", case.golden("dweight"), actual, category, name, tile
    part: Part = "y" if rng.random() < 0.5 else "dx"
    made = PLANTERS[kind](rng, case, part)
    return None if made is None else (part, case.golden(part), *made, None)


def _planted(seed: int, case: PreluCase, part: Part, golden: np.ndarray, actual: np.ndarray, category: str,
             name: str, tile: Optional[int]) -> Planted:
    """The generated case as every generated case is held: the elements whose bits the defect changed accept
    its category alone; a row's alpha, the weight's first element."""
    changed = np.flatnonzero(to_bits(golden).reshape(-1) != to_bits(actual).reshape(-1))
    return Planted(seed, case.x, None if part == "y" else case.dy, float(case.weight.reshape(-1)[0]),
                   "forward" if part == "y" else "backward", case.x.dtype.name, golden, actual,
                   (Defect(category, name),), {int(i): (category,) for i in changed}, None,
                   prelu=PreluSetting(case.weight, case.channel_axis, part, tile))


def cases(count: int, *, seed: int = 0) -> list[Planted]:
    """``count`` planted cases, of seeds ``seed`` onwards."""
    return [generate_prelu(s) for s in range(seed, seed + count)]
