"""pytest entry point of pytest-topsail: hooks only; everything else is delegated.

Kept tiny: importing it must cost nothing measurable when no suite is collected.
"""

from __future__ import annotations

import pytest


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_topsail import hookspec
    from pytest_topsail.report import plugin as report_plugin

    pluginmanager.add_hookspecs(hookspec)
    pluginmanager.register(report_plugin, "topsail-report")
