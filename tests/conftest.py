"""Tests see the console a CI log sees: not a terminal, no ``COLUMNS`` (so 120 columns),
whatever the terminal or pytest-xdist worker they run in; and not GitHub Actions' variables
(a test of the step summary or the annotations sets them itself), so a run of the suite
under GitHub Actions neither writes to its step summary nor changes what commands print."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_caller_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
