"""The slopes a batch's mismatches show, summarised without materialising them (numba).

``triage.candidates`` needs, of the slopes actual / operand of up to every mismatch, their
median and, for each candidate slope, the nearest slope shown below it and above it.  The
numpy path computes every slope into one array and sorts it; these passes recompute each
slope from the operands instead, so nothing as long as the mismatches is written:

- :func:`summary`: how many elements show a slope, how many of them are informative and on
  the negative side (as ``claims.observed_slopes`` says), and the range of their keys;
- :func:`at_ranks`: the slopes at two ranks of the sorted order, by a radix selection over
  the keys' range (a histogram of 2^12 buckets narrows it, the last few are sorted);
- :func:`shown_within`: per window of slopes (those a candidate's test holds for), whether
  some slope shown lies in it.

A slope's key is its ordered integer (both zeros are key 0, as a sort holds them equal).
"""
from __future__ import annotations

from typing import Optional

import numba
import numpy as np

from conformance.jit import read_only

__all__ = ["at_ranks", "leading", "shown_within", "summary"]

_DIGIT = 12  # bits of the key one histogram pass tells apart (its counts stay in the first cache)
_FEW = 1 << 20  # slopes sorted outright once the selection has narrowed to this many


@numba.njit(cache=True)
def _leading_loop(index):
    for k in range(index.size):
        if index[k] != k:
            return False
    return True


def leading(index: np.ndarray) -> bool:
    """``index`` is 0, 1, ..., k-1 (a reduced batch's mismatches), in one pass without temporaries."""
    return bool(_leading_loop(read_only(np.asarray(index, dtype=np.int64))))


@numba.njit(cache=True, inline="always")
def _shown(a, v):
    """Whether the pair shows a slope, and the slope (as ``metric_loops.slopes``)."""
    a, v = np.float64(a), np.float64(v)
    shown = np.isfinite(a) and np.isfinite(v) and v != 0
    return shown, a / v if shown else 0.0


@numba.njit(cache=True, inline="always")
def _key(s):
    """The ordered integer of a float64: its magnitude's bits, negated for a negative sign."""
    mag = np.int64(np.float64(s).view(np.uint64) & np.uint64(0x7FFFFFFFFFFFFFFF))
    return -mag if s < 0 else mag


@numba.njit(cache=True, inline="always")
def _at(index, k, whole):
    return k if whole else index[k]


@numba.njit(cache=True)
def _summary_loop(actual, operand, x, golden, index, whole, n, smallest_normal, forward):
    count, normal, negative = 0, 0, 0
    lo, hi = np.int64(0x7FFFFFFFFFFFFFFF), -np.int64(0x7FFFFFFFFFFFFFFF)
    for k in range(n):
        i = _at(index, k, whole)
        shown, s = _shown(actual[i], operand[i])
        if not shown:
            continue
        g, w = np.float64(golden[i]), np.float64(x[i])
        count += 1
        normal += abs(g) >= smallest_normal and np.isfinite(g)
        negative += (w < 0) if forward else (w <= 0 or w != w)
        key = _key(s)
        lo, hi = min(lo, key), max(hi, key)
    return count, normal, negative, lo, hi


def summary(actual: np.ndarray, operand: np.ndarray, x: np.ndarray, golden: np.ndarray,
            index: Optional[np.ndarray], *, smallest_normal: float, forward: bool) -> tuple[int, int, int, int, int]:
    """Of the elements at ``index`` (None: all, in order): how many show a slope, how many of
    those have a finite normal golden and lie on the negative side, and the least and
    greatest key of their slopes."""
    whole, at = _positions(actual, index)
    actual, operand, x, golden = (read_only(a) for a in (actual, operand, x, golden))
    return tuple(int(v) for v in _summary_loop(actual, operand, x, golden, at, whole, _size(actual, index),
                                               smallest_normal, forward))  # type: ignore[return-value]


def _positions(actual: np.ndarray, index: Optional[np.ndarray]) -> tuple[bool, np.ndarray]:
    """Whether the passes read every element, and the positions they read otherwise (read-only)."""
    return (True, read_only(np.empty(0, dtype=np.int64))) if index is None else (False, read_only(index))


def _size(actual: np.ndarray, index: Optional[np.ndarray]) -> int:
    return int(actual.size if index is None else index.size)


@numba.njit(cache=True)
def _histogram_loop(actual, operand, index, whole, n, lo, hi, shift, counts):
    below, last, run = 0, np.uint64(0), 0  # slopes of one bucket in a row are counted in a register
    for k in range(n):
        i = _at(index, k, whole)
        shown, s = _shown(actual[i], operand[i])
        if shown:
            key = _key(s)
            if key < lo:
                below += 1
            elif key <= hi:
                bucket = (np.uint64(key) - np.uint64(lo)) >> np.uint64(shift)
                if bucket != last:
                    counts[last] += run
                    last, run = bucket, 0
                run += 1
    counts[last] += run
    return below


@numba.njit(cache=True)
def _gather_loop(actual, operand, index, whole, n, lo, hi, out):
    done = 0
    for k in range(n):
        i = _at(index, k, whole)
        shown, s = _shown(actual[i], operand[i])
        if shown:
            key = _key(s)
            if lo <= key <= hi:
                out[done] = s
                done += 1
    return done


