"""The JSON report (schema ``leakyrelu-conformance/1``), and both reports written together.

The JSON is strict: no NaN or Infinity literals.  Every floating value is an
object ``{"dtype", "hex", "bits", "decimal", "value"}``: ``float.hex`` of the value
(``"inf"``, ``"-inf"``, ``"nan"`` for the specials), its bit pattern in its own
dtype as ``0x...``, its decimal ``repr`` as a string, and ``value``, the plain
number (null for NaN and ±inf, whose ``hex`` says which).  The schema is
``render.schema.SCHEMA`` (shipped as ``conformance/schemas/report.schema.json``);
the JUnit report is ``render.junit``.

Timings are the one part of a report that differs between two runs of one command and
seed: they are kept in ``summary.durations`` and each row's ``seconds``.
"""
from __future__ import annotations

import functools
import json
import math
import platform
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

import numpy as np

from conformance.dtypes import DTYPES, hex_value, info
from conformance.errors import UsageError
from conformance.judge.agreement import Agreement
from conformance.judge.gate import GateConfig, config_dict, overall
from conformance.records import DEFAULT_OP, Finding, Offender, Row
from conformance.render.files import ReportPaths, is_stream, remove_stale, write_atomic
from conformance.render.junit import junit_bytes, write_junit
from conformance.render.schema import SCHEMA, SCHEMA_ID, validate
from conformance.render.summary import NO_INFO, RunInfo, summary_dict
from conformance.render.text import position

__all__ = ["SCHEMA", "SCHEMA_ID", "RunInfo", "encode_value", "json_bytes", "junit_bytes", "report_dict",
           "row_dict", "validate", "versions", "write_json", "write_junit", "write_reports"]


# ----------------------------------------------------------------------------- values

def encode_value(v: Any, *, dtype: Optional[str] = None) -> Optional[dict]:
    """A numpy or Python float as the strict JSON value object (None stays None)."""
    if v is None:
        return None
    arr = np.asarray(v, dtype=dtype)
    with np.errstate(invalid="ignore"):  # a bfloat16 NaN widens with a warning
        if arr.dtype.name not in DTYPES:
            arr = arr.astype(np.float64)
        wide = float(arr.astype(np.float64))
    rec = info(arr.dtype)
    bits = int(arr.view(rec.uint).item())
    return {"dtype": rec.name, "hex": hex_value(wide), "bits": f"0x{bits:0{rec.bits // 4}x}",
            "decimal": repr(wide), "value": wide if math.isfinite(wide) else None}


def _ratio(v: Optional[float]) -> Optional[dict]:
    return None if v is None else encode_value(float(v), dtype="float64")


def _jsonable(value: Any) -> Any:
    """Detail values made strict-JSON safe (floats become value objects)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, str, int)) or value is None:
        return value
    if isinstance(value, (float, np.floating)):
        return encode_value(value)
    if isinstance(value, np.integer):
        return int(value)
    return str(value)


# ----------------------------------------------------------------------------- rows

def _example(ex: Offender, *, row: Row) -> dict:
    """``index`` stays the flat index; ``position`` is it in the input's shape (null: outside)."""
    pos = position(ex.index, row.shape_of(ex.part))
    return {"index": ex.index, "part": ex.part, "position": None if pos is None else list(pos),
            "x": encode_value(ex.x), "dy": encode_value(ex.dy),
            "expected": encode_value(ex.expected), "actual": encode_value(ex.actual),
            "core": ex.core, "tile": ex.tile}


def _finding(f: Finding, *, row: Row) -> dict:
    return {"category": f.category, "count": f.count, "allowed": not f.gated, "summary": f.summary,
            "detail": _jsonable(f.detail), "examples": [_example(e, row=row) for e in f.examples],
            "reproducer": f.reproducer, "violations": f.violations}


