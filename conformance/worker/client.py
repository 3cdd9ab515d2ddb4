"""The client side: a backend whose calls run in a worker process.

:func:`connect` starts the worker from its command line (shlex-split, no shell;
it may be ``ssh host /opt/venv/bin/conformance worker --backend torch_npu``),
reads its hello and checks the protocol version.  A worker that cannot start
or refuses (its framework is not installed) is a :class:`BackendUnavailable`:
a usage error, exit 2, one line.

Once running, nothing the worker does ends the run.  A crash or an
out-of-memory kill (the stream ends), a hang (no answer within the per-call
timeout), garbage on its stdout, or a result of the wrong shape or dtype becomes
a refusal of that call (``BackendResult.rejected`` starting with ``worker``),
which the report turns into that row's finding.  A dead worker is restarted
once; after its second death every further call is refused at once.
"""
from __future__ import annotations

import atexit
import functools
import os
import select
import shlex
import signal
import subprocess
import tempfile
import time
from typing import Any, Optional

import numpy as np

from conformance.backends import WorkerSpec
from conformance.dtypes import DTYPES, info
from conformance.errors import BackendUnavailable, WorkerFailure
from conformance.records import BackendResult, Direction
from conformance.worker.protocol import (
    PREFIX,
    PROTOCOL_VERSION,
    Message,
    ProtocolError,
    check_prefix,
    decode,
    frame,
    result_from,
)

START_TIMEOUT = 120.0  # seconds a worker may take to say hello (imports, ssh), at least
MAX_RESTARTS = 1
CHUNK = 1 << 20


