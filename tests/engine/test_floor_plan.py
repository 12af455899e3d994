"""The floor plan of docs/architecture.md, checked on the source: the import graph of pytest_topsail/, fixtures/ and
suites/ (read with ast, function-local imports and ``if TYPE_CHECKING:`` blocks included: an import a type checker
follows is part of the design) has no module cycle, no package cycle and no import that goes against the floors;
suites and fixture modules import only the public API: ``pytest_topsail`` (``topsail.*``) and the domain fronts
(``from pytest_topsail.tgis import TgisClient``: the package ``__init__``, the names of its ``__all__``)."""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

import pytest

import pytest_topsail as topsail

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("pytest_topsail", "fixtures", "suites")

# The floors, lowest first (docs/architecture.md, "Floor plan"). A module is on the floor of the first rule that
# names it (a package name covers its modules).
BASE = ("errors", "redact", "tree", "conditions", "hardware", "yamlparse", "aio", "fronts")  # nothing of ours
FOUNDATION = ("settings", "config", "jsonl", "waiting")  # validation, configuration, JSON lines, waits: only the base
DOMAINS = ("tgis", "fine_tuning", "llmload", "scale")
# What a domain package may use of the engine ("engine-lite"), and of another domain package.
ENGINE_LITE = ("pytest_topsail.leftovers", "pytest_topsail.report.figures")
DOMAIN_USES = {"llmload": ("tgis",)}  # the TGIS gRPC backend of the load generator uses the TGIS client
SIM_PLUGIN_MODULE = "simulation"  # <domain>.simulation: the domain's simulator controllers (entry points)
FRONTS = tuple(f"pytest_topsail.{name}" for name in (*DOMAINS, "kube"))  # the public fronts: these __init__ only



def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree: ast.AST, package: str = "") -> list[tuple[str, int]]:
    """(dotted name, line) of every import anywhere in `tree` (in functions and ``if TYPE_CHECKING:`` blocks too):
    ``import a.b`` gives a.b, ``from a import b`` gives a.b (b a module or a name: `resolve` finds the module);
    relative imports are resolved against `package`."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            visit_node(child)

    def visit_node(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([module] if module else [])])
            found.extend((f"{module}.{alias.name}", node.lineno) for alias in node.names)
        visit(node)

    visit(tree)
    return found


def source_modules(generated: bool = False) -> dict[str, Path]:
    """Our modules (`generated`: the generated gRPC stubs instead, outside the graph like a third-party module)."""
    modules = {}
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            if ("generation_pb2" in path.name) == generated:
                modules[module_name(path)] = path
    return modules


MODULES = source_modules()
GENERATED = source_modules(generated=True)


def resolve(name: str) -> str | None:
    """The module of ours `name` is (or is in), or None for a third-party name or a generated stub."""
    if name in GENERATED or name.rpartition(".")[0] in GENERATED:
        return None
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def import_edges() -> dict[str, dict[str, int]]:
    """module -> {imported module of ours: line}; ``from pytest_topsail import name`` counts as an import of the
    module the public name comes from."""
    exports = topsail._EXPORTS
    edges: dict[str, dict[str, int]] = defaultdict(dict)
    for module, path in MODULES.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for name, line in imported_names(ast.parse(path.read_text(encoding="utf-8")), package):
            if name.startswith("pytest_topsail.") and name.count(".") == 1 and name.split(".")[1] in exports:
                name = exports[name.split(".")[1]]
            target = resolve(name)
            if target is not None and target != module and target != "pytest_topsail":
                edges[module].setdefault(target, line)
    return edges


EDGES = import_edges()


def package_of(module: str) -> str:
    """The unit of the cycle check: a subpackage of pytest_topsail, a top-level engine module, a fixture module, or
    a suite. A package's ``__main__`` (its command line, which nothing imports) is a node of its own: it sits on top
    of everything and can use any package without making a cycle."""
    parts = module.split(".")
    if parts[-1] == "__main__":
        return module
    if parts[0] == "pytest_topsail":
        return ".".join(parts[:2])
    if parts[0] == "suites":
        return ".".join(parts[:2])
    return module


def floor(module: str) -> str:
    parts = module.split(".")
    if parts[0] in ("fixtures", "suites"):
        return parts[0]
    name = parts[1] if len(parts) > 1 else ""
    if name in BASE:
        return "base"
    if name in FOUNDATION:
        return "foundation"
    if name in ("kube", "sim", "prepare"):
        return name
    if name in DOMAINS:
        return "domain"
    return "engine"


def allowed(source: str, target: str) -> bool:
    """Whether the floor plan lets `source` import `target` (both modules of ours)."""
    below, above = floor(target), floor(source)
    if above == "base":
        return False
    if above == "foundation":
        return below in ("base", "foundation")
    if above == "kube":
        return below in ("base", "foundation", "kube")
    if above == "sim":
        return below in ("base", "foundation", "kube", "sim")
    if above == "domain":
        own, other = source.split(".")[1], target.split(".")[1] if below == "domain" else ""
        if below == "sim":
            return source.split(".")[2:3] == [SIM_PLUGIN_MODULE]
        if below == "domain":
            return other == own or other in DOMAIN_USES.get(own, ())
        if below == "engine":
            return target.startswith(ENGINE_LITE)
        return True  # base, foundation, kube
    if above == "engine":
        return below in ("base", "foundation", "kube", "sim", "engine") or (
            below == "prepare" and source == "pytest_topsail.plugin")  # the wiring registers the preparation plugin
    if above == "prepare":
        return below in ("base", "foundation", "kube", "engine", "prepare") or target in FRONTS
    if above == "fixtures":
        return below == "fixtures" or public(target)
    return public(target)  # suites: never fixtures (they are plugins), never another suite


def public(target: str) -> bool:
    """A module a suite or fixture module may import: a domain front, or where a ``topsail.*`` name comes from."""
    return target in FRONTS or target in topsail._EXPORTS.values()


def test_the_import_graph_is_read_with_function_local_and_type_checking_imports() -> None:
    # the plugin imports its collaborators inside its hooks: the graph must see them
    assert "pytest_topsail.cluster.plugin" in EDGES["pytest_topsail.plugin"]
    assert len(MODULES) > 100
    # a front imports its names only for type checkers: still edges
    assert "pytest_topsail.tgis.client" in EDGES["pytest_topsail.tgis"]
    code = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..errors import TopsailError\n"
            "def f():\n    from .store import Store\n    from . import store\n")
    # relative imports resolve against their package
    assert imported_names(ast.parse(code), "pytest_topsail.sim") == [
        ("typing.TYPE_CHECKING", 1), ("pytest_topsail.errors.TopsailError", 3),
        ("pytest_topsail.sim.store.Store", 5), ("pytest_topsail.sim.store", 6)]


def cycles_of(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of `graph`: none is allowed, between modules or between packages."""
    return [sorted(component) for component in strongly_connected(graph) if len(component) > 1]


