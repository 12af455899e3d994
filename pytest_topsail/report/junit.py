"""KPI values and verdicts in junit XML, valid against the schema of the chosen ``junit_family``.

- ``xunit2`` (pytest's default): pytest's junit-10.xsd allows ``<properties>`` only under ``<testsuite>``, so every
  KPI and verdict is a testsuite property named after its test: ``<nodeid>::kpi.<name>`` = number,
  ``<nodeid>::kpi.<name>.unit``, ``<nodeid>::verdict.<name>`` = status, ``<nodeid>::verdict.<name>.change_percent``
  (or ``.change_absolute`` when the reference is 0); plus ``topsail.verdict`` (the one-line verdict) and
  ``topsail.report``.
- ``xunit1`` / ``legacy``: the same per testcase (``kpi.<name>``, ``kpi.<name>.unit``, ...), added to the teardown
  report's ``user_properties`` on the controller, so ``record_property``'s xunit2 warning is never triggered.
Values are plain numbers; units are separate properties.
With ``--topsail-baseline``, each KPI compared with the baseline run gets ``baseline.<name>`` (per testcase, or
``<nodeid>::baseline.<name>``) = ``<verdict> <change [interval]>``, e.g. ``worse +12.3% [+8.1%, +16.0%]``, and the
session ``topsail.baseline`` = the baseline's name and the comparison's verdict line.

Every family also gets, in each testcase's ``<system-out>`` (what Jenkins and GitLab show per test), one line per
KPI in a stable format (docs/kpis-and-regressions.md):
``topsail KPI <name> = <value> [<unit>] | verdict <state> | change <change or -> | reference <value or -> |
history <n>`` (one line, `` | `` between fields; ``verdict -`` for a KPI not judged in this session).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord
    from pytest_topsail.regression import Verdict


def per_testcase(config: pytest.Config) -> bool:
    """True when the junit family allows testcase properties (xunit1, legacy)."""
    return str(config.getini("junit_family")) != "xunit2"


def kpi_properties(kpis: Iterable[dict[str, Any]], prefix: str = "") -> list[tuple[str, str]]:
    properties = []
    for kpi in kpis:
        properties.append((f"{prefix}kpi.{kpi['name']}", f"{float(kpi['value']):g}"))
        if kpi.get("unit"):
            properties.append((f"{prefix}kpi.{kpi['name']}.unit", str(kpi["unit"])))
    return properties


def verdict_properties(verdicts: Iterable[Verdict], prefix: str = "") -> list[tuple[str, str]]:
    properties = []
    for verdict in verdicts:
        name = f"{prefix}verdict.{verdict.kpi}"
        properties.append((name, verdict.status))
        if verdict.change_percent is not None:
            properties.append((f"{name}.change_percent", f"{verdict.change_percent:.2f}"))
        elif verdict.change_absolute is not None:
            properties.append((f"{name}.change_absolute", f"{verdict.change_absolute:g}"))
        if verdict.pvalue is not None:
            properties.append((f"{name}.pvalue", f"{verdict.pvalue:.3g}"))
        properties.append((f"{name}.history", str(verdict.history_size)))
    return properties


def kpi_lines(kpis: Iterable[dict[str, Any]], verdicts: Iterable[Verdict]) -> list[str]:
    by_name = {verdict.kpi: verdict for verdict in verdicts}
    lines = []
    for kpi in kpis:
        verdict = by_name.get(kpi["name"])
        value = f"{float(kpi['value']):g}" + (f" {kpi['unit']}" if kpi.get("unit") else "")
        if verdict is None:
            fields = ["verdict -", "change -", "reference -", "history -"]
        else:
            reference = "-" if verdict.reference is None else f"{verdict.reference:g}"
            fields = [f"verdict {verdict.status}", f"change {verdict.change_text() or '-'}",
                      f"reference {reference}", f"history {verdict.history_size}"]
        lines.append(" | ".join([f"topsail KPI {kpi['name']} = {value}", *fields]))
    return lines


def add_system_out(writer: Any, report: pytest.TestReport, lines: list[str]) -> None:
    """The item's KPI lines as a ``<system-out>`` of its testcase (the schema allows several)."""
    from xml.etree import ElementTree

    if not lines:
        return
    node = ElementTree.Element("system-out")
    node.text = "\n".join(lines) + "\n"
    writer.node_reporter(report).append(node)


def logxml(config: pytest.Config) -> Any | None:
    """pytest's junitxml writer of this session, when ``--junitxml`` is given."""
    from _pytest.junitxml import xml_key

    return config.stash.get(xml_key, None)


TESTCASES = pytest.StashKey[dict[str, Any]]()  # node id -> pytest's reporter of its testcase (add_baseline)


def add_item(config: pytest.Config, report: pytest.TestReport, record: ItemRecord,
             verdicts: list[Verdict]) -> None:
    """An item's KPIs and verdicts, where its junit family allows them."""
    writer = logxml(config)
    if writer is not None:
        add_system_out(writer, report, kpi_lines(record.kpis, verdicts))
        config.stash.setdefault(TESTCASES, {})[record.nodeid] = writer.node_reporter(report)
    if per_testcase(config):
        report.user_properties.extend(kpi_properties(record.kpis))
        report.user_properties.extend(verdict_properties(verdicts))
        return
    if writer is None:
        return
    prefix = f"{record.nodeid}::"
    for name, value in kpi_properties(record.kpis, prefix) + verdict_properties(verdicts, prefix):
        writer.add_global_property(name, value)


def add_session(config: pytest.Config, line: str, report: str | None) -> None:
    writer = logxml(config)
    if writer is None:
        return
    writer.add_global_property("topsail.verdict", line)
    if report:
        writer.add_global_property("topsail.report", report)


def add_baseline(config: pytest.Config, judgement: Any, nodeids: dict[tuple[str, str], str]) -> None:
    """The comparison with ``--topsail-baseline``: a property per compared KPI of an item of this run (`nodeids`:
    (suite, test id) -> node id), in its testcase's ``<properties>`` where the family allows it (pytest has
    serialised the testcase by now: the property goes into that element), else (xunit2, or items replotted with
    ``--topsail-replot``: no testcases) as testsuite properties ``<nodeid>::baseline.<kpi>``."""
    from xml.etree import ElementTree

    writer = logxml(config)
    if writer is None:
        return
    writer.add_global_property("topsail.baseline", f"{judgement.name or judgement.option}: {judgement.summary()}")
    testcases = config.stash.get(TESTCASES, {})
    for comparison in judgement.comparisons:
        nodeid = nodeids.get((comparison.suite, comparison.item))
        if nodeid is None or comparison.kpi == "*":
            continue
        name, value = f"baseline.{comparison.kpi}", " ".join(filter(None, (comparison.verdict,
                                                                             comparison.change_text())))
        if not per_testcase(config) or nodeid not in testcases:  # xunit2, or a replot (no testcases)
            writer.add_global_property(f"{nodeid}::{name}", value)
        else:
            testcase = testcases[nodeid].to_xml()
            properties = testcase.find("properties")
            if properties is None:
                properties = ElementTree.Element("properties")
                testcase.insert(0, properties)
            ElementTree.SubElement(properties, "property", name=name, value=value)
