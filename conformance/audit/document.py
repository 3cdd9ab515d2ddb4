"""The ``leakyrelu-audit/1`` JSON document: strict JSON (no NaN/inf literals)."""
from __future__ import annotations

import math
from typing import Any, Optional

from conformance.audit.compare import Pair
from conformance.audit.record import Activation, Audit

SCHEMA_ID = "leakyrelu-audit/1"


def _number(v: Optional[float]) -> Any:
    """A finite float as itself; inf/NaN as their ``float.hex`` text (strict JSON has no literal)."""
    return None if v is None else (v if math.isfinite(v) else float(v).hex())


def activation_dict(a: Activation) -> dict:
    return {"where": a.where, "framework": a.framework, "api": a.api, "origin": a.origin,
            "slope": _number(a.slope), "slope_hex": None if a.slope is None else float(a.slope).hex(),
            "op": a.op,
            "default": None if a.entry is None else {"api": a.api, "framework": a.framework, "slope": a.entry.declared},
            "equals_default": a.equals_default, "implicit": a.implicit, "dtype": a.dtype,
            "expression": a.expression, "hazards": list(a.hazards),
            "input": None if a.stats is None else {k: _number(v) for k, v in a.stats.items()},
            "weight": None if a.weight is None else [_number(v) for v in a.weight], "provenance": a.provenance,
            "bounds": None if a.bounds is None else [_number(v) for v in a.bounds], "arguments": list(a.arguments)}


def audit_dict(a: Audit) -> dict:
    return {"target": a.target, "kind": a.kind, "notes": list(a.notes),
            "activations": [activation_dict(x) for x in a.activations]}


def pair_dict(p: Pair) -> dict:
    return {"index": p.index, "mismatch": p.mismatch, "reason": p.reason if p.mismatch else None,
            "left": None if p.left is None else p.left.where, "right": None if p.right is None else p.right.where}


def document(main: Audit, *, against: Optional[Audit], pairs: list[Pair], strict: bool, verdict: str) -> dict:
    """The whole report: both audits, the pairs, the counts and the verdict."""
    audits = [main] + ([against] if against is not None else [])
    return {"schema": SCHEMA_ID, "verdict": verdict, "strict": strict,
            "audit": audit_dict(main), "against": None if against is None else audit_dict(against),
            "pairs": [pair_dict(p) for p in pairs],
            "counts": {"activations": sum(len(a.activations) for a in audits),
                       "implicit_defaults": sum(x.implicit for a in audits for x in a.activations),
                       "dynamic": sum(x.origin == "dynamic" for a in audits for x in a.activations),
                       "hazards": sum(len(x.hazards) for a in audits for x in a.activations),
                       "mismatches": sum(p.mismatch for p in pairs)}}
