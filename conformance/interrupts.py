"""SIGTERM as Ctrl-C: one interruption path for the keyboard, CI runners and ``timeout``.

While :func:`sigterm_as_interrupt` is active, SIGTERM raises :class:`Terminated`,
a ``KeyboardInterrupt`` subclass, so every ``except KeyboardInterrupt`` that
keeps the finished rows and writes a partial report serves both signals.
:func:`exit_code` gives the shell's convention: 130 for SIGINT, 143 for SIGTERM.
"""
from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Optional


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; handled exactly like Ctrl-C, but exits 143."""

    signum = signal.SIGTERM


def exit_code(exc: KeyboardInterrupt) -> int:
    """128 + the signal number: 130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


def describe(exc: KeyboardInterrupt) -> str:
    return "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"


def _raise_terminated(signum: int, frame: Optional[FrameType]) -> None:
    raise Terminated()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises :class:`Terminated`; the previous handler is restored
    after.  Outside the main thread (where handlers cannot be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
