"""The pytest plugin (entry point ``pytest11``: ``leakyrelu_conformance``).

A test of your own kernel::

    def test_my_kernel(leakyrelu_conformance):
        leakyrelu_conformance(my_fn, dtypes=["float16"], alphas=[0.2])

The fixture runs :func:`conformance.check` inside your test run and fails the
test with each failing row's "Mismatched elements: k / N (p%)" lines and its
triage categories.  ``--leakyrelu-json PATH`` writes every row the session's
checks ran as one JSON report (schema ``leakyrelu-conformance/1``); the
fixture's ``json=PATH`` argument writes that call's report.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import pytest

ROWS = pytest.StashKey[list]()
SEED = pytest.StashKey[Optional[int]]()
CONFIGS = pytest.StashKey[list]()  # the gate configuration of each check, for the session's report


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("leakyrelu-conformance")
    group.addoption("--leakyrelu-json", metavar="PATH", default=None,
                    help="write the rows of every leakyrelu_conformance check as one JSON report")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[ROWS] = []
    config.stash[SEED] = None
    config.stash[CONFIGS] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("leakyrelu_json", None)
    rows = session.config.stash.get(ROWS, [])
    if path and rows:
        from conformance.report import export

        configs = session.config.stash.get(CONFIGS, [])
        same = configs[0] if configs and all(c == configs[0] for c in configs) else None  # one gate, or none said
        export.write_json(rows, path, seed=session.config.stash.get(SEED, None), versions=export.versions(),
                          flag="--leakyrelu-json", config=same)


@pytest.fixture
def leakyrelu_conformance(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``check(fn, *, json=None, **conformance.check options) -> Report``; fails the test on a failing row."""
    from conformance.api import check
    from conformance.errors import UsageError

    def run(fn: Any, *, json: Optional[str | Path] = None, **options: Any) -> Any:
        __tracebackhide__ = True
        try:
            report = check(fn, **options)
        except UsageError as exc:
            pytest.fail(f"leakyrelu_conformance: {exc}", pytrace=False)
        request.config.stash[ROWS].extend(report.rows)
        request.config.stash[SEED] = report.seed
        request.config.stash[CONFIGS].append(report.config)
        if json is not None:
            report.write_json(json)
        if report.verdict == "fail":
            pytest.fail(f"LeakyReLU conformance failed for {len(report.failures)} of {len(report.rows)} "
                        f"rows\n\n{report.message}", pytrace=False)
        return report

    return run
