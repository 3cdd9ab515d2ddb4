"""Which rules are worth trying on a batch: the catalogue for the slopes the mismatches show.

A slope enters as a candidate when the median ratio actual/input of the mismatches (on each
side of zero) suggests it, and stays only when some element shows it (:func:`_plausible`).
"""
from __future__ import annotations

import numpy as np

from conformance.reference import golden as ref
from conformance.report.triage.claims import Batch, observed_slopes
from conformance.report.triage.rules import Rule, catalogue


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
    return bool((np.abs(near - slope) <= abs(slope) * 2.0 ** -6).any())  # inputs may be narrowed


def _estimates(ratio: np.ndarray, negative: np.ndarray) -> list[float]:
    """The median slope actual/input on each side of zero (a formula like min(x, a*x)
    shows its slope on the positive side)."""
    return [float(np.median(ratio[side], overwrite_input=True))  # the selection is a copy
            for side in (negative, ~negative) if side.any()]


def candidates_for(batch: Batch, mis: np.ndarray) -> list[Rule]:
    """The catalogue for the slopes the mismatches ``mis`` show, without the slopes no
    element shows (the ratios are dropped on return: on a large dump they are big)."""
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
