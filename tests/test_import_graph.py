"""The package's import graph: no cycles, and the layering the architecture note asks for.

Every ``import`` and ``from ... import`` of every module under ``conformance/`` is
read with ``ast``, function-level (lazy) imports included; only the bodies of
``if TYPE_CHECKING:`` are left out, since they never run.  A node is a module;
a package is the node of its ``__init__.py``.  ``from pkg import name`` is an edge
to ``pkg.name`` when that is a module, else to ``pkg``; importing a submodule is
an edge to the submodule only (its package's ``__init__`` has edges of its own).
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "conformance"
Graph = Mapping[str, frozenset[str]]

#: (importing layer, layers it must not import), from docs/architecture.md's rules of the house.
FORBIDDEN: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("conformance.reference", ("conformance.backends", "conformance.adapters", "conformance.worker",
                               "conformance.frameworks", "conformance.report", "conformance.suite",
                               "conformance.npu_impl", "conformance.commands")),
    ("conformance.report", ("conformance.npu_impl", "conformance.frameworks", "conformance.worker")),
)


def module_names(root: Path = ROOT, *, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` under ``root`` by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _import_nodes(nodes: Iterable[ast.AST]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in ``nodes`` at any depth, outside ``if TYPE_CHECKING:`` bodies."""
    for node in nodes:
        if _is_type_checking(node):
            yield from _import_nodes(node.orelse)  # type: ignore[attr-defined]
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _import_nodes(ast.iter_child_nodes(node))


def _base(node: ast.ImportFrom, *, module: str, is_package: bool) -> str:
    """The absolute module a ``from`` import names (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[:len(parts) - (node.level - 1)]
    return ".".join([*parts, node.module] if node.module else parts)


def imports_of(source: str, *, module: str, known: Iterable[str], is_package: bool = False) -> frozenset[str]:
    """The modules of ``known`` that ``source`` (the text of ``module``) imports."""
    known = set(known)
    targets: set[str] = set()
    for node in _import_nodes([ast.parse(source)]):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = _base(node, module=module, is_package=is_package)
        targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
    return frozenset(t for t in targets if t in known and t != module)


def import_graph(root: Path = ROOT, *, package: str = PACKAGE) -> dict[str, frozenset[str]]:
    """Each module of ``package`` and the modules of ``package`` it imports."""
    modules = module_names(root, package=package)
    return {name: imports_of(path.read_text(encoding="utf-8"), module=name, known=modules,
                             is_package=path.name == "__init__.py")
            for name, path in modules.items()}


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _within(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def violations(graph: Graph, *, rules: tuple[tuple[str, tuple[str, ...]], ...] = FORBIDDEN) -> list[tuple[str, str]]:
    """Every (importer, imported) edge that crosses a forbidden layer boundary."""
    return sorted((src, dst) for src, targets in graph.items() for dst in targets
                  for layer, banned in rules
                  if _within(src, layer) and any(_within(dst, b) for b in banned))


# ----------------------------------------------------------------------------- the package


@pytest.fixture(scope="module")
def graph() -> dict[str, frozenset[str]]:
    return import_graph()


def test_the_graph_sees_the_package(graph):
    assert "conformance.backends" in graph and "conformance.reference.golden" in graph
    assert "conformance.dtypes" in graph["conformance.backends"]


def test_no_import_cycle(graph):
    assert cycles(graph) == []


def test_reference_and_report_import_only_what_they_may(graph):
    assert violations(graph) == []


# ----------------------------------------------------------------------------- the checker itself

_KNOWN = ("pkg", "pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c", "pkg.report", "pkg.report.x", "pkg.worker")


def test_lazy_and_relative_imports_are_edges():
    source = ("from . import b\nfrom .sub import c\nimport pkg.sub\n"
              "def f():\n    from pkg.report import x\n    import pkg.worker\n")
    assert imports_of(source, module="pkg.a", known=_KNOWN) == {"pkg.b", "pkg.sub.c", "pkg.sub",
                                                                 "pkg.report.x", "pkg.worker"}


def test_a_name_from_a_package_is_an_edge_to_its_init():
    assert imports_of("from pkg.sub import helper\n", module="pkg.a", known=_KNOWN) == {"pkg.sub"}
    assert imports_of("from .. import a\n", module="pkg.sub.c", known=_KNOWN) == {"pkg.a"}
    assert imports_of("from . import c\n", module="pkg.sub", known=_KNOWN, is_package=True) == {"pkg.sub.c"}


def test_type_checking_imports_are_not_edges():
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\nelse:\n    import pkg.a\n"
    assert imports_of(source, module="pkg.sub.c", known=_KNOWN) == {"pkg.a"}


def test_a_cycle_is_found_and_a_chain_is_not():
    chain = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset()}
    assert cycles(chain) == []
    looped = {**chain, "c": frozenset({"a"}), "d": frozenset({"e"}), "e": frozenset({"d"})}
    assert cycles(looped) == [["a", "b", "c"], ["d", "e"]]


def test_a_forbidden_edge_is_found():
    synthetic = {"conformance.reference.defaults": frozenset({"conformance.worker.client", "conformance.dtypes"}),
                 "conformance.triage.search": frozenset({"conformance.npu_impl.kernel"}),
                 "conformance.reporting": frozenset({"conformance.worker"}),
                 "conformance.suite": frozenset({"conformance.worker.client"})}
    assert violations(synthetic) == [("conformance.reference.defaults", "conformance.worker.client"),
                                     ("conformance.triage.search", "conformance.npu_impl.kernel")]
