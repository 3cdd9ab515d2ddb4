"""Calling a backend that may be hostile: its own copies of the inputs, whatever it raises as a
refusal, a result of the wrong size as a refusal, and a write into its inputs as a finding.

The harness keeps the inputs it judges with; the backend gets copies.  After the call the copies
are compared with the originals bit for bit, so golden (computed from the originals) cannot be
moved by a backend, and a backend that writes into its input fails its row with ``input-modified``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import numpy as np

from conformance.backends import Backend, call
from conformance.dtypes import info, to_bits
from conformance.errors import Unsupported, one_line
from conformance.interrupts import from_signal
from conformance.judge.gate import GateConfig, verdict
from conformance.records import BackendResult, Direction, Finding, Row

Inputs = tuple[np.ndarray, Optional[np.ndarray]]  # (x, dy)


def guarded_call(backend: Backend, direction: Direction, x: np.ndarray, alpha: float, *,
                 dy: Optional[np.ndarray] = None, out_dtype: Optional[str] = None) -> BackendResult:
    """:func:`backends.call`, with whatever the backend raises (``SystemExit`` and its own
    ``KeyboardInterrupt`` included) as a refusal of the input: a failing row, never the end of
    the run.  ``Unsupported`` and the user's Ctrl-C or SIGTERM go on."""
    try:
        return call(backend, direction, x, alpha, dy=dy, out_dtype=out_dtype)
    except Unsupported:
        raise
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        if from_signal(exc):
            raise
        return BackendResult(value=None, rejected=f"the backend raised {one_line(exc)}")


def shaped_like(result: BackendResult, *, numel: int, out_dtype: str) -> BackendResult:
    """``result``, or a refusal when its value is not ``numel`` elements of ``out_dtype``."""
    if result.value is None:
        return result
    value = np.asarray(result.value)
    if value.size == numel and _dtype_name(value) == out_dtype:
        return result
    return BackendResult(value=None, rejected=f"the backend returned {value.dtype}[{value.size}]; "
                                              f"expected {numel} elements of {out_dtype}", malformed=True)


def _dtype_name(value: np.ndarray) -> Optional[str]:
    try:
        return info(value.dtype).name
    except (ValueError, KeyError, TypeError):
        return None


def _changed(before: Optional[np.ndarray], after: Optional[np.ndarray]) -> int:
    """Elements whose bits differ between the harness's input and the copy the backend got."""
    if before is None or after is None:
        return 0
    if after.shape != before.shape or after.dtype != before.dtype:
        return int(before.size)
    return int(np.count_nonzero(to_bits(before) != to_bits(after)))


def input_modified(row: Row, *, kept: Inputs, handed: Inputs, config: GateConfig) -> Row:
    """``row`` with an ``input-modified`` finding when the copies ``handed`` to the backend differ,
    after the call, from the inputs the harness ``kept``."""
    changed = {"x": _changed(kept[0], handed[0]), "dy": _changed(kept[1], handed[1])}
    if not any(changed.values()):
        return row
    count = max(changed.values())
    where = ", ".join(f"{n:,} of {kept[0].size:,} elements of {name}" for name, n in changed.items() if n)
    gated = not config.allows(row.backend, "input-modified", profile=row.profile)
    finding = Finding("input-modified", count, gated, f"the backend wrote into its input ({where})",
                      {"changed": changed}, (), None, count)
    findings = (*row.findings, finding)
    return replace(row, findings=findings, verdict=verdict([f.gated for f in findings]))
