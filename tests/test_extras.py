"""The extras pin the versions the tests ran: each requirement of an extra admits exactly the
version installed in the test environment, and docs/setup.md's table names that version."""
from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
#: Extras that are not a library's version: ``all`` names the others, ``dev`` is the tests' own tools.
NOT_PINNED = ("all", "dev")


def _pinned() -> list[tuple[str, Requirement]]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return [(extra, Requirement(text)) for extra, texts in extras.items() if extra not in NOT_PINNED
            for text in texts]


@pytest.mark.parametrize(("extra", "requirement"), _pinned(), ids=lambda v: str(v))
def test_an_extra_admits_only_the_version_the_tests_ran(extra: str, requirement: Requirement) -> None:
    try:
        installed = Version(metadata.version(requirement.name))
    except metadata.PackageNotFoundError:
        pytest.skip(f"{requirement.name} is not installed here: this environment did not test [{extra}]")
    (spec,) = requirement.specifier  # one specifier: a pin
    assert spec.operator == "==" and installed in requirement.specifier, \
        f"[{extra}] {requirement} admits versions the tests did not run; they ran {installed}"
    named = f"{str(requirement).partition('==')[0]} {spec.version}"  # dask[distributed] 2026.8.0
    assert named in (ROOT / "docs" / "setup.md").read_text(), f"docs/setup.md's extras table does not name {named}"