def row_dict(row: Row, *, seconds: Optional[float] = None, plots: bool = False) -> dict:
    """One row with docs/architecture.md's fields plus the extra metric fields; ``seconds`` is
    the time it took (null when the command did not time it); ``plots`` adds the counts the
    HTML report draws."""
    m = row.metrics
    return {
        "backend": row.backend, "profile": row.profile, "variant": row.variant,
        **({} if row.op == DEFAULT_OP else {"op": row.op}),
        "dtype": row.dtype, "out_dtype": row.out_dtype, "direction": row.direction,
        "alpha": encode_value(row.alpha, dtype="float64"), "elements": m.elements,
        "mismatches": m.mismatches, "max_abs": encode_value(m.max_abs, dtype="float64"),
        "max_rel": encode_value(m.max_rel, dtype="float64"), "max_ulp": m.max_ulp,
        "verdict": row.verdict, "findings": [_finding(f, row=row) for f in row.findings],
        "violations": m.violations, "nan_positions": m.nan_positions,
        "inf_positions": m.inf_positions, "zero_signs": m.zero_signs,
        "one_thousandth_ratio": _ratio(m.one_thousandth_ratio),
        "five_thousandths_ratio": _ratio(m.five_thousandths_ratio),
        "cosine_similarity": _ratio(m.cosine), "error_balance": _ratio(m.error_balance),
        "parts": list(row.parts), "seconds": seconds,
        **({"notes": list(row.notes)} if row.notes else {}),
        **({"plots": row.plots.as_dict()} if plots and row.plots is not None else {}),
        "other_checks": [{"name": c.name, "passes": c.passes, "detail": c.detail,
                          "passes_if_shared_equal": c.passes_if_shared_equal} for c in row.other_checks],
    }


def agreement_dict(a: Agreement) -> dict:
    """One agreement between a row and the reference backend's row, as JSON."""
    return {"reference": a.reference, "backend": a.backend, "profile": a.profile,
            **({} if a.op == DEFAULT_OP else {"op": a.op}), "dtype": a.dtype,
            "out_dtype": a.out_dtype, "direction": a.direction, "alpha": encode_value(a.alpha),
            "identical": a.identical, "differing": a.differing, "elements": a.elements, "why": a.why,
            "causes": list(a.causes), **({"variant": a.variant} if a.variant is not None else {})}


def report_dict(rows: Sequence[Row], *, seed: Optional[int], versions: Mapping[str, str],
                verdict: Optional[str] = None, config: Optional[GateConfig] = None,
                agreement: Optional[Sequence[Agreement]] = None, info: RunInfo = NO_INFO,
                plots: bool = False) -> dict:
    """The whole report document; ``config`` records the gate configuration it was judged under,
    ``agreement`` the comparison with a reference backend (None: none was asked for), ``info``
    the run around the rows (its summary, skipped rows and timings); ``plots`` adds each row's
    plot data (the HTML report's document)."""
    doc = {"schema": SCHEMA_ID, "verdict": verdict or overall(r.verdict for r in rows),
           "seed": seed, "versions": {str(k): str(v) for k, v in versions.items()}}
    if config is not None:
        doc["config"] = config_dict(config)
    if info.environment:
        doc["environment"] = dict(info.environment)
    doc["summary"] = summary_dict(rows, info, config=config)
    doc["rows"] = [row_dict(r, seconds=info.seconds_of(r), plots=plots) for r in rows]
    if agreement is not None:
        doc["agreement"] = [agreement_dict(a) for a in agreement]
    return doc


def dumps(doc: dict) -> str:
    """Strict JSON text (raises on NaN/inf floats instead of writing literals)."""
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def json_bytes(rows: Sequence[Row], *, seed: Optional[int], versions: Mapping[str, str],
               verdict: Optional[str] = None, partial: bool = False, config: Optional[GateConfig] = None,
               agreement: Optional[Sequence[Agreement]] = None, info: RunInfo = NO_INFO) -> bytes:
    """The strict JSON report as bytes; ``partial`` marks a run cut short (Ctrl-C, SIGTERM,
    an internal error)."""
    doc = report_dict(rows, seed=seed, versions=versions, verdict=verdict, config=config, agreement=agreement,
                      info=info)
    if partial:
        doc["partial"] = True
    return dumps(doc).encode("utf-8")


