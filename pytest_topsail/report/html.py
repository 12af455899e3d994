"""The HTML report: one self-contained offline file.

plotly.js (from the installed plotly package) is embedded once, gzip-compressed and base64-encoded, and decoded in
the browser with ``DecompressionStream``; figures are embedded as JSON and drawn after it loads. Every text goes
through Jinja2 autoescaping; JSON inside ``<script>`` has ``<``, ``>`` and ``&`` escaped. A content security policy
forbids any network access, so the page behaves the same with and without a network.
"""

from __future__ import annotations

import base64
import datetime
import functools
import gzip
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

from pytest_topsail.kpi import format_value
from pytest_topsail.regression import Verdict
from pytest_topsail.verdict_states import State

SERIES_COLORS = ("#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#393b79")
VERDICT_COLORS = {"regression": "#d62728", "improvement": "#2ca02c", "accepted": "#6b7280",
                  "insufficient_history": "#9ca3af", "no_history": "#9ca3af", "ignored": "#9ca3af"}
STATUS_ORDER = {"regression": 0, "improvement": 1, "accepted": 2, "insufficient_history": 3, "no_history": 4,
                "ignored": 5}


@functools.lru_cache(maxsize=1)
def plotly_bundle() -> tuple[str, str]:
    """(base64 of gzip(plotly.min.js), plotly.js version) from the installed plotly package."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    source = path.read_bytes()
    version = "unknown"
    head = source[:300].decode("utf-8", "replace")
    if "plotly.js v" in head:
        version = head.split("plotly.js v", 1)[1].split()[0]
    return base64.b64encode(gzip.compress(source, compresslevel=9, mtime=0)).decode("ascii"), version


def script_json(data: Any) -> str:
    """JSON safe to place inside a <script> element."""
    text = json.dumps(data, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@dataclass
class Figure:
    title: str
    spec: dict[str, Any]
    id: str = ""


@dataclass
class ReportInput:
    """Everything the report shows."""

    title: str
    records: list[dict[str, Any]]  # item records (report.topsail)
    verdicts: list[Verdict]
    summary: dict[str, Any]
    run_info: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    suite_figures: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # suite -> [{title, path}]
    needed_history: dict[str, int] = field(default_factory=dict)  # suite -> regression.min_history
    suite_settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # suite -> its report: settings
    interrupted: str | None = None  # why the run stopped before every item ran
    expected: int = 0  # items selected


def relative_link(target: str | None, report_dir: Path) -> str | None:
    if not target:
        return None
    try:
        relative = os.path.relpath(target, report_dir)
    except ValueError:
        relative = target
    return quote(Path(relative).as_posix() + "/")


def trend_figure(suite: str, kpi: str, verdicts: Sequence[Verdict], now: float) -> dict[str, Any]:
    """History of one KPI, one trace per item, on a shared time axis: every series' current value sits at ``now``
    (this run), baseline points filled, points left out of the baseline (unacknowledged regressions) hollow,
    change points circled; hovering a point shows its run id, presets and git sha."""
    data: list[dict[str, Any]] = []
    unit = verdicts[0].unit if verdicts else ""
    hover = "%{x}<br>%{y} " + unit + "<br>run %{customdata[0]}<br>presets %{customdata[1]}<br>git %{customdata[2]}"
    for number, verdict in enumerate(verdicts):
        color = SERIES_COLORS[number % len(SERIES_COLORS)]
        name = verdict.nodeid.split("::")[-1]
        points = [*verdict.history, {"timestamp": now, "value": verdict.value, "run_id": "this run",
                                     "baseline": True}]
        xs = [_iso(h["timestamp"]) for h in points]
        ys = [h["value"] for h in points]
        meta = [[h.get("run_id") or "?", ", ".join(h.get("presets") or []) or "-", (h.get("git_sha") or "-")[:12]]
                for h in points]
        symbols = ["circle" if h["baseline"] else "circle-open" for h in points[:-1]] + ["diamond"]
        sizes = [7] * (len(points) - 1) + [13]
        colors = [color] * (len(points) - 1) + [VERDICT_COLORS.get(verdict.status, color)]
        data.append({"type": "scatter", "mode": "lines+markers", "name": f"{name}: {verdict.status}", "x": xs,
                     "y": ys, "customdata": meta, "hovertemplate": hover, "legendgroup": name,
                     "line": {"color": color}, "marker": {"color": colors, "symbol": symbols, "size": sizes}})
        in_baseline = [i for i, h in enumerate(points) if h["baseline"]]  # change points index baseline + current
        marked = [in_baseline[i] for i in verdict.change_points if i < len(in_baseline)]
        if marked:
            data.append({"type": "scatter", "mode": "markers", "name": f"{name}: change points",
                         "x": [xs[i] for i in marked], "y": [ys[i] for i in marked], "legendgroup": name,
                         "hoverinfo": "skip",
                         "marker": {"size": 18, "symbol": "circle-open", "color": "#ff7f0e", "line": {"width": 2}}})
    layout = {"title": {"text": f"{suite}: {kpi}"}, "height": 340, "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
              "yaxis": {"title": {"text": unit}, "rangemode": "tozero"},
              "xaxis": {"type": "date", "title": {"text": "run time (UTC); the diamond is this run"}},
              "showlegend": True}
    return {"data": data, "layout": layout}


def _iso(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(float(timestamp), datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def load_figure(path: str, problems: list[str]) -> dict[str, Any] | None:
    try:
        spec = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        problems.append(f"figure {path}: cannot be read ({type(error).__name__})")
        return None
    if not isinstance(spec, dict) or not isinstance(spec.get("data"), list):
        problems.append(f"figure {path}: not a plotly figure (no data list)")
        return None
    return spec


def common_labels(label_sets: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Labels with the same value in every set (shown once, the rest per row)."""
    if not label_sets:
        return {}
    first = label_sets[0]
    return {k: v for k, v in sorted(first.items()) if all(s.get(k, object()) == v for s in label_sets)}


