"""The HTML report: self-contained, every text escaped, and in headless Chromium offline: no network request,
no JavaScript error, every figure rendered, links to the items' artifacts."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.report.chromium import CHROMIUM, READY, visit_page
from tests.report.conftest import Project, report_text, seed_both

PAYLOAD = '<img src="http://127.0.0.1:9/pwned.png" onerror="window.pwned=1">'
SCRIPT_PAYLOAD = "</script><script>window.pwned=2</script>"

TEST = f"""
import json
import pathlib

PAYLOAD = {PAYLOAD!r}
SCRIPT_PAYLOAD = {SCRIPT_PAYLOAD!r}


def test_train(case, kpis, request):
    values = json.loads((pathlib.Path(str(request.config.rootpath)) / "values.json").read_text())
    kpis.labels(note=PAYLOAD)
    kpis.record_from({{**values, "size": case.settings["size"]}})
    kpis.record("odd_kpi", 1.5, unit=PAYLOAD, help=PAYLOAD, higher_better=True)
    figure = {{"data": [{{"type": "scatter", "x": [1, 2, 3], "y": [3, 1, 2], "name": SCRIPT_PAYLOAD}}],
              "layout": {{"title": {{"text": "latency " + SCRIPT_PAYLOAD}}}}}}
    kpis.add_figure("latency plot " + PAYLOAD, figure)
"""

PAGE = """(async () => {
  await window.topsailDrawAll();
  const text = s => Array.from(document.querySelectorAll(s)).map(e => e.innerText);
  const color = s => { const c = document.querySelector(s); return c ? getComputedStyle(c).backgroundColor : null; };
  return {
    holders: document.querySelectorAll("div[data-figure]").length,
    drawn: Array.from(document.querySelectorAll("div[data-figure]"))
      .filter(d => d.querySelector("svg.main-svg")).length,
    errors: JSON.parse(document.body.dataset.errors || "[]"),
    violations: JSON.parse(document.body.dataset.violations || "[]"),
    images: document.images.length,
    pwned: window.pwned || null,
    links: Array.from(document.querySelectorAll("tr.item-details div > a:first-of-type")).map(a => a.href),
    matrixHeader: text("table.matrix tr:first-child th"),
    matrixRows: text("table.matrix tr.item").map(t => t.split("\t").slice(0, 2)),
    regressionColor: color("table.matrix td.state-regression"),
    acceptedColor: color("table.matrix td.state-accepted"),
    verdictLine: (() => { const v = document.getElementById("verdict"), r = v.getBoundingClientRect();
                          return {text: v.innerText, top: r.top, bottom: r.bottom, height: window.innerHeight,
                                  status: v.className}; })(),
    firstSection: document.querySelector("section").id,
    toc: text("nav#toc a"),
    constant: text("section.suite ul.constant li"),
    groupRows: text("#attention tr.group"),
    baseline: text("details.baseline > summary"),
    changedRows: document.querySelectorAll("details.baseline > table.verdicts tr").length - 1,
    allRows: document.querySelectorAll("details.all-verdicts table.verdicts tr").length - 1,
    trends: Array.from(document.querySelectorAll("div[data-figure]"))
      .filter(d => d.layout.title.text.includes("demo: "))
      .map(d => ({axis: d.layout.xaxis.type, tickLabels: d.querySelectorAll(".xtick").length,
                  series: d.data.map(t => ({name: t.name, x: t.x.map(x => Date.parse(x.replace(" ", "T") + "Z")),
                                            runs: (t.customdata || []).map(c => c[0])}))})),
    text: document.body.innerText,
  };
})()"""


@pytest.fixture
def report(project: Project) -> Path:
    """Twenty past runs, then two sessions: the first accepted, the second's throughput regressed."""
    project.write("suites/demo/test_demo.py", TEST)
    seed_both(project, note=PAYLOAD)
    assert project.run().ret == 0
    project.set_values(throughput=60.0)
    assert project.run("--topsail-report", "out/report.html").ret == 1
    return project.path / "out" / "report.html"


