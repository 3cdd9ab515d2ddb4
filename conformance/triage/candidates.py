"""Which rules are worth trying on a batch: the catalogue for the slopes the mismatches show.

A slope enters as a candidate when the median ratio actual/input of the mismatches (on each
side of zero) suggests it, and stays only when some element shows it (:func:`_plausible`).
With the compiled paths, many mismatches that are all informative and on one side of zero are
summarised by compiled passes over the operands (``triage._compiled.slope_loops``: one survey of
them, the median by a radix selection it starts, which slopes are shown near a candidate's
from it, or by one more pass where it cannot tell) instead of a sorted array of every slope;
the numpy path stays the reference, and gives the same rules.
"""
from __future__ import annotations

import functools
import math
import struct
from typing import Optional

import numpy as np

from conformance import jit
from conformance.dtypes import info
from conformance.reference import golden as ref
from conformance.triage import sampling
from conformance.triage.claims import Batch, observed_slopes
from conformance.triage.rules import Rule, catalogue

_NEAR = 2.0 ** -6  # how close a shown slope is to a candidate's, relative: inputs may be narrowed
_MAGNITUDE = (1 << 63) - 1
COMPILED_FROM = 1 << 16  # mismatches from which the compiled passes beat sorting their slopes


def _plausible(rule: Rule, ratios: np.ndarray) -> bool:
    """A slope is worth trying only if some element shows it (actual/input within 1.6%
    of it: a slope or inputs rounded to a 16-bit dtype stay closer); with no
    informative element every slope is.  ``ratios`` are sorted, without NaN: the
    nearest ratio below the slope and the nearest above are the closest (a rounded
    difference is monotone), so only they are tested."""
    sem = rule.semantics
    if rule.category != "alpha-mismatch" or sem.slope is None or ratios.size == 0:
        return True
    slope = ref.effective_slope(sem.slope, slope_dtype=sem.slope_dtype)
    at = int(np.searchsorted(ratios, slope))
    near = ratios[max(at - 1, 0):at + 1]
    return bool((np.abs(near - slope) <= abs(slope) * _NEAR).any())


def _estimates(ratio: np.ndarray, negative: np.ndarray) -> list[float]:
    """The median slope actual/input on each side of zero (a formula like min(x, a*x)
    shows its slope on the positive side)."""
    return [float(np.median(ratio[side], overwrite_input=True))  # the selection is a copy
            for side in (negative, ~negative) if side.any()]


def candidates_for(batch: Batch, mis: np.ndarray, *, leading: Optional[bool] = None) -> list[Rule]:
    """The catalogue for the slopes the mismatches ``mis`` show, without the slopes no
    element shows (the ratios are dropped on return: on a large dump they are big).
    ``leading`` says whether ``mis`` is 0, 1, ..., k-1, when the caller knows (None: looked at)."""
    compiled = _compiled_candidates(batch, mis, leading=leading) if jit.enabled() and mis.size >= COMPILED_FROM \
        else None
    if compiled is not None:
        return compiled
    observed, normal, negative = observed_slopes(batch, mis)
    if observed.size and normal.all() and (negative.all() or not negative.any()):  # the median of all
        observed.sort()  # no NaN: both sides finite
        estimates = [sorted_median(observed)]
    else:
        estimates = _estimates(observed[normal], negative[normal])
        observed.sort()
    del normal, negative
    cands = catalogue(alpha=batch.alpha, direction=batch.direction, dtypes=batch.dtypes,
                      estimates=estimates)
    return [r for r in cands if _plausible(r, observed)]


def sorted_median(ratio: np.ndarray) -> float:
    """``np.median`` of sorted values, taken as it takes it: the mean of the middle one or two."""
    half = ratio.size // 2
    return float(np.mean(ratio[half - 1:half + 1] if ratio.size % 2 == 0 else ratio[half:half + 1]))


# ----------------------------------------------------------------------------- compiled

