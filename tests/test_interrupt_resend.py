"""Ctrl-C that lands where Python cannot raise it (a weakref or gc callback, a ``__del__``) is
sent again while the command line's handlers are active, so it still stops the run."""
from __future__ import annotations

import signal
import sys
import threading
import time
import weakref

import pytest

from conformance import interrupts

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signal handlers are set in the main thread only")


class _Thing:
    pass


def _swallowed_interrupt() -> None:
    """Raise the handler's Interrupted inside a weakref callback, where Python prints
    "Exception ignored" and goes on; then give the interruption time to arrive again."""
    thing = _Thing()
    ref = weakref.ref(thing, lambda _: interrupts._raise_interrupted(signal.SIGINT, None))
    del thing
    assert ref() is None
    for _ in range(200):
        time.sleep(0.01)


def test_an_interrupt_swallowed_in_a_callback_is_sent_again() -> None:
    with pytest.raises(interrupts.Interrupted):
        with interrupts.sigterm_as_interrupt():
            _swallowed_interrupt()


def test_other_unraisable_exceptions_reach_the_previous_hook_and_the_hook_is_restored() -> None:
    seen: list[type] = []

    def mine(unraisable: object) -> None:
        seen.append(type(unraisable.exc_value))  # type: ignore[attr-defined]

    before, sys.unraisablehook = sys.unraisablehook, mine
    try:
        with interrupts.sigterm_as_interrupt():
            assert sys.unraisablehook is not mine
            thing = _Thing()
            ref = weakref.ref(thing, lambda _: 1 / 0)
            del thing
        assert ref() is None and seen == [ZeroDivisionError] and sys.unraisablehook is mine
    finally:
        sys.unraisablehook = before