def test_report_is_one_offline_file_with_every_text_escaped(project: Project) -> None:
    project.write("suites/demo/test_demo.py", TEST)
    assert project.run().ret == 0
    html = report_text(project.artifacts("s1") / "report.html")
    assert PAYLOAD not in html and SCRIPT_PAYLOAD not in html
    assert "&lt;img src=&#34;http://127.0.0.1:9/pwned.png&#34;" in html
    assert "<script src" not in html and "<link" not in html and "https://cdn" not in html
    assert html.count('id="plotly-bundle"') == 1
    assert 'class="verdict-unjudged">no verdict: not enough comparable history yet (0 of 5 comparable runs)' in html
    assert "default-src 'none'" in html
    assert (project.artifacts("s1") / "report.html").stat().st_size < 1_700_000, "plotly.js as raw gzip bytes"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_report_renders_in_headless_chromium_offline(report: Path, project: Project) -> None:
    visit = visit_page(report, READY, PAGE)
    page = visit.result
    assert visit.requests == [report.resolve().as_uri()], "no request besides the report itself"
    assert visit.exceptions == [] and visit.console_errors == []
    assert page["errors"] == [] and page["violations"] == []
    # the throughput history (the KPI that changed) + one figure per item (shown at the top: no suite figure)
    assert page["holders"] == page["drawn"] == 3
    verdict_line = page["verdictLine"]
    assert verdict_line["text"].startswith("2 KPI regressions") and "tests: 2 passed" in verdict_line["text"]
    assert 0 <= verdict_line["top"] and verdict_line["bottom"] < verdict_line["height"], "visible without scrolling"
    assert verdict_line["status"] == "verdict-fail" and page["firstSection"] == "attention"
    assert page["toc"][:2] == ["Failures and changes", "demo"]
    assert "image v1" in page["constant"] and "ocp_version 4.16" in page["constant"], "shared labels once"
    assert page["matrixHeader"][:2] == ["size", "outcome"] and page["matrixHeader"][2].startswith("throughput")
    assert page["matrixRows"] == [["▸1", "passed"], ["▸2", "passed"]], "items by their dimension"
    assert [row.split("\t")[0] for row in page["groupRows"]] == ["demo · size=1", "demo · size=2"]
    assert page["baseline"] == ["Baseline comparison: 2 of 8 KPI verdicts changed"]
    assert page["changedRows"] == 2 and page["allRows"] == 8
    assert len(page["trends"]) == 1
    for trend in page["trends"]:
        assert trend["axis"] == "date" and trend["tickLabels"] > 0, "a shared, labelled run axis"
        lines = [series for series in trend["series"] if not series["name"].endswith("change points")]
        assert [line["name"] for line in lines] == ["size=1: regression", "size=2: regression"]
        for series in lines:
            assert series["x"] == sorted(series["x"]), f"{series['name']} runs backwards"
            assert series["runs"][-1] == "this run"
        assert len({series["x"][-1] for series in lines}) == 1, "the current run sits at one x"
    assert page["images"] == 0 and page["pwned"] is None
    assert PAYLOAD in page["text"], "the hostile text is shown as text"
    linked = [Path(unquote(urlsplit(link).path)) for link in page["links"]]
    assert len(linked) == 2 and all(path.is_dir() and (path / "kpis.json").is_file() for path in linked)
    assert linked[0].parent == project.artifacts("s2") / "demo"
    assert page["regressionColor"] == "rgb(214, 39, 40)"
    assert page["acceptedColor"] == "rgb(246, 251, 247)", "accepted is quiet"


def test_report_lists_unreadable_figures_as_problems(project: Project) -> None:
    project.write("suites/demo/test_demo.py", """
        def test_train(case, kpis, artifact_dir):
            kpis.record("latency", 3)
            path = kpis.add_figure("broken", {"data": []})
            path.write_text("{not json")
        """)
    assert project.run().ret == 0
    html = report_text(project.artifacts("s1") / "report.html")
    assert "Problems" in html and "broken.json: cannot be read (JSONDecodeError)" in html


def test_plotly_bundle_is_compressed_once_per_installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_topsail.report import html

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    html.plotly_bundle.cache_clear()
    try:
        first, version = html.plotly_bundle()
        cached = list((tmp_path / "pytest-topsail").glob("plotly-*.bin"))
        assert len(cached) == 1 and cached[0].read_bytes() == first and version[0].isdigit()
        cached[0].write_bytes(b"from the cache")
        html.plotly_bundle.cache_clear()
        assert html.plotly_bundle() == (b"from the cache", version)  # read back, not compressed again
    finally:
        html.plotly_bundle.cache_clear()


