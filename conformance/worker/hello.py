"""A worker's hello checked before the client believes it: its facts well formed and bounded,
and every string a terminal may show made printable."""
from __future__ import annotations

from typing import Any, Optional

from conformance.backends import BackendUnavailable
from conformance.categories import NAMES
from conformance.dtypes import DTYPES
from conformance.ops import OPS
from conformance.worker.protocol import PROTOCOL_VERSION, Message

MAX_HELLO_ITEMS = 4096  # entries of each hello list or table
MAX_BOUNDARY_SIZES = 256  # sizes per dtype pair and direction
MAX_BOUNDARY_SIZE = 1 << 24  # elements of one boundary batch
MAX_TEXT = 300  # characters of one string from a worker


def printable(text: Any) -> str:
    """A worker's string made safe for a terminal: control characters escaped, length capped."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return out if len(out) <= MAX_TEXT else out[:MAX_TEXT - 3] + "..."


_HELLO = {"backend": str, "supports": list, "suite_pairs": list}  # what the client cannot do without


def _strings(value: Any, *, length: int) -> bool:
    return isinstance(value, list) and len(value) == length and all(isinstance(v, str) for v in value)


def _size_list(value: Any) -> bool:
    return isinstance(value, list) and len(value) <= MAX_BOUNDARY_SIZES and all(
        isinstance(n, int) and not isinstance(n, bool) and 0 < n <= MAX_BOUNDARY_SIZE for n in value)


def _table(value: Any, *, valid: Any) -> bool:
    return isinstance(value, dict) and len(value) <= MAX_HELLO_ITEMS and all(valid(v) for v in value.values())


def _hello_problem(h: dict) -> Optional[str]:
    """What is wrong with a hello's facts (None when they are well formed and bounded)."""
    if len(h["supports"]) > MAX_HELLO_ITEMS or not all(_strings(t, length=3) for t in h["supports"]):
        return f"supports must be at most {MAX_HELLO_ITEMS} [dtype, out_dtype, direction] triples"
    if len(h["suite_pairs"]) > MAX_HELLO_ITEMS or not all(
            _strings(p, length=2) and set(p) <= set(DTYPES) for p in h["suite_pairs"]):
        return f"suite_pairs must be at most {MAX_HELLO_ITEMS} [dtype, out_dtype] pairs of known dtypes"
    if not _table(h.get("boundary_sizes", {}), valid=_size_list):
        return (f"boundary_sizes must map to at most {MAX_BOUNDARY_SIZES} sizes of 1 to "
                f"{MAX_BOUNDARY_SIZE} elements")
    for key in ("skip_reasons", "versions"):
        if not _table(h.get(key) or {}, valid=lambda v: isinstance(v, str)):
            return f"{key} must be a table of strings"
    if not all(isinstance(h.get(k), (str, type(None))) for k in ("profile", "variant")):
        return "profile and variant must be strings or null"
    return _op_problem(h)


def _op_problem(h: dict) -> Optional[str]:
    """What is wrong with a hello's op facts (``ops``, ``prelu_supports``, ``prelu_allowed``; a hello
    without them serves LeakyReLU only)."""
    ops, pairs, allowed = h.get("ops", []), h.get("prelu_supports", []), h.get("prelu_allowed", [])
    if not isinstance(ops, list) or len(ops) > len(OPS) or not all(isinstance(o, str) and o in OPS for o in ops):
        return f"ops must be a list of known ops ({', '.join(OPS)})"
    if not isinstance(pairs, list) or len(pairs) > MAX_HELLO_ITEMS or not all(
            _strings(p, length=2) and p[0] in DTYPES and p[1] in ("forward", "backward") for p in pairs):
        return f"prelu_supports must be at most {MAX_HELLO_ITEMS} [dtype, direction] pairs"
    if not isinstance(allowed, list) or len(allowed) > len(NAMES) or not all(
            isinstance(c, str) and c in NAMES for c in allowed):
        return "prelu_allowed must be a list of triage category names"
    return None


def _clean_hello(h: dict) -> dict:
    """The hello with every string a terminal may show made printable."""
    tables = {k: {printable(key): printable(v) for key, v in (h.get(k) or {}).items()}
              for k in ("skip_reasons", "versions")}
    names = {k: None if h.get(k) is None else printable(h[k]) for k in ("backend", "profile", "variant")}
    return {**h, **tables, **names, "machine": clean_machine(h.get("machine"))}


_MACHINE_TEXT = ("platform", "machine", "cpu", "device")
_MACHINE_STATES = ("flush_to_zero", "denormals_are_zero")


def clean_machine(value: object) -> dict:
    """What a worker said of its machine (``conformance.machine.describe`` and its device), kept
    to the known fields, strings printable, flags bounded; {} from a worker that says nothing."""
    if not isinstance(value, dict):
        return {}
    out: dict = {k: printable(value[k]) for k in _MACHINE_TEXT if isinstance(value.get(k), str)}
    out.setdefault("platform", "unknown")
    out.setdefault("machine", "unknown")
    out.setdefault("cpu", None)
    flags = value.get("cpu_flags")
    out["cpu_flags"] = [printable(f) for f in flags[:64] if isinstance(f, str)] if isinstance(flags, list) else None
    out.update({k: value[k] if isinstance(value.get(k), bool) else None for k in _MACHINE_STATES})
    return out if value else {}


def check_hello(message: Message, *, command: str) -> dict:
    """The hello's header, checked and cleaned; BackendUnavailable (one line) when it is not one."""
    h = message.header
    if message.type == "error":
        raise BackendUnavailable(printable(h.get("message", "the worker refused to start")))
    if message.type != "hello":
        raise BackendUnavailable(f"worker {command!r} did not say hello (got {printable(repr(message.type))})")
    if h.get("protocol") != PROTOCOL_VERSION:
        spoken = printable(repr(h.get("protocol")))
        raise BackendUnavailable(f"worker {command!r} speaks protocol {spoken}, this client "
                                 f"{PROTOCOL_VERSION}; install the same conformance version on both sides")
    missing = [k for k, kind in _HELLO.items() if not isinstance(h.get(k), kind)]
    if missing:
        raise BackendUnavailable(f"worker {command!r} sent a hello without {', '.join(missing)}")
    problem = _hello_problem(h)
    if problem is not None:
        raise BackendUnavailable(f"worker {command!r} sent a malformed hello: {problem}")
    return _clean_hello(h)
