"""The slopes a batch's mismatches show, summarised without materialising them (numba).

``triage.candidates`` needs, of the slopes actual / operand of up to every mismatch, their
median and, for each candidate slope, whether some slope shown lies near it.  The numpy path
computes every slope into one array and sorts it; these passes recompute each slope from the
operands instead, so nothing as long as the mismatches is written:

- :func:`survey`: how many elements show a slope, how many of them are informative and on
  the negative side (as ``claims.observed_slopes`` says), the range of their keys, how
  many keys fall in each of 2^12 buckets over the range a stride sample of them spans (with
  those below and above apart, and the nearest of each to the buckets), and the keys
  themselves within a few hundredths of the ranks either side of the sample's median, with
  how many lie below them (when they fit the room kept for them);
- :func:`at_ranks`: the slopes at two ranks of the sorted order: partitioned out of the
  keys the survey kept when both ranks lie among them (the median, nearly always); else the
  survey's buckets narrow the keys to one or two buckets, a histogram pass per 12 bits
  narrows them further while more than ``_FEW`` remain (ranks in different buckets one by
  one), and the last few are gathered and partitioned at the ranks;
- :func:`shown_within`: per window of slopes (those a candidate's test holds for), whether
  some slope shown lies in it: from the survey where it tells (a key it saw lies in the
  window, a whole bucket that holds keys does, or nothing it saw can), else by one pass.

Every pass computes a run of slopes and keys at a time in vectorised loops (:func:`_keys_of`)
and splits its positions over ``jit.threads()`` threads (``nogil``), each part's counts,
histograms, extremes, kept keys and hits merged exactly: the ranks, slopes and answers are the
same for any number of threads.  A slope's key is its ordered integer (both zeros are key 0,
as a sort holds them equal).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

import numba
import numpy as np

from conformance import jit
from conformance.dtypes import ordered
from conformance.jit import read_only

__all__ = ["Survey", "at_ranks", "shown_within", "survey"]

_DIGIT = 12  # bits of the key one histogram tells apart (its counts stay in the first cache)
_FEW = 1 << 20  # slopes gathered outright once the selection has narrowed to this many
_SAMPLED = 1 << 12  # positions a stride sample reads for the range the survey's buckets cover
_MIDDLE = 0.02  # the survey keeps the keys within this share of ranks either side of the sample's median
_ROOM = 4  # ... in room for this many times the share of each part's positions they are expected to take
_SPLIT_FROM = 1 << 16  # positions from which a pass is split over threads
_TOP = (1 << 63) - 1  # the greatest key


@numba.njit(cache=True, inline="always")
def _at(index, k, whole):
    return k if whole else index[k]


_RUN = 512  # positions whose slopes one vectorised loop computes at a time
_NONE = np.int64(-(1 << 63))  # the key of a position that shows no slope (no slope has it)


@numba.njit(cache=True, nogil=True)
def _keys_of(actual, operand, x, golden, index, whole, start, n, slopes, keys, smallest_normal, forward):
    """The slopes actual / operand of positions ``start .. start + n - 1`` in float64 (NaN where
    none is shown: an operand or actual not finite, or an operand of zero, as
    ``metric_loops.slopes`` says) and their keys (:data:`_NONE` where none), from 0; how many of
    the slopes shown have a finite normal golden, and how many an x on the negative side (x < 0
    forward; x <= 0 or NaN backward).  One loop of the divisions without branches
    (vectorised), one of the keys from the slopes' bits (a slope's key is its magnitude's bits,
    negated for a negative sign: both zeros are 0).  A pass that needs no counts passes
    ``operand`` and ``actual`` for ``x`` and ``golden`` (read already: nothing more is loaded)."""
    normal, negative = 0, 0
    for k in range(n):
        i = _at(index, start + k, whole)
        a, v = np.float64(actual[i]), np.float64(operand[i])
        shown = (abs(a) < np.inf) & (abs(v) < np.inf) & (v != 0)
        slopes[k] = a / v if shown else np.nan
        g, w = abs(np.float64(golden[i])), np.float64(x[i])
        normal += np.int64(shown & (g >= smallest_normal) & (g < np.inf))
        negative += np.int64(shown & ((w < 0) if forward else ((w <= 0) | (w != w))))
    bits = slopes.view(np.int64)
    for k in range(n):
        mag = bits[k] & np.int64(0x7FFFFFFFFFFFFFFF)
        keys[k] = _NONE if mag > np.int64(0x7FF0000000000000) else (-mag if bits[k] < 0 else mag)
    return normal, negative


@numba.njit(cache=True, inline="always")
def _run_room():
    return np.empty(_RUN, dtype=np.float64), np.empty(_RUN, dtype=np.int64)


@numba.njit(cache=True, inline="always")
def _keyed(actual, operand, index, whole, run, stop, slopes, keys):
    """:func:`_keys_of` of the run of positions from ``run`` (before ``stop``), no counts; its length."""
    n = min(_RUN, stop - run)
    _keys_of(actual, operand, operand, actual, index, whole, run, n, slopes, keys, 0.0, True)
    return n


# ----------------------------------------------------------------------------- parts and positions

def _positions(index: Optional[np.ndarray]) -> tuple[np.ndarray, bool]:
    """The positions the passes read (read-only; empty when they read every element in order),
    and whether they read every element."""
    return (read_only(np.empty(0, dtype=np.int64)), True) if index is None else (read_only(index), False)


def _size(actual: np.ndarray, index: Optional[np.ndarray]) -> int:
    return int(actual.size if index is None else index.size)


def _parts(n: int) -> list[tuple[int, int]]:
    """The ranges of positions a pass over ``n`` splits into, one per thread."""
    return jit.ranges(0, n, least=_SPLIT_FROM)


# ----------------------------------------------------------------------------- the survey

@numba.njit(cache=True, nogil=True)
def _sample_loop(actual, operand, index, whole, n, step, out):
    """The keys of the slopes a stride sample of the positions shows (``out``: room for them)."""
    done = 0
    slopes, keys = _run_room()
    for k in range(0, n, step):
        _keys_of(actual, operand, operand, actual, index, whole, k, 1, slopes, keys, 0.0, True)
        if keys[0] != _NONE:
            out[done] = keys[0]
            done += 1
    return done


@numba.njit(cache=True, nogil=True)
def _survey_loop(actual, operand, x, golden, index, whole, start, stop, smallest_normal, forward,
                 first, last, shift, counts, low, high, kept):
    """``counts``: the keys below ``first``, in each bucket of ``2^shift`` keys from ``first``
    to ``last``, above ``last`` (those two counted in registers: most keys lie in the
    buckets, and a cell counted on every element would be a chain through memory); the keys
    in ``[low, high]`` written to ``kept`` while there is room, how many there are, and how
    many keys lie below ``low``."""
    top = np.int64(0x7FFFFFFFFFFFFFFF)
    count, normal, negative, below, above = 0, 0, 0, 0, 0
    under, middle = 0, 0
    lo, hi, below_top, above_bottom = top, -top, -top, top  # keys outside [first, last]: the nearest
    slopes, keys = _run_room()
    for run in range(start, stop, _RUN):
        n = min(_RUN, stop - run)
        informative, negatives = _keys_of(actual, operand, x, golden, index, whole, run, n, slopes, keys,
                                          smallest_normal, forward)
        normal, negative = normal + informative, negative + negatives
        for k in range(n):
            key = keys[k]
            if key == _NONE:
                continue
            count += 1
            lo, hi = min(lo, key), max(hi, key)
            under += key < low
            if low <= key <= high:
                if middle < kept.size:
                    kept[middle] = key
                middle += 1
            if key < first:
                below += 1
                below_top = max(below_top, key)
            elif key > last:
                above += 1
                above_bottom = min(above_bottom, key)
            else:
                counts[np.int64((np.uint64(key) - np.uint64(first)) >> np.uint64(shift)) + 1] += 1
    counts[0] += below
    counts[counts.size - 1] += above
    return count, normal, negative, lo, hi, below_top, above_bottom, under, middle


@dataclass(frozen=True)
class Survey:
    """What one pass learnt of the slopes shown: how many, how many informative and on the
    negative side, their least and greatest key, and the keys as ordered intervals
    ``[starts[j], stops[j]]`` holding ``counts[j]`` keys each (the keys below the buckets,
    the buckets, the keys above them; ``present`` are keys some slope has)."""

    count: int
    normal: int
    negative: int
    lo: int
    hi: int
    starts: np.ndarray  # int64 keys
    stops: np.ndarray
    counts: np.ndarray
    present: tuple[int, ...]
    middle: Optional[tuple[int, np.ndarray]] = None  # keys in a window about the median, how many below it


def _bucket_range(actual: np.ndarray, operand: np.ndarray,
                  index: Optional[np.ndarray]) -> tuple[int, int, int, tuple[int, int]]:
    """The keys the survey's buckets cover, and the bits of key one bucket holds: the range
    a stride sample's keys span (the median of all lies there but with a vanishing chance;
    the selection still finds it if not); and the keys within :data:`_MIDDLE` of the
    sample's ranks either side of its median (the median of all lies there but with a chance
    of about one in a hundred; the selection passes find it if not)."""
    at, whole = _positions(index)
    n = _size(actual, index)
    step = max(1, -(-n // _SAMPLED))
    keys = np.empty(-(-n // step), dtype=np.int64)
    keys = np.sort(keys[:_sample_loop(actual, operand, at, whole, n, step, keys)])
    if not keys.size:  # the sample shows no slope: one bucket of key 0, no window
        return 0, 0, 0, (1, 0)
    first, last = int(keys[0]), int(keys[-1])
    low, high = (int(keys[min(keys.size - 1, max(0, int(q * keys.size)))]) for q in (0.5 - _MIDDLE, 0.5 + _MIDDLE))
    return first, last, max(0, (last - first).bit_length() - _DIGIT), (low, high)


def survey(actual: np.ndarray, operand: np.ndarray, x: np.ndarray, golden: np.ndarray,
           index: Optional[np.ndarray], *, smallest_normal: float, forward: bool) -> Survey:
    """Of the elements at ``index`` (None: all, in order): how many show a slope, how many of
    those have a finite normal golden and lie on the negative side, their keys'
    extremes and histogram, and the keys about the median when they fit their room
    (:class:`Survey`), in one pass."""
    actual, operand, x, golden = (read_only(a) for a in (actual, operand, x, golden))
    first, last, shift, (low, high) = _bucket_range(actual, operand, index)
    at, whole = _positions(index)
    parts = _parts(_size(actual, index))
    counts = np.zeros((len(parts), ((last - first) >> shift) + 3), dtype=np.int64)
    kept = [np.empty(int(_ROOM * 2 * _MIDDLE * (stop - start)) + 16, dtype=np.int64) for start, stop in parts]
    found = jit.in_parallel([functools.partial(_survey_loop, actual, operand, x, golden, at, whole, start, stop,
                                               smallest_normal, forward, first, last, shift, counts[p], low, high,
                                               kept[p])
                             for p, (start, stop) in enumerate(parts)])
    count, normal, negative, under = (sum(int(f[j]) for f in found) for j in (0, 1, 2, 7))
    lo, above_bottom = (min(int(f[j]) for f in found) for j in (3, 6))
    hi, below_top = (max(int(f[j]) for f in found) for j in (4, 5))
    cells = counts.sum(axis=0)
    starts, stops = _cell_keys(cells.size - 2, first=first, last=last, shift=shift)
    starts[0], stops[0], starts[-1], stops[-1] = lo, below_top, above_bottom, hi
    present = tuple(k for k, c in ((lo, count), (hi, count), (below_top, cells[0]), (above_bottom, cells[-1])) if c)
    fits = all(int(f[8]) <= room.size for f, room in zip(found, kept))
    middle = (under, np.concatenate([room[:int(f[8])] for f, room in zip(found, kept)])) if fits else None
    return Survey(count, normal, negative, lo, hi, starts, stops, cells, present, middle)


def _cell_keys(buckets: int, *, first: int, last: int, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """The first and last key of each of the survey's cells: one before the buckets (left for
    the caller), each bucket, one after them (left too)."""
    starts = np.zeros(buckets + 2, dtype=np.int64)
    stops = np.zeros(buckets + 2, dtype=np.int64)
    offsets = np.arange(buckets, dtype=np.uint64) << np.uint64(shift)
    starts[1:-1] = (np.uint64(first % (1 << 64)) + offsets).view(np.int64)  # within [first, last]: no wrap
    stops[1:-2], stops[-2] = starts[2:-1] - 1, last  # a bucket ends where the next starts
    return starts, stops


# ----------------------------------------------------------------------------- the slopes at two ranks

@numba.njit(cache=True, nogil=True)
def _histogram_loop(actual, operand, index, whole, start, stop, lo, hi, shift, counts):
    below = 0
    slopes, keys = _run_room()
    for run in range(start, stop, _RUN):
        n = _keyed(actual, operand, index, whole, run, stop, slopes, keys)
        for k in range(n):
            key = keys[k]
            if key == _NONE:
                continue
            if key < lo:
                below += 1
            elif key <= hi:
                counts[(np.uint64(key) - np.uint64(lo)) >> np.uint64(shift)] += 1
    return below


@numba.njit(cache=True, nogil=True)
def _gather_loop(actual, operand, index, whole, start, stop, lo, hi, out):
    done = 0
    slopes, keys = _run_room()
    for run in range(start, stop, _RUN):
        n = _keyed(actual, operand, index, whole, run, stop, slopes, keys)
        for k in range(n):
            key = keys[k]
            if key != _NONE and lo <= key <= hi:
                out[done] = slopes[k]
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


@dataclass(frozen=True)
class _Narrowed:
    """Where the two ranks lie: keys ``[lo, hi]`` holding ``count`` slopes, ``offset`` slopes
    below them; ``apart`` when they lie in different cells."""

    lo: int
    hi: int
    count: int
    offset: int
    apart: bool


def _narrowed(starts: np.ndarray, stops: np.ndarray, counts: np.ndarray, ranks: tuple[int, int], *,
              offset: int) -> _Narrowed:
    """The cells holding the two ranks (``offset`` slopes lie below the first cell)."""
    ends = np.cumsum(counts) + offset
    first, last = (int(np.searchsorted(ends, r, side="right")) for r in ranks)
    below = int(ends[first] - counts[first])
    return _Narrowed(int(starts[first]), int(stops[last]), int(ends[last] - below), below, first != last)


def _histogram(actual: np.ndarray, operand: np.ndarray, index: Optional[np.ndarray], *, lo: int, hi: int,
               shift: int) -> tuple[np.ndarray, int]:
    """How many keys fall in each bucket of ``2^shift`` keys over ``[lo, hi]``, and how many below."""
    at, whole = _positions(index)
    parts = _parts(_size(actual, index))
    counts = np.zeros((len(parts), ((hi - lo) >> shift) + 1), dtype=np.int64)
    below = jit.in_parallel([functools.partial(_histogram_loop, actual, operand, at, whole, start, stop,
                                               lo, hi, shift, counts[p]) for p, (start, stop) in enumerate(parts)])
    return counts.sum(axis=0), sum(int(b) for b in below)


def _gathered(actual: np.ndarray, operand: np.ndarray, index: Optional[np.ndarray], *, lo: int, hi: int,
              count: int) -> np.ndarray:
    """The ``count`` slopes whose keys lie in ``[lo, hi]`` (in no order)."""
    at, whole = _positions(index)
    parts = _parts(_size(actual, index))
    outs = [np.empty(count, dtype=np.float64) for _ in parts]  # pages past what a part writes stay untouched
    done = jit.in_parallel([functools.partial(_gather_loop, actual, operand, at, whole, start, stop, lo, hi, out)
                            for out, (start, stop) in zip(outs, parts)])
    return np.concatenate([out[:int(d)] for out, d in zip(outs, done)])


def at_ranks(actual: np.ndarray, operand: np.ndarray, index: Optional[np.ndarray], *, ranks: tuple[int, int],
             surveyed: Survey) -> Optional[tuple[float, float]]:
    """The slopes at ``ranks`` (``r`` and ``r`` or ``r + 1``) of the slopes shown, sorted
    (``surveyed`` is their :func:`survey`); None when a zero is at either (a sort places
    zeros of either sign in an order of its own)."""
    if surveyed.middle is not None:
        under, keys = surveyed.middle
        if under <= ranks[0] and ranks[1] < under + keys.size:  # both in the keys kept about the median
            wanted = [ranks[0] - under, ranks[1] - under]
            picked = np.partition(keys, wanted)[wanted]
            return None if 0 in picked else (_value_of(int(picked[0])), _value_of(int(picked[1])))
    cells = (surveyed.starts, surveyed.stops, surveyed.counts)
    return _selected(read_only(actual), read_only(operand), index, ranks, cells, offset=0)


def _selected(actual: np.ndarray, operand: np.ndarray, index: Optional[np.ndarray], ranks: tuple[int, int],
              cells: tuple[np.ndarray, np.ndarray, np.ndarray], *, offset: int) -> Optional[tuple[float, float]]:
    """:func:`at_ranks` from ``cells`` (first keys, last keys, counts) over the keys, ``offset``
    slopes below them.  Ranks in different cells are selected one by one: a range holding
    both might narrow no further, one bucket of a single rank always does."""
    at = _narrowed(*cells, ranks, offset=offset)
    if at.apart:
        one, two = (_selected(actual, operand, index, (r, r), cells, offset=offset) for r in ranks)
        return None if one is None or two is None else (one[0], two[0])
    if at.hi == at.lo:
        return _values(at.lo, at.lo)
    if at.count > _FEW:
        shift = max(0, (at.hi - at.lo).bit_length() - _DIGIT)
        counts, below = _histogram(actual, operand, index, lo=at.lo, hi=at.hi, shift=shift)
        starts = at.lo + (np.arange(counts.size, dtype=object) << shift)  # Python ints: a key range may pass 2^63
        stops = np.append(starts[1:] - 1, at.hi)  # the last bucket starts at or below hi
        return _selected(actual, operand, index, ranks, (starts, stops, counts), offset=below)
    wanted = [ranks[0] - at.offset, ranks[1] - at.offset]
    found = np.partition(_gathered(actual, operand, index, lo=at.lo, hi=at.hi, count=at.count), wanted)
    picked = (float(found[wanted[0]]), float(found[wanted[1]]))  # a sort's, whatever the gathered order
    return None if 0.0 in picked else picked


# ----------------------------------------------------------------------------- slopes within windows

@numba.njit(cache=True, nogil=True)
def _hit_loop(actual, operand, index, whole, start, stop, starts, hit):
    """Mark the cell each slope falls in: cell ``c + 1`` holds ``starts[c] <= s < starts[c + 1]``,
    cell 0 the slopes below every start."""
    low, high = np.inf, -np.inf  # the last slope's cell, marked: a slope in [low, high) is in it too
    slopes, keys = _run_room()
    for run in range(start, stop, _RUN):
        n = _keyed(actual, operand, index, whole, run, stop, slopes, keys)
        for k in range(n):
            s = slopes[k]
            if keys[k] == _NONE or (low <= s < high):
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


def _float_key(v: float) -> int:
    """The key of a Python float (not NaN), as :func:`_keys_of` gives a slope's: its place on
    the ordered-integer line."""
    return int(ordered(np.array([v], dtype=np.float64))[0])


def _decided(surveyed: Survey, lo: float, hi: float) -> Optional[bool]:
    """Whether some slope shown lies in ``[lo, hi]``, when the survey tells: a key it saw lies
    there, or a whole interval that holds keys does (True), or no interval that holds keys
    meets it (False); None otherwise."""
    a, b = _float_key(lo), _float_key(hi)
    if any(a <= k <= b for k in surveyed.present):
        return True
    held = surveyed.counts > 0
    meets = held & (surveyed.starts <= b) & (surveyed.stops >= a)
    if not meets.any():
        return False
    return True if (meets & (surveyed.starts >= a) & (surveyed.stops <= b)).any() else None


def _hits(actual: np.ndarray, operand: np.ndarray, index: Optional[np.ndarray],
          windows: list[tuple[float, float]]) -> list[bool]:
    """Per window, whether some slope shown lies in it, in one pass."""
    ends = [hi for _, hi in windows]
    starts = np.array(sorted({lo for lo, _ in windows} | set(np.nextafter(ends, np.inf).tolist())))
    at, whole = _positions(index)
    parts = _parts(_size(actual, index))
    hit = np.zeros((len(parts), starts.size + 1), dtype=np.bool_)
    jit.in_parallel([functools.partial(_hit_loop, read_only(actual), read_only(operand), at, whole, start, stop,
                                       starts, hit[p]) for p, (start, stop) in enumerate(parts)])
    cells = hit.any(axis=0)
    return [bool(cells[int(np.searchsorted(starts, lo)) + 1:int(np.searchsorted(starts, np.nextafter(hi, np.inf)))
                       + 1].any()) for lo, hi in windows]


def shown_within(actual: np.ndarray, operand: np.ndarray, index: Optional[np.ndarray],
                 windows: list[tuple[float, float]], *, surveyed: Optional[Survey] = None) -> list[bool]:
    """Per window ``[lo, hi]`` (finite floats): whether some slope shown lies in it; from
    ``surveyed`` (the slopes' :func:`survey`) where it tells, by one pass for the others."""
    told = [None if surveyed is None else _decided(surveyed, lo, hi) for lo, hi in windows]
    open_ = [w for w, t in zip(windows, told) if t is None]
    passed = iter(_hits(actual, operand, index, open_) if open_ else [])
    return [next(passed) if t is None else t for t in told]


def warm() -> None:
    """Compile (or load) every pass for float32 and float64 operands (read-only, as every pass
    reads them), read in order and at positions."""
    for dtype, index in ((d, i) for d in (np.float32, np.float64) for i in (None, np.arange(0, 8, 2))):
        s, t = np.linspace(-3, -1, 8).astype(dtype), np.linspace(-1, -2, 8).astype(dtype)  # slopes apart
        seen = survey(s, t, s, s, index, smallest_normal=0.0, forward=True)
        _histogram(read_only(s), read_only(t), index, lo=seen.lo, hi=seen.hi,
                   shift=max(0, (seen.hi - seen.lo).bit_length() - _DIGIT))
        _gathered(read_only(s), read_only(t), index, lo=seen.lo, hi=seen.hi, count=seen.count)
        at_ranks(s, t, index, ranks=(0, 1), surveyed=seen)
        shown_within(s, t, index, [(-2.0, -1.5)])
