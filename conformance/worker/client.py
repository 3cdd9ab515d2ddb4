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

Nothing a worker sends is trusted to be small or well formed: its stderr is
kept as a bounded tail (``STDERR_TAIL``), a frame may be no longer than its
message needs (``SMALL_FRAME`` for a hello, the expected value plus headroom for
a result), the hello's lists are bounded and checked, and every string from it
has its control characters escaped before it can reach a terminal.
"""
from __future__ import annotations

import atexit
import dataclasses
import os
import select
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from conformance.backends import WorkerSpec
from conformance.dtypes import info
from conformance.errors import BackendUnavailable, WorkerFailure
from conformance.records import DEFAULT_OP, BackendResult, Direction
from conformance.worker.hello import check_hello, printable
from conformance.worker.protocol import (
    PREFIX,
    SMALL_FRAME,
    Message,
    ProtocolError,
    call_message,
    check_prefix,
    decode,
    frame,
    result_frame_limit,
    result_from,
)

START_TIMEOUT = 120.0  # seconds a worker may take to say hello (imports, ssh), at least
MAX_RESTARTS = 1
CHUNK = 1 << 20
STDERR_TAIL = 64 << 10  # bytes of a worker's stderr kept (the last ones); the rest is dropped


@dataclass(frozen=True)
class Deadline:
    """When to give up, and the seconds that allowed (for the message saying so)."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def left(self) -> float:
        return self.at - time.monotonic()


class StderrTail:
    """A worker's stderr drained by a thread that keeps only its last ``STDERR_TAIL`` bytes."""

    def __init__(self, fd: int):
        self.fd, self.data, self.lock = fd, bytearray(), threading.Lock()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        """Read until the pipe ends (every writer gone), then close it."""
        try:
            while chunk := os.read(self.fd, CHUNK):
                with self.lock:
                    self.data += chunk
                    del self.data[:max(0, len(self.data) - STDERR_TAIL)]
        except OSError:
            pass
        finally:
            os.close(self.fd)

    def last_line(self) -> str:
        self.thread.join(timeout=1.0)  # what a dead worker wrote last is usually still in the pipe
        with self.lock:
            text = bytes(self.data).decode(errors="replace")
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return printable(lines[-1]) if lines else ""

    def close(self) -> None:
        """Wait briefly for the drain to end (it closes the pipe itself once the worker is gone)."""
        self.thread.join(timeout=1.0)


class WorkerProcess:
    """One running worker: its process, its stdout read with deadlines, the tail of its stderr."""

    def __init__(self, spec: WorkerSpec):
        argv = shlex.split(spec.command)
        if not argv:
            raise BackendUnavailable("--worker needs a command, e.g. 'conformance worker --backend torch'")
        self.spec = spec
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise BackendUnavailable(f"worker {spec.command!r} does not start: {exc.strerror or exc}") from None
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.stderr = StderrTail(os.dup(self.proc.stderr.fileno()))
        self.proc.stderr.close()
        os.set_blocking(self.proc.stdin.fileno(), False)  # a worker that stops reading must not block us

    @staticmethod
    def _late(deadline: Deadline) -> WorkerFailure:
        return WorkerFailure(f"worker did not answer within {deadline.seconds:g} s; killed it")

    def send(self, message: Message, *, deadline: Deadline) -> None:
        """Write one frame, giving up at ``deadline`` (a worker that stops reading is hung)."""
        assert self.proc.stdin is not None
        fd, data = self.proc.stdin.fileno(), memoryview(frame(message))
        while data:
            left = deadline.left()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise self._late(deadline)
            try:
                data = data[os.write(fd, data[:CHUNK]):]
            except BlockingIOError:
                continue
            except OSError:  # broken pipe: it died
                raise WorkerFailure(self.death()) from None

    def _read(self, n: int, *, deadline: Deadline) -> bytes:
        assert self.proc.stdout is not None
        fd, parts, have = self.proc.stdout.fileno(), [], 0
        while have < n:
            left = deadline.left()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise self._late(deadline)
            chunk = os.read(fd, min(n - have, CHUNK))
            if not chunk:
                raise WorkerFailure(self.death())
            parts.append(chunk)
            have += len(chunk)
        return b"".join(parts)

    def receive(self, *, deadline: Deadline, limit: int = SMALL_FRAME) -> Message:
        """Read one frame of at most ``limit`` bytes, giving up at ``deadline``."""
        try:
            length = check_prefix(self._read(PREFIX.size, deadline=deadline), limit=limit)
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
        return self.stderr.last_line()

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


