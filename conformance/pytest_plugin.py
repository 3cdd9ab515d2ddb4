"""The pytest plugin (entry point ``pytest11``: ``leakyrelu_conformance``).

A test of your own kernel, the whole check as one test::

    def test_my_kernel(leakyrelu_conformance):
        leakyrelu_conformance(my_fn, dtypes=["float16"], alphas=[0.2])

or one test item per row, each with its row's one spelling as its id (``my_fn fp16 forward
alpha=0.2``), which ``-k`` selects by its words or the dtype marks (``-k "float16 and forward"``,
``-k fp16``, ``-m bf16``)::

    @conformance_rows(my_fn, dtypes=["float16", "float32"], alphas=[0.2, 1.5])
    def test_my_kernel_row(leakyrelu_row):
        leakyrelu_row()

The fixture runs :func:`conformance.check` inside your test run and fails the
test with each failing row's "Mismatched elements: k / N (p%)" lines and its
triage categories; a row the kernel does not support is skipped with its reason.
``--leakyrelu-json PATH`` writes every row the session's checks ran as one JSON
report (schema ``leakyrelu-conformance/1``); the fixture's ``json=PATH`` argument
writes that call's report.  ``reference="torch"`` (or several names), in either
form, is ``run --reference``: the reference's rows run too, and the report's
``agreement`` says whether the kernel gives the same bits::

    def test_same_bits_as_torch(leakyrelu_conformance):
        report = leakyrelu_conformance(my_fn, dtypes=["float16"], alphas=[0.2], reference="torch")
        assert all(a.identical for a in report.agreement), [a.why for a in report.agreement]
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pytest

from conformance.dtypes import short_name
from conformance.records import RowKey

ROWS = pytest.StashKey[list]()
SEED = pytest.StashKey[Optional[int]]()
CONFIGS = pytest.StashKey[list]()  # the gate configuration of each check, for the session's report
AGREEMENTS = pytest.StashKey[Optional[list]]()  # of the checks with reference= (None: none had one)
#: a kernel's four same-dtype pairs, as check() runs them
_DEFAULT_DTYPES = ("float16", "bfloat16", "float32", "float64")
_DIRECTIONS = ("forward", "backward")
_NO_ROWS = "the selection runs no rows"  # how check() says the kernel runs none of the selection


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("leakyrelu-conformance")
    group.addoption("--leakyrelu-json", metavar="PATH", default=None,
                    help="write the rows of every leakyrelu_conformance check as one JSON report")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[ROWS] = []
    config.stash[SEED] = None
    config.stash[CONFIGS] = []
    config.stash[AGREEMENTS] = None
    for name in _DEFAULT_DTYPES:  # -k fp16, -k float16 and -m fp16 select the rows of @conformance_rows
        for mark in (name, short_name(name)):
            config.addinivalue_line("markers", f"{mark}: a leakyrelu_row whose input or output dtype is {name}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("leakyrelu_json", None)
    rows = session.config.stash.get(ROWS, [])
    if path and rows:
        from conformance.render import export

        configs = session.config.stash.get(CONFIGS, [])
        same = configs[0] if configs and all(c == configs[0] for c in configs) else None  # one gate, or none said
        export.write_json(rows, path, seed=session.config.stash.get(SEED, None), versions=export.versions(),
                          flag="--leakyrelu-json", config=same, agreement=session.config.stash.get(AGREEMENTS, None))


def _check(request: pytest.FixtureRequest, fn: Any, *, json: Optional[str | Path], options: dict,
           skip_unsupported: bool = False) -> Any:
    """``conformance.check(fn, **options)``, its rows kept for ``--leakyrelu-json``; a usage error
    fails the test in one line (or, with ``skip_unsupported``, a selection the kernel does not
    run skips it with the kernel's reason)."""
    __tracebackhide__ = True
    from conformance.api import check
    from conformance.errors import UsageError

    try:
        report = check(fn, **options)
    except UsageError as exc:
        if skip_unsupported and str(exc).startswith(_NO_ROWS):
            pytest.skip(f"leakyrelu_row: {exc}")
        pytest.fail(f"leakyrelu_conformance: {exc}", pytrace=False)
    request.config.stash[ROWS].extend(report.rows)
    request.config.stash[SEED] = report.seed
    request.config.stash[CONFIGS].append(report.config)
    if report.references:
        request.config.stash[AGREEMENTS] = [*(request.config.stash[AGREEMENTS] or ()), *report.agreement]
    if json is not None:
        report.write_json(json)
    return report


def _fail_on(report: Any) -> None:
    __tracebackhide__ = True
    if report.verdict == "fail":
        pytest.fail(f"LeakyReLU conformance failed for {len(report.failures)} of {len(report.rows)} "
                    f"rows\n\n{report.message}", pytrace=False)


@pytest.fixture
def leakyrelu_conformance(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``check(fn, *, json=None, **conformance.check options) -> Report``; fails the test on a failing row."""

    def run(fn: Any, *, json: Optional[str | Path] = None, **options: Any) -> Any:
        __tracebackhide__ = True
        report = _check(request, fn, json=json, options=options)
        _fail_on(report)
        return report

    return run


# ----------------------------------------------------------------------------- one item per row

@dataclass(frozen=True)
class RowCase(RowKey):
    """One row of a kernel to check: its key (the backend is the kernel's name), whose ``str``
    is the test id (``my_fn fp16 forward alpha=0.2``), and the kernel with its options."""

    fn: Any = None
    options: dict = field(default_factory=dict, compare=False)

    @property
    def dtypes(self) -> str:
        """The pair as ``check``'s ``dtypes`` take it."""
        return self.dtype if self.dtype == self.out_dtype else f"{self.dtype}->{self.out_dtype}"


def _pairs(dtypes: Optional[Sequence[str]]) -> list[tuple[str, str]]:
    found = []
    for spelled in [dtypes] if isinstance(dtypes, str) else (dtypes or _DEFAULT_DTYPES):
        src, _, out = spelled.replace(":", "->").partition("->")
        found.append((src, out or src))
    return found


def row_cases(fn: Any, *, dtypes: Optional[Sequence[str]] = None, alphas: Sequence[float] = (),
              directions: Sequence[str] = _DIRECTIONS, **options: Any) -> list[RowCase]:
    """Every (dtype pair, direction, alpha) row of ``fn`` that a check with these options runs
    (``alphas`` empty: the suite's 8); the other ``options`` go to ``conformance.check``."""
    from conformance.suite import SUITE_ALPHAS

    name = options.get("name") or getattr(fn, "__name__", None) or str(fn)
    return [RowCase(name, None, None, src, out, direction, float(alpha), fn=fn, options=options)
            for src, out in _pairs(dtypes) for direction in directions for alpha in (alphas or SUITE_ALPHAS)]


def _param(case: RowCase) -> Any:
    marks = dict.fromkeys(m for d in (case.dtype, case.out_dtype) for m in (d, short_name(d)))
    return pytest.param(case, id=str(case), marks=[getattr(pytest.mark, m) for m in marks])


def conformance_rows(fn: Any, **options: Any) -> pytest.MarkDecorator:
    """``@conformance_rows(fn, dtypes=..., alphas=..., directions=..., **check options)``: the
    decorated test gets one item per row, each with the ``leakyrelu_row`` fixture (indirect
    parametrization of it)."""
    return pytest.mark.parametrize("leakyrelu_row", [_param(c) for c in row_cases(fn, **options)], indirect=True)


def generate_rows(metafunc: pytest.Metafunc, fn: Any, **options: Any) -> None:
    """For a ``pytest_generate_tests(metafunc)`` hook: ``conformance_rows`` of a test that takes
    ``leakyrelu_row``."""
    if "leakyrelu_row" in metafunc.fixturenames:
        metafunc.parametrize("leakyrelu_row", [_param(c) for c in row_cases(fn, **options)], indirect=True)


@dataclass
class RowRun:
    """``leakyrelu_row``: calling it, ``(json=None) -> Row``, checks the item's row; ``report`` is
    then that check's ``Report`` (with ``reference=``, the reference's row and the ``agreement``)."""

    request: pytest.FixtureRequest
    case: RowCase
    report: Any = None

    def __call__(self, *, json: Optional[str | Path] = None) -> Any:
        __tracebackhide__ = True
        case = self.case
        options = {**case.options, "dtypes": [case.dtypes], "alphas": [case.alpha], "directions": [case.direction]}
        self.report = _check(self.request, case.fn, json=json, options=options, skip_unsupported=True)
        _fail_on(self.report)
        return self.report.subject[0]


@pytest.fixture
def leakyrelu_row(request: pytest.FixtureRequest) -> RowRun:
    """The row the test item stands for, as ``run(json=None) -> Row``: fails the test when the
    row fails, skips it when the kernel does not support it."""
    case = getattr(request, "param", None)
    if not isinstance(case, RowCase):
        pytest.fail("leakyrelu_row: parametrize the test with @conformance_rows(fn, ...) or "
                    "generate_rows(metafunc, fn, ...)", pytrace=False)
    return RowRun(request, case)
