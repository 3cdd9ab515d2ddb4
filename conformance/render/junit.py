"""The JUnit XML report, in the subset of JUnit that ``conformance/schemas/junit.xsd`` describes.

One ``<testsuite>`` holds one ``<testcase>`` per row and per skipped row:

- a failing row has ``<failure message="TITLE: CATEGORY ×N not allowed: SUMMARY; ...">`` whose
  text is the torch.testing-style message; the message attribute is what GitHub, GitLab and
  Jenkins reporters show in their list;
- a warned row has the allowed findings in ``<system-out>`` and a ``warning`` property;
- a skipped row has ``<skipped message="REASON"/>``;
- every finding is also a ``<property>`` (category, count, allowed, summary);
- ``time`` (seconds) is on each testcase the command timed, on the suite and on the root.

Counts on ``<testsuites>`` and ``<testsuite>`` (tests, failures, errors, skipped) are counted
from the testcases written.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from conformance.judge.gate import GateConfig
from conformance.machine import summary_line
from conformance.records import Finding, Row, Skip
from conformance.render import messages
from conformance.render.files import write_atomic
from conformance.render.summary import NO_INFO, RunInfo

SUITE_NAME = "leakyrelu-conformance"
INTERRUPTED = ("the run did not finish (interrupted, or ended before its report): the report is partial")


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def finding_line(f: Finding) -> str:
    """``CATEGORY ×N allowed: SUMMARY`` (or ``not allowed``)."""
    return f"{f.category} ×{f.count} {'not allowed' if f.gated else 'allowed'}: {f.summary}"


def failure_line(row: Row) -> str:
    """The one line a CI reporter lists for a failing row: the row, then each finding not allowed."""
    bad = [finding_line(f) for f in row.findings if f.gated] or ["outside tolerance"]
    return f"{row}: {'; '.join(bad)}"


def warning_message(row: Row) -> str:
    """The one line of a warned row: the row, then each allowed finding."""
    return f"{row}: warning: {'; '.join(finding_line(f) for f in row.findings if not f.gated)}"


def _properties(case: ET.Element, row: Row) -> None:
    if not row.findings and row.verdict != "warn":
        return
    props = ET.SubElement(case, "properties")
    for f in row.findings:
        ET.SubElement(props, "property", name=f.category,
                      value=f"{f.count} ({'not allowed' if f.gated else 'allowed'}): {f.summary}")
    if row.verdict == "warn":
        ET.SubElement(props, "property", name="warning", value=warning_message(row))


def _testcase(suite: ET.Element, row: Row, *, seconds: Optional[float]) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"conformance.{row.backend}", name=str(row))
    if seconds is not None:
        case.set("time", _seconds(seconds))
    _properties(case, row)
    if row.verdict == "fail":
        failure = ET.SubElement(case, "failure", message=failure_line(row), type="ConformanceFailure")
        failure.text = messages.failure_message(row)
    elif row.verdict == "warn":
        ET.SubElement(case, "system-out").text = f"{warning_message(row)}\n\n{messages.failure_message(row)}"


def _skipped_case(suite: ET.Element, skip: Skip) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"conformance.{skip.backend}", name=str(skip),
                         time=_seconds(0.0))
    ET.SubElement(case, "skipped", message=skip.reason)


def _interrupted_case(suite: ET.Element) -> None:
    case = ET.SubElement(suite, "testcase", classname="conformance", name="interrupted", time=_seconds(0.0))
    ET.SubElement(case, "error", message=INTERRUPTED)


def _count(element: ET.Element, *, total: Optional[float]) -> None:
    """tests, failures, errors, skipped (and time) on ``element``, counted from its testcases."""
    cases = list(element.iter("testcase"))
    element.set("tests", str(len(cases)))
    for attr, child in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        element.set(attr, str(sum(c.find(child) is not None for c in cases)))
    if total is not None:
        element.set("time", _seconds(total))


def _suite_seconds(rows: Sequence[Row], info: RunInfo) -> Optional[float]:
    if info.total_seconds is not None:
        return info.total_seconds
    timed = [s for s in map(info.seconds_of, rows) if s is not None]
    return sum(timed) if timed else None


def junit_bytes(rows: Sequence[Row], *, partial: bool = False, config: Optional[GateConfig] = None,
                info: RunInfo = NO_INFO) -> bytes:
    """The JUnit document (see the module docstring).  A run cut short by Ctrl-C or SIGTERM gets an
    ``interrupted`` error case, so CI never reads it as green; ``config`` is the suite's ``config``
    property, the run's environment (``info.environment``) its ``environment`` property."""
    root = ET.Element("testsuites", name=SUITE_NAME)
    suite = ET.SubElement(root, "testsuite", name=SUITE_NAME)
    if config is not None or info.environment:
        props = ET.SubElement(suite, "properties")
        if config is not None:
            ET.SubElement(props, "property", name="config", value=config.described)
        if info.environment:  # the run's frameworks, CPU features and FTZ/DAZ, as the console's line
            ET.SubElement(props, "property", name="environment",
                          value=summary_line(dict(info.environment), versions=dict(info.versions)))
    if partial:
        _interrupted_case(suite)
    for row in rows:
        _testcase(suite, row, seconds=info.seconds_of(row))
    for skip in info.skipped:
        _skipped_case(suite, skip)
    total = _suite_seconds(rows, info)
    _count(suite, total=total)
    _count(root, total=total)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_junit(rows: Sequence[Row], path: str | Path, *, partial: bool = False, flag: str = "--junit",
                config: Optional[GateConfig] = None, info: RunInfo = NO_INFO) -> None:
    """The JUnit XML report, written atomically (see ``render.files``)."""
    write_atomic(path, junit_bytes(rows, partial=partial, config=config, info=info), flag=flag)
