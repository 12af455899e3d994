"""The public API (`import pytest_topsail as topsail` and the domain fronts, `from pytest_topsail.tgis import
TgisClient`): every name resolves, names load on first use, each front's type-checking imports name exactly its
public names, the KPI decorator is `topsail.kpi` even once the kpi module is imported (that suites and fixture
modules use nothing else: test_floor_plan.py)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_topsail as topsail

REPO = Path(__file__).resolve().parents[2]


def test_kpi_is_the_decorator_even_after_the_module_is_imported() -> None:
    import pytest_topsail.kpi as kpi_module  # noqa: F401

    @topsail.kpi(unit="ms", help="h", lower_better=True)
    def latency_ms(data):
        return data

    assert latency_ms.topsail_kpi.name == "latency_ms"


def test_importing_the_package_and_its_fronts_loads_nothing_heavy() -> None:
    code = (f"import sys, pytest_topsail, {', '.join(FRONTS)}\n"
            "print(sorted(m for m in ('kubernetes', 'pydantic', 'numpy', 'grpc', 'aiohttp', 'yaml') "
            "if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert result.stdout.strip() == "[]", result.stderr


FRONTS = [f"pytest_topsail.{name}" for name in ("tgis", "llmload", "scale", "fine_tuning", "kube")]


def type_checking_imports(module: str) -> dict[str, str]:
    """name -> module of the ``if TYPE_CHECKING:`` imports of `module`'s source."""
    tree = ast.parse(Path(importlib.import_module(module).__file__ or "").read_text(encoding="utf-8"))
    return {alias.name: node.module or "" for block in tree.body
            if isinstance(block, ast.If) and getattr(block.test, "id", "") == "TYPE_CHECKING"
            for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}


@pytest.mark.parametrize("front", ["pytest_topsail", *FRONTS])
def test_a_front_lists_each_name_once_and_every_name_resolves(front: str) -> None:
    module = importlib.import_module(front)
    assert sorted(module.__all__) == sorted(module._EXPORTS) == sorted(set(module.__all__))
    assert type_checking_imports(front) == module._EXPORTS  # what type checkers see is what runs
    for name in module.__all__:
        assert getattr(module, name) is getattr(importlib.import_module(module._EXPORTS[name]), name), name
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = module.nothing
