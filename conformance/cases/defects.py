"""Generated defects: random cases with a defect from the catalogue planted into golden.

Each :class:`Planted` case holds inputs (any dtype pair, direction, shape, share of
zeros, NaN, infinities and subnormals), the alpha (0, above 1 and negative
included), the golden output and the defective output, and for every element the
defect changed, the categories that name it correctly (one, or two where two
stacked defects both change an element).  Defects are golden variants (another
slope, a default rounded to the dtype, a rounded slope, DAZ/FTZ, a formulation,
saturation, gradient rules, narrowed inputs) or edits (a garbled tail).
``generate(seed)`` is deterministic; triage's job is to name every planted element.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Optional

import numpy as np

from conformance.dtypes import from_bits, info
from conformance.records import TilePlan
from conformance.reference import golden as ref
from conformance.reference.defaults import default_slopes
from conformance.reference.quantized import QuantParams
from conformance.reference.semantics import EXACT, Semantics

PAIRS = sorted(ref.SUPPORTED_PAIRS)
ALPHAS = (0.0, 0.01, 0.2, 0.3, 1 / 3, 1.5, 2.0, -0.5, -0.2, 1.0)


@dataclass(frozen=True)
class Defect:
    """One planted defect: its category, a readable name, and what it does."""

    category: str
    name: str
    semantics: Semantics = EXACT  # the golden variant that plants it
    tail: int = 0  # garble the last ``tail`` elements
    block: tuple[int, int, int] = ()  # (start, stop, step): elements a stale block overwrites
    fill: str = ""  # what a stale block holds: "zeros", "previous" (the block before) or "garbage"
    shift: int = 0  # the whole output written ``shift`` elements late (negative: early), edges 0
    # categories it is never stacked with ("*": any): a formula that changes what actual/input
    # means (operands swapped, applied twice, a narrowed result) hides a second slope from
    # the slope estimate, and that pair only together reproduces any element
    excludes: frozenset = frozenset()

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class PreluSetting:
    """A PReLU case's weight, its channel axis, the compared part (``y``, ``dx`` or ``dweight``) and the tile
    of the plan its dweight was summed by (None: no plan)."""

    weight: np.ndarray
    channel_axis: int
    part: str
    tile: Optional[int] = None

    def __str__(self) -> str:
        return f"prelu {self.part} (weight on axis {self.channel_axis})"


@dataclass(frozen=True)
class Planted:
    """A generated case: inputs, golden, the defective output and the planted categories."""

    seed: int
    x: np.ndarray
    dy: Optional[np.ndarray]
    alpha: float
    direction: str
    out_dtype: str
    golden: np.ndarray
    actual: np.ndarray
    defects: tuple[Defect, ...]
    accept: dict = field(default_factory=dict)  # flat index -> tuple of categories
    tile_plan: Optional[TilePlan] = None  # the tiling plan a regional defect was planted by
    params: Optional[QuantParams] = None  # a quantized case's setting: x, golden and actual are codes
    prelu: Optional[PreluSetting] = None  # a PReLU case's setting: golden and actual are its part

    def __str__(self) -> str:
        shape = "x".join(map(str, self.x.shape)) or "0-d"
        op = f"{self.prelu} " if self.prelu is not None else ""
        return (f"seed {self.seed}: {op}{self.x.dtype}->{self.out_dtype} {self.direction} {shape} "
                f"alpha={self.alpha!r} {' + '.join(map(str, self.defects)) or 'clean'}")


# ----------------------------------------------------------------------------- inputs

def _shape(rng: np.random.Generator) -> tuple[int, ...]:
    kind = rng.integers(0, 5)
    if kind == 0:
        return ()
    if kind == 1:
        return (1,)
    if kind == 2:
        return (int(rng.integers(2, 64)),)
    if kind == 3:
        return (int(rng.integers(64, 3000)),)
    return tuple(int(v) for v in rng.integers(1, 12, size=int(rng.integers(2, 4))))


def draw_values(rng: np.random.Generator, dtype: str, n: int) -> np.ndarray:
    """Normal values of random sign and magnitude, with random shares of specials."""
    rec = info(dtype)
    exp = rng.integers(max(rec.emin, -60), min(rec.bias, 60) + 1, n)
    v = np.ldexp(rng.uniform(1.0, 2.0, n), exp) * rng.choice([-1.0, 1.0], n)
    shares = rng.dirichlet(np.ones(5)) * rng.uniform(0.0, 0.6)  # zeros, NaN, inf, subnormal, tiny
    kinds = rng.choice(6, n, p=np.append(shares, 1 - shares.sum()))
    sign = rng.choice([-1.0, 1.0], n)
    v = np.where(kinds == 0, 0.0 * sign, v)
    v = np.where(kinds == 1, np.nan, v)
    v = np.where(kinds == 2, np.inf * sign, v)
    v = np.where(kinds == 3, sign * rec.smallest_subnormal * rng.integers(1, 64, n), v)
    v = np.where(kinds == 4, sign * rec.smallest_normal * rng.uniform(1, 4, n), v)
    return ref.round_float64(v, rec)


# ----------------------------------------------------------------------------- defects

def _slope_defects(alpha: float, src: str, out: str) -> list[Defect]:
    """Another slope: a framework default (exact or rounded to a 16-bit dtype in play)."""
    found = []
    narrow = [d for d in (src, out) if info(d).bits == 16]
    for d in default_slopes():
        if abs(d - alpha) > max(abs(alpha), 1e-3) * 0.02:
            found.append(Defect("alpha-mismatch", f"slope {d!r}", Semantics(slope=d)))
            found += [Defect("alpha-mismatch", f"slope {d!r} in {t}", Semantics(slope=d, slope_dtype=t))
                      for t in narrow if d != 0]
    if alpha != 0:
        found.append(Defect("alpha-mismatch", "plain ReLU", Semantics(formulation="relu")))
    return found


def catalogue(*, alpha: float, src: str, out: str, direction: str) -> list[Defect]:
    """Every defect that may show on this kind of case."""
    found = _slope_defects(alpha, src, out)
    found += [Defect("alpha-precision", f"slope in {t}", Semantics(slope_dtype=t))
              for t in dict.fromkeys((src, out)) if info(t).bits == 16]
    found += [Defect("subnormal-flush", "DAZ+FTZ", Semantics(daz=True, ftz=True)),
              Defect("saturation", "saturation mode", Semantics(saturate=True))]
    if src in ("float32", "float64"):
        found.append(Defect("input-precision", "inputs cast to fp16", Semantics(input_dtype="float16")))
    if direction == "forward":
        found.append(Defect("subnormal-flush", "XLA DAZ+FTZ, x >= 0",
                            Semantics(daz=True, ftz=True, predicate="ge")))
        if alpha > 1 or alpha < 0:
            found.append(Defect("formulation", "max(x, a*x)" if alpha > 1 else "min(x, a*x)",
                                Semantics(formulation="max" if alpha > 1 else "min")))
    else:
        found += [Defect("grad-at-zero", "dx = dy at x == 0", Semantics(grad_rule="ge")),
                  Defect("nan-gradient", "dx = dy at NaN", Semantics(nan_grad="dy")),
                  Defect("nan-gradient", "dx = dy*0 at NaN", Semantics(nan_grad="dy*0")),
                  Defect("formulation", "gradient of maximum", Semantics(grad_rule="max"))]
    return found + _unlisted(alpha=alpha, src=src, out=out, direction=direction)


def _unlisted(*, alpha: float, src: str, out: str, direction: str) -> list[Defect]:
    """Defects of hand-written kernels no issue lists: another rounding mode of the final
    conversion, formulas gone wrong, a result kept at a narrower precision."""
    found = []
    slopes = frozenset({"alpha-mismatch", "alpha-precision"})
    if "float64" not in (src, out):
        found += [Defect("rounding", "results truncated", Semantics(rounding="rtz")),
                  Defect("rounding", "ties away from zero", Semantics(rounding="rna"))]
    if src == "float64":
        found.append(Defect("input-precision", "computed in fp32",
                            Semantics(input_dtype="float32", opmath="float32")))
    if info(src).bits == 16:  # hardware without arithmetic in T computes in the other 16-bit type
        other = "bfloat16" if src == "float16" else "float16"
        found.append(Defect("input-precision", f"inputs cast to {other}", Semantics(input_dtype=other)))
    if info(src).bits == 16 and out == "float32":
        found.append(Defect("input-precision", f"result rounded to {src}, widened", Semantics(result_dtype=src),
                            excludes=slopes))
    if direction == "forward":
        found.append(Defect("formulation", "applied twice", Semantics(formulation="twice"), excludes=slopes))
        if alpha == 0:
            found.append(Defect("formulation", "max(x, 0) at alpha 0", Semantics(formulation="relu")))
        return found
    found += [Defect("formulation", "branches swapped", Semantics(formulation="swap_branches"), excludes=slopes),
              Defect("formulation", "dy and x swapped", Semantics(formulation="swap_operands"),
                     excludes=frozenset({"*"})),
              Defect("nan-gradient", "NaN at NaN", Semantics(nan_grad="nan"))]
    if alpha < 0:
        found.append(Defect("formulation", "gradient from y > 0", Semantics(grad_rule="result")))
    return found


def _tail(rng: np.random.Generator, n: int) -> Optional[Defect]:
    if n < 8:
        return None
    k = min(int(rng.choice([1, 3, 16, max(1, n // 10)])), n // 2)  # the rest stays clean
    return Defect("tail-block", f"garbled last {k}", tail=k)


def compute(x: np.ndarray, dy: Optional[np.ndarray], alpha: float, out: str,
             semantics: Semantics) -> np.ndarray:
    direction = "forward" if dy is None else "backward"
    return ref.compute(direction, x, alpha, dy=dy, out_dtype=out, semantics=semantics).reshape(-1)


def _garble(y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """The last k elements replaced by random finite bit patterns (what GM garbage looks like)."""
    out = y.copy()
    rec = info(y.dtype)
    bits = rng.integers(0, 1 << rec.bits, k, dtype=np.uint64).astype(rec.uint)
    vals = from_bits(bits, y.dtype)
    with np.errstate(invalid="ignore"):
        vals = np.where(np.isfinite(vals.astype(np.float64)), vals, np.zeros((), y.dtype))
    out[-k:] = vals
    return out


def _stale(rng: np.random.Generator, n: int, *, alone: bool) -> Defect:
    """A block away from the tail (a tile, a row) or every k-th element, holding zeros, the
    block before's results, or garbage; ``alone``, also a whole output shifted by a few
    elements."""
    if alone and rng.random() < 0.3:
        k = int(rng.choice([-16, -8, -1, 1, 2, 8, 32]))
        return Defect("stale-block", f"output shifted by {k}", shift=k)
    if rng.random() < 0.5:
        k = int(rng.integers(16, n // 8))  # a tile or a row: one wrong element proves no position
        start = int(rng.integers(0, n - 2 * k + 1))
        fill = str(rng.choice(["zeros", "garbage"] + (["previous"] if start >= k else [])))
        return Defect("stale-block", f"stale block [{start}, {start + k}) ({fill})", block=(start, start + k, 1),
                      fill=fill)
    step = int(rng.choice([3, 4, 7, 8, 16]))  # every 2nd is half the tensor: no position is proved
    offset = int(rng.integers(0, step))
    fill = str(rng.choice(["zeros", "garbage"]))
    return Defect("stale-block", f"every {step}th element from {offset} ({fill})", block=(offset, n, step),
                  fill=fill)


def _relocated(actual: np.ndarray, golden: np.ndarray, defect: Defect,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``actual`` with a location defect applied, and the elements it overwrote."""
    if isinstance(defect, Edited):
        return defect.edit(actual), np.arange(actual.size)
    if defect.shift:
        k = defect.shift
        out = np.zeros_like(actual)
        if k > 0:
            out[k:] = actual[:-k]
        else:
            out[:k] = actual[-k:]
        return out, np.arange(actual.size)
    if not defect.block:
        return _garble(actual, defect.tail, rng), np.arange(actual.size - defect.tail, actual.size)
    start, stop, step = defect.block
    where = np.arange(start, stop, step)
    out = actual.copy()
    if defect.fill == "zeros":  # a zero result keeps its sign: one flipped zero sign has many causes
        kept = golden[where].astype(np.float64) == 0
        out[where] = np.where(kept, golden[where], np.zeros((), actual.dtype))
    elif defect.fill == "previous":
        out[where] = golden[where - (stop - start)]
    else:
        out[where] = _garble(actual[where], where.size, rng)
    return out, where


