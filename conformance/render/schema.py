"""The JSON report's schema (``leakyrelu-conformance/1``) and a small checker of it.

:data:`SCHEMA` is the JSON Schema document; ``conformance/schemas/report.schema.json``
is the same document as a file shipped in the package (a test keeps the two equal),
for tools that validate a report with a JSON Schema library.  :func:`validate` checks
a report against the subset of JSON Schema that :data:`SCHEMA` uses, so the harness
needs no ``jsonschema`` at run time.

``summary``, each row's ``seconds`` and each value's ``value`` are written in every report
but optional in the schema: a ``leakyrelu-conformance/1`` report without them (from an older
harness, kept as a ``--baseline``) stays valid.
"""
from __future__ import annotations

import json
import math
from importlib import resources
from typing import Any

from conformance.dtypes import DTYPES
from conformance.judge.gate import CATEGORIES, VERDICTS
from conformance.ops import OPS
from conformance.reference.quantized import QDTYPES

SCHEMA_ID = "leakyrelu-conformance/1"
SCHEMA_FILES = {"json": "report.schema.json", "junit": "junit.xsd"}
_DTYPES = list(DTYPES)
_ROW_DTYPES = _DTYPES + list(QDTYPES)  # quantized rows: codes of a per-tensor affine setting
_VALUE = {"type": "object", "required": ["dtype", "hex", "bits", "decimal"],
          "additionalProperties": False,
          "properties": {"dtype": {"enum": _DTYPES}, "hex": {"type": "string"},
                         "bits": {"type": "string"}, "decimal": {"type": "string"},
                         "value": {"type": ["number", "null"]}}}  # always written; null: NaN or ±inf (see hex)
_MAYBE_VALUE = {"anyOf": [_VALUE, {"type": "null"}]}
_MAYBE_INT = {"type": ["integer", "null"]}
_COUNT = {"type": "integer", "minimum": 0}
_SECONDS = {"type": ["number", "null"], "minimum": 0}
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
_ROW_PROPS = {
    "backend": {"type": "string"}, "profile": {"type": ["string", "null"]},
    "variant": {"type": ["string", "null"]}, "dtype": {"enum": _ROW_DTYPES},
    "out_dtype": {"enum": _ROW_DTYPES}, "direction": {"enum": ["forward", "backward"]},
    "alpha": _VALUE, "elements": {"type": "integer"}, "mismatches": {"type": "integer"},
    "max_abs": _VALUE, "max_rel": _VALUE, "max_ulp": {"type": "integer"},
    "verdict": {"enum": list(VERDICTS)}, "findings": {"type": "array", "items": _FINDING},
    "violations": {"type": "integer"}, "nan_positions": {"type": "integer"},
    "inf_positions": {"type": "integer"}, "zero_signs": {"type": "integer"},
    "one_thousandth_ratio": _MAYBE_VALUE, "five_thousandths_ratio": _MAYBE_VALUE,
    "cosine_similarity": _MAYBE_VALUE, "error_balance": _MAYBE_VALUE,
    "parts": {"type": "array", "items": {"type": "string"}},
}
_OTHER_CHECK = {"type": "object", "additionalProperties": False, "required": ["name", "passes", "detail"],
                "properties": {"name": {"type": "string"}, "passes": {"type": "boolean"},
                               "detail": {"type": "string"}, "passes_if_shared_equal": {"type": "boolean"}}}
_OPTIONAL_ROW_PROPS = {
    "notes": {"type": "array", "items": {"type": "string"}},  # present only when there are notes
    "op": {"enum": list(OPS)},  # the operator, present only when not leaky_relu
    "other_checks": {"type": "array", "items": _OTHER_CHECK},  # other tools' verdicts; [] when not applicable
    "seconds": _SECONDS,  # always written: the row's one timing, null when the command did not time it
    "plots": {"type": "object"},  # what the HTML report draws (judge.plots); only in its document
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
                             "why": {"type": "string"}, "causes": {"type": "array", "items": {"type": "string"}},
                             "variant": {"type": "string"},
                             "op": {"enum": list(OPS)}}}  # present only when not leaky_relu
_VERDICT_COUNTS = {"type": "object", "additionalProperties": False,
                   "required": ["pass", "warn", "fail", "skipped"],
                   "properties": {v: _COUNT for v in (*VERDICTS, "skipped")}}
_CATEGORY_COUNTS = {"type": "object", "additionalProperties": False,
                    "required": ["rows", "elements", "not_allowed_rows"],
                    "properties": {"rows": _COUNT, "elements": _COUNT, "not_allowed_rows": _COUNT}}
