"""The public API (`import pytest_topsail as topsail`): every name resolves, names load on first use, the KPI
decorator is `topsail.kpi` even once the kpi module is imported (that suites and fixture modules use nothing
private: test_floor_plan.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest_topsail as topsail

REPO = Path(__file__).resolve().parents[2]


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
