"""Triage of PReLU and RReLU outputs: slopes that vary per channel, a weight on the wrong axis, a
formulation, and dweight sums in another order or accumulator, each proved by recomputation.

Forward and dx are elementwise: every mismatching element is explained by the rule that
reproduces its bits.  The rules, in order:

- ``formulation``: aclnnPrelu's ``max(0, x) + w * min(0, x)`` and Keras's ``relu(x) - w*relu(-x)``
  (a zero result on the non-positive side is +0), and Keras's gradient of it (each relu's gradient a
  multiply by its step); ``nan-gradient``: dx as ``x <= 0 ? w*dy : dy`` (dy at x = NaN);
  ``subnormal-flush``: the same with DAZ/FTZ (TensorFlow's CPU kernels);
- ``alpha-mismatch`` by axis: the weight applied on another axis of the same length (torch's
  channel axis 1 against a channels-last axis, or ONNX's numpy broadcast from the trailing axis);
- ``alpha-mismatch`` (or ``alpha-precision``) per weight element: the slope each channel used, of any
  value, is recovered from its own elements (:mod:`conformance.triage.prelu_slopes` proposes, a
  recomputation proves; the declared slope rounded to a narrower dtype, or the decimal it was written from
  held wider, is ``alpha-precision``; any other slope is named with whose default it is,
  ``conformance.ops``, else by its value), or, when the weight clipped to bounds the slopes show reproduces them all,
  a clip of a learnable slope named with its bounds ("slope clipped to [0.01, 0.5]: channels 0, 3");
- ``signed-zero`` for zeros of the other sign; ``unexplained`` for what is left.

dweight is a sum: its mismatching elements are ``reduction-order`` when some way of summing
(:data:`conformance.reference.reductions.CATALOGUE`, and the tile of the backend's plan when it
reports one) reproduces their bits.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from conformance.dtypes import info, short_name, to_bits
from conformance.ops import whose
from conformance.reference import prelu, prelu_variants
from conformance.reference.exact import cast_exact
from conformance.reference.reductions import CATALOGUE, Reduction, reduce_dweight
from conformance.triage.prelu_slopes import HELD_IN, candidate_slopes, decimal_of, held


@dataclass(frozen=True)
class PreluClaim:
    """One category's elements (a mask over the compared tensor), its summary and detail."""

    category: str
    mask: np.ndarray
    summary: str
    detail: dict = field(default_factory=dict)


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the same bits, any NaN equal to any NaN."""
    nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return (to_bits(a) == to_bits(b)) | nan


@dataclass(frozen=True)
class Operands:
    """What an elementwise PReLU output was computed from: ``x``, the multiplied ``operand`` (x for
    forward, dy for dx), the declared ``weight`` and its ``channel_axis``."""

    x: np.ndarray
    operand: np.ndarray
    weight: np.ndarray
    channel_axis: int = 1

    def golden(self, weight: np.ndarray, *, channel_axis: Optional[int] = None,
               opmath: Optional[str] = None) -> np.ndarray:
        """The select under ``weight`` (broadcast on ``channel_axis``, default the declared one); with
        ``opmath`` each product is rounded to that dtype first (torch's float32 opmath), then to the output's."""
        axis = self.channel_axis if channel_axis is None else channel_axis
        w = prelu.weight_per_element(weight, self.x.shape, channel_axis=axis)
        out = info(self.x.dtype)
        product = prelu.products(self.operand, w, info(opmath) if opmath else out)
        with np.errstate(invalid="ignore"):
            return np.where(self.x > 0, self.operand, cast_exact(product, out))


def _claim_where(predicted: np.ndarray, actual: np.ndarray, open_: np.ndarray) -> np.ndarray:
    """The open elements whose bits ``predicted`` reproduces (an all-or-nothing proof is the caller's)."""
    return open_ & same_bits(predicted, actual)


@dataclass(frozen=True)
class Recomputed:
    """A golden variant that may claim elements: its category, summary, detail, and what it predicts."""

    category: str
    summary: str
    detail: dict
    forward: bool
    predict: Callable[[Operands], np.ndarray]


_MAXMIN = "max(0, x) + w*min(0, x) (aclnnPrelu; Keras's relu(x) - w*relu(-x) too): a zero result for x <= 0 is +0"
_KERAS = "relu(x) + (-w)*relu(-x) (Keras's PReLU): a zero result takes the sum's sign"
_STEPS = ("relu(x) - w*relu(-x) differentiated with each relu's gradient a multiply by its step (Keras): "
          "dx is 0 at x = ±0 and NaN, NaN where dy is ±inf and x <= 0")
_GE = {"forward": "x >= 0 selects x (jnp.where(x >= 0, x, w*x)): -0 stays -0",
       "backward": "x >= 0 selects dy: at x = ±0 the gradient is dy, not w*dy"}
_GE_SUM = ("the gradient of where(x >= 0, x, w*x) as branch cotangents added (JAX's vjp): dy at x = ±0, "
           "a zero w*dy is +0")
_LE = ("the product only where x <= 0 (MindSpore's PReLUGrad, Paddle's RReLU): at x = NaN the gradient is dy, "
       "not w*dy")
_FLUSH = "subnormal inputs read as zero and subnormal products flushed (DAZ/FTZ)"


def _named(category: str, summary: str, detail: dict, *, flush: bool) -> tuple[str, str, dict]:
    """A rule's (category, summary, detail), or ``subnormal-flush``'s when it also flushes."""
    if flush:
        return "subnormal-flush", f"{_FLUSH}, with {summary}", {"daz": True, "ftz": True}
    return category, summary, detail


def _keras_forward(o: Operands, *, flush: bool, keeps: bool) -> np.ndarray:
    return prelu_variants.forward_relu_difference(o.x, o.weight, channel_axis=o.channel_axis, flush=flush,
                                                  relu_keeps_minus_zero=keeps)


def _keras_backward(o: Operands, *, flush: bool) -> np.ndarray:
    return prelu_variants.backward_relu_difference(o.operand, o.x, o.weight, channel_axis=o.channel_axis,
                                                   flush=flush)


def _selected(o: Operands, *, predicate: prelu_variants.Predicate, flush: bool) -> np.ndarray:
    return prelu_variants.select(o.x, o.operand, o.weight, channel_axis=o.channel_axis, predicate=predicate,
                                 flush=flush)


def _ge_sum(o: Operands, *, flush: bool, fused: bool) -> np.ndarray:
    return prelu_variants.select_gradient_sum(o.operand, o.x, o.weight, channel_axis=o.channel_axis, flush=flush,
                                              fused=fused)


def _variants() -> tuple[Recomputed, ...]:
    """Every golden variant triage recomputes, the plain ones before their flushing twins, the plain select's
    before Keras's sums (whose zero signs a select's may share by chance)."""
    rules = [Recomputed("formulation", _MAXMIN, {"formulation": "max(0,x)+w*min(0,x)"}, True,
                        lambda o: prelu.forward(o.x, o.weight, channel_axis=o.channel_axis, formulation="maxmin"))]
    for flush in (False, True):
        for forward, category in ((True, "formulation"), (False, "grad-at-zero")):
            direction = "forward" if forward else "backward"
            rules.append(Recomputed(*_named(category, _GE[direction], {"predicate": "ge"}, flush=flush), forward,
                                    functools.partial(_selected, predicate="ge", flush=flush)))
        rules.append(Recomputed(*_named("nan-gradient", _LE, {"predicate": "le"}, flush=flush), False,
                                functools.partial(_selected, predicate="le", flush=flush)))
        rules += [Recomputed(*_named("grad-at-zero", _GE_SUM, {"predicate": "ge", "grad_form": "sum"}, flush=flush),
                             False, functools.partial(_ge_sum, flush=flush, fused=fused))
                  for fused in ((True, False) if flush else (True,))]
        rules += [Recomputed(*_named("formulation", _KERAS + (" (max(-0, 0) = -0)" if keeps else ""),
                                     {"formulation": "relu(x)-w*relu(-x)"}, flush=flush), True,
                             functools.partial(_keras_forward, flush=flush, keeps=keeps)) for keeps in (False, True)]
        rules.append(Recomputed(*_named("formulation", _STEPS, {"formulation": "relu(x)-w*relu(-x), step gradients"},
                                        flush=flush), False, functools.partial(_keras_backward, flush=flush)))
    rules += [Recomputed(*_named("", "x > 0 selects", {}, flush=True), forward,
                         functools.partial(_selected, predicate="gt", flush=True)) for forward in (True, False)]
    return tuple(rules)


VARIANTS: tuple[Recomputed, ...] = _variants()


def _variant(rule: Recomputed, ops: Operands, expected: np.ndarray, actual: np.ndarray,
             open_: np.ndarray) -> Optional[PreluClaim]:
    """The open elements ``rule`` reproduces, when it contradicts no element the output has right."""
    predicted = rule.predict(ops)
    right = same_bits(expected, actual)
    if (right & ~same_bits(predicted, actual)).any():
        return None
    hit = open_ & same_bits(predicted, actual)
    return PreluClaim(rule.category, hit, rule.summary, dict(rule.detail)) if hit.any() else None


def _other_axes(ops: Operands) -> list[tuple[int, np.ndarray]]:
    """(axis, weight reshaped onto it) for every other axis the weight's length fits."""
    w, shape = np.asarray(ops.weight).reshape(-1), ops.x.shape
    if w.size == 1:
        return []
    declared = prelu.channel_axis_of(len(shape), channel_axis=ops.channel_axis)
    return [(k, w) for k in range(len(shape)) if k != declared and shape[k] == w.size]


def _wrong_axis(ops: Operands, expected: np.ndarray, actual: np.ndarray, open_: np.ndarray) -> Optional[PreluClaim]:
    """The weight applied on another axis, when that reproduces every open element and contradicts none; it
    claims every mismatching element it reproduces (zeros a formulation also reproduces included)."""
    right = same_bits(expected, actual)
    for axis, w in _other_axes(ops):
        reproduced = same_bits(ops.golden(w, channel_axis=axis), actual)
        if reproduced[open_ | right].all():
            return PreluClaim("alpha-mismatch", reproduced & ~right,
                              f"the weight was applied on axis {axis}, not on axis {ops.channel_axis}",
                              {"axis": axis, "declared_axis": ops.channel_axis})
    return None


def _slope_name(slope: float, declared: float, weight_dtype: str, *,
                opmath: Optional[str] = None) -> tuple[str, str]:
    """(category, words) of a recovered slope: the declared one rounded (or multiplied in a wider
    ``opmath``, each product rounded there first), or the decimal it was written from held wider than the
    weight's dtype, is alpha-precision."""
    if opmath is not None and slope in (declared, float(cast_exact(np.array([declared]), info(opmath))[0])):
        return "alpha-precision", (f"{slope!r} (the declared {declared!r} held in {short_name(opmath)}, each "
                                   f"product rounded to {short_name(opmath)} first)")
    for held_in in HELD_IN:
        held = float(cast_exact(np.array([declared]), info(held_in))[0])
        if slope == held and slope != declared:
            return "alpha-precision", f"{slope!r} (the declared {declared!r} rounded to {short_name(held_in)})"
    decimal = decimal_of(declared, info(weight_dtype).dtype)
    if slope != declared and slope in (decimal, *(float(cast_exact(np.array([decimal]), info(t))[0]) for t in HELD_IN)):
        return "alpha-precision", (f"{slope!r} (the weight's decimal {decimal!r} held wider than its "
                                   f"{short_name(weight_dtype)} {declared!r})")
    return "alpha-mismatch", described(slope)


def described(slope: float) -> str:
    """``slope`` with whose default it is, and, when a narrower dtype holds it, the decimal it was written
    from ("0.009999999776482582 (the torch LeakyReLU default, ...; 0.01 held in fp32)")."""
    written = written_as(slope)
    names = whose(slope) or (whose(written[0]) if written else ())
    notes = [", ".join(names)] if names else []
    notes += [f"{written[0]!r} held in {short_name(written[1])}"] if written else []
    return f"{slope!r}" + (f" ({'; '.join(notes)})" if notes else "")


def written_as(slope: float) -> Optional[tuple[float, str]]:
    """(the shortest decimal, the dtype) when a dtype of :data:`HELD_IN` holds ``slope`` exactly and a shorter
    decimal rounds to it there: the constant a slope held narrow was written as."""
    found = [(decimal_of(slope, info(t).dtype), t) for t in HELD_IN if held(slope, t) == slope]
    found = [(d, t) for d, t in found if d != slope]
    return min(found, key=lambda f: len(repr(f[0]))) if found else None


def _reproducing(ops: Operands, actual: np.ndarray, group: np.ndarray, open_: np.ndarray, g: int,
                 slopes: list[float]) -> Optional[tuple[float, Optional[str], np.ndarray]]:
    """The (slope, opmath) that, the slope put in weight element ``g``, reproduces the elements of ``group``
    (products rounded once, or through float32 first as torch's opmath does, its slope then held in float32:
    tried first), and every element it reproduces: the first that reproduces them all, else the one
    reproducing most of the ``open_`` ones, when it contradicts none of the others (:func:`_proves`)."""
    w = np.asarray(ops.weight)
    in_float32 = float(cast_exact(np.array([w.reshape(-1)[g]], dtype=np.float64), info("float32"))[0])
    sub = Operands(ops.x[group], ops.operand[group], np.zeros(1))
    best: Optional[tuple[int, float, Optional[str], np.ndarray]] = None
    for opmath, tried in ((None, slopes), ("float32", sorted(slopes, key=lambda s: s != in_float32))):
        for slope in tried:
            hits = same_bits(sub.golden(np.array([slope]), opmath=opmath), actual[group])
            if hits.all():
                return slope, opmath, _spread(hits, group)
            if best is None or hits.sum() > best[0]:
                best = (int(hits.sum()), slope, opmath, hits)
    if best is not None and _proves(best[3], open_[group]):
        return best[1], best[2], _spread(best[3], group)
    return None


def _reproduced(ops: Operands, actual: np.ndarray, group: np.ndarray, *, slope: float,
                opmath: Optional[str]) -> np.ndarray:
    """The elements of ``group`` (an earlier rule's among them) that ``slope`` reproduces, as a mask."""
    sub = Operands(ops.x[group], ops.operand[group], np.zeros(1))
    return _spread(same_bits(sub.golden(np.array([slope]), opmath=opmath), actual[group]), group)


def _proves(hits: np.ndarray, open_: np.ndarray) -> bool:
    """A slope reproducing only some of a group's elements accounts for them when it contradicts none the
    output has right and reproduces most of the open ones (a few disturbed elements stay unexplained)."""
    return bool(hits[~open_].all() and 2 * int(hits[open_].sum()) > int(open_.sum()) >= 3)


def _spread(hits: np.ndarray, group: np.ndarray) -> np.ndarray:
    """``hits`` over the elements of ``group``, as a mask over the whole tensor."""
    full = np.zeros(group.shape, dtype=bool)
    full[group] = hits
    return full


@dataclass(frozen=True)
class Recovered:
    """The slope (and opmath) that reproduces one weight element's open elements (``at``)."""

    slope: float
    opmath: Optional[str]
    at: np.ndarray


def _recovered(ops: Operands, actual: np.ndarray, open_: np.ndarray, *,
               mismatching: np.ndarray) -> dict[int, Recovered]:
    """Per weight element with open elements, the slope that reproduces every element of it no earlier rule
    claimed (the open ones and those the output has right), where one does; it claims every ``mismatching``
    element of it that it reproduces (zeros a formulation also reproduces included: one slope is the shorter
    account), and leaves an earlier rule the others (a ``x >= 0`` select's zeros beside a rounded slope)."""
    w = np.asarray(ops.weight)
    groups = prelu.groups_of(w, ops.x.shape, channel_axis=ops.channel_axis)
    flat_w = w.reshape(-1).astype(np.float64)
    unclaimed = open_ | ~mismatching
    found: dict[int, Recovered] = {}
    for g in np.unique(groups[open_]).tolist():
        at = (groups == g) & open_
        slopes = candidate_slopes(ops.operand[at], actual[at], ops.x[at], declared=float(flat_w[g]),
                                  weight_dtype=w.dtype)
        slope = _reproducing(ops, actual, (groups == g) & unclaimed, open_, g, slopes)
        if slope is not None:
            found[g] = Recovered(slope[0], slope[1],
                                 mismatching & _reproduced(ops, actual, groups == g, slope=slope[0], opmath=slope[1]))
    return found


def _per_weight(ops: Operands, expected: np.ndarray, actual: np.ndarray, open_: np.ndarray) -> list[PreluClaim]:
    """Per weight element with open elements: the slope that reproduces all of them, if one does; a clip of
    the weight to bounds when one explains every such slope (:func:`_clip`)."""
    recovered = _recovered(ops, actual, open_, mismatching=~same_bits(expected, actual))
    clip = _clip(ops, expected, actual, recovered)
    if clip is not None:
        return [clip]
    flat_w = np.asarray(ops.weight).reshape(-1).astype(np.float64)
    found: dict[tuple[str, float], list[int]] = {}
    masks: dict[tuple[str, float], np.ndarray] = {}
    for g, r in recovered.items():
        slope, opmath, at = r.slope, r.opmath, r.at
        category, words = _slope_name(slope, float(flat_w[g]), np.asarray(ops.weight).dtype.name, opmath=opmath)
        key = (f"{category}|{words}", slope)
        found.setdefault(key, []).append(g)
        masks[key] = masks.get(key, np.zeros_like(open_)) | at
    return [_slope_claim(key[0], channels, masks[key], declared=flat_w, slope=key[1])
            for key, channels in found.items()]


def _slope_claim(key: str, channels: list[int], mask: np.ndarray, *, declared: np.ndarray,
                 slope: float) -> PreluClaim:
    category, words = key.split("|", 1)
    which = "the one slope" if declared.size == 1 else \
        "channel" + ("s " if len(channels) > 1 else " ") + ", ".join(map(str, channels))
    used = ", ".join(f"{float(declared[c])!r}" for c in channels[:4])
    return PreluClaim(category, mask, f"{which} used {words} where the weight held {used}",
                      {"channels": channels, "effective_alpha": slope})


def _bounds(recovered: dict[int, Recovered], flat_w: np.ndarray, *, raised: bool, weight_dtype: str) -> list[float]:
    """The slopes the raised (``raised``) or lowered weight elements used, the commonest first, each also
    held in the weight's dtype, then the open side (∓inf): a bound is one of them (a channel of few elements
    shows a range of slopes, and its simplest, a short decimal, may sit beside a bound the weight's dtype holds)."""
    used = [r.slope for g, r in recovered.items() if r.slope != flat_w[g] and (r.slope > flat_w[g]) == raised]
    values, counts = np.unique(np.array(used, dtype=np.float64), return_counts=True)
    commonest = values[np.argsort(-counts, kind="stable")][:3].tolist()
    return list(dict.fromkeys([*commonest, *(held(v, weight_dtype) for v in commonest),
                               -np.inf if raised else np.inf]))


def _clip(ops: Operands, expected: np.ndarray, actual: np.ndarray,
          recovered: dict[int, Recovered]) -> Optional[PreluClaim]:
    """A learnable slope clipped to [lo, hi] (seed 000's adaptive LeakyReLU: ``clip(alpha, 0.01, 0.5)``): the
    weight clipped to bounds the recovered slopes show (:func:`_bounds`) reproduces every recovered element
    and contradicts no element the output has right.  One bound on one element is no evidence of a clip (a
    wrong slope looks the same): both bounds, or one on two elements or more."""
    flat_w = np.asarray(ops.weight).reshape(-1).astype(np.float64)
    if not recovered or any(r.opmath is not None for r in recovered.values()):
        return None
    right = same_bits(expected, actual)
    proof = right | np.logical_or.reduce([r.at for r in recovered.values()])
    held_in = np.asarray(ops.weight).dtype.name
    for lo, hi in ((lo, hi) for lo in _bounds(recovered, flat_w, raised=True, weight_dtype=held_in)
                   for hi in _bounds(recovered, flat_w, raised=False, weight_dtype=held_in) if lo < hi):
        clipped = np.clip(flat_w, lo, hi)
        moved = (clipped < flat_w).any() and (clipped > flat_w).any() or (clipped != flat_w).sum() > 1
        reproduced = same_bits(ops.golden(clipped.reshape(np.shape(ops.weight))), actual)
        if moved and reproduced[proof].all():
            return _clip_claim(ops, reproduced & ~right, bounds=(lo, hi))
    return None


def _clip_claim(ops: Operands, claimed: np.ndarray, *, bounds: tuple[float, float]) -> PreluClaim:
    """The clip's claim on every mismatching element it reproduces (a channel whose only mismatches are zeros
    a formulation reproduces too included)."""
    flat_w = np.asarray(ops.weight).reshape(-1).astype(np.float64)
    groups = prelu.groups_of(np.asarray(ops.weight), ops.x.shape, channel_axis=ops.channel_axis)
    channels = np.unique(groups[claimed]).tolist()
    held = ", ".join(_short(flat_w[g]) for g in channels[:4])
    which = f"channel{'s' if len(channels) > 1 else ''} {', '.join(map(str, channels))}"
    return PreluClaim("alpha-mismatch", claimed,
                      f"slope clipped to [{_short(bounds[0])}, {_short(bounds[1])}]: {which} (the weight held {held})",
                      {"channels": channels, "clip": [float(bounds[0]), float(bounds[1])]})


def _short(v: float) -> str:
    """``v`` as the shortest decimal of the narrowest float16/float32 holding it exactly (an open bound: ∓inf)."""
    for dtype in (np.float16, np.float32):
        with np.errstate(over="ignore"):
            if np.isfinite(v) and float(dtype(v)) == v:
                return str(dtype(v))
    return repr(float(v)) if np.isfinite(v) else ("-inf" if v < 0 else "inf")


def triage_elementwise(ops: Operands, expected: np.ndarray, actual: np.ndarray, *,
                       forward: bool) -> list[PreluClaim]:
    """Every mismatching element of a forward (``forward``) or dx output, claimed by one rule."""
    open_ = ~same_bits(expected, actual)
    claims: list[PreluClaim] = []
    rules: Sequence[Callable[[np.ndarray], object]] = (
        *(functools.partial(_variant, v, ops, expected, actual) for v in VARIANTS if v.forward == forward),
        lambda o: _wrong_axis(ops, expected, actual, o),
        lambda o: _per_weight(ops, expected, actual, o))
    for rule in rules:
        if not open_.any():
            break
        made = rule(open_)
        for claim in made if isinstance(made, list) else [made] if made is not None else []:
            claims = [*_without(claims, claim.mask), claim]
            open_ = open_ & ~claim.mask
    return claims + _residue(expected, actual, open_)


def _without(claims: list[PreluClaim], mask: np.ndarray) -> list[PreluClaim]:
    """``claims`` without the elements of ``mask`` (a later rule's account of them is the shorter one)."""
    kept = [replace(c, mask=c.mask & ~mask) for c in claims]
    return [c for c in kept if c.mask.any()]


def _residue(expected: np.ndarray, actual: np.ndarray, open_: np.ndarray) -> list[PreluClaim]:
    """What no rule reproduced: zeros of the other sign, then ``unexplained``."""
    zeros = open_ & (expected.astype(np.float64) == 0) & (actual.astype(np.float64) == 0)
    claims = [PreluClaim("signed-zero", zeros, "both zero, sign differs")] if zeros.any() else []
    rest = open_ & ~zeros
    return claims + ([PreluClaim("unexplained", rest, "no PReLU rule reproduces these elements")] if rest.any() else [])


def reductions_for(tile: Optional[int]) -> tuple[Reduction, ...]:
    """The catalogue, with each of its ways also per ``tile`` (a backend's plan) when given."""
    tiled = tuple(Reduction(r.accumulator, r.order, r.terms, tile) for r in CATALOGUE) if tile else ()
    return tiled + CATALOGUE


def triage_dweight(dy: np.ndarray, x: np.ndarray, weight: np.ndarray, expected: np.ndarray,
                   actual: np.ndarray, *, channel_axis: int = 1, tile: Optional[int] = None) -> list[PreluClaim]:
    """dweight's mismatching elements: ``reduction-order`` by the first way of summing that reproduces
    every element, the right ones too (else the one reproducing most mismatching elements and
    contradicting fewest right ones, the rest left to the residue)."""
    open_ = ~same_bits(expected, actual)
    if not open_.any():
        return []
    best: Optional[tuple[tuple[int, int], Reduction, np.ndarray]] = None
    for reduction in reductions_for(tile):
        reproduced = same_bits(reduce_dweight(dy, x, weight, reduction, channel_axis=channel_axis), actual)
        hit = open_ & reproduced
        score = (int(hit.sum()), -int((~open_ & ~reproduced).sum()))
        if best is None or score > best[0]:
            best = (score, reduction, hit)
        if reproduced.all():
            break
    claims = []
    if best is not None and best[0][0]:
        claims.append(PreluClaim("reduction-order", best[2], f"dweight summed as a {best[1]}",
                                 {"reduction": str(best[1])}))
        open_ = open_ & ~best[2]
    return claims + _residue(expected, actual, open_)
