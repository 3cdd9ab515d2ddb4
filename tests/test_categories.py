"""The category registry owns every name: derived lists agree, unknown names raise, and each
category links the module that claims it and a test that proves it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

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

ROOT = Path(__file__).resolve().parents[1]
_NODE_ID = re.compile(r"tests/[\w/]+\.py::test_\w+")


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
    odd = Finding("made-up", 3, True, "a finding from elsewhere", {}, ())
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


def _cells(line: str) -> list[str]:
    """The cells of one markdown table row."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _docs_table_lines() -> list[str]:
    """The header and the rows of docs/reference/categories.md's table."""
    text = ROOT.joinpath("docs", "reference", "categories.md").read_text()
    return [line for line in text.splitlines() if line.startswith(("| `", "| category |"))]


def _docs_table_rows() -> list[list[str]]:
    """The rows of docs/reference/categories.md's table, split into cells."""
    return [_cells(line) for line in _docs_table_lines() if line.startswith("| `")]


def test_docs_table_follows_the_registry() -> None:
    listed = [row[0].strip("`") for row in _docs_table_rows()]
    assert listed == list(categories.NAMES)


def test_docs_table_has_the_generated_columns_then_the_examples() -> None:
    header, _, *rows = categories.markdown_table().splitlines()
    width = len(categories.TABLE_COLUMNS)
    assert _cells(header) == list(categories.TABLE_COLUMNS)
    assert _cells(_docs_table_lines()[0]) == [*categories.TABLE_COLUMNS, "example"]
    assert [row[:width] for row in _docs_table_rows()] == [_cells(row) for row in rows]
    assert all(len(row) == width + 1 for row in _docs_table_rows())


def test_generated_table_links_each_definition_and_proof() -> None:
    rows = {_cells(row)[0].strip("`"): _cells(row) for row in categories.markdown_table().splitlines()[2:]}
    rules = rows["alpha-precision"][3]
    assert rules == "[triage/rules.py](../../conformance/triage/rules.py)"
    path, _, test = categories.check("alpha-precision").proved.partition("::")
    assert rows["alpha-precision"][4] == f"[{path.removeprefix('tests/')}::{test}](../../{path})"
    targets = [t for row in rows.values() for t in re.findall(r"\]\(([^)]+)\)", " ".join(row[3:]))]
    assert len(targets) == 2 * len(categories.NAMES)
    assert [t for t in targets if not ROOT.joinpath("docs", "reference", t).resolve().is_file()] == []


def test_architecture_groups_follow_the_registry() -> None:
    from pathlib import Path

    text = Path(__file__).resolve().parents[1].joinpath("docs", "architecture.md").read_text()
    section = text[text.index("**Triage categories.**"):text.index("**Document formats.**")]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("| ") and "`" in line]
    listed = [(name.strip("` "), group) for group, _, names in rows for name in names.split(",")]
    assert listed == [(c.name, c.group) for c in categories.REGISTRY.values()]


def _unlinked(entries: list[categories.Category]) -> list[str]:
    """The categories whose ``defined`` is not a module path or whose ``proved`` is not a
    pytest node id ``tests/<path>.py::<test>`` (an empty one included)."""
    return [c.name for c in entries
            if not (c.defined.startswith("conformance/") and c.defined.endswith(".py")
                    and _NODE_ID.fullmatch(c.proved))]


def _assigned(text: str, tree: ast.Module, names: set[str]) -> list[str]:
    """The source of the module-level assignments in ``tree`` that bind one of ``names``."""
    found = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id in names for t in targets):
            found.append(ast.get_source_segment(text, node) or "")
    return found


def _test_text(node_id: str) -> str:
    """The text of the test ``node_id``: its function with its decorators, and the case
    tables its decorators name, bound in its module or imported from a module under tests/;
    "" when the file defines no such function."""
    path, _, name = node_id.partition("::")
    text = ROOT.joinpath(path).read_text()
    tree = ast.parse(text)
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if func is None:
        return ""
    # a parametrized test's cases, and so the defect's category, often live in a table
    tables = {n.id for d in func.decorator_list for n in ast.walk(d) if isinstance(n, ast.Name)}
    parts = [ast.get_source_segment(text, n) or "" for n in (*func.decorator_list, func)]
    parts += _assigned(text, tree, tables)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests."):
            wanted = {a.name for a in node.names if (a.asname or a.name) in tables}
            if wanted:
                source = ROOT.joinpath(*node.module.split(".")).with_suffix(".py").read_text()
                parts += _assigned(source, ast.parse(source), wanted)
    return "\n".join(parts)


def test_every_category_links_a_definition_and_a_proof() -> None:
    assert _unlinked(list(categories.REGISTRY.values())) == []
    bare = categories.Category("bare", "residue", 99, "residue", "no links", "", "")
    half = categories.Category("half", "residue", 99, "residue", "no proof", "conformance/guard.py", "tests/x.py")
    assert _unlinked([bare, half]) == ["bare", "half"]


@pytest.mark.parametrize("name", categories.NAMES)
def test_the_defining_module_names_its_category(name: str) -> None:
    module = ROOT / categories.check(name).defined
    assert module.is_file(), module
    assert f'"{name}"' in module.read_text()


@pytest.mark.parametrize("name", categories.NAMES)
def test_the_proving_test_exists_and_names_its_category(name: str) -> None:
    proved = categories.check(name).proved
    assert ROOT.joinpath(proved.partition("::")[0]).is_file(), proved
    text = _test_text(proved)
    assert text, f"{proved}: no such test function"
    assert name in text, f"{proved} never names {name}"


def test_the_proof_check_reads_tables_and_rejects_other_tests() -> None:
    here = "tests/test_categories.py::"
    assert _test_text(here + "test_no_such_test") == ""
    assert "grad-step" not in _test_text(here + "test_unknown_category_raises_everywhere")
    # the hand-built defects table a parametrized test imports is part of its text
    table = _test_text(categories.check("grad-step").proved)
    assert "DEFECTS = [" in table and '"grad-step"' in table


def test_a_detail_merges_by_its_scope() -> None:
    within = categories.merge_detail({"max_ulp": 3, "confirmed_by_inf": False, "explained": 2},
                                     {"max_ulp": 1, "confirmed_by_inf": True, "explained": 5}, scope="claims")
    across = categories.merge_detail({"max_ulp": 3, "confirmed_by_inf": False, "explained": 2},
                                     {"max_ulp": 9, "confirmed_by_inf": True, "explained": 5}, scope="findings")
    assert within == {"max_ulp": 3, "confirmed_by_inf": True, "explained": 7}
    assert across == {"max_ulp": 9, "confirmed_by_inf": False, "explained": 7}


def test_an_unconfirmed_saturation_refuted_by_a_batch_is_a_lost_nan() -> None:
    found = [("saturation", {"confirmed_by_inf": False}), ("lost-nan", {})]
    assert categories.saturation_refuted(found)
    assert not categories.saturation_refuted([*found, ("saturation", {"confirmed_by_inf": True})])
    assert categories.relabelled("saturation", {}, refuted=True) == ("lost-nan", "a NaN result became a number")
    assert categories.relabelled("saturation", {"limit": 65504.0}, refuted=True) is None
    assert categories.relabelled("saturation", {}, refuted=False) is None