def test_no_module_cycle() -> None:
    graph = {source: set(targets) for source, targets in EDGES.items()}
    assert cycles_of(graph) == [], "module cycles"


def test_no_package_cycle() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, targets in EDGES.items():
        for target in targets:
            if package_of(source) != package_of(target):
                graph[package_of(source)].add(package_of(target))
    assert cycles_of(graph) == [], "package cycles"


def test_every_import_keeps_the_floor_plan() -> None:
    broken = [f"{MODULES[source].relative_to(REPO)}:{line} ({floor(source)}) imports {target} ({floor(target)})"
              for source, targets in sorted(EDGES.items()) for target, line in sorted(targets.items())
              if not allowed(source, target)]
    assert broken == []


def private_imports(tree: ast.AST) -> list[str]:
    """Imports of names outside the public API (``TYPE_CHECKING`` and function-local imports included):
    ``from pytest_topsail import X`` or ``from pytest_topsail.<front> import X`` with X not in that ``__all__``, or
    any other ``pytest_topsail.<module>`` (a module of a front's package too)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("pytest_topsail", *FRONTS):
            exported = importlib.import_module(node.module).__all__
            found += [f"line {node.lineno}: {node.module}.{alias.name}" for alias in node.names
                      if alias.name not in exported]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_topsail."):
            found.append(f"line {node.lineno}: {node.module}")
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: {alias.name}" for alias in node.names
                      if alias.name.startswith("pytest_topsail.") and alias.name not in FRONTS]
    return found


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith(("fixtures", "suites"))))
def test_suites_and_fixture_modules_use_only_the_public_api(module: str) -> None:
    private = private_imports(ast.parse(MODULES[module].read_text(encoding="utf-8")))
    assert private == [], f"{MODULES[module].relative_to(REPO)} imports names outside the public API"


def test_the_checks_catch_what_they_are_for() -> None:
    assert not allowed("pytest_topsail.sim.store", "pytest_topsail.tgis.sizing")
    assert not allowed("pytest_topsail.kube.client", "pytest_topsail.suites")
    assert not allowed("pytest_topsail.errors", "pytest_topsail.tree")
    assert not allowed("pytest_topsail.tgis.sizing", "pytest_topsail.sim.profile")
    assert not allowed("pytest_topsail.scale.run", "pytest_topsail.suites")
    assert not allowed("pytest_topsail.report.plugin", "pytest_topsail.scale.run")
    assert not allowed("fixtures.olm", "pytest_topsail.cluster.rundir")  # no public name comes from there
    assert not allowed("suites.scale.conftest", "fixtures.olm")
    assert not allowed("fixtures.olm", "pytest_topsail.kube.events")  # modules behind the fronts
    assert not allowed("suites.fine_tuning.test_fine_tuning", "pytest_topsail.fine_tuning.estimate")
    assert allowed("fixtures.olm", "pytest_topsail.kube") and allowed("suites.scale.kpis", "pytest_topsail.kpi")
    # the preparation plugin: above the engine, the domains through their fronts; only the wiring imports it
    assert allowed("pytest_topsail.prepare.tgis_workers", "pytest_topsail.tgis")
    assert not allowed("pytest_topsail.prepare.tgis_workers", "pytest_topsail.tgis.client")
    assert not allowed("pytest_topsail.report.plugin", "pytest_topsail.prepare.stack")
    assert sorted(map(sorted, strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}))) == [["a", "b"], ["c"]]
    assert private_imports(ast.parse(
        "from pytest_topsail.kpi import kpi\nfrom pytest_topsail import kpi, _EXPORTS\nimport pytest_topsail.cases\n"
        "from pytest_topsail.kube.wait import poll\nfrom pytest_topsail.kube import poll, Kube\n"
        "import pytest_topsail.tgis\n"
        "def f():\n    from pytest_topsail.fine_tuning.estimate import Point\n")) == [
        "line 1: pytest_topsail.kpi", "line 2: pytest_topsail._EXPORTS", "line 3: pytest_topsail.cases",
        "line 4: pytest_topsail.kube.wait", "line 5: pytest_topsail.kube.Kube",
        "line 8: pytest_topsail.fine_tuning.estimate"]
    # a cycle through a TYPE_CHECKING import or a function is a cycle; a known one may shrink, never grow
    assert cycles_of({"a": {"b"}, "b": {"a"}}) == [["a", "b"]]
    assert cycles_of({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert cycles_of({"a": {"b"}, "b": {"c"}}) == []


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    nodes = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components
