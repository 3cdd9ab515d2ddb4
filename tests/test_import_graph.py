"""The package's import graph: no cycles, and the layering the architecture note asks for.

Every ``import`` and ``from ... import`` of every module under ``conformance/`` is
read with ``ast``, function-level (lazy) imports and ``if TYPE_CHECKING:`` bodies
included: a dependency a reader must hold is a dependency, whether or not it runs.  A node is a module;
a package is the node of its ``__init__.py``.  ``from pkg import name`` is an edge
to ``pkg.name`` when that is a module, else to ``pkg``; importing a submodule is
an edge to the submodule only (its package's ``__init__`` has edges of its own).
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "conformance"
Graph = Mapping[str, frozenset[str]]

#: The pipeline's stages in order (ARCHITECTURE.md): a module of a stage imports only the
#: foundation, its own stage and the stages before it.  ``cases`` follows ``backends`` in the
#: import order although data flows from it: the inputs are planned from what a backend
#: declares (its plan's boundary sizes, its copy block), and no backend imports a case.
FOUNDATION = ("conformance.errors", "conformance.records", "conformance.categories", "conformance.dtypes",
              "conformance.jit", "conformance.ulp_loops", "conformance.interrupts", "conformance.pool",
              "conformance.extras", "conformance.reference", "conformance.ops", "conformance.machine")
STAGES: tuple[tuple[str, ...], ...] = (
    ("conformance.backends", "conformance.adapters", "conformance.frameworks", "conformance.worker",
     "conformance.npu_impl"),
    ("conformance.cases",),
    ("conformance.metrics",),
    ("conformance.triage",),
    ("conformance.judge",),
    ("conformance.render",),
)
#: Edges the stage order allows that a rule of the house forbids:
#: - no stage after the backends imports the emulator, a framework, a worker or an adapter
#:   (they hand results on as data);
#: - render reads records, never triage's internals;
#: - the judge gets its policy as data, never from the backend registry;
#: - the registry never imports a framework or a case (its default boundary sizes are the
#:   default chip's plan edges, ``npu_impl.boundaries``), nor the worker's transport a
#:   framework (the command that starts a worker hands it the probes);
#: - the golden never imports a backend.
FORBIDDEN: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("conformance.render", ("conformance.triage",)),
    *((stage, ("conformance.npu_impl", "conformance.frameworks", "conformance.worker", "conformance.adapters"))
      for stage in ("conformance.metrics", "conformance.triage", "conformance.judge", "conformance.render")),
    ("conformance.judge", ("conformance.backends",)),
    ("conformance.backends", ("conformance.frameworks", "conformance.cases")),
    ("conformance.worker", ("conformance.frameworks",)),
    ("conformance.reference", ("conformance.backends", "conformance.adapters", "conformance.worker",
                               "conformance.frameworks", "conformance.npu_impl")),
)


def stage_of(module: str) -> Optional[int]:
    """-1 for the foundation, the stage's place in :data:`STAGES`, None for the application
    (the CLI, its commands, the suite, the sweep, the ingest of outside data, the API)."""
    if any(_within(module, f) for f in FOUNDATION):
        return -1
    return next((i for i, stage in enumerate(STAGES) if any(_within(module, m) for m in stage)), None)


def stage_violations(graph: Graph) -> list[tuple[str, str]]:
    """Every edge from a stage (or the foundation) to the application or to a later stage."""
    found = []
    for src, targets in graph.items():
        here = stage_of(src)
        if here is None:
            continue
        found += [(src, dst) for dst in targets
                  if (there := stage_of(dst)) is None or there > here]
    return sorted(found)


def module_names(root: Path = ROOT, *, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` under ``root`` by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _import_nodes(nodes: Iterable[ast.AST]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in ``nodes`` at any depth, ``if TYPE_CHECKING:`` bodies included."""
    for node in nodes:
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


def test_no_stage_imports_a_later_stage_or_the_application(graph):
    assert stage_violations(graph) == []


def test_no_rule_of_the_house_is_broken(graph):
    assert violations(graph) == []


def test_every_stage_exists(graph):
    for stage in (*STAGES, FOUNDATION):
        for name in stage:
            assert name in graph, name


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


def test_type_checking_imports_are_edges():
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\nelse:\n    import pkg.a\n"
    assert imports_of(source, module="pkg.sub.c", known=_KNOWN) == {"pkg.a", "pkg.b"}


def test_a_cycle_is_found_and_a_chain_is_not():
    chain = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset()}
    assert cycles(chain) == []
    looped = {**chain, "c": frozenset({"a"}), "d": frozenset({"e"}), "e": frozenset({"d"})}
    assert cycles(looped) == [["a", "b", "c"], ["d", "e"]]


def test_a_forbidden_edge_is_found():
    synthetic = {"conformance.reference.defaults": frozenset({"conformance.worker.client", "conformance.dtypes"}),
                 "conformance.render.html": frozenset({"conformance.triage.claims", "conformance.records"}),
                 "conformance.reporting": frozenset({"conformance.worker"}),
                 "conformance.suite": frozenset({"conformance.worker.client"})}
    assert violations(synthetic) == [("conformance.reference.defaults", "conformance.worker.client"),
                                     ("conformance.render.html", "conformance.triage.claims")]


def test_a_later_stage_or_the_application_is_found():
    synthetic = {"conformance.metrics.exact": frozenset({"conformance.triage.claims", "conformance.records"}),
                 "conformance.judge.evaluate": frozenset({"conformance.render.messages", "conformance.metrics"}),
                 "conformance.records": frozenset({"conformance.suite"}),
                 "conformance.render.console": frozenset({"conformance.judge.gate", "conformance.cases.edges"}),
                 "conformance.cases.edges": frozenset({"conformance.npu_impl.chips"}),
                 "conformance.suite": frozenset({"conformance.render.console"})}
    assert stage_violations(synthetic) == [("conformance.judge.evaluate", "conformance.render.messages"),
                                           ("conformance.metrics.exact", "conformance.triage.claims"),
                                           ("conformance.records", "conformance.suite")]
