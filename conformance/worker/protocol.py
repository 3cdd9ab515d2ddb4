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
  ``suite_pairs``, ``boundary_sizes`` (for a backend with sizes of its own; a pair it does not
  name takes the default sizes, which the client computes) and ``versions``; a backend computing
  more ops than LeakyReLU adds ``ops``, ``prelu_supports`` ([dtype, direction] pairs) and
  ``prelu_allowed`` (category names); a hello without them serves LeakyReLU only;
- ``call`` (client -> worker): ``direction``, ``alpha``, ``out_dtype``; arrays ``x`` and ``dy``;
  a call of another op than LeakyReLU also names it, ``op`` (``prelu``, ``rrelu``), and a PReLU
  call has the array ``weight`` (:func:`call_message`; a LeakyReLU call is what it always was);
- ``result`` (worker -> client): ``rejected`` (a refusal's reason or null), ``layout`` (a
  ``TilePlan``, or null; the field keeps its name on the wire),
  ``hazards``; array ``value``, and ``dweight`` for a PReLU backward;
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
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Optional

import numpy as np

from conformance.dtypes import DTYPES, info, to_bits
from conformance.errors import ProtocolError, one_line
from conformance.records import DEFAULT_OP, BackendResult, Direction, Hazard, TilePlan, TileSpan

PROTOCOL_VERSION = 1
MAGIC = b"LRW1"
PREFIX = struct.Struct(">4sQ")
MAX_FRAME = 1 << 36  # 64 GiB: what a worker accepts from its client (the client is trusted)
SMALL_FRAME = 4 << 20  # bytes of a hello, probed or error frame
FRAME_HEADROOM = 16 << 20  # bytes a result frame may hold beyond its value (header, tile plan, hazards:
#   an overrun of one whole Unified Buffer tile is ~100k hazard records)


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


def result_frame_limit(value_bytes: int) -> int:
    """The largest result frame a call whose value is ``value_bytes`` long may get back."""
    return value_bytes + max(FRAME_HEADROOM, value_bytes)


def _check_stored(payload: bytes) -> None:
    """Every member stored as ``np.savez`` writes it: no compression, so nothing inflates."""
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        members = archive.infolist()
    if any(m.compress_type != zipfile.ZIP_STORED for m in members):
        raise ProtocolError("payload member is compressed (np.savez never compresses)")
    if sum(m.file_size for m in members) > len(payload):
        raise ProtocolError("payload members declare more bytes than the frame holds")


def decode(payload: bytes) -> Message:
    """The message in a payload; ProtocolError when it is not one."""
    try:
        _check_stored(payload)
        with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        header = json.loads(arrays.pop("header").tobytes().decode())
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"unreadable payload ({one_line(exc)})") from None
    if not isinstance(header, dict) or "type" not in header:
        raise ProtocolError("payload header has no message type")
    return Message(header, _typed(arrays, header.pop("dtypes", None) or {}))


def _typed(arrays: dict[str, np.ndarray], dtypes: Any) -> dict[str, np.ndarray]:
    """The arrays viewed as the float formats the header names (checked: known names, same width)."""
    if not isinstance(dtypes, dict):
        raise ProtocolError(f"header dtypes is a {type(dtypes).__name__}, not an object")
    for name, dt in dtypes.items():
        if dt is None or name not in arrays:
            continue
        if not isinstance(dt, str) or dt not in DTYPES:
            raise ProtocolError(f"header names an unknown dtype {str(dt)[:40]!r} for {str(name)[:40]!r}")
        target = info(dt).dtype
        if arrays[name].dtype.kind != "u" or arrays[name].dtype.itemsize != target.itemsize:
            raise ProtocolError(f"array {name[:40]!r} holds {arrays[name].dtype} but the header says {dt} "
                                f"({target.itemsize}-byte bits)")
        arrays[name] = arrays[name].view(target)
    return arrays


# ----------------------------------------------------------------------------- frames

def frame(message: Message) -> bytes:
    payload = encode(message)
    return PREFIX.pack(MAGIC, len(payload)) + payload


