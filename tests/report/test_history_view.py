"""``python -m pytest_topsail.history report``: per KPI the runs over time, the level changes (when a change
started, with its run id), acknowledged and pending regressions, as one offline page."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pytest_topsail.history import open_history
from pytest_topsail.history.__main__ import main
from tests.report.chromium import CHROMIUM, READY, visit_page
from tests.report.conftest import report_text

START = 1_750_000_000.0
DAY = 86400.0


def seed(path: Path) -> None:
    """20 runs of two items; from run 12 on, item a's latency is 40 % higher (run 12 a regression, acknowledged;
    the last run of item b a regression nobody acknowledged)."""
    rng = random.Random(4)
    records = []
    for run in range(20):
        for item in ("a", "b"):
            value = rng.gauss(100.0, 1.0) * (1.4 if item == "a" and run >= 12 else 1.0)
            verdict = "regression" if (item, run) in (("a", 12), ("b", 19)) else "accepted"
            if (item, run) == ("b", 19):
                value = 150.0
            record = {"suite": "demo", "name": "latency_ms", "value": value, "unit": "ms", "higher_better": False,
                      "timestamp": START + run * DAY, "test_uuid": f"{item}-{run}", "run_id": f"run-{run:02d}",
                      "nodeid": f"suites/demo/test_demo.py::test_x[size={item}]", "verdict": verdict,
                      "labels": {"size": item, "image": "v1"}}
            if (item, run) == ("a", 12):
                record["acknowledged"] = {"reason": "bigger batches on purpose", "at": START + 13 * DAY}
            records.append(record)
    store = open_history(path)
    store.add(records)
    store.close()


def test_history_report_shows_when_a_change_started(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed(tmp_path / "h.sqlite")
    page = tmp_path / "history.html"
    assert main(["report", "--history", str(tmp_path / "h.sqlite"), "--suite", "demo", "-o", str(page)]) == 0
    assert "1 KPI(s) of suite demo over 40 stored record(s)" in capsys.readouterr().err
    html = report_text(page)
    rows = [line for line in html.splitlines() if line.startswith("<tr><td>")]
    assert len(rows) == 1 and "size=a" in rows[0] and "run-12" in rows[0], rows
    assert "2 items, 40 runs; 1 regression records waiting for an acknowledgement, 1 acknowledged" in html
    if CHROMIUM is None:
        return
    visit = visit_page(page, READY, """(async () => { await window.topsailDrawAll(); const d = document.querySelector(
      "div[data-figure]"); return {width: document.documentElement.scrollWidth, drawn: !!d.querySelector("svg"),
      errors: JSON.parse(document.body.dataset.errors || "[]"), traces: d.data.map(t => ({name: t.name,
      symbols: (t.marker || {}).symbol, text: t.text || []}))}; })()""")
    result = visit.result
    assert result["errors"] == [] and result["drawn"] and result["width"] <= 1400
    line = next(t for t in result["traces"] if t["name"] == "size=a")
    assert line["symbols"][12] == "star" and "bigger batches on purpose" in line["text"][12]
    other = next(t for t in result["traces"] if t["name"] == "size=b")
    assert other["symbols"][19] == "circle-open", "a regression nobody acknowledged"


def test_history_report_of_an_unknown_suite_is_one_message(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    seed(tmp_path / "h.sqlite")
    assert main(["report", "--history", str(tmp_path / "h.sqlite"), "--suite", "nope"]) == 2
    assert capsys.readouterr().err.strip() == (f"error: report: the history {tmp_path / 'h.sqlite'} holds no KPI "
                                               "record of suite nope")
