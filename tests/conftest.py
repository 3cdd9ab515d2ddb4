"""Tests see the console a CI log sees: not a terminal, no ``COLUMNS`` (so 120 columns),
whatever the terminal or pytest-xdist worker they run in; and not GitHub Actions' variables
(a test of the step summary or the annotations sets them itself), so a run of the suite
under GitHub Actions neither writes to its step summary nor changes what commands print.

Under pytest-xdist the controller compiles the numba loops once, in a process of its own
started before the workers collect (:mod:`conformance.compile_cache`), unless the cache is
already filled for these sources: on a fresh clone the workers then load them from numba's
cache instead of each compiling them."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_WARMING = pytest.StashKey[subprocess.Popen]()


@pytest.fixture(autouse=True)
def _no_caller_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture(scope="module")
def small_batches() -> Iterator[None]:
    """For a module's tests: the suite's rows keep only their small batches
    (:func:`tests.helpers.keep_small_batches`), for tests whose property is not the inputs' size."""
    from tests.helpers import keep_small_batches

    with pytest.MonkeyPatch.context() as mp:
        keep_small_batches(mp)
        yield


def _sigint_at_its_default() -> None:
    """Ctrl-C raises KeyboardInterrupt in the tests' process, as in a terminal, also when pytest
    was started with SIGINT ignored (``make test &`` in a shell without job control): the tests
    of the interruption handlers need the default handler, which those handlers replace only
    when it is there (an ignored SIGINT stays ignored in a real run)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _children_without_hypothesis_plugins(config: pytest.Config) -> None:
    """The processes the tests start (``conformance`` runs, workers) skip loading hypothesis's
    entry-point plugins (``HYPOTHESIS_NO_PLUGINS``): a run draws its batches from explicit
    strategies, which no plugin changes, and the plugins installed here (trio's, which imports
    pytest) cost a child about 0.2 s CPU of its ~0.8.  This process loads its own first; an xdist
    controller sets nothing, so its workers load theirs too."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", default=None):
        import hypothesis  # noqa: F401  (its plugins are this process's)

        os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")


def pytest_configure(config: pytest.Config) -> None:
    """In an xdist controller, start compiling the numba loops beside the workers' start-up."""
    _sigint_at_its_default()
    _children_without_hypothesis_plugins(config)
    if hasattr(config, "workerinput"):
        return
    from conformance.compile_cache import cached, clear_stale

    if cached():  # `make setup` filled the cache for these sources: nothing to compile
        return
    clear_stale()  # before any worker loads a loop compiled with a helper since edited
    if not config.getoption("numprocesses", default=None):
        return
    code = "from conformance.compile_cache import fill; fill()"
    config.stash[_WARMING] = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def pytest_unconfigure(config: pytest.Config) -> None:
    warming = config.stash.get(_WARMING, None)
    if warming is not None and warming.poll() is None:
        warming.kill()
        warming.wait()