# ----------------------------------------------------------------------------- layouts and clamps

@dataclass(frozen=True)
class Edited(Defect):
    """A defect applied to the whole flat output: a layout mix-up or a clamp at a limit."""

    edit: Optional[Callable[[np.ndarray], np.ndarray]] = None


_EDITED_SHARE = 0.12  # of the cases with a defect, the share of layout mix-ups and of clamps


def _edited_kind(seed: int) -> str:
    """Whether case ``seed`` gets a layout mix-up or a clamp (drawn apart from the case's
    own draws, so the other cases stay as they are)."""
    draw = np.random.default_rng((seed, 1)).random()
    return "layout" if draw < _EDITED_SHARE else "clamp" if draw < 2 * _EDITED_SHARE else ""


def _layout_shape(rng: np.random.Generator) -> tuple[int, ...]:
    rank = int(rng.integers(2, 6))
    return tuple(int(v) for v in rng.integers(2, {2: 40, 3: 14, 4: 9, 5: 6}[rank], size=rank))


def _permuted(y: np.ndarray, shape: tuple[int, ...], perm: tuple[int, ...]) -> np.ndarray:
    """Golden written transposed by ``perm``, read back flat."""
    return np.ascontiguousarray(y.reshape(shape).transpose(perm)).reshape(-1)


