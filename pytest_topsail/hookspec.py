"""Hooks that pytest-topsail adds; other plugins (fixtures/, suites' conftest.py) implement them."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_topsail_labels(item: pytest.Item) -> dict[str, Any] | None:
    """Extra KPI labels for ``item`` (e.g. cluster facts). Results of all implementations are merged."""
