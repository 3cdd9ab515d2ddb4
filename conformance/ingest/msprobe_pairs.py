"""Two msprobe dumps of one model, a device run and a benchmark run, call by call.

Calls are matched as msprobe's own compare matches APIs: by name
(``Functional.leaky_relu.1.forward``) first; the calls then left of each operator and
direction are paired in the order the dumps hold them (a run that made another LeakyReLU
call first numbers its calls differently), and the pair says it was matched by order.
A call left after that has no partner, and its pair says so.

A matched pair is compared before the kernel (slopes, dtypes, shapes, and the bits of x and
dy, which an earlier layer of the model hands on), then output against output: bit for bit
(``judge.agreement``, when dtypes and shapes agree) and by msprobe's columns
(``metrics.msprobe_columns``, always, as msprobe computes them).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from conformance.ingest.arrays import Dump
from conformance.ingest.msprobe import _CALL, Call
from conformance.judge.agreement import Agreement, differing, from_chunks
from conformance.judge.call_pairs import BENCHMARK, DEVICE, CallPair
from conformance.metrics.msprobe_columns import msprobe_columns
from conformance.records import Row


@dataclass(frozen=True)
class Match:
    """A device call and its benchmark partner (either None: no partner)."""

    device: Optional[Call]
    benchmark: Optional[Call]
    by_order: bool = False


def _family(name: str) -> tuple[str, str, str]:
    """(step/proc prefix, operator, direction) of a call name: the calls ordered among themselves."""
    prefix, _, api = name.rpartition("/")
    found = _CALL.match(api)
    return (prefix, found["op"], found["dir"]) if found else (prefix, api, "")


def _by_order(device: Sequence[Call], benchmark: Sequence[Call]) -> list[Match]:
    """The calls left unmatched by name, paired in dump order within each (prefix, operator, direction)."""
    queues: dict[tuple[str, str, str], list[Call]] = {}
    for call in benchmark:
        queues.setdefault(_family(call.name), []).append(call)
    found = []
    for call in device:
        queue = queues.get(_family(call.name))
        found.append(Match(call, queue.pop(0), by_order=True) if queue else Match(call, None))
    return found + [Match(None, call) for queue in queues.values() for call in queue]


def match(device: Sequence[Call], benchmark: Sequence[Call]) -> list[Match]:
    """Every call of both dumps once: pairs by name, then by order; the device's order first,
    then the benchmark's calls that have no partner."""
    names = {c.name for c in device} & {c.name for c in benchmark}
    by_name = {c.name: c for c in benchmark if c.name in names}
    rest = _by_order([c for c in device if c.name not in names], [c for c in benchmark if c.name not in names])
    paired = {id(m.device): m for m in rest if m.device is not None}
    ordered = [Match(c, by_name[c.name]) if c.name in names else paired[id(c)] for c in device]
    return ordered + [m for m in rest if m.device is None]


def _whole(dump: Dump) -> np.ndarray:
    return dump.chunk(0, dump.size).reshape(dump.shape)


def _bits_differ(what: str, device: Optional[Dump], benchmark: Optional[Dump]) -> tuple[str, ...]:
    """``what`` differs in k of n elements, when both are there with one dtype and shape."""
    if device is None or benchmark is None or device.dtype != benchmark.dtype or device.shape != benchmark.shape:
        return ()
    n = int(differing(_whole(device), _whole(benchmark)).sum())
    return (f"{what} differs in {n:,} of {device.size:,} elements (an earlier layer's output)",) if n else ()


def before_kernel(device: Call, benchmark: Call) -> tuple[str, ...]:
    """What differs between the two calls before the kernel runs, in the order it matters."""
    found = []
    if device.alpha != benchmark.alpha:
        found.append(f"slopes differ: {DEVICE} {device.alpha!r}, {BENCHMARK} {benchmark.alpha!r}")
    dtypes = {what: (d.dtype.name, b.dtype.name) for what, d, b in (("x", device.x, benchmark.x),
                                                                    ("output", device.out, benchmark.out))}
    if len(set(dtypes.values())) == 1 and dtypes["x"][0] != dtypes["x"][1]:
        found.append(f"dtypes differ: {DEVICE} {dtypes['x'][0]}, {BENCHMARK} {dtypes['x'][1]}")
    else:
        found += [f"{what} dtypes differ: {DEVICE} {d}, {BENCHMARK} {b}" for what, (d, b) in dtypes.items() if d != b]
    if device.out.shape != benchmark.out.shape:
        found.append(f"shapes differ: {DEVICE} {list(device.out.shape)}, {BENCHMARK} {list(benchmark.out.shape)}")
    return (*found, *_bits_differ("x", device.x, benchmark.x), *_bits_differ("dy", device.dy, benchmark.dy))


def outputs_agreement(device: Call, benchmark: Call, *, device_row: Row, benchmark_row: Row) -> Optional[Agreement]:
    """The two outputs bit for bit, each side's triage giving the why; None when their dtypes or
    shapes differ (no bit-for-bit comparison then)."""
    if device.out.dtype != benchmark.out.dtype or device.out.shape != benchmark.out.shape:
        return None
    pairs = [(_whole(benchmark.out).reshape(-1), _whole(device.out).reshape(-1))]
    return from_chunks(pairs, ref_row=benchmark_row, row=device_row, names=(BENCHMARK, DEVICE))


def paired(found: Match, *, device_row: Optional[Row], benchmark_row: Optional[Row]) -> CallPair:
    """The pair of a match, from each side's row judged against the golden."""
    d, b = found.device, found.benchmark
    if d is None or b is None or device_row is None or benchmark_row is None:
        alone = d or b
        assert alone is not None
        return CallPair(alone.name, alone.direction, device_row, benchmark_row,
                        benchmark_name=None if b is None else b.name)
    return CallPair(d.name, d.direction, device_row, benchmark_row, benchmark_name=b.name,
                    agreement=outputs_agreement(d, b, device_row=device_row, benchmark_row=benchmark_row),
                    columns=msprobe_columns(_whole(d.out), _whole(b.out)), before=before_kernel(d, b),
                    by_order=found.by_order)
