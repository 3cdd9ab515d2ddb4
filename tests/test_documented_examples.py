"""Every command the documentation shows parses, and every runnable one prints what the text says.

The convention, in README.md and docs/**/*.md:

- A line ``$ conformance ARGS`` (or ``$ .venv/bin/conformance ARGS``) inside a fenced code block is
  a **runnable example**, typed in the repository root.  The lines after it, up to the next ``$``
  line, a ``# exit N`` line or the end of the block, are its documented output; ``# exit N`` is its
  documented exit code (0 when the block does not say).  The test runs the command through
  ``conformance.cli:main``, what the installed ``conformance`` script (``cli:run``) runs, in this process
  (the frameworks it calls are then imported once per test process, not once per example), with
  ``COLUMNS=100``, in a scratch directory that links the repository's ``examples/``, ``tests/``
  and ``pyproject.toml``, and asserts the exit code and that every documented output line appears
  in its stdout and stderr, in order.  A line ``...`` stands for lines left out; progress bars are
  not compared.
- Any other ``conformance ...`` line of a ``sh``/``console`` block, and of an ``examples/*.py``
  docstring, is an illustration: it must parse (its flags exist, its values are accepted by
  argparse), and an import path it passes to ``--backend`` must load.
- A ``python`` block runs as written from the repository root; its ``assert``s are its expectations.

Runnable examples that cannot run here are listed in :data:`NOT_RUN` with the reason.
"""
from __future__ import annotations

import ast
import inspect
import re
import shlex
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from conformance import backends, cli
from tests.helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
_PROMPT = re.compile(r"^\$ (?:\.venv/bin/)?conformance(?: |$)")
_EXIT = re.compile(r"^# exit (\d+)$")
_PROGRESS = re.compile(r"━.* \d+/\d+ \d+:\d\d:\d\d$")
_ILLUSTRATION = re.compile(r"^(?:\.venv/bin/)?(?:python -m )?(?:\.venv/bin/python -m )?conformance ")
_SHELL_BLOCKS = ("sh", "console", "shell", "bash")

#: Runnable examples this test does not run: (page, command) -> why.  None today: an example that
#: needs a device, Paddle, MindSpore or a 2^32 sweep is shown as an illustration instead.
NOT_RUN: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Example:
    """A ``$ conformance ...`` line of a page, its documented output and exit code."""

    page: str
    line: int
    command: str
    output: tuple[str, ...]
    exit_code: int

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """Each fenced block of a Markdown text: its language, the line number of its first line, its lines."""
    lang, start, lines = None, 0, []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if lang is None:
                lang, start, lines = line[3:].strip(), number + 1, []
            else:
                yield lang, start, lines
                lang = None
        elif lang is not None:
            lines.append(line)


def examples_of(page: Path) -> list[Example]:
    """The runnable examples of one page."""
    found = []
    for _, start, lines in _blocks(page.read_text(encoding="utf-8")):
        for i, line in enumerate(lines):
            if not _PROMPT.match(line):
                continue
            output, code = [], 0
            for after in lines[i + 1:]:
                if _PROMPT.match(after) or after.startswith("$ "):
                    break
                if (exit_line := _EXIT.match(after)) is not None:
                    code = int(exit_line.group(1))
                    break
                output.append(after.rstrip())
            command = re.sub(r"^\.venv/bin/", "", line[2:].strip())
            found.append(Example(str(page.relative_to(ROOT)), start + i, command, tuple(output), code))
    return found


def _joined(lines: Sequence[str]) -> Iterator[str]:
    """Lines with trailing-backslash continuations joined."""
    pending = ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield pending + line
        pending = ""


def illustrations() -> list[tuple[str, str]]:
    """(where, command) of every other ``conformance ...`` line of a shell block or an example docstring."""
    found = []
    for page in _pages():
        for lang, start, lines in _blocks(page.read_text(encoding="utf-8")):
            if lang in _SHELL_BLOCKS:
                found += [(f"{page.relative_to(ROOT)}:{start}", line.strip()) for line in _joined(lines)
                          if _ILLUSTRATION.match(line.strip())]
    for module in sorted((ROOT / "examples").glob("*.py")):
        doc = ast.get_docstring(ast.parse(module.read_text(encoding="utf-8"))) or ""
        found += [(str(module.relative_to(ROOT)), line.strip()) for line in doc.splitlines()
                  if _ILLUSTRATION.match(line.strip())]
    return found


