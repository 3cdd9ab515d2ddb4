"""JSON (schema ``leakyrelu-conformance/1``) and JUnit XML.

The JSON is strict: no NaN or Infinity literals.  Every floating value is an
object ``{"dtype", "hex", "bits", "decimal"}``: ``float.hex`` of the value
(``"inf"``, ``"-inf"``, ``"nan"`` for the specials), its bit pattern in its own
dtype as ``0x...``, and its decimal ``repr`` as a string.  ``SCHEMA`` is the
JSON Schema document; :func:`validate` checks a report against the subset of
JSON Schema it uses (``jsonschema`` is not a dependency).
"""
from __future__ import annotations

import json
import math
import platform
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

import numpy as np

from conformance.dtypes import DTYPES, hex_value, info
from conformance.errors import UsageError
from conformance.report.agreement import Agreement
from conformance.report.evaluate import Finding, Row
from conformance.report.files import ReportPaths, is_stream, remove_stale, write_atomic
from conformance.report.gate import CATEGORIES, VERDICTS, GateConfig, config_dict, overall
from conformance.report.messages import Offender
from conformance.report.text import position

SCHEMA_ID = "leakyrelu-conformance/1"
_DTYPES = list(DTYPES)
_VALUE = {"type": "object", "required": ["dtype", "hex", "bits", "decimal"],
          "additionalProperties": False,
          "properties": {"dtype": {"enum": _DTYPES}, "hex": {"type": "string"},
                         "bits": {"type": "string"}, "decimal": {"type": "string"}}}
_MAYBE_VALUE = {"anyOf": [_VALUE, {"type": "null"}]}
_MAYBE_INT = {"type": ["integer", "null"]}
_POSITION = {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]}
_EXAMPLE = {"type": "object", "additionalProperties": False,
            "required": ["index", "part", "x", "dy", "expected", "actual", "core", "tile"],
            "properties": {"index": {"type": "integer"}, "part": {"type": "string"},
                           "position": _POSITION,  # optional: index in the input's shape
                           "x": _MAYBE_VALUE, "dy": _MAYBE_VALUE, "expected": _MAYBE_VALUE,
                           "actual": _MAYBE_VALUE, "core": _MAYBE_INT, "tile": _MAYBE_INT}}
_FINDING = {"type": "object", "additionalProperties": False,
            "required": ["category", "count", "allowed", "summary", "detail", "examples",
                         "reproducer", "violations"],
            "properties": {"category": {"enum": list(CATEGORIES)}, "count": {"type": "integer"},
                           "allowed": {"type": "boolean"}, "summary": {"type": "string"},
                           "detail": {"type": "object"}, "examples": {"type": "array", "items": _EXAMPLE},
                           "reproducer": {"type": ["string", "null"]},
                           "violations": {"type": "integer"}}}
_RATIO = {"anyOf": [_VALUE, {"type": "null"}]}
_ROW_PROPS = {
    "backend": {"type": "string"}, "profile": {"type": ["string", "null"]},
    "variant": {"type": ["string", "null"]}, "dtype": {"enum": _DTYPES},
    "out_dtype": {"enum": _DTYPES}, "direction": {"enum": ["forward", "backward"]},
    "alpha": _VALUE, "elements": {"type": "integer"}, "mismatches": {"type": "integer"},
    "max_abs": _VALUE, "max_rel": _VALUE, "max_ulp": {"type": "integer"},
    "verdict": {"enum": list(VERDICTS)}, "findings": {"type": "array", "items": _FINDING},
    "violations": {"type": "integer"}, "nan_positions": {"type": "integer"},
    "inf_positions": {"type": "integer"}, "zero_signs": {"type": "integer"},
    "one_thousandth_ratio": _RATIO, "five_thousandths_ratio": _RATIO,
    "cosine_similarity": _RATIO, "error_balance": _RATIO,
    "parts": {"type": "array", "items": {"type": "string"}},
}
_OPTIONAL_ROW_PROPS = {  # present only when they say something
    "notes": {"type": "array", "items": {"type": "string"}},
}
_NUMBER_PAIR = {"type": "object", "required": ["rtol", "atol"], "additionalProperties": False,
                "properties": {"rtol": {"type": "number"}, "atol": {"type": "number"}}}
_CONFIG = {"type": "object", "additionalProperties": False,
           "required": ["tolerances", "max_ulp", "strict_zeros", "policy", "sources"],
           "properties": {
               "tolerances": {"type": "object", "additionalProperties": _NUMBER_PAIR},
               "max_ulp": {"type": "integer"}, "strict_zeros": {"type": "boolean"},
               "policy": {"type": "object",
                          "additionalProperties": {"type": "array", "items": {"enum": list(CATEGORIES)}}},
               "sources": {"type": "array", "items": {"type": "string"}},
               "strict": {"type": "boolean"},
               "allowed": {"type": "array", "items": {"enum": list(CATEGORIES)}}}}
