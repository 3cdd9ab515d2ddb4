"""Ctrl-C that lands where Python cannot raise it (a weakref or gc callback, a ``__del__``) is
sent again while the command line's handlers are active, so it still stops the run; an
export cut short leaves its directory as it found it."""
from __future__ import annotations

import signal
import sys
import threading
import time
import weakref
from pathlib import Path

import pytest

from conformance import interrupts
from tests.helpers import run_cli

main_thread_only = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
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


@main_thread_only
def test_an_interrupt_swallowed_in_a_callback_is_sent_again() -> None:
    with pytest.raises(interrupts.Interrupted):
        with interrupts.sigterm_as_interrupt():
            _swallowed_interrupt()


@main_thread_only
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


@pytest.mark.parametrize("existed", [False, True], ids=["new directory", "empty directory"])
@pytest.mark.parametrize("stop", [KeyboardInterrupt, OSError], ids=["ctrl-c", "disk full"])
def test_an_export_cut_short_leaves_its_directory_as_it_found_it(tmp_path: Path, capsys, monkeypatch,
                                                                 existed: bool, stop: type) -> None:
    from conformance.ingest import manifest

    real, written = manifest._case_entry, []

    def entry(*args, **kwargs):  # type: ignore[no-untyped-def]
        if len(written) == 3:
            raise stop(28, "No space left on device") if stop is OSError else stop()
        written.append(real(*args, **kwargs))
        return written[-1]

    monkeypatch.setattr(manifest, "_case_entry", entry)
    target = tmp_path / "cases"
    if existed:
        target.mkdir()
    argv = ["export-cases", str(target), "--dtype", "fp16", "--alpha", "0.2", "--max-examples", "2"]  # 12 cases
    result = run_cli(argv, capsys)
    assert result.code == (130 if stop is KeyboardInterrupt else 2) and len(written) == 3, result.text
    assert (sorted(target.iterdir()) == [] if existed else not target.exists())
    monkeypatch.setattr(manifest, "_case_entry", real)
    assert run_cli(argv, capsys).code == 0 and (target / "manifest.json").is_file()  # the same command runs again