def start(spec: WorkerSpec) -> tuple[WorkerProcess, dict]:
    """A started worker (the one :func:`launch` started, if any) and its hello; BackendUnavailable
    when it does not get that far."""
    worker = _LAUNCHED.pop(spec, None) or WorkerProcess(spec)
    try:
        deadline = Deadline.after(max(spec.timeout, START_TIMEOUT))
        hello = check_hello(worker.receive(deadline=deadline), command=spec.command)
    except WorkerFailure as exc:
        worker.kill()
        raise BackendUnavailable(f"worker {spec.command!r} failed to start: {exc}") from None
    except BaseException:  # BackendUnavailable, or Ctrl-C or SIGTERM while it starts: it ends with the wait
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

    @property
    def machine(self) -> dict:
        """What the worker said of its own machine, FTZ/DAZ state and device ({}: nothing)."""
        return dict(self.hello.get("machine") or {})

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool:
        return [dtype, out_dtype, direction] in self.hello["supports"]

    def skip_reason(self, dtype: str, out_dtype: str, direction: Direction) -> str:
        return self.hello.get("skip_reasons", {}).get(f"{dtype}->{out_dtype} {direction}",
                                                     "not supported by the backend")

    def suite_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((d, o) for d, o in self.hello["suite_pairs"])

    @property
    def ops(self) -> tuple[str, ...]:
        """The ops the worker computes (its hello's ``ops``; a hello without them: LeakyReLU only)."""
        return tuple(self.hello.get("ops") or (DEFAULT_OP,))

    @property
    def prelu_allowed(self) -> frozenset[str]:
        """What the served backend's PReLU shows by design (its hello's category names)."""
        return frozenset(self.hello.get("prelu_allowed") or ())

    def prelu_supports(self, dtype: str, direction: Direction) -> bool:
        return [dtype, direction] in (self.hello.get("prelu_supports") or [])

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

    def prelu(self, direction: Direction, x: np.ndarray, weight: np.ndarray, *,
              dy: Optional[np.ndarray] = None) -> BackendResult:
        """The worker's PReLU: y, or dx and dweight (a refusal when it does not compute PReLU)."""
        return self._call(direction, x, 0.0, dy=dy, out_dtype=None, op="prelu", weight=np.asarray(weight))

    def rrelu(self, direction: Direction, x: np.ndarray, *, dy: Optional[np.ndarray] = None) -> BackendResult:
        """The worker's RReLU in eval mode (a refusal when it does not compute RReLU)."""
        return self._call(direction, x, 0.0, dy=dy, out_dtype=None, op="rrelu")

    def _call(self, direction: Direction, x: np.ndarray, alpha: float, *, dy: Optional[np.ndarray],
              out_dtype: Optional[str], op: str = DEFAULT_OP, weight: Optional[np.ndarray] = None) -> BackendResult:
        if not self._ready():
            return _refused(f"{self.dead}; not restarted again")
        deadline = Deadline.after(self.spec.timeout)
        expected = out_dtype or info(np.asarray(x).dtype).name
        shape = tuple(np.asarray(x).shape)
        wanted = None if weight is None or direction != "backward" else weight
        limit = result_frame_limit((int(np.asarray(x).size) + (0 if wanted is None else int(wanted.size)))
                                   * info(expected).dtype.itemsize)
        try:
            self.worker.send(call_message(direction, np.asarray(x), alpha=alpha, dy=dy, out_dtype=out_dtype, op=op,
                                          weight=weight), deadline=deadline)
            reply = self.worker.receive(deadline=deadline, limit=limit)
        except WorkerFailure as exc:
            self.worker.kill()
            self.dead = str(exc)
            return _refused(str(exc))
        return _checked(reply, shape=shape, out_dtype=expected, weight=wanted)

    def probe_default(self, api: str) -> tuple[float, Optional[str]]:
        """The default slope of ``api`` (an entry of the default-slope table) probed in the worker,
        and the version that ran it; WorkerFailure with the worker's one line otherwise."""
        if not self._ready():
            raise WorkerFailure(f"{self.dead}; not restarted again")
        deadline = Deadline.after(self.spec.timeout)
        try:
            self.worker.send(Message({"type": "probe", "api": api}), deadline=deadline)
            reply = self.worker.receive(deadline=deadline)
        except WorkerFailure as exc:
            self.worker.kill()
            self.dead = str(exc)
            raise
        if reply.type != "probed":
            raise WorkerFailure(printable(reply.header.get("message", f"worker sent a {reply.type!r} message")))
        slope, version = reply.header.get("slope"), reply.header.get("version")
        if not isinstance(slope, (int, float)) or isinstance(slope, bool) or not isinstance(version, (str, type(None))):
            raise WorkerFailure("worker sent a probed message without a numeric slope")
        return float(slope), None if version is None else printable(version)

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