_AGREEMENT = {"type": "object", "additionalProperties": False,
              "required": ["reference", "backend", "profile", "dtype", "out_dtype", "direction", "alpha",
                           "identical", "differing", "elements", "why"],
              "properties": {"reference": {"type": "string"}, "backend": {"type": "string"},
                             "profile": {"type": ["string", "null"]}, "dtype": {"enum": _DTYPES},
                             "out_dtype": {"enum": _DTYPES}, "direction": {"enum": ["forward", "backward"]},
                             "alpha": _VALUE, "identical": {"type": "boolean"},
                             "differing": {"type": "integer"}, "elements": {"type": "integer"},
                             "why": {"type": "string"}, "causes": {"type": "array", "items": {"type": "string"}}}}
SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SCHEMA_ID,
    "type": "object", "additionalProperties": False,
    "required": ["schema", "verdict", "seed", "versions", "rows"],
    "properties": {
        "schema": {"const": SCHEMA_ID}, "verdict": {"enum": ["pass", "fail"]},
        "seed": {"type": ["integer", "null"]}, "versions": {"type": "object"},
        "partial": {"type": "boolean"},  # optional: true when Ctrl-C, SIGTERM or an internal error stopped the run
        "config": _CONFIG,  # optional: the gate configuration the rows were judged under
        "rows": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                            "required": list(_ROW_PROPS),
                                            "properties": {**_ROW_PROPS, **_OPTIONAL_ROW_PROPS}}},
        "agreement": {"type": "array", "items": _AGREEMENT},  # optional: with run --reference
    },
}


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
            "decimal": repr(wide)}


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
    return {"category": f.category, "count": f.count, "allowed": f.allowed, "summary": f.summary,
            "detail": _jsonable(f.detail), "examples": [_example(e, row=row) for e in f.examples],
            "reproducer": f.reproducer, "violations": f.violations}


def row_dict(row: Row) -> dict:
    """One row with docs/architecture.md's fields plus the extra metric fields."""
    m = row.metrics
    return {
        "backend": row.backend, "profile": row.profile, "variant": row.variant,
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
        "parts": list(row.parts),
        **({"notes": list(row.notes)} if row.notes else {}),
    }


def agreement_dict(a: Agreement) -> dict:
    """One agreement between a row and the reference backend's row, as JSON."""
    return {"reference": a.reference, "backend": a.backend, "profile": a.profile, "dtype": a.dtype,
            "out_dtype": a.out_dtype, "direction": a.direction, "alpha": encode_value(a.alpha),
            "identical": a.identical, "differing": a.differing, "elements": a.elements, "why": a.why,
            "causes": list(a.causes)}


def report_dict(rows: Sequence[Row], *, seed: Optional[int], versions: dict,
                verdict: Optional[str] = None, config: Optional[GateConfig] = None,
                agreement: Optional[Sequence[Agreement]] = None) -> dict:
    """The whole report document; ``config`` records the gate configuration it was judged under,
    ``agreement`` the comparison with a reference backend (None: none was asked for)."""
    doc = {"schema": SCHEMA_ID, "verdict": verdict or overall(r.verdict for r in rows),
           "seed": seed, "versions": _jsonable(dict(versions))}
    if config is not None:
        doc["config"] = config_dict(config)
    doc["rows"] = [row_dict(r) for r in rows]
    if agreement is not None:
        doc["agreement"] = [agreement_dict(a) for a in agreement]
    return doc


def dumps(doc: dict) -> str:
    """Strict JSON text (raises on NaN/inf floats instead of writing literals)."""
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def json_bytes(rows: Sequence[Row], *, seed: Optional[int], versions: dict,
               verdict: Optional[str] = None, partial: bool = False,
               config: Optional[GateConfig] = None, agreement: Optional[Sequence[Agreement]] = None) -> bytes:
    """The strict JSON report as bytes; ``partial`` marks a run cut short (Ctrl-C, SIGTERM,
    an internal error)."""
    doc = report_dict(rows, seed=seed, versions=versions, verdict=verdict, config=config, agreement=agreement)
    if partial:
        doc["partial"] = True
    return dumps(doc).encode("utf-8")


def write_json(rows: Sequence[Row], path: str | Path, *, seed: Optional[int], versions: dict,
               verdict: Optional[str] = None, partial: bool = False, flag: str = "--json",
               config: Optional[GateConfig] = None, agreement: Optional[Sequence[Agreement]] = None) -> None:
    """The strict JSON report, written atomically (see ``report.files``)."""
    write_atomic(path, json_bytes(rows, seed=seed, versions=versions, verdict=verdict, partial=partial,
                                  config=config, agreement=agreement), flag=flag)


_PACKAGES = ("numpy", "ml_dtypes", "torch", "tensorflow-cpu", "hypothesis", "rich", "conformance")


def versions() -> dict[str, str]:
    """Installed versions, from package metadata (importing TensorFlow would cost seconds)."""
    found = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found



