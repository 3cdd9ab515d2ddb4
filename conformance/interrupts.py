"""Ctrl-C and SIGTERM: one interruption path for the keyboard, CI runners and ``timeout``; and
``os._exit`` called by code the command line loaded, which becomes a ``SystemExit`` too.

While :func:`sigterm_as_interrupt` is active, SIGINT raises :class:`Interrupted`
and SIGTERM raises :class:`Terminated`, both ``KeyboardInterrupt`` subclasses,
so every ``except KeyboardInterrupt`` that keeps the finished rows and writes a
partial report serves both signals.  :func:`exit_code` gives the shell's
convention: 130 for SIGINT, 143 for SIGTERM.

Because the signals raise their own classes, :func:`from_signal` tells the
user's Ctrl-C from a ``KeyboardInterrupt`` that a backend raised itself (a
plug-in's ``raise KeyboardInterrupt`` is a finding on its row, not a stop).

The program ends by :func:`exit_now`: the exit handlers run and the output is flushed, but the
interpreter's teardown, which for a process that imported TensorFlow takes seconds and writes
nothing, is skipped.

A signal handler runs wherever the main thread is, also inside a garbage-collector
callback, a weakref callback or a ``__del__``, where Python cannot propagate an exception:
it prints "Exception ignored" and goes on, and the Ctrl-C would be lost.  While the
handlers are active, such a swallowed interruption is sent again (:func:`_resend`), so it
lands at the next point where it can stop the run.
"""
from __future__ import annotations

import _thread
import atexit
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn, Optional


class Interrupted(KeyboardInterrupt):
    """SIGINT (Ctrl-C) arrived while the CLI's handlers were active."""

    signum = signal.SIGINT


class Terminated(Interrupted):
    """SIGTERM arrived; handled exactly like Ctrl-C, but exits 143."""

    signum = signal.SIGTERM


def exit_code(exc: KeyboardInterrupt) -> int:
    """128 + the signal number: 130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


def describe(exc: KeyboardInterrupt) -> str:
    return "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"


def _raise_terminated(signum: int, frame: Optional[FrameType]) -> None:
    raise Terminated()


def _raise_interrupted(signum: int, frame: Optional[FrameType]) -> None:
    raise Interrupted()


def from_signal(exc: BaseException) -> bool:
    """``exc`` is the user's Ctrl-C or a SIGTERM, not code raising ``KeyboardInterrupt``.

    With the handlers of :func:`sigterm_as_interrupt` active only :class:`Interrupted`
    counts; without them (the library API, pytest) every ``KeyboardInterrupt`` does,
    since nothing tells them apart there.
    """
    if isinstance(exc, Interrupted):
        return True
    return isinstance(exc, KeyboardInterrupt) and signal.getsignal(signal.SIGINT) is not _raise_interrupted


RESEND_AFTER = 0.05  # seconds: the hook has returned by then, so the signal is not raised inside it


_pending: list[int] = []  # swallowed signals not yet sent again; cleared when the block ends
_pending_lock = threading.Lock()


def _send_later(signum: int) -> None:
    time.sleep(RESEND_AFTER)
    with _pending_lock:
        if signum in _pending:  # the block has not ended (which raises it itself) nor been sent
            _pending.remove(signum)
            _thread.interrupt_main(signum)


def _take_pending() -> Optional[int]:
    """The swallowed signal not yet sent again, if any, now no thread will send it."""
    with _pending_lock:
        signum = _pending[0] if _pending else None
        _pending.clear()
    return signum


def _resend(previous: Any) -> Any:
    """An unraisable-exception hook that sends a swallowed :class:`Interrupted` again, from
    another thread a moment later (raised inside this hook, it would be swallowed too), and
    hands anything else on to ``previous``."""

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, Interrupted):
            with _pending_lock:
                _pending.append(unraisable.exc_value.signum)
            _thread.start_new_thread(_send_later, (unraisable.exc_value.signum,))  # does not wait for the thread
            return
        previous(unraisable)

    return hook


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGINT raises :class:`Interrupted` and SIGTERM :class:`Terminated`; the
    previous handlers are restored after.  Outside the main thread (where handlers cannot be
    set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:  # an ignored SIGINT (nohup, `cmd &`) stays ignored
        signal.signal(signal.SIGINT, _raise_interrupted)
    previous_hook, sys.unraisablehook = sys.unraisablehook, _resend(sys.unraisablehook)
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        swallowed = _take_pending()
        signal.signal(signal.SIGTERM, previous)
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)
        if swallowed is not None and sys.exc_info()[0] is None:  # the block ended before it was sent
            raise Terminated() if swallowed == signal.SIGTERM else Interrupted()


class ProcessExit(SystemExit):
    """In-process code called ``os._exit(code)`` while :func:`os_exit_raises` was active."""

    def __str__(self) -> str:
        return f"os._exit({self.code!r})"


@contextmanager
def os_exit_raises() -> Iterator[None]:
    """Within the block ``os._exit`` in this process raises :class:`ProcessExit`, so a kernel
    or plug-in that ends the process becomes a failing row (or exit 2), never the exit code it
    chose.  A forked child (multiprocessing, a framework's worker pool) still exits for real."""
    real = os._exit
    owner = os.getpid()

    def _exit(code: Any) -> NoReturn:
        if os.getpid() != owner:
            real(code)
        raise ProcessExit(code)

    os._exit = _exit  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = real


def exit_now(code: int) -> NoReturn:
    """End this process with ``code`` once every exit handler ran (workers closed, temporary files
    removed, logging flushed) and stdout and stderr are flushed, without the interpreter's teardown
    (modules' and frameworks' destructors: TensorFlow's take seconds, and write nothing)."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe, or a closed stream: nothing more can be written
            pass
    os._exit(code)