EXAMPLES = [e for page in _pages() for e in examples_of(page)]


def _argv(command: str) -> list[str]:
    """The arguments after ``conformance`` (comments dropped)."""
    words = shlex.split(command, comments=True)
    start = next(i for i, w in enumerate(words) if w == "conformance" or w.endswith("/conformance"))
    return words[start + 1:]  # after .venv/bin/conformance, python -m conformance, ...


def _in_order(documented: Sequence[str], printed: Sequence[str]) -> list[str]:
    """The documented lines missing from ``printed`` in their order ("..." and progress bars skipped)."""
    wanted = [line for line in documented if line.strip() not in ("...", "…", "") and not _PROGRESS.search(line)]
    missing, position = [], 0
    for line in wanted:
        try:
            position = printed.index(line, position) + 1
        except ValueError:
            missing.append(line)
    return missing


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory that looks like the repository root to a command, and keeps its outputs."""
    where = tmp_path_factory.mktemp("docs-examples")
    for name in ("examples", "tests", "pyproject.toml"):
        (where / name).symlink_to(ROOT / name)
    return where


def test_the_documentation_has_runnable_examples() -> None:
    pages = {e.page for e in EXAMPLES}
    assert {"README.md", "docs/how-to/own-kernel.md"} <= pages, pages


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_a_runnable_example_prints_what_the_text_says(example: Example, scratch: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    why = NOT_RUN.get((example.page, example.command))
    if why is not None:
        pytest.skip(why)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    result = run_cli(_argv(example.command), capsys, cwd=scratch)
    printed = [line.rstrip() for line in result.text.splitlines()]
    assert result.code == example.exit_code, f"{example.command}: exit {result.code}\n{result.err}"
    assert _in_order(example.output, printed) == [], "\n".join(printed)


def test_the_installed_script_runs_the_entry_point_the_examples_call() -> None:
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "conformance"]
    assert script.value == "conformance.cli:run" and "exit_now(main())" in inspect.getsource(cli.run)


@pytest.mark.parametrize(("where", "command"), illustrations(), ids=lambda v: str(v)[:60])
def test_an_illustrated_command_parses_and_its_import_paths_load(where: str, command: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    args = cli.build_parser().parse_args(cli.join_negative_values(_argv(command)))
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    given = getattr(args, "backend", None) or ()
    for name in (n for value in ([given] if isinstance(given, str) else given) for n in value.split(",")):
        if backends.is_import_path(name):
            backends.load(name)


def test_the_matcher_reports_a_documented_line_that_was_not_printed() -> None:
    printed = ["a", "progress", "b", "1 row: 1 passed, 0 warned, 0 failed: PASS"]
    assert _in_order(["a", "...", "1 row: 1 passed, 0 warned, 0 failed: PASS"], printed) == []
    assert _in_order(["b", "a"], printed) == ["a"]  # out of order
    assert _in_order(["1 row: 0 passed, 0 warned, 1 failed: FAIL"], printed) == \
        ["1 row: 0 passed, 0 warned, 1 failed: FAIL"]


PYTHON_BLOCKS = [(f"{page.relative_to(ROOT)}:{start}", "\n".join(lines)) for page in _pages()
                 for lang, start, lines in _blocks(page.read_text(encoding="utf-8")) if lang == "python"]


@pytest.mark.parametrize(("where", "source"), PYTHON_BLOCKS, ids=[w for w, _ in PYTHON_BLOCKS])
def test_a_python_example_runs(where: str, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ``python`` block runs as written from the repository root (its asserts are its expectations)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", [str(ROOT), *sys.path])
    exec(compile(source, where, "exec"), {"__name__": "documented_example"})
