"""KPIs under pytest-xdist: records from every worker reach the controller's outputs, and a finished item's KPIs
survive the crash of its worker later on."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

from tests.report.conftest import Project, read_json

WORKER_TEST = """
import os


def test_train(case, kpis):
    kpis.record("latency", 10.0 * case.settings["size"])
    kpis.labels(worker=os.environ["PYTEST_XDIST_WORKER"])
    kpis.record("throughput", 100.0)
"""

CASES = """
- name: run
  size: [1, 2, 3, 4]
"""


def test_two_workers_kpis_are_merged_in_one_set_of_outputs(project: Project) -> None:
    project.write("cases/demo.yaml", CASES)
    project.write("suites/demo/test_demo.py", WORKER_TEST)
    result = project.run("-n", "2", "--dist", "load", "--junitxml=junit.xml", subprocess=True)
    result.assert_outcomes(passed=4)
    prom = (project.artifacts("s1") / "kpis.prom").read_text()
    workers = set(re.findall(r'worker="(gw\d)"', prom))
    assert workers == {"gw0", "gw1"}, "each worker recorded at least one item"
    assert len(re.findall(r"^latency\{", prom, re.M)) == 4 and len(re.findall(r"^throughput\{", prom, re.M)) == 4
    verdicts = read_json(project.artifacts("s1") / "verdicts.json")
    assert len(verdicts) == 8
    tree = ElementTree.parse(project.path / "junit.xml")
    names = [p.get("name") for p in tree.iter("property")]
    assert len([n for n in names if n.endswith("::kpi.latency")]) == 4
    assert len([n for n in names if n.endswith("::verdict.throughput")]) == 4
    result.stdout.fnmatch_lines([
        "topsail: no verdict: not enough comparable history yet (0 of 5 comparable runs) "
        "?8 KPIs: 0 accepted, 0 insufficient_history, 8 no_history, 0 ignored?"])


CRASH_TEST = """
import os
import pathlib


def test_train(case, kpis, request):
    kpis.record("latency", 10.0 * case.settings["size"])


def test_zz_crash():
    marker = pathlib.Path(os.environ["CRASH_MARKER"])
    if not marker.exists():
        marker.write_text("crashed once")
        os._exit(3)
"""


def test_kpis_of_finished_items_survive_a_worker_crash(project: Project, monkeypatch) -> None:
    project.write("cases/demo.yaml", CASES)
    project.write("suites/demo/test_demo.py", CRASH_TEST)
    monkeypatch.setenv("CRASH_MARKER", str(project.path / "crash.marker"))
    result = project.run("-n", "2", "--dist", "loadfile", "--max-worker-restart=1", subprocess=True)
    assert (project.path / "crash.marker").is_file(), "the crashing test ran"
    assert result.ret == 1, "a crashed worker fails the session"
    output = result.stdout.str()
    assert re.search(r"(crashed|worker 'gw\d' crashed)", output), output
    prom = (project.artifacts("s1") / "kpis.prom").read_text()
    assert len(re.findall(r"^latency\{", prom, re.M)) == 4
    assert {float(v) for v in re.findall(r"^latency\{.*\} (\S+)$", prom, re.M)} == {10.0, 20.0, 30.0, 40.0}
    from pytest_topsail.history.sqlite import SqliteHistory

    store = SqliteHistory(project.history)
    assert len(store.records("demo")) == 4
    store.close()
