"""Misbehaving backends served over the worker protocol: test fixtures, not product code.

``command(mode)`` is the command line of a worker serving the golden reference
under the name ``misbehaving``, which behaves until it sees ``TRIGGER_ALPHA`` and
then does what ``mode`` says: crash, hang, write garbage, be killed (as by the
out-of-memory killer), or return a value of the wrong shape or dtype.  ``noisy``
prints to stdout on every call (it must not reach the frame stream),
``old-protocol`` says hello in another protocol version, ``bare-hello`` leaves
out the facts, and ``deaf`` says hello and then never reads its input.
"""
from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import BinaryIO, Optional

import numpy as np

from conformance.frameworks.golden_backend import GoldenBackend
from conformance.records import BackendResult

ROOT = Path(__file__).resolve().parent.parent
TRIGGER_ALPHA = 1.5
MODES = ("crash", "hang", "garbage", "oom", "wrong-shape", "wrong-dtype")


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


def main(mode: str) -> None:
    from conformance.worker import protocol, server

    frames = server.frames_only_stdout()
    if mode == "deaf":  # says hello, then never reads its input again
        protocol.write_frame(frames, server.hello(Misbehaving(mode, frames)))
        time.sleep(120)
    if mode in ("old-protocol", "bare-hello"):
        version = 0 if mode == "old-protocol" else protocol.PROTOCOL_VERSION
        protocol.write_frame(frames, protocol.Message({"type": "hello", "protocol": version, "backend": "misbehaving"}))
        sys.exit(0)
    sys.exit(server.serve(Misbehaving(mode, frames), stdin=sys.stdin.buffer, stdout=frames))


def command(mode: str) -> str:
    """The worker command line for ``mode`` (importable from any working directory)."""
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tests.worker_fakes import main; main({mode!r})"
    return shlex.join([sys.executable, "-c", code])
