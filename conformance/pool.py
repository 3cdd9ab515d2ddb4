"""Independent tasks on several cores: the suite's rows in processes forked from this one.

:func:`run_tasks` runs every task once.  Each task belongs to a group (the suite's: the backend
that runs the row); ``jobs - 1`` forked processes take tasks alongside this one, and each keeps to
the group it ran last while that group has tasks left, then takes the group with the most tasks
that no process runs yet, and only at the end helps another process with its group.  So a
framework is imported and warmed up (JAX compiles a kernel per shape) in as few processes as
possible.  A group marked ``here`` runs in this process only: a backend served by a worker
process, whose pipes belong to this process.  Without ``shared``, a group never runs on two
processes: a comparison's group keeps state (its references' outputs) that only its own process
holds, so a process whose groups are done takes no other's.

Forked, not spawned: a child starts with this process's modules, backends and input caches, and
runs the same code on the same data, so a task's result does not depend on where it ran.  Every
result comes back to this process as soon as its task ends, and is handed to ``deliver`` with the
seconds it took, under one lock, in the order the tasks end: the caller orders them.

Interruptions: the children ignore SIGINT (Ctrl-C reaches the whole process group; this process
decides).  A KeyboardInterrupt here (Ctrl-C, or SIGTERM as ``interrupts.Terminated``) sends the
children SIGTERM, which unwinds them as it would this process (half-written files are removed),
and is raised again once they are gone.  An exception raised by a task in a child is raised here,
with the child's traceback as its cause; a child that dies is a :class:`PoolFailure`.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import posix
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe
from typing import Any, Optional

from conformance.errors import PoolFailure, RemoteTraceback
from conformance.interrupts import Terminated, os_exit_raises

HERE = 0  # the lane of this process; children are lanes 1..jobs-1
#: Modules whose native thread pools do not survive a fork (a forked child hangs in its first call):
#: a process that imported one of them runs its tasks alone.  JAX counts once its runtime started;
#: ONNX Runtime's threads are its sessions', which a forked process builds anew.
THREADED = ("tensorflow", "torch", "paddle", "mindspore")
STOP_GRACE = 5.0  # seconds an interrupted child gets to unwind before it is killed

Run = Callable[[int], Any]
Deliver = Callable[[int, Any, float], None]


@dataclass(frozen=True)
class Task:
    """One task: its index (what ``run`` takes), its group, and whether it must run here."""

    index: int
    group: str
    here: bool = False


class Scheduler:
    """Which task each lane runs next (see the module's docstring); thread-safe."""

    def __init__(self, tasks: Sequence[Task], *, shared: bool = True):
        self.shared = shared
        self.left: dict[str, deque[Task]] = {}
        for task in tasks:
            self.left.setdefault(task.group, deque()).append(task)
        self.on: dict[int, str] = {}
        self.lock = threading.Lock()
        self.stopped = False

    def next(self, lane: int) -> Optional[Task]:
        """The next task of ``lane``, or None when none is left for it (or the run stopped)."""
        with self.lock:
            group = None if self.stopped else self._pick(lane)
            if group is None:
                return None
            self.on[lane] = group
            return self.left[group].popleft()

    def _pick(self, lane: int) -> Optional[str]:
        usable = [g for g, q in self.left.items() if q and (lane == HERE or not q[0].here)]
        if self.on.get(lane) in usable:
            return self.on[lane]
        running = {g for other, g in self.on.items() if other != lane}
        free = [g for g in usable if g not in running] or (usable if self.shared else [])
        # this process takes the groups only it can run first; then the largest group (first on ties)
        return max(free, key=lambda g: (lane == HERE and self.left[g][0].here, len(self.left[g])), default=None)

    def stop(self) -> None:
        with self.lock:
            self.stopped = True


def can_fork() -> bool:
    """Whether forked children of this process can run tasks: a POSIX ``fork``, and no framework
    thread pool started here yet (:data:`THREADED`, an initialised JAX runtime)."""
    if not hasattr(os, "fork") or any(name in sys.modules for name in THREADED):
        return False
    bridge = sys.modules.get("jax._src.xla_bridge")
    return not getattr(bridge, "_backends", None)


def run_tasks(tasks: Sequence[Task], run: Run, *, jobs: int, deliver: Deliver, shared: bool = True) -> None:
    """Run every task (``run(task.index)``) on ``jobs`` processes, this one included; ``shared``: a
    process may help another with its group (see the module)."""
    scheduler, lock = Scheduler(tasks, shared=shared), threading.Lock()
    children = [Child.fork(run) for _ in range(max(jobs, 1) - 1)]
    feeders = [Feeder(child, lane, scheduler, deliver=deliver, lock=lock)
               for lane, child in enumerate(children, start=HERE + 1)]
    try:
        for feeder in feeders:
            feeder.thread.start()
        while (task := scheduler.next(HERE)) is not None:
            start = time.perf_counter()
            result = run(task.index)
            with lock:
                deliver(task.index, result, time.perf_counter() - start)
        for feeder in feeders:
            feeder.thread.join()
    except BaseException:
        _stop(scheduler, children, feeders)
        raise
    finally:
        for child in children:
            child.close()
    for feeder in feeders:
        feeder.raise_failure()


def _stop(scheduler: Scheduler, children: Sequence[Child], feeders: Sequence[Feeder]) -> None:
    """An interruption or a failure here: no new task, the children ended, their last results in."""
    scheduler.stop()
    for child in children:
        child.terminate()
    for feeder in feeders:
        if feeder.thread.is_alive():
            feeder.thread.join(timeout=STOP_GRACE)


class Child:
    """A forked process answering tasks over a pipe: ``("done", index, result, seconds)``, or
    ``("raised", index, exception, traceback text)``; ``None`` ends it."""

    def __init__(self, pid: int, conn: Connection):
        self.pid, self.conn = pid, conn

    @classmethod
    def fork(cls, run: Run) -> Child:
        here, there = Pipe()
        sys.stdout.flush()  # else the child would write this process's pending output again
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: it never returns
            here.close()
            _serve(there, run)
        there.close()
        return cls(pid, here)

    def terminate(self) -> None:
        """SIGTERM, then SIGKILL if it has not ended within ``STOP_GRACE`` seconds."""
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_GRACE
        while time.monotonic() < deadline:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                self.pid = 0
                return
            time.sleep(0.02)
        os.kill(self.pid, signal.SIGKILL)

    def close(self) -> None:
        """Tell it to end (if it still listens), close the pipe and reap it."""
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.conn.close()
        if self.pid:
            os.waitpid(self.pid, 0)
            self.pid = 0


def _serve(conn: Connection, run: Run) -> None:
    """The child's loop: run each task it is sent and answer, until told to end; then exit for real
    (no ``atexit`` handler of the parent runs here: the parent's workers and files stay the parent's).

    SIGINT is blocked rather than ignored, so the signal handlers (which tell the user's Ctrl-C from a
    KeyboardInterrupt a kernel raises) are the parent's; an ``os._exit`` of a kernel raises here when
    it raises in the parent (the command line's ``interrupts.os_exit_raises``)."""
    exit_now = os._exit  # the real one, or the command line's, which exits for real in a child
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    signal.signal(signal.SIGTERM, _raise_terminated)
    code = 1
    try:
        with os_exit_raises() if exit_now is not posix._exit else contextlib.nullcontext():
            while (index := conn.recv()) is not None:
                _send(conn, _answer(run, index))
        code = 0
    except (EOFError, OSError, KeyboardInterrupt):  # the parent went away, or stopped the run
        pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        exit_now(code)


def _send(conn: Connection, answer: tuple) -> None:
    """Send an answer; one that does not pickle is sent as the error saying so."""
    try:
        conn.send(answer)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        conn.send(("raised", answer[1], RuntimeError(f"a result that cannot be sent back: {exc}"),
                   traceback.format_exc()))


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


def _answer(run: Run, index: int) -> tuple:
    start = time.perf_counter()
    try:
        result = run(index)
    except Exception as exc:  # a bug: raised again in the parent, with this traceback as its cause
        return ("raised", index, _picklable(exc), traceback.format_exc())
    return ("done", index, result, time.perf_counter() - start)


def _picklable(exc: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any exception that does not survive the pipe
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class Feeder:
    """This process's side of one child: a thread sending it tasks and delivering its results."""

    def __init__(self, child: Child, lane: int, scheduler: Scheduler, *, deliver: Deliver,
                 lock: threading.Lock):
        self.child, self.lane, self.scheduler = child, lane, scheduler
        self.deliver, self.lock = deliver, lock
        self.failure: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._feed, name=f"suite-lane-{lane}", daemon=True)

    def _feed(self) -> None:
        try:
            while (task := self.scheduler.next(self.lane)) is not None:
                self.child.conn.send(task.index)
                self._received(self.child.conn.recv(), task)
        except (EOFError, OSError) as exc:
            if not self.scheduler.stopped:
                self._failed(PoolFailure(f"a forked suite process ended while running task {task.index} "
                                         f"({type(exc).__name__})"))
        except BaseException as exc:  # noqa: BLE001 - raised again in the main thread
            self._failed(exc)

    def _received(self, answer: tuple, task: Task) -> None:
        kind, index, value, extra = answer
        if kind == "raised":
            value.__cause__ = RemoteTraceback(extra)
            raise value
        with self.lock:
            self.deliver(index, value, extra)

    def _failed(self, exc: BaseException) -> None:
        self.failure = exc
        self.scheduler.stop()

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure
