"""KPIs and verdicts as TeamCity test metadata (PyCharm and TeamCity runs through teamcity-messages).

When the teamcity-messages plugin reports this session (``--teamcity``, or running under TeamCity), each item gets
``##teamcity[testMetadata testName=... name=<kpi> type='number' value=...]`` per KPI and a text entry
``verdict.<kpi>`` per judged KPI, written through that plugin's own message writer and test naming.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord
    from pytest_topsail.regression import Verdict


def reporter(config: pytest.Config) -> Any | None:
    """The teamcity-messages reporter of this session, when active."""
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "EchoTeamCityMessages" and hasattr(plugin, "format_test_id"):
            return plugin
    return None


def add_item(config: pytest.Config, report: pytest.TestReport, record: ItemRecord,
             verdicts: Sequence[Verdict]) -> None:
    echo = reporter(config)
    if echo is None:
        return
    test_name = echo.format_test_id(report.nodeid, report.location)
    for kpi in record.kpis:
        unit = f" ({kpi['unit']})" if kpi.get("unit") else ""
        echo.teamcity.message("testMetadata", testName=test_name, name=f"{kpi['name']}{unit}", type="number",
                              value=f"{float(kpi['value']):g}")
    for verdict in verdicts:
        if verdict.status in ("regression", "improvement", "accepted"):
            text = f"{verdict.status} {verdict.change_text()}".strip()
            echo.teamcity.message("testMetadata", testName=test_name, name=f"verdict.{verdict.kpi}", value=text)