def _value_of(key: int) -> float:
    """The float64 whose key is ``key`` (not zero)."""
    bits = np.array([abs(key)], dtype=np.uint64)
    if key < 0:
        bits |= np.uint64(1 << 63)
    return float(bits.view(np.float64)[0])


def _values(first: int, last: int) -> Optional[tuple[float, float]]:
    return None if 0 in (first, last) else (_value_of(first), _value_of(last))


def at_ranks(actual: np.ndarray, operand: np.ndarray, index: Optional[np.ndarray], *, ranks: tuple[int, int],
             count: int, keys: tuple[int, int]) -> Optional[tuple[float, float]]:
    """The slopes at ``ranks`` (``r`` and ``r`` or ``r + 1``) of the ``count`` slopes shown,
    sorted, their keys within ``keys``; None when a zero is at either (a sort places zeros of
    either sign in an order of its own)."""
    whole, at = _positions(actual, index)
    n = _size(actual, index)
    actual, operand = read_only(actual), read_only(operand)
    (lo, hi), offset = keys, 0
    while hi > lo and count > _FEW:
        shift = max(0, (hi - lo).bit_length() - _DIGIT)
        counts = np.zeros(((hi - lo) >> shift) + 1, dtype=np.int64)
        offset = _histogram_loop(actual, operand, at, whole, n, lo, hi, shift, counts)  # slopes below lo
        ends = np.cumsum(counts) + offset
        first, last = (int(np.searchsorted(ends, r, side="right")) for r in ranks)
        offset = int(ends[first] - counts[first])
        count = int(ends[last] - offset)
        if shift == 0:  # a bucket per key: the keys at the ranks are known
            return _values(lo + first, lo + last)
        lo, hi = lo + (first << shift), min(hi, lo + ((last + 1) << shift) - 1)
    if hi == lo:
        return _values(lo, lo)
    found = np.empty(count, dtype=np.float64)
    found = np.sort(found[:_gather_loop(actual, operand, at, whole, n, lo, hi, found)])
    picked = (float(found[ranks[0] - offset]), float(found[ranks[1] - offset]))
    return None if 0.0 in picked else picked


@numba.njit(cache=True)
def _hit_loop(actual, operand, index, whole, n, starts, hit):
    """Mark the cell each slope falls in: cell ``c + 1`` holds ``starts[c] <= s < starts[c + 1]``,
    cell 0 the slopes below every start."""
    low, high = np.inf, -np.inf  # the last slope's cell, marked: a slope in [low, high) is in it too
    for k in range(n):
        i = _at(index, k, whole)
        shown, s = _shown(actual[i], operand[i])
        if not shown or (low <= s < high):
            continue
        lo, hi = 0, starts.size  # how many starts are <= s
        while lo < hi:
            mid = (lo + hi) // 2
            if starts[mid] <= s:
                lo = mid + 1
            else:
                hi = mid
        hit[lo] = True
        low = starts[lo - 1] if lo > 0 else -np.inf
        high = starts[lo] if lo < starts.size else np.inf


def shown_within(actual: np.ndarray, operand: np.ndarray, index: Optional[np.ndarray],
                 windows: list[tuple[float, float]]) -> list[bool]:
    """Per window ``[lo, hi]`` (finite floats): whether some slope shown lies in it, in one pass."""
    ends = [hi for _, hi in windows]
    starts = np.array(sorted({lo for lo, _ in windows} | set(np.nextafter(ends, np.inf).tolist())))
    hit = np.zeros(starts.size + 1, dtype=np.bool_)
    _hit_loop(read_only(actual), read_only(operand), *_positions(actual, index)[::-1], _size(actual, index),
              starts, hit)
    return [bool(hit[int(np.searchsorted(starts, lo)) + 1:int(np.searchsorted(starts, np.nextafter(hi, np.inf))) + 1]
                 .any()) for lo, hi in windows]


def warm() -> None:
    """Compile (or load) every pass for float32 and float64 operands (read-only, as every pass
    reads them), read in order and at positions (a selection narrows by a histogram only past
    ``_FEW``)."""
    leading(np.arange(3))
    for dtype, index in ((d, i) for d in (np.float32, np.float64) for i in (None, np.arange(0, 8, 2))):
        s, t = np.linspace(-3, -1, 8).astype(dtype), np.linspace(-1, -2, 8).astype(dtype)  # slopes apart
        count, _, _, lo, hi = summary(s, t, s, s, index, smallest_normal=0.0, forward=True)
        whole, at = _positions(s, index)
        shift = max(0, (hi - lo).bit_length() - _DIGIT)
        _histogram_loop(read_only(s), read_only(t), at, whole, _size(s, index), lo, hi, shift,
                        np.zeros(((hi - lo) >> shift) + 1, dtype=np.int64))
        at_ranks(s, t, index, ranks=(0, 1), count=count, keys=(lo, hi))  # distinct keys: the gather pass runs
        shown_within(s, t, index, [(-2.0, -1.5)])
