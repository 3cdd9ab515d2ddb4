"""The worker protocol: frames of ``.npz`` bytes over a byte stream.

A frame is ``MAGIC`` (4 bytes), the payload length (8 bytes, big-endian), then
the payload: an ``.npz`` archive written by ``np.savez`` and read with
``allow_pickle=False``.  Its member ``header`` is UTF-8 JSON (as uint8); every
other member is an array.  Arrays of the harness's float formats travel as their
unsigned bit patterns and the header names their dtype, so bfloat16 crosses
exactly and no dtype needs pickling.

Messages (``header["type"]``):

- ``hello`` (worker -> client, first frame): ``protocol``, ``backend``, ``profile``,
  ``variant``, ``supports`` ([dtype, out_dtype, direction] triples), ``skip_reasons``,
  ``suite_pairs``, ``boundary_sizes`` and ``versions``;
- ``call`` (client -> worker): ``direction``, ``alpha``, ``out_dtype``; arrays ``x`` and ``dy``;
- ``result`` (worker -> client): ``rejected`` (a refusal's reason or null), ``layout``,
  ``hazards``; array ``value``;
- ``probe`` (client -> worker): ``api``, an entry of the default-slope table
  (``conformance.reference.defaults``) to probe in the worker's environment;
- ``probed`` (worker -> client): ``api``, ``slope`` and ``version`` (the distribution that ran it);
- ``error`` (worker -> client, instead of hello, result or probed): ``kind`` (``unavailable``,
  ``unsupported``, ``error``) and a one-line ``message``.
"""
from __future__ import annotations

import dataclasses
import io
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Optional

import numpy as np

from conformance.dtypes import DTYPES, info, to_bits
from conformance.errors import ProtocolError
from conformance.records import BackendResult, Hazard, TileLayout, TileSpan

PROTOCOL_VERSION = 1
MAGIC = b"LRW1"
PREFIX = struct.Struct(">4sQ")
MAX_FRAME = 1 << 36  # 64 GiB: a larger length is garbage, not data


@dataclass(frozen=True)
class Message:
    """One decoded frame: the JSON header and the named arrays."""

    header: dict
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def type(self) -> str:
        return str(self.header.get("type"))


# ----------------------------------------------------------------------------- payloads

def _jsonable(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _wire(a: np.ndarray) -> tuple[np.ndarray, Optional[str]]:
    """An array as sent: float formats as their bits (with the dtype name), others as they are."""
    a = np.ascontiguousarray(a)
    if a.dtype.name in DTYPES:
        return to_bits(a), a.dtype.name
    if a.dtype.kind not in "biuf":
        raise ProtocolError(f"cannot send an array of dtype {a.dtype}")
    return a, None


def encode(message: Message) -> bytes:
    """The ``.npz`` payload of ``message``."""
    wired = {name: _wire(a) for name, a in message.arrays.items()}
    header = {**message.header, "dtypes": {name: dt for name, (_, dt) in wired.items()}}
    text = json.dumps(header, default=_jsonable, allow_nan=False).encode()
    buf = io.BytesIO()
    np.savez(buf, header=np.frombuffer(text, np.uint8), **{name: a for name, (a, _) in wired.items()})
    return buf.getvalue()


def decode(payload: bytes) -> Message:
    """The message in a payload; ProtocolError when it is not one."""
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        header = json.loads(arrays.pop("header").tobytes().decode())
    except Exception as exc:
        raise ProtocolError(f"unreadable payload ({type(exc).__name__}: {exc})") from None
    if not isinstance(header, dict) or "type" not in header:
        raise ProtocolError("payload header has no message type")
    dtypes = header.pop("dtypes", {}) or {}
    for name, dt in dtypes.items():
        if dt is not None and name in arrays:
            arrays[name] = arrays[name].view(info(dt).dtype)
    return Message(header, arrays)


# ----------------------------------------------------------------------------- frames

def frame(message: Message) -> bytes:
    payload = encode(message)
    return PREFIX.pack(MAGIC, len(payload)) + payload


def check_prefix(prefix: bytes) -> int:
    """The payload length a frame prefix announces; ProtocolError on garbage."""
    magic, length = PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise ProtocolError(f"bad frame start {prefix[:16]!r}; something else wrote to the worker's stdout")
    if length > MAX_FRAME:
        raise ProtocolError(f"frame length {length} is beyond {MAX_FRAME}")
    return int(length)


def write_frame(stream: BinaryIO, message: Message) -> None:
    stream.write(frame(message))
    stream.flush()


def read_frame(stream: BinaryIO) -> Optional[Message]:
    """The next message from a blocking stream; None at a clean end of stream."""
    prefix = stream.read(PREFIX.size)
    if not prefix:
        return None
    if len(prefix) < PREFIX.size:
        raise ProtocolError("stream ended inside a frame prefix")
    length = check_prefix(prefix)
    payload = stream.read(length)
    if len(payload) < length:
        raise ProtocolError("stream ended inside a frame")
    return decode(payload)


# ----------------------------------------------------------------------------- results

def result_message(result: BackendResult) -> Message:
    """A backend's result as a ``result`` message (layout and hazards as plain data)."""
    header = {"type": "result", "rejected": result.rejected,
              "layout": None if result.layout is None else dataclasses.asdict(result.layout),
              "hazards": [dataclasses.asdict(h) for h in result.hazards]}
    arrays = {} if result.value is None else {"value": np.asarray(result.value)}
    return Message(header, arrays)


def _layout(data: Optional[Mapping[str, Any]]) -> Optional[TileLayout]:
    if data is None:
        return None
    spans = tuple(TileSpan(**span) for span in data["spans"])
    return TileLayout(data["tile_elements"], spans, data.get("align_elements", 1))


def result_from(message: Message) -> BackendResult:
    """The BackendResult a ``result`` message carries (its value is not checked here)."""
    header = message.header
    hazards = tuple(Hazard(h["kind"], h["index"], tuple(h["cores"])) for h in header.get("hazards") or ())
    return BackendResult(message.arrays.get("value"), layout=_layout(header.get("layout")),
                         hazards=hazards, rejected=header.get("rejected"))


def error_message(kind: str, text: str) -> Message:
    """An ``error`` reply; ``text`` is cut to its first line."""
    first = (text.strip().splitlines() or ["(no message)"])[0]
    return Message({"type": "error", "kind": kind, "message": first})
