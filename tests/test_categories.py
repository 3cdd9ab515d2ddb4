"""The category registry owns every name: derived lists agree, unknown names raise."""
from __future__ import annotations

import numpy as np
import pytest

from conformance import categories
from conformance.config import default_config
from conformance.errors import UnknownCategory
from conformance.judge.evaluate import merge_findings
from conformance.judge.gate import CATEGORIES
from conformance.npu_impl.variants import VARIANTS
from conformance.records import Finding
from conformance.reference import golden as ref
from conformance.render.export import SCHEMA
from conformance.triage import Claim
from tests.helpers import F16, judge


def test_gate_and_schema_derive_from_the_registry() -> None:
    assert CATEGORIES == categories.NAMES
    enum = SCHEMA["properties"]["rows"]["items"]["properties"]["findings"]["items"]["properties"]["category"]["enum"]
    assert enum == list(categories.NAMES)
    assert [categories.order(n) for n in categories.NAMES] == sorted(categories.order(n) for n in categories.NAMES)


def test_selftest_expectations_are_registered() -> None:
    assert all(name in categories.REGISTRY for v in VARIANTS.values() for name in v.expected)


def test_unknown_category_raises_everywhere() -> None:
    with pytest.raises(UnknownCategory, match="unknown triage category 'no-such'"):
        categories.check("no-such")
    with pytest.raises(UnknownCategory, match="unknown triage category"):
        Claim("no-such", np.zeros(0, np.int64), 0, "")


def test_merge_findings_never_drops_an_unknown_category() -> None:
    row = judge(F16, ref.forward(F16, 0.01), 0.2)
    odd = Finding("made-up", 3, False, "a finding from elsewhere", {}, ())
    bad = row.__class__(**{**row.__dict__, "findings": row.findings + (odd,)})
    with pytest.raises(UnknownCategory, match="made-up"):
        merge_findings([row, bad], backend="cann", config=default_config())


def test_layout_is_a_location_category_that_no_backend_allows() -> None:
    assert categories.check("layout").group == "location"
    assert categories.order("stale-block") < categories.order("layout") < categories.order("overflow")
    assert not any("layout" in allowed for allowed in default_config().policy.values())


def test_generated_table_lists_every_category() -> None:
    table = categories.markdown_table()
    assert all(f"`{name}`" in table for name in categories.NAMES)


def _docs_table_rows() -> list[list[str]]:
    """The rows of docs/reference/categories.md's table, split into cells."""
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("docs", "reference", "categories.md").read_text()
    return [[cell.strip() for cell in line.strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| `")]


def test_docs_table_follows_the_registry() -> None:
    listed = [row[0].strip("`") for row in _docs_table_rows()]
    assert listed == list(categories.NAMES)


def test_docs_table_has_the_registry_group_and_meaning() -> None:
    generated = [[cell.strip() for cell in line.strip("|").split("|")]
                 for line in categories.markdown_table().splitlines()[2:]]
    assert [row[:3] for row in _docs_table_rows()] == generated


def test_architecture_groups_follow_the_registry() -> None:
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("docs", "architecture.md").read_text()
    section = text[text.index("**Triage categories.**"):text.index("**Document formats.**")]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ") and "`" in line]
    listed = [(name.strip("` "), group) for group, _, names in rows for name in names.split(",")]
    assert listed == [(c.name, c.group) for c in categories.REGISTRY.values()]