def check_prefix(prefix: bytes, *, limit: int = MAX_FRAME) -> int:
    """The payload length a frame prefix announces; ProtocolError on garbage or beyond ``limit``."""
    magic, length = PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise ProtocolError(f"bad frame start {prefix[:16]!r}; something else wrote to the worker's stdout")
    if length > limit:
        raise ProtocolError(f"frame length {length} is beyond the {limit} bytes this message may take")
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


# ----------------------------------------------------------------------------- calls and results

def call_message(direction: Direction, x: np.ndarray, *, alpha: float, dy: Optional[np.ndarray] = None,
                 out_dtype: Optional[str] = None, op: str = DEFAULT_OP,
                 weight: Optional[np.ndarray] = None) -> Message:
    """A ``call``: a LeakyReLU call's header and arrays as they always were; another op's names it
    (``op``) and carries its ``weight`` when it has one."""
    header = {"type": "call", "direction": direction, "alpha": float(alpha), "out_dtype": out_dtype,
              **({} if op == DEFAULT_OP else {"op": op})}
    given = {"x": x, "dy": dy, "weight": weight}
    return Message(header, {name: np.asarray(a) for name, a in given.items() if a is not None})


def result_message(result: BackendResult) -> Message:
    """A backend's result as a ``result`` message (tile plan and hazards as plain data; a PReLU
    backward's weight gradient as the array ``dweight``)."""
    header = {"type": "result", "rejected": result.rejected,
              "layout": None if result.tile_plan is None else dataclasses.asdict(result.tile_plan),
              "hazards": [dataclasses.asdict(h) for h in result.hazards]}
    given = {"value": result.value, "dweight": result.dweight}
    return Message(header, {name: np.asarray(a) for name, a in given.items() if a is not None})


def _tile_plan(data: Optional[Mapping[str, Any]]) -> Optional[TilePlan]:
    if data is None:
        return None
    spans = tuple(_span(span) for span in data["spans"])
    tile, align = data["tile_elements"], data.get("align_elements", 1)
    if not (_is_int(tile) and _is_int(align) and tile > 0 and align > 0):
        raise ValueError("tile_elements and align_elements must be positive integers")
    return TilePlan(tile, spans, align)


def _span(data: Mapping[str, Any]) -> TileSpan:
    span = TileSpan(**data)
    if not all(_is_int(v) and v >= 0 for v in (span.core, span.tile, span.start, span.length)) \
            or not isinstance(span.is_tail, bool):
        raise ValueError("a span needs non-negative integer core, tile, start and length")
    return span


def _hazard(data: Any) -> Hazard:
    kind, index, cores = data["kind"], data["index"], data["cores"]
    if not isinstance(kind, str) or not _is_int(index) or not all(_is_int(c) for c in cores):
        raise TypeError("a hazard needs a kind string, an integer index and integer cores")
    return Hazard(kind, index, tuple(cores))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def result_from(message: Message) -> BackendResult:
    """The BackendResult a ``result`` message carries (its value is not checked here);
    ProtocolError when its tile plan, hazards or refusal are not what the protocol says."""
    header = message.header
    rejected = header.get("rejected")
    try:
        hazards = tuple(_hazard(h) for h in header.get("hazards") or ())
        tile_plan = _tile_plan(header.get("layout"))  # the wire keeps its name
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProtocolError(f"malformed tile plan or hazards in a result ({type(exc).__name__})") from None
    if rejected is not None and not isinstance(rejected, str):
        raise ProtocolError("a result's rejected field is not a string")
    return BackendResult(message.arrays.get("value"), tile_plan=tile_plan, hazards=hazards, rejected=rejected,
                         dweight=message.arrays.get("dweight"))


def error_message(kind: str, text: str) -> Message:
    """An ``error`` reply; ``text`` is cut to its first line."""
    first = (text.strip().splitlines() or ["(no message)"])[0]
    return Message({"type": "error", "kind": kind, "message": first})