def _labels_text(labels: dict[str, Any], skip: dict[str, Any] | None = None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if not skip or k not in skip)


def build_context(report: ReportInput, report_dir: Path) -> dict[str, Any]:
    problems = list(report.problems)
    figures: list[Figure] = []

    def add_figure(title: str, spec: dict[str, Any]) -> Figure:
        figure = Figure(title=title, spec=spec, id=f"fig-{len(figures)}")
        figures.append(figure)
        return figure

    by_suite: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in report.records:
        by_suite[record["suite"]].append(record)
    verdicts_by_suite: dict[str, list[Verdict]] = defaultdict(list)
    for verdict in report.verdicts:
        verdicts_by_suite[verdict.suite].append(verdict)
    now = max((v.timestamp for v in report.verdicts), default=0.0)  # this run: one x for every series

    suites = []
    for suite in sorted(set(by_suite) | set(verdicts_by_suite)):
        records = sorted(by_suite[suite], key=lambda r: r["nodeid"])
        kpi_names = sorted({k["name"] for r in records for k in r.get("kpis") or []})
        units = {k["name"]: k.get("unit", "") for r in records for k in r.get("kpis") or []}
        rows = []
        for record in records:
            values = {k["name"]: format_value(k["value"], k.get("format")) for k in record.get("kpis") or []}
            rows.append({"test_id": record.get("test_id") or record["nodeid"], "nodeid": record["nodeid"],
                         "outcome": record.get("outcome", ""), "link": relative_link(record.get("artifact_dir"),
                                                                                     report_dir),
                         "values": [values.get(name, "") for name in kpi_names]})
        verdicts = sorted(verdicts_by_suite[suite], key=lambda v: (STATUS_ORDER.get(v.status, 9), v.nodeid, v.kpi))
        shared = common_labels([v.labels for v in verdicts])
        by_kpi: dict[str, list[Verdict]] = defaultdict(list)
        for verdict in verdicts:
            if verdict.history:
                by_kpi[verdict.kpi].append(verdict)
        trend_order = sorted(by_kpi, key=lambda k: (min(STATUS_ORDER.get(v.status, 9) for v in by_kpi[k]), k))
        trends = {kpi: add_figure(f"{kpi} history", trend_figure(suite, kpi, by_kpi[kpi], now))
                  for kpi in trend_order}
        suite_figures = []
        for entry in report.suite_figures.get(suite, []):  # figures of the whole suite (kpis.py figures())
            spec = load_figure(entry["path"], problems)
            if spec is not None:
                suite_figures.append(add_figure(entry["title"], spec))
        for record in records:
            for entry in record.get("figures") or []:
                spec = load_figure(entry.get("path", ""), problems)
                if spec is not None:
                    title = f"{record.get('test_id') or record['nodeid']}: {entry.get('title', '')}"
                    suite_figures.append(add_figure(title, spec))
        suites.append({
            "name": suite, "kpi_names": kpi_names, "units": [units[n] for n in kpi_names], "rows": rows,
            "labels": _labels_text(shared),
            "verdicts": [_verdict_row(v, shared, trends) for v in verdicts],
            "trends": list(trends.values()), "figures": suite_figures,
        })
    bundle, version = plotly_bundle()
    outcomes: dict[str, int] = defaultdict(int)
    for record in report.records:
        outcomes[record.get("outcome", "unknown")] += 1
    failed = [{"test_id": r.get("test_id") or r["nodeid"], "nodeid": r["nodeid"], "suite": r["suite"],
               "link": relative_link(r.get("artifact_dir"), report_dir)}
              for r in report.records if r.get("outcome") == "failed"]
    return {
        "title": report.title, "summary": report.summary, "run_info": report.run_info, "suites": suites,
        "banner": banner(report.summary, outcomes), "failed": failed,
        "changes": {status: _grouped([v for v in report.verdicts if v.status == status])
                    for status in ("regression", "improvement")},
        "change_labels": {status: _labels_text(common_labels([v.labels for v in report.verdicts
                                                               if v.status == status]))
                          for status in ("regression", "improvement")},
        "outcomes": dict(sorted(outcomes.items())), "problems": problems, "figures": figures,
        "figures_json": {f.id: script_json(f.spec) for f in figures}, "plotly_bundle": bundle,
        "plotly_version": version, "colors": VERDICT_COLORS,
    }