def write_json(rows: Sequence[Row], path: str | Path, *, seed: Optional[int], versions: Mapping[str, str],
               verdict: Optional[str] = None, partial: bool = False, flag: str = "--json",
               config: Optional[GateConfig] = None, agreement: Optional[Sequence[Agreement]] = None,
               info: RunInfo = NO_INFO) -> None:
    """The strict JSON report, written atomically (see ``render.files``)."""
    write_atomic(path, json_bytes(rows, seed=seed, versions=versions, verdict=verdict, partial=partial,
                                  config=config, agreement=agreement, info=info), flag=flag)


HARNESS_PACKAGES = ("conformance", "numpy", "ml_dtypes", "hypothesis", "rich")


def versions(extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """Python and the harness's own packages, from package metadata, then ``extra``: the versions
    the backends that ran report of their frameworks (a harness package already named keeps
    this process's version)."""
    found = _harness_versions()
    return {**found, **{k: v for k, v in (extra or {}).items() if k not in found}}


@functools.cache
def _harness_versions() -> dict[str, str]:
    """Python's and the harness packages' versions, read from package metadata once per process
    (:func:`versions` copies it)."""
    found = {"python": platform.python_version()}
    for name in HARNESS_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


# ----------------------------------------------------------------------------- both reports

def write_reports(rows: Sequence[Row], paths: ReportPaths, *, seed: Optional[int],
                  partial: bool = False, config: Optional[GateConfig] = None,
                  agreement: Optional[Sequence[Agreement]] = None, info: RunInfo = NO_INFO) -> list[str]:
    """Write the JSON and JUnit reports asked for and return their paths.  A partial report
    says so and fails: an interrupted gate is not a pass."""
    written = []
    if paths.json:
        write_json(rows, paths.json, seed=seed, versions=versions(info.versions), partial=partial,
                   verdict="fail" if partial else None, config=config, agreement=agreement, info=info)
        written.append(paths.json)
    if paths.junit:
        write_junit(rows, paths.junit, partial=partial, config=config, info=info)
        written.append(paths.junit)
    if paths.html:
        from conformance.render.html import render_html

        doc = report_dict(rows, seed=seed, versions=versions(info.versions), verdict="fail" if partial else None,
                          config=config, agreement=agreement, info=info, plots=True)
        render_html({**doc, "partial": True} if partial else doc, paths.html)
        written.append(paths.html)
    return written


def _files_only(paths: ReportPaths) -> ReportPaths:
    """``paths`` without the streams (``/dev/stdout``, a FIFO), which are appended to, never replaced."""
    return ReportPaths(*(None if p is None or is_stream(p) else p for p in (paths.json, paths.junit)))


@contextmanager
def placeholder(paths: ReportPaths, *, seed: Optional[int],
                config: Optional[GateConfig] = None) -> Iterator[None]:
    """A failing partial report with no rows at each report file for the block, which the final
    report replaces atomically: a process that vanishes mid-run (``os._exit`` in in-process
    code, SIGKILL, the OOM killer) leaves a failing report behind, never none.  A usage error
    inside the block removes it again (exit 2 writes nothing)."""
    files_only = _files_only(paths)
    write_reports([], files_only, seed=seed, partial=True, config=config)
    try:
        yield
    except UsageError:
        remove_stale(files_only)
        raise


@contextmanager
def partial_on_interrupt(paths: ReportPaths, rows: Callable[[], Sequence[Row]], *,
                         seed: Optional[int], config: Optional[GateConfig] = None,
                         info: Callable[[], RunInfo] = RunInfo) -> Iterator[None]:
    """Ctrl-C, SIGTERM or an internal error inside the block writes ``rows()`` (the rows
    finished so far) as a partial report, then goes on to the CLI, which exits 130, 143 or 3.
    A usage error (exit 2) writes nothing: it is raised before there is anything to report,
    or by the report writing itself.  Until the block ends, a placeholder report stands in.
    ``info()`` is the run so far (timings, skipped rows), for the partial report."""
    with placeholder(paths, seed=seed, config=config):
        try:
            yield
        except UsageError:
            raise
        except (KeyboardInterrupt, Exception):
            write_reports(rows(), paths, seed=seed, partial=True, config=config, info=info())
            raise
