"""Hostile workers served over the worker protocol: a reusable test helper, not product code.

``command(mode)`` is the command line of a worker serving the golden reference
under the name ``misbehaving``.  It behaves until it sees ``TRIGGER_ALPHA`` and
then does what ``mode`` says:

- ``MODES`` (the call is refused, the run goes on): crash, hang, write garbage, be
  killed (as by the out-of-memory killer), return a value of the wrong size or dtype;
- ``HOSTILE_RESULTS``: flood stderr, announce a huge frame, or answer with a result
  whose header or value breaks the protocol (see ``_hostile_result``);
- ``noisy`` prints to stdout on every call (it must not reach the frame stream).

``HOSTILE_HELLOS`` say a hello that breaks the protocol (``old-protocol``,
``bare-hello``, unbounded or malformed lists, terminal escape codes in names);
``deaf`` says hello and then never reads its input.

A fake computes its honest answers on golden's numpy path (``CONFORMANCE_COMPILED=0``): the
reference implementation, bit-identical to the compiled one, and milliseconds instead of the
second that importing numba and loading its cached loops takes a fresh process.
"""
from __future__ import annotations

import io
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO, Optional

import numpy as np

from conformance.frameworks.golden_backend import GoldenBackend
from conformance.records import BackendResult

ROOT = Path(__file__).resolve().parent.parent
TRIGGER_ALPHA = 1.5
MODES = ("crash", "hang", "garbage", "oom", "wrong-shape", "wrong-dtype")
HOSTILE_RESULTS = ("flood-stderr", "huge-frame", "unknown-dtype", "list-dtypes", "width", "bad-hazards",
                   "bad-layout", "same-size-wrong-shape", "compressed-payload")
ESCAPE_NAME = "\x1b[31mmisbehaving[/x]\x07"
HOSTILE_HELLOS: dict[str, dict[str, Any]] = {
    "old-protocol": {"protocol": 0},
    "bare-hello": {"supports": None, "suite_pairs": None},
    "huge-boundary": {"boundary_sizes": {"float16->float16 forward": [1 << 34]}},
    "bool-boundary": {"boundary_sizes": {"float16->float16 forward": [True]}},
    "bad-suite-pairs": {"suite_pairs": [["float16"], "x"]},
    "unknown-suite-dtype": {"suite_pairs": [["float17", "float16"]]},
    "many-suite-pairs": {"suite_pairs": [["float16", "float16"]] * 5000},
    "escape-hello": {"backend": ESCAPE_NAME, "versions": {"torch": "\x1b]0;owned\x07"}},
}
FLOOD_BYTES = 8 << 20  # what flood-stderr writes before it dies
FLOOD_LAST_LINE = "fake: flooded and died"


class Misbehaving(GoldenBackend):
    name = "misbehaving"

    def __init__(self, mode: str, frames: BinaryIO):
        self.mode, self.frames = mode, frames

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        result = super().forward(x, alpha, out_dtype=out_dtype)
        if self.mode == "noisy":
            print("a framework talking on stdout")
            os.write(1, b"and a C library on file descriptor 1\n")
        return self.misbehave(result) if alpha == TRIGGER_ALPHA else result

    def misbehave(self, result: BackendResult) -> BackendResult:
        value = np.asarray(result.value)
        if self.mode == "crash":
            print("fake: crashing now", file=sys.stderr)
            os._exit(3)
        if self.mode == "oom":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.mode == "hang":
            time.sleep(120)
        if self.mode == "garbage":
            self.frames.write(b"this is not a frame at all\n" * 4)
            self.frames.flush()
        if self.mode == "wrong-shape":
            return BackendResult(value[:-1])
        if self.mode == "wrong-dtype":
            return BackendResult(value.astype(np.float32))
        return result