def _operands(batch: Batch, mis: np.ndarray, *,
              leading: Optional[bool] = None) -> Optional[tuple[tuple[np.ndarray, ...], Optional[np.ndarray]]]:
    """(actual, operand, x, golden) and the positions to read them at (None: all, in order,
    views of a reduced batch's leading mismatches), when the compiled passes read these dtypes."""
    if not {batch.x.dtype.name, batch.actual.dtype.name, batch.golden.dtype.name} <= {"float32", "float64"}:
        return None
    operand = batch.x if batch.direction == "forward" else batch.dy
    if sampling.leading_mismatches(batch, mis) if leading is None else leading:
        at = slice(0, mis.size)
        return (batch.actual[at], operand[at], batch.x[at], batch.golden[at]), None
    return (batch.actual, operand, batch.x, batch.golden), np.asarray(mis, dtype=np.int64)


def _compiled_candidates(batch: Batch, mis: np.ndarray, *, leading: Optional[bool] = None) -> Optional[list[Rule]]:
    """:func:`candidates_for` by the compiled passes, when every slope shown is informative
    and on one side of zero (the median of all of them); None otherwise, and when a zero
    sits at the median (a sort orders zeros of either sign its own way)."""
    found = _operands(batch, mis, leading=leading) if mis.size else None
    if found is None:
        return None
    from conformance.triage._compiled import slope_loops  # numba, imported on the first compiled call

    (actual, operand, x, golden), index = found
    seen = slope_loops.survey(actual, operand, x, golden, index, smallest_normal=info(batch.out_dtype).smallest_normal,
                              forward=batch.direction == "forward")
    count = seen.count
    if not count or seen.normal != count or seen.negative not in (0, count):
        return None
    half = count // 2
    picked = slope_loops.at_ranks(actual, operand, index, ranks=(half - 1, half) if count % 2 == 0 else (half, half),
                                  surveyed=seen)
    if picked is None:
        return None
    median = np.array(picked if count % 2 == 0 else picked[:1])
    cands = catalogue(alpha=batch.alpha, direction=batch.direction, dtypes=batch.dtypes,
                      estimates=[float(np.mean(median))])
    slopes = sorted({v for v in map(_slope_of, cands) if v is not None})
    if not all(math.isfinite(v) for v in slopes):
        return None
    shown = slope_loops.shown_within(actual, operand, index, [_window(v) for v in slopes], surveyed=seen)
    near = dict(zip(slopes, shown))
    return [r for r in cands if _slope_of(r) is None or near[_slope_of(r)]]


def _slope_of(rule: Rule) -> Optional[float]:
    sem = rule.semantics
    if rule.category != "alpha-mismatch" or sem.slope is None:
        return None
    return ref.effective_slope(sem.slope, slope_dtype=sem.slope_dtype)


def _key(v: float) -> int:
    """The ordered integer of a float64 (both zeros 0)."""
    bits = struct.unpack("<q", struct.pack("<d", v))[0]
    return -(bits & _MAGNITUDE) if bits < 0 else bits


def _float(key: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", -key | 1 << 63 if key < 0 else key))[0]


@functools.lru_cache(maxsize=4096)
def _window(slope: float) -> tuple[float, float]:
    """The floats ``r`` that :func:`_plausible`'s test ``|r - slope| <= |slope| * 2^-6`` holds for,
    as ``[lo, hi]``: a rounded difference grows with the distance, so they are one interval
    around the (finite) slope, its ends found by bisection over the floats."""
    tolerance = abs(slope) * _NEAR

    def end(inside: int, outside: int) -> int:
        while abs(outside - inside) > 1:
            mid = (inside + outside) // 2
            inside, outside = (mid, outside) if abs(_float(mid) - slope) <= tolerance else (inside, mid)
        return inside

    at, top = _key(slope), _key(math.inf)
    return _float(end(at, -top)), _float(end(at, top))
