"""An msprobe statistics dump (task ``statistics``): each LeakyReLU call, its slope and the
input's Max and Min, and the value-range hazards those imply without any tensor.

The call names, slope arguments and framework defaults are read the way
``conformance/ingest/msprobe.py`` reads tensor dumps.  Statistics only give a
tensor's extremes, so a hazard is stated only when the extremes prove it
(every input subnormal, the most negative product past the dtype's max, ...).
"""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import ml_dtypes

from conformance.audit.record import DEFAULT, PASSED, Activation, with_value
from conformance.dtypes import DTYPES
from conformance.errors import UsageError
from conformance.ingest import bounded
from conformance.ingest.msprobe import _CALL, _DEFAULT_API, default_slope, find_dumps, slope

FP16_MAX = float(ml_dtypes.finfo("float16").max)


def is_stats_dump(path: Path) -> bool:
    """A dump.json, or a directory holding one (directly or as step*/proc*/dump.json)."""
    if path.is_file():
        return path.name == "dump.json"
    return (path / "dump.json").is_file() or any(path.glob("step*/*/dump.json"))


def _number(value: Any) -> Optional[float]:
    """A statistic: a number, or msprobe's "inf"/"-inf"/"nan" strings."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def dtype_name(text: Any) -> Optional[str]:
    """``torch.float16`` / MindSpore ``Float16`` as the table's name (None when not a float type)."""
    name = str(text or "").removeprefix("torch.").removeprefix("mindspore.").lower()
    return name if name in DTYPES else None


def hazards(*, alpha: float, dtype: Optional[str], high: Optional[float], low: Optional[float],
            out_dtype: Optional[str] = None) -> tuple[str, ...]:
    """The value-range hazards that the input's extremes and the slope prove."""
    found = []
    if dtype in DTYPES and low is not None and low < 0 and abs(alpha) > 1:
        limit = float(ml_dtypes.finfo(DTYPES[dtype].dtype).max)
        if abs(alpha * low) > limit:
            found.append(f"overflow: {alpha:g} x {low:g} is past the {dtype} max {limit:g}")
    extremes = [v for v in (high, low) if v is not None]
    if dtype == "float16" and any(math.isinf(v) or abs(v) > FP16_MAX for v in extremes):
        found.append("fp16 input beyond 65504 (inf): cast down before the call")
    elif out_dtype == "float16" and dtype != "float16" and any(abs(v) > FP16_MAX for v in extremes):
        found.append(f"{dtype} input beyond 65504, fp16 output: overflows when cast down")
    finite = [abs(v) for v in extremes if math.isfinite(v)]
    if finite and len(finite) == len(extremes) and max(finite) > 0:
        for half in ("float16", "bfloat16"):
            tiny = float(ml_dtypes.finfo(DTYPES[half].dtype).smallest_normal)
            if max(finite) < tiny:
                found.append(f"subnormal in {half}: |x| <= {max(finite):.3g} < {tiny:.3g}")
    return tuple(found)


def _header(file: Path) -> dict:
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{file}: not a readable dump.json ({type(exc).__name__})") from None
    doc = bounded.parse_json(text, where=str(file), fix="pass an msprobe dump", finite=False)
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict):
        raise UsageError(f"{file}: unknown dump.json layout (no top-level data); pass an msprobe dump")
    if not isinstance(doc.get("framework"), str) or doc["framework"] not in _DEFAULT_API:
        raise UsageError(f"{file}: framework {str(doc.get('framework'))[:40]!r} is not read "
                         "(pytorch and mindspore are)")
    return doc


def _call(name: str, entry: dict, *, framework: str) -> Activation:
    args = entry.get("input_args") or [{}]
    x = args[0] if isinstance(args[0], dict) else {}
    out = (entry.get("output") or [{}])[0]
    dtype, high, low = dtype_name(x.get("dtype")), _number(x.get("Max")), _number(x.get("Min"))
    api = _DEFAULT_API[framework]
    passed = slope(entry, skip=1)
    alpha = passed if passed is not None else default_slope(framework)[0]
    found = with_value(alpha, where=name, api=api, origin=PASSED if passed is not None else DEFAULT, dtype=dtype)
    risks = hazards(alpha=alpha, dtype=dtype, high=high, low=low,
                    out_dtype=dtype_name(out.get("dtype")) if isinstance(out, dict) else None)
    stats = {k: v for k, v in (("Max", high), ("Min", low)) if v is not None}
    return replace(found, hazards=risks, stats=stats or None)


def audit_stats(path: Path) -> list[Activation]:
    """Every forward LeakyReLU call of the dump(s) under ``path``, in dump order."""
    files = find_dumps(str(path))
    found = []
    for file in files:
        doc = _header(file)
        prefix = f"{file.parent.parent.name}/{file.parent.name}/" if len(files) > 1 else ""
        for name, entry in doc["data"].items():
            match = _CALL.match(name)
            if match and match["dir"] == "forward" and match["op"] != "leaky_relu_backward" and isinstance(entry, dict):
                found.append(_call(f"{prefix}{name.removesuffix('.forward')}", entry, framework=doc["framework"]))
    return found