def test_report_without_figures_embeds_no_plotly(project: Project) -> None:
    project.write("suites/demo/test_demo.py", "def test_train(case, kpis):\n    kpis.record('latency', 3)\n")
    assert project.run().ret == 0
    html = report_text(project.artifacts("s1") / "report.html")
    assert 'id="plotly-bundle"' not in html and len(html) < 50_000
    summary = json.loads((project.artifacts("s1") / "verdicts.json").read_text())
    assert {v["status"] for v in summary} == {"no_history"}


def test_trend_figure_marks_the_change_points(tmp_path: Path) -> None:
    import random
    import re

    from pytest_topsail.regression import RegressionSettings, judge
    from pytest_topsail.report.html import ReportInput, render_report

    rng = random.Random(3)
    values = [rng.gauss(100, 1) for _ in range(15)] + [rng.gauss(80, 1) for _ in range(15)]
    history = [{"name": "speed", "value": v, "timestamp": float(t), "test_uuid": f"u{t}", "higher_better": True,
                "unit": "x", "labels": {}} for t, v in enumerate(values)]
    current = {**history[-1], "value": 60.0, "timestamp": 99.0, "test_uuid": "now", "suite": "demo",
               "nodeid": "suites/demo/test_demo.py::test_train[a]"}
    verdict = judge(current, history, RegressionSettings())
    assert verdict.status == "regression" and verdict.change_points == [15, 30]
    path = render_report(ReportInput(title="t", records=[], verdicts=[verdict], summary={}), tmp_path / "r.html")
    figures = re.findall(r'<script type="application/json" id="fig-\d+-json">(.*?)</script>', report_text(path))
    traces = json.loads(figures[0])["data"]
    marks = [t for t in traces if t["name"].endswith("change points")]
    assert len(marks) == 1 and marks[0]["y"] == [values[15], 60.0]
    line = [t for t in traces if t["name"].endswith(": regression")][0]
    assert line["marker"]["color"][-1] == "#d62728" and line["marker"]["symbol"][-1] == "diamond"
    assert line["x"] == sorted(line["x"]) and len(line["x"]) == 31


def test_points_left_out_of_the_baseline_are_hollow_and_change_points_skip_them(tmp_path: Path) -> None:
    from pytest_topsail.regression import RegressionSettings, judge
    from pytest_topsail.report.html import trend_figure

    history = [{"name": "speed", "value": 100.0 + (t % 2) * 0.1, "timestamp": float(t), "test_uuid": f"u{t}",
                "higher_better": True, "unit": "x", "labels": {}} for t in range(10)]
    history.append({**history[0], "value": 50.0, "timestamp": 20.0, "test_uuid": "bad", "verdict": "regression",
                    "run_id": "r-bad"})
    current = {**history[0], "value": 50.0, "timestamp": 30.0, "test_uuid": "now", "suite": "demo", "nodeid": "n"}
    verdict = judge(current, history, RegressionSettings())
    assert verdict.status == "regression" and verdict.excluded == 1 and verdict.change_points == [10]
    figure = trend_figure("demo", "speed", [verdict], now=30.0)
    line, marks = figure["data"]
    assert line["marker"]["symbol"][10] == "circle-open" and line["customdata"][10][0] == "r-bad"
    assert marks["x"] == [line["x"][11]], "the change point is the current value, not the excluded point"


def test_each_plotly_theme_is_in_the_page_once() -> None:
    """plotly puts its whole theme (~6.5 KB) into every figure: the page holds each distinct one once and each
    figure names it; the callers' figures are left as they are."""
    from pytest_topsail.report.html import shared_templates

    white, dark = {"layout": {"paper_bgcolor": "white"}}, {"layout": {"paper_bgcolor": "black"}}
    specs = {"fig-0": {"data": [], "layout": {"title": "a", "template": white}},
             "fig-1": {"data": [], "layout": {"title": "b", "template": json.loads(json.dumps(white))}},
             "fig-2": {"data": [], "layout": {"template": dark}},
             "fig-3": {"data": [], "layout": {"title": "no theme"}}}
    shared, templates = shared_templates(specs)
    assert templates == {"template-0": white, "template-1": dark}
    assert [spec.get("template_ref") for spec in shared.values()] == ["template-0", "template-0", "template-1", None]
    assert shared["fig-0"]["layout"] == {"title": "a"} and shared["fig-3"] == specs["fig-3"]
    assert specs["fig-0"]["layout"]["template"] is white, "the caller's figure keeps its theme"
