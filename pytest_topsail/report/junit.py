"""KPI values and verdicts as junit ``<property>`` elements of each testcase.

KPI values are added to ``item.user_properties`` before the teardown report is made (on the worker under xdist),
verdicts to the teardown report's ``user_properties`` on the controller before junitxml reads them. Both reach
junitxml through the report, so ``record_property``'s xunit2 warning is never triggered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_topsail.regression import Verdict


def kpi_properties(kpis: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(f"kpi.{k['name']}", f"{float(k['value']):g} {k.get('unit', '')}".strip()) for k in kpis]


def verdict_properties(verdicts: Iterable[Verdict]) -> list[tuple[str, str]]:
    properties = []
    for verdict in verdicts:
        text = verdict.status
        if verdict.change_percent is not None:
            text += f" {verdict.change_percent:+.2f}%"
        if verdict.pvalue is not None:
            text += f" p={verdict.pvalue:.3g}"
        text += f" history={verdict.history_size}"
        properties.append((f"verdict.{verdict.kpi}", text))
    return properties