class WorkerProcess:
    """One running worker: its process, its stdout read with deadlines, its stderr kept in a file."""

    def __init__(self, spec: WorkerSpec):
        argv = shlex.split(spec.command)
        if not argv:
            raise BackendUnavailable("--worker needs a command, e.g. 'conformance worker --backend torch'")
        self.spec = spec
        self.stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                         start_new_session=True)
        except OSError as exc:
            raise BackendUnavailable(f"worker {spec.command!r} does not start: {exc.strerror or exc}") from None
        assert self.proc.stdin is not None
        os.set_blocking(self.proc.stdin.fileno(), False)  # a worker that stops reading must not block us

    def _late(self) -> WorkerFailure:
        return WorkerFailure(f"worker did not answer within {self.spec.timeout:g} s; killed it")

    def send(self, message: Message, *, deadline: float) -> None:
        """Write one frame, giving up at ``deadline`` (a worker that stops reading is hung)."""
        assert self.proc.stdin is not None
        fd, data = self.proc.stdin.fileno(), memoryview(frame(message))
        while data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise self._late()
            try:
                data = data[os.write(fd, data[:CHUNK]):]
            except BlockingIOError:
                continue
            except OSError:  # broken pipe: it died
                raise WorkerFailure(self.death()) from None

    def _read(self, n: int, *, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd, parts, have = self.proc.stdout.fileno(), [], 0
        while have < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise self._late()
            chunk = os.read(fd, min(n - have, CHUNK))
            if not chunk:
                raise WorkerFailure(self.death())
            parts.append(chunk)
            have += len(chunk)
        return b"".join(parts)

    def receive(self, *, deadline: float) -> Message:
        """Read one frame, giving up at ``deadline``."""
        try:
            length = check_prefix(self._read(PREFIX.size, deadline=deadline))
            return decode(self._read(length, deadline=deadline))
        except ProtocolError as exc:
            raise WorkerFailure(f"worker sent garbage ({exc}); killed it") from None

    def death(self) -> str:
        """Why the worker is gone: its exit status and the last line of its stderr."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "worker closed its stdout but kept running; killed it"
        how = f"killed by signal {-code}" + (" (out of memory?)" if -code == signal.SIGKILL else "") \
            if code < 0 else f"exit code {code}"
        last = self.last_stderr_line()
        return f"worker died ({how})" + (f": {last}" if last else "")

    def last_stderr_line(self) -> str:
        self.stderr.seek(0, os.SEEK_END)
        size = self.stderr.tell()
        self.stderr.seek(max(0, size - 4096))
        lines = [ln.strip() for ln in self.stderr.read().decode(errors="replace").splitlines() if ln.strip()]
        return lines[-1][:300] if lines else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """End the worker and everything it started (its own session)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        """Ask politely (end of input), then kill."""
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            self.kill()
        self.stderr.close()


_HELLO = {"backend": str, "supports": list, "suite_pairs": list}  # what the client cannot do without


def _check_hello(message: Message, *, command: str) -> dict:
    h = message.header
    if message.type == "error":
        raise BackendUnavailable(str(h.get("message", "the worker refused to start")))
    if message.type != "hello":
        raise BackendUnavailable(f"worker {command!r} did not say hello (got {message.type!r})")
    if h.get("protocol") != PROTOCOL_VERSION:
        raise BackendUnavailable(f"worker {command!r} speaks protocol {h.get('protocol')!r}, this client "
                                 f"{PROTOCOL_VERSION}; install the same conformance version on both sides")
    missing = [k for k, kind in _HELLO.items() if not isinstance(h.get(k), kind)]
    if missing:
        raise BackendUnavailable(f"worker {command!r} sent a hello without {', '.join(missing)}")
    return h


def start(spec: WorkerSpec) -> tuple[WorkerProcess, dict]:
    """A started worker and its hello; BackendUnavailable when it does not get that far."""
    worker = WorkerProcess(spec)
    try:
        deadline = time.monotonic() + max(spec.timeout, START_TIMEOUT)
        hello = _check_hello(worker.receive(deadline=deadline), command=spec.command)
    except WorkerFailure as exc:
        worker.kill()
        raise BackendUnavailable(f"worker {spec.command!r} failed to start: {exc}") from None
    except BackendUnavailable:
        worker.kill()
        raise
    return worker, hello


class WorkerBackend:
    """The Backend protocol, answered by a worker process; facts come from its hello."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.worker, self.hello = start(spec)
        self.name: str = self.hello["backend"]
        self.profile: Optional[str] = self.hello.get("profile")
        self.variant: Optional[str] = self.hello.get("variant")
        self.restarts = 0
        self.dead: Optional[str] = None  # why the worker is gone (None while it runs)

    def __repr__(self) -> str:
        return f"WorkerBackend({self.name!r}, command={self.spec.command!r})"

    # ------------------------------------------------------------------ facts
    @property
    def versions(self) -> dict[str, str]:
        return dict(self.hello.get("versions") or {})

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool:
        return [dtype, out_dtype, direction] in self.hello["supports"]

    def skip_reason(self, dtype: str, out_dtype: str, direction: Direction) -> str:
        return self.hello.get("skip_reasons", {}).get(f"{dtype}->{out_dtype} {direction}",
                                                     "not supported by the backend")

    def suite_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((d, o) for d, o in self.hello["suite_pairs"])

    def boundary_sizes(self, dtype: str, out_dtype: str, direction: Direction) -> tuple[int, ...]:
        sizes = self.hello.get("boundary_sizes", {}).get(f"{dtype}->{out_dtype} {direction}")
        if sizes is None:
            from conformance.backends import BackendBase

            return BackendBase().boundary_sizes(dtype, out_dtype, direction)
        return tuple(int(n) for n in sizes)

    # ------------------------------------------------------------------ calls
    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        return self._call("forward", x, alpha, dy=None, out_dtype=out_dtype)

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        return self._call("backward", x, alpha, dy=dy, out_dtype=out_dtype)

    def _call(self, direction: Direction, x: np.ndarray, alpha: float, *, dy: Optional[np.ndarray],
              out_dtype: Optional[str]) -> BackendResult:
        if not self._ready():
            return _refused(f"{self.dead}; not restarted again")
        arrays = {"x": np.asarray(x)} if dy is None else {"x": np.asarray(x), "dy": np.asarray(dy)}
        header = {"type": "call", "direction": direction, "alpha": float(alpha), "out_dtype": out_dtype}
        deadline = time.monotonic() + self.spec.timeout
        try:
            self.worker.send(Message(header, arrays), deadline=deadline)
            reply = self.worker.receive(deadline=deadline)
        except WorkerFailure as exc:
            self.worker.kill()
            self.dead = str(exc)
            return _refused(str(exc))
        expected = out_dtype or info(np.asarray(x).dtype).name
        return _checked(reply, numel=int(np.asarray(x).size), out_dtype=expected)

    def probe_default(self, api: str) -> tuple[float, Optional[str]]:
        """The default slope of ``api`` (an entry of the default-slope table) probed in the worker,
        and the version that ran it; WorkerFailure with the worker's one line otherwise."""
        if not self._ready():
            raise WorkerFailure(f"{self.dead}; not restarted again")
        deadline = time.monotonic() + self.spec.timeout
        try:
            self.worker.send(Message({"type": "probe", "api": api}), deadline=deadline)
            reply = self.worker.receive(deadline=deadline)
        except WorkerFailure as exc:
            self.worker.kill()
            self.dead = str(exc)
            raise
        if reply.type != "probed":
            raise WorkerFailure(str(reply.header.get("message", f"worker sent a {reply.type!r} message")))
        return float(reply.header["slope"]), reply.header.get("version")

    def _ready(self) -> bool:
        """True when a worker runs, restarting a dead one if it has not been restarted yet."""
        if self.dead is None and self.worker.alive():
            return True
        if self.dead is None:  # it died between calls
            self.dead = self.worker.death()
        if self.restarts >= MAX_RESTARTS:
            return False
        self.restarts += 1
        self.worker.close()
        try:
            worker, hello = start(self.spec)
        except BackendUnavailable as exc:
            self.dead = f"{self.dead}; the restart failed: {exc}"
            return False
        if hello["backend"] != self.name:
            worker.kill()
            self.dead = f"the restarted worker serves {hello['backend']!r}, not {self.name!r}"
            return False
        self.worker, self.dead = worker, None
        return True

    def close(self) -> None:
        self.worker.close()


def _refused(reason: str) -> BackendResult:
    text = reason if reason.startswith("worker") else f"worker: {reason}"
    return BackendResult(value=None, rejected=text)


def _describe(value: Any) -> str:
    if value is None:
        return "no value"
    return f"{value.dtype.name} of shape {value.shape}"


def _checked(reply: Message, *, numel: int, out_dtype: str) -> BackendResult:
    """A result reply as a BackendResult; errors and wrong values become refusals."""
    if reply.type == "error":
        return _refused(f"worker error ({reply.header.get('kind')}): {reply.header.get('message')}")
    if reply.type != "result":
        return _refused(f"worker sent a {reply.type!r} message instead of a result")
    result = result_from(reply)
    if result.rejected is not None:
        return result
    value = result.value
    if value is None or value.dtype.name not in DTYPES or value.dtype.name != out_dtype or value.size != numel:
        return _refused(f"worker returned {_describe(value)}; expected {numel} elements of {out_dtype}")
    return result


_OPEN: list[WorkerBackend] = []


@functools.cache
def connect(spec: WorkerSpec) -> WorkerBackend:
    """The one client of ``spec`` in this process (started on first use, closed at exit)."""
    backend = WorkerBackend(spec)
    _OPEN.append(backend)
    return backend


def close_all() -> None:
    """Close every worker this process started and forget them (the next connect starts anew)."""
    while _OPEN:
        _OPEN.pop().close()
    connect.cache_clear()


atexit.register(close_all)