def _packed(y: np.ndarray, shape: tuple[int, ...], c0: int) -> np.ndarray:
    """NCHW golden packed to NC1HWC0 (zero padded channels), read back flat, cut to size."""
    n, c, h, w = shape
    c1 = -(-c // c0)
    padded = np.zeros((n, c1 * c0, h, w), y.dtype)
    padded[:, :c] = y.reshape(shape)
    return np.ascontiguousarray(padded.reshape(n, c1, c0, h, w).transpose(0, 1, 3, 4, 2)).reshape(-1)[:y.size]


def _unpacked(y: np.ndarray, shape: tuple[int, ...], c0: int) -> np.ndarray:
    """NCHW golden's memory read as NC1HWC0 (zeros past its end), unpacked to NCHW."""
    n, c, h, w = shape
    c1 = -(-c // c0)
    memory = np.zeros(n * c1 * h * w * c0, y.dtype)
    memory[:y.size] = y
    return np.ascontiguousarray(memory.reshape(n, c1, h, w, c0).transpose(0, 1, 4, 2, 3)).reshape(
        n, c1 * c0, h, w)[:, :c].reshape(-1)


def _layout(rng: np.random.Generator, shape: tuple[int, ...], out: str) -> Edited:
    """A permutation of the axes, or for 4-D a packing to or from NC1HWC0."""
    if len(shape) == 4 and rng.random() < 0.5:
        size = info(out).bits // 8
        c0 = int(rng.choice([32 // size] + ([16] if size == 4 else [])))
        if rng.random() < 0.5:
            return Edited("layout", f"packed to NC1HWC0 (C0={c0})", edit=partial(_packed, shape=shape, c0=c0))
        return Edited("layout", f"unpacked from NC1HWC0 (C0={c0})", edit=partial(_unpacked, shape=shape, c0=c0))
    perm = tuple(range(len(shape)))
    while perm == tuple(range(len(shape))):
        perm = tuple(int(a) for a in rng.permutation(len(shape)))
    return Edited("layout", f"axes permuted {perm}", edit=partial(_permuted, shape=shape, perm=perm))


def _clamped(y: np.ndarray, limit: float, *, side: str, nan: str, inf: str) -> np.ndarray:
    """``y`` clamped at ``limit`` (float64 arithmetic, exact: the limit is a value of y's dtype)."""
    v = y.astype(np.float64)
    lo = -np.inf if side == "upper" else -limit
    w = np.clip(v, lo, limit)
    if inf == "kept":
        w = np.where(np.isinf(v), v, w)
    w = np.where(np.isnan(v), {"kept": np.nan, "0": 0.0, "+L": limit, "-L": -limit}[nan], w)
    return ref.round_float64(w, info(y.dtype))


def _clamp(rng: np.random.Generator, golden: np.ndarray, out: str) -> Optional[Edited]:
    """A clamp at another dtype's finite max, an int8 code limit, a fused constant or a
    value of the data, with a NaN and ±inf behaviour; None when it would clamp fewer than
    two numbers."""
    v = golden.astype(np.float64)
    finite = np.abs(v[np.isfinite(v) & (np.abs(v) >= info(out).smallest_normal)])
    limits = [info(d).max for d in ("float16", "bfloat16", "float32") if info(d).max < info(out).max]
    limits += [127.0, 6.0, 1e4] + ([float(np.quantile(finite, rng.uniform(0.6, 0.98)))] if finite.size else [])
    limit = float(ref.round_float64(np.array([rng.choice(limits)]), info(out))[0].astype(np.float64))
    side, nan = str(rng.choice(["both", "both", "upper"])), str(rng.choice(["kept", "0", "+L", "-L"]))
    inf = str(rng.choice(["L", "kept"]))
    edit = partial(_clamped, limit=limit, side=side, nan=nan, inf=inf)
    moved = ~np.isnan(v) & (edit(golden).astype(np.float64) != v)
    if limit <= 0 or int(moved.sum()) < 2:
        return None
    return Edited("saturation", f"clamped at {limit:g} ({side}, NaN {nan}, inf {inf})", edit=edit)


def _edited(kind: str, rng: np.random.Generator, *, shape: tuple[int, ...], golden: np.ndarray,
            out: str) -> Optional[Edited]:
    return _layout(rng, shape, out) if kind == "layout" else _clamp(rng, golden, out) if kind else None


# ----------------------------------------------------------------------------- cases

def _stackable(a: Defect, b: Defect) -> bool:
    shared = a.semantics.settings().keys() & b.semantics.settings().keys()  # one field, two values
    if shared or a.category == b.category or "*" in a.excludes | b.excludes:
        return False
    return a.category not in b.excludes and b.category not in a.excludes


def _pick(rng: np.random.Generator, defects: list[Defect], count: int) -> list[Defect]:
    chosen: list[Defect] = []
    if count <= 0:
        return chosen
    for i in rng.permutation(len(defects)):
        d = defects[i]
        if all(_stackable(d, c) for c in chosen):
            chosen.append(d)
        if len(chosen) == count:
            break
    return chosen


def generate(seed: int, *, defects: Optional[int] = None, min_size: int = 0) -> Planted:
    """One deterministic random case with 0, 1 or 2 planted defects (``defects`` fixes
    how many; ``min_size`` the least number of elements)."""
    rng = np.random.default_rng(seed)
    src, out = PAIRS[int(rng.integers(len(PAIRS)))]
    direction = "forward" if rng.random() < 0.55 else "backward"
    alpha = float(rng.choice(ALPHAS)) if rng.random() < 0.8 else float(rng.uniform(-1, 2))
    shape = _shape(rng)
    while int(np.prod(shape, dtype=np.int64)) < min_size:
        shape = _shape(rng)
    kind, edit_rng = _edited_kind(seed), np.random.default_rng((seed, 2))
    while kind == "layout" and (len(shape) < 2 or int(np.prod(shape, dtype=np.int64)) < min_size):
        shape = _layout_shape(edit_rng)
    n = int(np.prod(shape, dtype=np.int64))
    x = draw_values(rng, src, n).reshape(shape)
    dy = draw_values(rng, src, n).reshape(shape) if direction == "backward" else None
    golden = compute(x, dy, alpha, out, EXACT)
    wanted = int(rng.choice([0, 1, 1, 1, 2, 2])) if defects is None else defects
    pool = catalogue(alpha=alpha, src=src, out=out, direction=direction)
    tail = _tail(rng, n) if rng.random() < 0.2 and wanted else None
    if tail is None and wanted and n >= 1024 and rng.random() < 0.2:
        tail = _stale(rng, n, alone=wanted == 1)
    planted = _pick(rng, pool, wanted - (tail is not None)) if wanted else []
    edited = _edited(kind, edit_rng, shape=shape, golden=golden, out=out) if wanted else None
    if edited is not None:  # alone: golden moved or clamped
        tail, planted = edited, []
    actual, accept = _plant(x, dy, alpha, out, golden, planted, tail, rng)
    chosen = tuple(planted) + ((tail,) if tail is not None else ())
    return Planted(seed, x, dy, alpha, direction, out, golden, actual, chosen, accept)


def _plant(x, dy, alpha, out, golden, defects, tail, rng) -> tuple[np.ndarray, dict]:
    """The defective output and, per changed element, the categories that name it."""
    semantics = EXACT
    for d in defects:
        semantics = semantics.combined(d.semantics)
    actual = compute(x, dy, alpha, out, semantics) if defects else golden.copy()
    changed = np.flatnonzero(~same_bits(actual, golden)).tolist()
    alone = [compute(x, dy, alpha, out, d.semantics) for d in defects]
    names = tuple(d.category for d in defects)
    accept = accepted(names, alone, actual, changed, symptom_against=golden)
    if tail is not None:
        garbled, where = _relocated(actual, golden, tail, rng)
        moved = ~same_bits(garbled, golden)
        kept = [i for i in where.tolist() if moved[i]]
        for i in where.tolist():  # a defect of value that gives the overwritten value there names it too
            if not moved[i]:
                accept.pop(i, None)
        for i, also in zip(kept, reproducing(names, alone, garbled, kept)):
            accept[i] = (tail.category,) + also + _value_symptom(garbled[i], golden[i])
        actual = garbled
    return actual, accept


def accepted(names: tuple[str, ...], alone: Sequence[np.ndarray], actual: np.ndarray, changed: list[int], *,
             symptom_against: np.ndarray) -> dict:
    """Per changed element, the category of each defect whose output ``alone`` reproduces it,
    or all of ``names`` where none does; an operand overflowed when narrowed (``actual`` not
    finite where ``symptom_against`` is) is also named by its value class."""
    symptom = ~np.isfinite(actual.astype(np.float64)) & np.isfinite(symptom_against.astype(np.float64))
    accept: dict = {}
    for i, cats in zip(changed, reproducing(names, alone, actual, changed)):
        cats = cats or names
        if "input-precision" in cats and symptom[i]:
            cats += ("overflow", "spurious-nan")
        accept[i] = cats
    return accept


def reproducing(names: Sequence[str], alone: Sequence[np.ndarray], actual: np.ndarray,
                where: list[int]) -> list[tuple[str, ...]]:
    """Per element of ``where``, the names of the defects whose output alone (``alone``,
    aligned with ``names``) has there the bits of ``actual``."""
    agree = [same_bits(y, actual) for y in alone]
    return [tuple(name for name, same in zip(names, agree) if same[i]) for i in where]


def _value_symptom(actual: np.generic, golden: np.generic) -> tuple[str, ...]:
    """A garbled element whose NaN was lost, that became NaN, or that is golden's zero with the
    other sign, is also named rightly by that value class: with no earlier input of its kind,
    nothing shows it is the position."""
    a, g = np.float64(actual), np.float64(golden)
    was, now = bool(np.isnan(g)), bool(np.isnan(a))
    if was != now:
        return ("lost-nan",) if was else ("spurious-nan",)
    return ("signed-zero",) if a == 0 and g == 0 and np.signbit(a) != np.signbit(g) else ()


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    bits_a = a.view(info(a.dtype).uint)
    bits_b = b.view(info(b.dtype).uint)
    nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return (bits_a == bits_b) | nan
