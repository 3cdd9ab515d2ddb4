"""Tests see the console a CI log sees: not a terminal, no ``COLUMNS`` (so 120 columns),
whatever the terminal or pytest-xdist worker they run in."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_caller_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