def _checked(reply: Message, *, shape: tuple[int, ...], out_dtype: str,
             weight: Optional[np.ndarray] = None) -> BackendResult:
    """A result reply as a BackendResult; errors, malformed results and wrong values become refusals
    (``weight``: a PReLU backward's, whose shape and dtype a dweight it returns must have)."""
    if reply.type == "error":
        return _refused(f"worker error ({printable(reply.header.get('kind'))}): "
                        f"{printable(reply.header.get('message'))}")
    if reply.type != "result":
        return _refused(f"worker sent a {printable(reply.type)!r} message instead of a result")
    try:
        result = result_from(reply)
    except ProtocolError as exc:
        return _refused(f"worker sent garbage ({exc})")
    if result.rejected is not None:
        return dataclasses.replace(result, rejected=printable(result.rejected))
    value = result.value
    if value is None or value.dtype.name != out_dtype or tuple(value.shape) != shape:
        return _refused(f"worker returned {_describe(value)}; expected {out_dtype} of shape {shape}")
    dweight = result.dweight
    if dweight is not None and (weight is None or dweight.dtype != weight.dtype or dweight.shape != weight.shape):
        expected = "none" if weight is None else f"{weight.dtype.name} of shape {weight.shape}"
        return _refused(f"worker returned a dweight {_describe(dweight)}; expected {expected}")
    return result


_OPEN: dict[WorkerSpec, WorkerBackend] = {}
_LAUNCHED: dict[WorkerSpec, WorkerProcess] = {}  # started by launch, their hello not read yet


def launch(spec: WorkerSpec) -> None:
    """Start the worker of ``spec`` now, its hello read by the first :func:`connect`: its framework
    imports in its own process while this one goes on.  A worker that does not start is started
    again by the connect, which says why."""
    if spec in _OPEN or spec in _LAUNCHED:
        return
    try:
        _LAUNCHED[spec] = WorkerProcess(spec)
    except BackendUnavailable:
        pass


def connect(spec: WorkerSpec) -> WorkerBackend:
    """The one client of ``spec`` in this process (started on first use, or by :func:`launch`;
    closed at exit)."""
    if spec not in _OPEN:
        _OPEN[spec] = WorkerBackend(spec)
    return _OPEN[spec]


def close(spec: WorkerSpec) -> None:
    """Close the worker of ``spec`` if this process started one (the next connect starts anew)."""
    backend = _OPEN.pop(spec, None)
    if backend is not None:
        backend.close()
    launched = _LAUNCHED.pop(spec, None)
    if launched is not None:
        launched.close()


def close_all() -> None:
    """Close every worker this process started and forget them (the next connect starts anew)."""
    while _OPEN:
        close(next(reversed(_OPEN)))
    while _LAUNCHED:
        _LAUNCHED.popitem()[1].close()


atexit.register(close_all)
