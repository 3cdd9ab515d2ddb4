"""The documentation covers every command and option, and its links lead somewhere.

Each sub-command has a page ``docs/commands/<name>.md`` that names every option its
parser accepts, the README links to every page under ``docs/``, and every relative
link in the README, the changelog and ``docs/`` points at a file that exists.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from conformance import cli

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("name", cli.COMMANDS)
def test_every_option_is_on_its_command_page(name: str) -> None:
    page = ROOT / "docs" / "commands" / f"{name}.md"
    text = page.read_text()
    options = {s for a in _subparsers()[name]._actions for s in a.option_strings if s.startswith("--")}
    assert sorted(o for o in options if o not in text) == []


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    targets = [m.group(1) for m in _LINK.finditer(page.read_text()) if "://" not in m.group(1)]
    assert [t for t in targets if not (page.parent / t).exists()] == []


def test_readme_links_every_docs_page() -> None:
    readme = ROOT / "README.md"
    linked = {(ROOT / m.group(1)).resolve() for m in _LINK.finditer(readme.read_text())}
    pages = {p.resolve() for p in (ROOT / "docs").rglob("*.md")}
    assert sorted(str(p.relative_to(ROOT)) for p in pages - linked) == []


def test_readme_stays_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
