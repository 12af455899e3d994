"""The public API (`import pytest_topsail as topsail`): every name resolves, names load on first use, the KPI
decorator is `topsail.kpi` even once the kpi module is imported, and the scale suite uses nothing private."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest_topsail as topsail

REPO = Path(__file__).resolve().parents[2]
PUBLIC_PACKAGES = ("pytest_topsail.scale", "pytest_topsail.tgis", "pytest_topsail.llmload",
                   "pytest_topsail.fine_tuning", "pytest_topsail.kube")


def test_every_public_name_resolves() -> None:
    for name in topsail.__all__:
        assert getattr(topsail, name) is not None, name
    assert set(topsail.__all__) <= set(dir(topsail))


def test_kpi_is_the_decorator_even_after_the_module_is_imported() -> None:
    import pytest_topsail.kpi as kpi_module  # noqa: F401

    @topsail.kpi(unit="ms", help="h", lower_better=True)
    def latency_ms(data):
        return data

    assert latency_ms.topsail_kpi.name == "latency_ms"


def test_importing_the_package_loads_nothing_heavy() -> None:
    code = ("import sys, pytest_topsail\n"
            "print(sorted(m for m in ('kubernetes', 'pydantic', 'numpy') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert result.stdout.strip() == "[]", result.stderr


def test_the_scale_suite_uses_only_the_public_api() -> None:
    for path in sorted((REPO / "suites" / "scale").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            for module in modules:
                if module.startswith("pytest_topsail") and module != "pytest_topsail":
                    assert module.startswith(PUBLIC_PACKAGES), f"{path.name} imports {module}"