def raw_frame(header: dict[str, Any], arrays: dict[str, np.ndarray], *, compress: bool = False) -> bytes:
    """A frame whose header (``dtypes`` included) is sent exactly as given, unchecked."""
    from conformance.worker import protocol

    buf = io.BytesIO()
    save = np.savez_compressed if compress else np.savez
    save(buf, header=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)
    return protocol.PREFIX.pack(protocol.MAGIC, len(buf.getvalue())) + buf.getvalue()


def _hostile_result(mode: str, value: np.ndarray) -> bytes:
    """The frame ``mode`` answers the triggering call with."""
    bits = value.view(np.uint16)
    ok = {"type": "result", "rejected": None, "layout": None, "hazards": [], "dtypes": {"value": "float16"}}
    headers = {"unknown-dtype": {**ok, "dtypes": {"value": "float17"}},
               "list-dtypes": {**ok, "dtypes": ["float16"]},
               "bad-hazards": {**ok, "hazards": [{"kind": 1, "index": "x"}]},
               "bad-layout": {**ok, "layout": {"spans": 5, "tile_elements": "big"}}}
    if mode == "width":
        return raw_frame(ok, {"value": bits.astype(np.uint32)})
    if mode == "same-size-wrong-shape":
        return raw_frame(ok, {"value": bits.reshape(2, -1) if bits.size % 2 == 0 else bits.reshape(1, -1, 1)})
    if mode == "compressed-payload":
        return raw_frame(ok, {"value": bits, "bomb": np.zeros(1 << 22, np.uint8)}, compress=True)
    return raw_frame(headers[mode], {"value": bits})


def _misbehave_raw(mode: str, value: np.ndarray, frames: BinaryIO) -> None:
    from conformance.worker import protocol

    if mode == "flood-stderr":
        line = b"x" * 1023 + b"\n"
        for _ in range(FLOOD_BYTES // len(line)):
            os.write(2, line)
        os.write(2, FLOOD_LAST_LINE.encode() + b"\n")
        os._exit(3)
    if mode == "huge-frame":
        frames.write(protocol.PREFIX.pack(protocol.MAGIC, 2 << 30))
        frames.flush()
        time.sleep(120)
    frames.write(_hostile_result(mode, value))
    frames.flush()


def _serve_raw(mode: str, frames: BinaryIO, *, hello: Optional[dict[str, Any]] = None) -> int:
    """Serve like ``server.serve`` (with ``hello`` when given) but answer the triggering call
    with a hostile frame."""
    from conformance.worker import protocol, server

    backend = Misbehaving(mode, frames)
    protocol.write_frame(frames, protocol.Message(hello) if hello else server.hello(backend))
    while (message := protocol.read_frame(sys.stdin.buffer)) is not None:
        if message.type == "call" and message.header.get("alpha") == TRIGGER_ALPHA:
            value = np.asarray(GoldenBackend().forward(message.arrays["x"], 0.2).value)
            _misbehave_raw(mode, value, frames)
        else:
            protocol.write_frame(frames, server.answer(backend, message))
    return 0


def main(mode: str) -> None:
    from conformance.worker import protocol, server

    os.environ["CONFORMANCE_COMPILED"] = "0"
    frames = server.frames_only_stdout()
    if mode == "deaf":  # says hello, then never reads its input again
        protocol.write_frame(frames, server.hello(Misbehaving(mode, frames)))
        time.sleep(120)
    if mode in HOSTILE_HELLOS:
        hello = {**server.hello(Misbehaving(mode, frames)).header, **HOSTILE_HELLOS[mode]}
        sys.exit(_serve_raw(mode, frames, hello=hello))
    if mode in HOSTILE_RESULTS:
        sys.exit(_serve_raw(mode, frames))
    sys.exit(server.serve(Misbehaving(mode, frames), stdin=sys.stdin.buffer, stdout=frames))


def command(mode: str) -> str:
    """The worker command line for ``mode`` (importable from any working directory)."""
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tests.worker_fakes import main; main({mode!r})"
    return shlex.join([sys.executable, "-c", code])
