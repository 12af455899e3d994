"""Hooks that pytest-topsail adds; other plugins (fixtures/, suites' conftest.py) implement them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_topsail.suites import Suite


@pytest.hookspec
def pytest_topsail_labels(item: pytest.Item) -> dict[str, Any] | None:
    """Extra KPI labels for ``item`` (e.g. cluster facts). Results of all implementations are merged."""


@pytest.hookspec
def pytest_topsail_check_suite(suite: Suite) -> None:
    """Check, at start-up, the sections of ``suite``'s configuration this plugin reads (its settings model): raise a
    TopsailError naming the file and the key. Called for every suite in scope after ``Suite.validate()``, also on the
    xdist controller, so bad input stops the run before any test."""


@pytest.hookspec(firstresult=True)
def pytest_topsail_baseline(config: pytest.Config, root: Any) -> Any | None:
    """This run (its artifacts at ``root``) judged against a baseline run, or None: the first plugin that judges
    answers (compare/plugin.py for ``--topsail-baseline``). The reporting reads its ``name``, ``option``,
    ``summary()``, ``report_context()`` and ``comparisons``; called on the controller before the run is stored in the
    history, so the run is never its own noise."""
