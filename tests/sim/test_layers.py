"""The simulator's layout: subpackages in layers (each imports only lower ones), no import cycle between its modules,
no module over 600 lines. Imports inside functions and under TYPE_CHECKING count like the others."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_topsail.sim

SIM = Path(pytest_topsail.sim.__file__).parent
# lowest first: a module may import its own subpackage and those before it
LAYERS = ["machinery", "storage", "registry", "node", "controllers", "streams", "api", "run"]
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = ["pytest_topsail", "sim", *path.relative_to(SIM).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The sim modules a file imports anywhere in it (``from pkg import module`` names the module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path}: relative import of {node.module}"
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name in known} - {module_name(path)}


FILES = sorted(SIM.rglob("*.py"))
MODULES = {module_name(path): path for path in FILES}
GRAPH = {name: imported_modules(path, set(MODULES)) for name, path in MODULES.items()}


def layer(module: str) -> int:
    """The index of the module's subpackage in LAYERS; pytest_topsail.sim and its __main__ sit above them all."""
    parts = module.split(".")
    return LAYERS.index(parts[2]) if len(parts) > 2 and parts[2] in LAYERS else len(LAYERS)


def test_every_module_sits_in_a_layer() -> None:
    outside = {"pytest_topsail.sim", "pytest_topsail.sim.__main__"}
    assert {module.split(".")[2] for module in MODULES if module not in outside} == set(LAYERS)


def test_no_module_imports_a_higher_layer() -> None:
    upward = [f"{source} imports {target}" for source, targets in sorted(GRAPH.items()) for target in sorted(targets)
              if layer(target) > layer(source)]
    assert upward == []


def test_no_import_cycle_between_modules() -> None:
    def cycle_from(start: str) -> list[str] | None:
        path: list[str] = []

        def visit(module: str) -> list[str] | None:
            if module in path:
                return [*path[path.index(module):], module]
            if module in done:
                return None
            path.append(module)
            for target in sorted(GRAPH[module]):
                found = visit(target)
                if found:
                    return found
            path.pop()
            done.add(module)
            return None

        return visit(start)

    done: set[str] = set()
    cycles = [cycle for module in sorted(GRAPH) if (cycle := cycle_from(module))]
    assert cycles == []


def test_no_module_is_over_600_lines() -> None:
    lengths = {str(path.relative_to(SIM)): len(path.read_text(encoding="utf-8").splitlines()) for path in FILES}
    assert {name: lines for name, lines in lengths.items() if lines > MAX_LINES} == {}


def test_the_check_sees_function_local_and_type_checking_imports() -> None:
    # run/cli.py imports the profile loader inside a function; controllers/base.py the Store Protocol under
    # TYPE_CHECKING
    assert "pytest_topsail.sim.run.profile" in GRAPH["pytest_topsail.sim.run.cli"]
    assert "pytest_topsail.sim.controllers.storeapi" in GRAPH["pytest_topsail.sim.controllers.base"]