_SKIPPED = {"type": "object", "additionalProperties": False, "required": ["backend", "reason", "rows"],
            "properties": {"backend": {"type": "string"}, "reason": {"type": "string"}, "rows": _COUNT}}
_DURATIONS = {"type": "object", "additionalProperties": False,
              "required": ["total_seconds", "rows_seconds", "backends"],
              "properties": {"total_seconds": _SECONDS, "rows_seconds": _SECONDS,
                             "backends": {"type": "array", "items": {
                                 "type": "object", "additionalProperties": False,
                                 "required": ["backend", "seconds"],
                                 "properties": {"backend": {"type": "string"}, "seconds": _SECONDS}}}}}
_SUMMARY = {"type": "object", "additionalProperties": False,
            "required": ["rows", "verdicts", "categories", "backends", "skipped", "command", "config",
                         "durations"],
            "properties": {"rows": _COUNT, "verdicts": _VERDICT_COUNTS,
                           "categories": {"type": "object", "additionalProperties": _CATEGORY_COUNTS},
                           "backends": {"type": "object", "additionalProperties": _VERDICT_COUNTS},
                           "skipped": {"type": "array", "items": _SKIPPED},
                           "command": {"anyOf": [{"type": "array", "items": {"type": "string"}},
                                                 {"type": "null"}]},
                           "config": {"type": ["string", "null"]},
                           "durations": _DURATIONS}}
_MACHINE_PROPS = {"platform": {"type": "string"}, "machine": {"type": "string"},
                  "cpu": {"type": ["string", "null"]},
                  "cpu_flags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
                  "flush_to_zero": {"type": ["boolean", "null"]},
                  "denormals_are_zero": {"type": ["boolean", "null"]},
                  "device": {"type": "string"}}  # a worker's own word of its device
_MACHINE = {"type": "object", "additionalProperties": False,
            "required": ["platform", "machine", "cpu", "cpu_flags", "flush_to_zero", "denormals_are_zero"],
            "properties": _MACHINE_PROPS}
_ENVIRONMENT = {"type": "object", "additionalProperties": False,
                "required": ["platform", "machine", "cpu", "cpu_flags", "flush_to_zero", "denormals_are_zero"],
                "properties": {**_MACHINE_PROPS, "workers": {"type": "object", "additionalProperties": _MACHINE}}}
SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SCHEMA_ID,
    "type": "object", "additionalProperties": False,
    "required": ["schema", "verdict", "seed", "versions", "rows"],
    "properties": {
        "schema": {"const": SCHEMA_ID}, "verdict": {"enum": ["pass", "fail"]},
        "seed": {"type": ["integer", "null"]},
        "versions": {"type": "object", "additionalProperties": {"type": "string"}},
        "partial": {"type": "boolean"},  # optional: true when Ctrl-C, SIGTERM or an internal error stopped the run
        "config": _CONFIG,  # optional: the gate configuration the rows were judged under
        "environment": _ENVIRONMENT,  # optional: the machine and float state the run had (conformance.machine)
        "summary": _SUMMARY,  # always written
        "rows": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                            "required": list(_ROW_PROPS),
                                            "properties": {**_ROW_PROPS, **_OPTIONAL_ROW_PROPS}}},
        "agreement": {"type": "array", "items": _AGREEMENT},  # optional: with run --reference
    },
}


def schema_text(kind: str = "json") -> str:
    """The shipped schema file of ``kind`` (``json``: the JSON report, ``junit``: the JUnit XSD)."""
    return resources.files("conformance.schemas").joinpath(SCHEMA_FILES[kind]).read_text(encoding="utf-8")


def schema_file_text() -> str:
    """:data:`SCHEMA` as the text of ``report.schema.json`` (what the shipped file holds)."""
    return json.dumps(SCHEMA, indent=2) + "\n"


# ----------------------------------------------------------------------------- the checker

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


def _scalar_errors(value: Any, schema: dict, path: str) -> list[str]:
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} not in {schema['enum']}"]
    if "const" in schema and value != schema["const"]:
        return [f"{path}: expected {schema['const']!r}"]
    if "minimum" in schema and _type_ok(value, "number") and value < schema["minimum"]:
        return [f"{path}: {value!r} is below {schema['minimum']}"]
    return []


def validate(value: Any, schema: dict, *, path: str = "$") -> list[str]:
    """Errors of ``value`` against ``schema`` (type, enum, const, minimum, anyOf, required,
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
    errors = _scalar_errors(value, schema, path)
    if errors:
        return errors
    if isinstance(value, dict):
        return _check_object(value, schema, path)
    if isinstance(value, list) and "items" in schema:
        return [e for i, item in enumerate(value) for e in validate(item, schema["items"], path=f"{path}[{i}]")]
    return []
