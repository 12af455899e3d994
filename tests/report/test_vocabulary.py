"""One vocabulary of verdict states (pytest_topsail/verdict_states.py): one session producing all six states, and
every output — terminal, verdicts.json, regression_summary.yaml, junit, the HTML report, the docs — names each
state exactly so, and never by a synonym."""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml

from pytest_topsail.verdict_states import State
from tests.report.conftest import Project, read_json, report_text

NAMES = {state.value for state in State}
SYNONYMS = ("short history", "not_analyzed", "insufficient history", "no history", "REGRESSION", "not judged",
            "without enough history", "not enough history")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "kpis-and-regressions.md"


@pytest.fixture
def every_state(project: Project, monkeypatch: pytest.MonkeyPatch) -> pytest.RunResult:
    """size=1 against 20 runs: throughput down (regression), latency down (improvement), avg_tokens (ignored);
    size=2: throughput as before (accepted), 3 earlier latencies (insufficient_history); setup_time is new to
    both (no_history)."""
    monkeypatch.setenv("COLUMNS", "200")
    for size, latencies in ((1, 20), (2, 3)):
        wobble = [1 + 0.01 * ((i * 7) % 5 - 2) for i in range(20)]
        throughput = 100.0 if size == 1 else 140.0
        series = {"throughput": [throughput * w for w in wobble], "avg_tokens": [512.0 * w for w in wobble]}
        project.import_history(project.seed_history(series, size=size))
        project.import_history(project.seed_history({"latency": [10.0 * w for w in wobble[:latencies]]}, size=size))
    kpis = (project.path / "suites/demo/kpis.py").read_text()
    project.write("suites/demo/kpis.py", kpis + "\n\n@kpi(unit='s', help='Setup', lower_better=True)\n"
                  "def setup_time(data):\n    return 1.0\n")
    project.write("suites/demo/config.yaml", "cases: [cases/demo.yaml]\nregression: {comparison_keys: [image]}\n")
    project.set_values(throughput=70.0, latency=5.0)
    return project.run("-vv", "--junitxml=junit.xml", "-o", "junit_family=xunit1")


def test_every_output_names_the_states_alike(project: Project, every_state: pytest.RunResult) -> None:
    root = project.artifacts("s1")
    statuses = {v["status"] for v in read_json(root / "verdicts.json")}
    assert statuses == NAMES, "the session produces every state"
    summary = yaml.safe_load((root / "regression_summary.yaml").read_text())
    assert set(summary["verdicts"]) == NAMES
    texts = {"terminal": every_state.stdout.str(), "summary": (root / "regression_summary.yaml").read_text(),
             "report": report_text(root / "report.html"), "junit": (project.path / "junit.xml").read_text()}
    table = texts["terminal"].split("topsail KPIs and regressions", 1)[1].split("topsail KPIs:", 1)[0]
    assert {line.split()[-1] for line in table.splitlines()[3:] if line.strip()} == NAMES
    junit = ElementTree.parse(project.path / "junit.xml")
    assert {p.get("value") for p in junit.iter("property") if re.fullmatch(r"verdict\.\w+", p.get("name", ""))} \
        == NAMES
    for state in NAMES:
        assert f"state-{state}" in texts["report"], f"report: {state} cell class"
    for where, text in texts.items():
        for synonym in SYNONYMS:
            assert synonym not in text, f"{where} says {synonym!r}"


def test_the_docs_table_is_the_vocabulary() -> None:
    text = DOCS.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| (.+) \|$", text.split("| verdict | meaning |", 1)[1], flags=re.M)
    assert [name for name, _ in rows][:len(State)] == [state.value for state in State]
    assert {name: meaning for name, meaning in rows[:len(State)]} == {s.value: s.meaning for s in State}