def banner(summary: dict[str, Any], outcomes: dict[str, int]) -> dict[str, str]:
    """The one-line verdict at the top: KPI verdict first, then the tests' outcomes (failed tests are not KPIs)."""
    regressions = int(summary.get("failures", 0))
    failed = outcomes.get("failed", 0)
    tests = ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items()))
    kpi_text = summary.get("message", "no regression")
    if regressions or summary.get("significant_performance_increase"):
        status = "fail" if regressions else "improved"
    elif (summary.get("verdicts") or {}).get(State.ACCEPTED):
        status, kpi_text = "pass", "pass: no regression"
    else:
        status = "unjudged"
    if failed and status != "fail":
        status = "fail"
    return {"status": status, "kpis": kpi_text, "tests": f"tests: {tests}" if tests else ""}


def _grouped(verdicts: Sequence[Verdict]) -> list[dict[str, Any]]:
    """Changes grouped by item: the labels every change shares are shown once above the table, each item's own
    labels once on its group row, then one row per KPI."""
    shared = common_labels([v.labels for v in verdicts])
    groups: dict[str, list[Verdict]] = defaultdict(list)
    for verdict in verdicts:
        groups[verdict.nodeid].append(verdict)
    return [{"test_id": nodeid.split("::")[-1], "nodeid": nodeid, "suite": items[0].suite,
             "labels": _labels_text(items[0].labels, shared),
             "rows": [_verdict_row(v, items[0].labels, {}) for v in sorted(items, key=lambda v: v.kpi)]}
            for nodeid, items in sorted(groups.items())]


def _baseline_stats(verdict: Verdict) -> dict[str, str]:
    values = [h["value"] for h in verdict.history if h.get("baseline")]
    if not values:
        return {"min": "", "median": "", "mean": "", "stddev": ""}
    import statistics

    stddev = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"min": format_value(min(values), verdict.format), "median": format_value(statistics.median(values),
                                                                                      verdict.format),
            "mean": format_value(statistics.fmean(values), verdict.format),
            "stddev": format_value(stddev, verdict.format)}


def _verdict_row(verdict: Verdict, shared: dict[str, Any], trends: dict[str, Figure]) -> dict[str, Any]:
    figure = trends.get(verdict.kpi)
    return {
        "test_id": verdict.nodeid.split("::")[-1], "nodeid": verdict.nodeid, "kpi": verdict.kpi,
        "value": f"{format_value(verdict.value, verdict.format)} {verdict.unit}".strip(),
        "reference": "" if verdict.reference is None else format_value(verdict.reference, verdict.format),
        "change": verdict.change_text(),
        "pvalue": "" if verdict.pvalue is None else f"{verdict.pvalue:.2g}",
        "history_size": verdict.history_size, "excluded": verdict.excluded,
        "method": verdict.explanation or verdict.method,
        "status": verdict.status, "status_text": verdict.status,
        "direction": "higher is better" if verdict.higher_better else "lower is better",
        "labels": _labels_text(verdict.labels, shared), "stats": _baseline_stats(verdict),
        "trend": figure.id if figure else None,
    }


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_topsail.report", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_report(report: ReportInput, path: Path) -> Path:
    """Write the report to ``path`` and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    context = build_context(report, path.parent.resolve())
    html = _environment().get_template("report.html.j2").render(**context)
    path.write_text(html, encoding="utf-8")
    return path