# ----------------------------------------------------------------------------- schema check

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _type_ok(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, _TYPES[name])


def _check_object(value: dict, schema: dict, path: str) -> list[str]:
    errors = [f"{path}: missing {k!r}" for k in schema.get("required", []) if k not in value]
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    if extra is False:
        errors += [f"{path}: unexpected {k!r}" for k in value if k not in props]
    elif isinstance(extra, dict):
        errors += [e for k in value if k not in props for e in validate(value[k], extra, path=f"{path}.{k}")]
    for key, sub in props.items():
        if key in value:
            errors += validate(value[key], sub, path=f"{path}.{key}")
    return errors


def validate(value: Any, schema: dict, *, path: str = "$") -> list[str]:
    """Errors of ``value`` against ``schema`` (type, enum, const, anyOf, required,
    properties, additionalProperties as false or a schema, items); empty when valid."""
    if "anyOf" in schema:
        if all(validate(value, s, path=path) for s in schema["anyOf"]):
            return [f"{path}: matches none of anyOf"]
        return []
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(_type_ok(value, n) for n in names):
            return [f"{path}: expected {types}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} not in {schema['enum']}"]
    if "const" in schema and value != schema["const"]:
        return [f"{path}: expected {schema['const']!r}"]
    if isinstance(value, dict):
        return _check_object(value, schema, path)
    if isinstance(value, list) and "items" in schema:
        return [e for i, item in enumerate(value) for e in validate(item, schema["items"], path=f"{path}[{i}]")]
    return []


# ----------------------------------------------------------------------------- JUnit

def _testcase(suite: ET.Element, row: Row) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"conformance.{row.backend}", name=row.title)
    props = ET.SubElement(case, "properties")
    for f in row.findings:
        ET.SubElement(props, "property", name=f.category,
                      value=f"{f.count} ({'allowed' if f.allowed else 'not allowed'}): {f.summary}")
    if row.verdict == "fail":
        bad = [f.category for f in row.findings if not f.allowed]
        failure = ET.SubElement(case, "failure", message=f"{row.title}: {', '.join(bad)}",
                                type="ConformanceFailure")
        failure.text = row.message
    elif row.verdict == "warn":
        ET.SubElement(case, "system-out").text = "warning (allowed findings)\n" + row.message


def junit_bytes(rows: Sequence[Row], *, partial: bool = False, config: Optional[GateConfig] = None) -> bytes:
    """One testcase per row; failures carry the torch.testing-style message.  A run cut
    short by Ctrl-C or SIGTERM gets an ``interrupted`` error case, so CI never reads it as green.
    ``config`` is named in the suite's ``config`` property."""
    root = ET.Element("testsuites")
    failures = sum(r.verdict == "fail" for r in rows)
    suite = ET.SubElement(root, "testsuite", name="leakyrelu-conformance", tests=str(len(rows) + partial),
                          failures=str(failures), errors=str(int(partial)), skipped="0")
    if config is not None:
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="config", value=config.described)
    if partial:
        case = ET.SubElement(suite, "testcase", classname="conformance", name="interrupted")
        ET.SubElement(case, "error", message="the run did not finish (interrupted, or ended before "
                                             "its report): the report is partial")
    for row in rows:
        _testcase(suite, row)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_junit(rows: Sequence[Row], path: str | Path, *, partial: bool = False, flag: str = "--junit",
                config: Optional[GateConfig] = None) -> None:
    """The JUnit XML report, written atomically (see ``report.files``)."""
    write_atomic(path, junit_bytes(rows, partial=partial, config=config), flag=flag)


# ----------------------------------------------------------------------------- both reports

def write_reports(rows: Sequence[Row], paths: ReportPaths, *, seed: Optional[int],
                  partial: bool = False, config: Optional[GateConfig] = None,
                  agreement: Optional[Sequence[Agreement]] = None) -> list[str]:
    """Write the JSON and JUnit reports asked for and return their paths.  A partial report
    says so and fails: an interrupted gate is not a pass."""
    written = []
    if paths.json:
        write_json(rows, paths.json, seed=seed, versions=versions(), partial=partial,
                   verdict="fail" if partial else None, config=config, agreement=agreement)
        written.append(paths.json)
    if paths.junit:
        write_junit(rows, paths.junit, partial=partial, config=config)
        written.append(paths.junit)
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
                         seed: Optional[int], config: Optional[GateConfig] = None) -> Iterator[None]:
    """Ctrl-C, SIGTERM or an internal error inside the block writes ``rows()`` (the rows
    finished so far) as a partial report, then goes on to the CLI, which exits 130, 143 or 3.
    A usage error (exit 2) writes nothing: it is raised before there is anything to report,
    or by the report writing itself.  Until the block ends, a placeholder report stands in."""
    with placeholder(paths, seed=seed, config=config):
        try:
            yield
        except UsageError:
            raise
        except (KeyboardInterrupt, Exception):
            write_reports(rows(), paths, seed=seed, partial=True, config=config)
            raise
