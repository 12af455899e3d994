"""A fault's KPIs (`kpis.exclude(reason)`: a cluster fault ended the item's server, its worker lost its GPU): kept in
the item's kpis.json, the verdicts and the report, marked excluded with the reason, never judged, never stored as
history points; the other items' KPIs are judged and stored as usual."""

from __future__ import annotations

import json

from tests.report.conftest import Project, read_json, report_text, seed_both

FAULT = "evicted: pod demo-predictor-0 on node gpu-0003: The node was low on resource: memory."

TEST = """
import json
import pathlib


def test_train(case, kpis, artifact_dir, request):
    root = pathlib.Path(str(request.config.rootpath))
    values = json.loads((root / "values.json").read_text())
    data = {**values, "size": case.settings["size"]}
    kpis.record_from(data)
    fault = root / f"fault-{case.settings['size']}.txt"
    if fault.exists():
        kpis.exclude(fault.read_text())
"""


def test_excluded_kpis_are_shown_with_the_reason_and_never_stored(project: Project) -> None:
    from pytest_topsail.history import open_history

    project.write("suites/demo/test_demo.py", TEST)
    seed_both(project)
    before = len(open_history(project.history).records("demo"))
    project.write("fault-2.txt", FAULT)
    project.set_values(throughput=10.0)  # a collapse the fault explains: never a regression
    result = project.run()
    result.assert_outcomes(passed=2)
    verdicts = read_json(project.artifacts("s1") / "verdicts.json")
    faulted = [v for v in verdicts if "size=2" in v["nodeid"]]
    healthy = [v for v in verdicts if "size=1" in v["nodeid"]]
    assert faulted and all(v["status"] == "ignored" for v in faulted)
    assert all(v["explanation"] == f"excluded from history: {FAULT}" for v in faulted)
    assert {v["status"] for v in healthy if v["kpi"] == "throughput"} == {"regression"}
    item = next(p for p in (project.artifacts("s1") / "demo").iterdir() if "size=2" in p.name)
    kpis = json.loads((item / "kpis.json").read_text())
    assert {k["name"] for k in kpis} == {"throughput", "latency", "avg_tokens"}
    assert all(k["excluded"] == FAULT for k in kpis)
    stored = open_history(project.history).records("demo")
    new = stored[before:]
    assert len(new) == 3 and all("size=1" in r["nodeid"] for r in new)
    assert "excluded from history: evicted: pod demo-predictor-0 on node gpu-0003" in \
        report_text(project.artifacts("s1") / "report.html")
