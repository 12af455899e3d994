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

SERIES_COLORS = ("#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#393b79")
VERDICT_COLORS = {"regression": "#d62728", "improvement": "#2ca02c", "accepted": "#1f77b4",
                  "no_history": "#7f7f7f", "ignored": "#bcbd22"}


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


def relative_link(target: str | None, report_dir: Path) -> str | None:
    if not target:
        return None
    try:
        relative = os.path.relpath(target, report_dir)
    except ValueError:
        relative = target
    return quote(Path(relative).as_posix() + "/")


def trend_figure(suite: str, kpi: str, verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """History of one KPI (one trace per item / label set), change points and the current value marked."""
    data: list[dict[str, Any]] = []
    unit = verdicts[0].unit if verdicts else ""
    for number, verdict in enumerate(verdicts):
        color = SERIES_COLORS[number % len(SERIES_COLORS)]
        xs = [_iso(h["timestamp"]) for h in verdict.history] + ["current"]
        ys = [h["value"] for h in verdict.history] + [verdict.value]
        xs[-1] = _iso(max([h["timestamp"] for h in verdict.history], default=0) + 1) if verdict.history else "now"
        name = verdict.nodeid.split("::")[-1]
        data.append({"type": "scatter", "mode": "lines+markers", "name": name, "x": xs[:-1], "y": ys[:-1],
                     "legendgroup": name, "line": {"color": color}, "marker": {"color": color}})
        data.append({"type": "scatter", "mode": "markers", "name": f"{name}: {verdict.status}", "x": xs[-1:],
                     "y": ys[-1:], "legendgroup": name,
                     "marker": {"size": 12, "symbol": "diamond", "color": VERDICT_COLORS.get(verdict.status)}})
        points = [i for i in verdict.change_points if i < len(xs)]
        if points:
            data.append({"type": "scatter", "mode": "markers", "name": f"{name}: change points",
                         "x": [xs[i] for i in points], "y": [ys[i] for i in points], "legendgroup": name,
                         "marker": {"size": 14, "symbol": "x-open", "color": "#ff7f0e", "line": {"width": 2}}})
    layout = {"title": {"text": f"{suite}: {kpi}"}, "height": 360, "margin": {"l": 60, "r": 20, "t": 50, "b": 40},
              "yaxis": {"title": {"text": unit}}, "xaxis": {"type": "category", "showticklabels": False},
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
        verdicts = sorted(verdicts_by_suite[suite], key=lambda v: (v.status != "regression", v.kpi, v.nodeid))
        trends = []
        by_kpi: dict[str, list[Verdict]] = defaultdict(list)
        for verdict in verdicts:
            if verdict.history:
                by_kpi[verdict.kpi].append(verdict)
        for kpi in sorted(by_kpi):
            trends.append(add_figure(f"{kpi} history", trend_figure(suite, kpi, by_kpi[kpi])))
        suite_figures = []
        for record in records:
            for entry in record.get("figures") or []:
                spec = load_figure(entry.get("path", ""), problems)
                if spec is not None:
                    title = f"{record.get('test_id') or record['nodeid']}: {entry.get('title', '')}"
                    suite_figures.append(add_figure(title, spec))
        suites.append({
            "name": suite, "kpi_names": kpi_names, "units": [units[n] for n in kpi_names], "rows": rows,
            "verdicts": [_verdict_row(v) for v in verdicts], "trends": trends, "figures": suite_figures,
        })
    bundle, version = plotly_bundle()
    outcomes = defaultdict(int)
    for record in report.records:
        outcomes[record.get("outcome", "unknown")] += 1
    return {
        "title": report.title, "summary": report.summary, "run_info": report.run_info, "suites": suites,
        "regressions": [_verdict_row(v) for v in report.verdicts if v.status == "regression"],
        "outcomes": dict(sorted(outcomes.items())), "problems": problems, "figures": figures,
        "figures_json": {f.id: script_json(f.spec) for f in figures}, "plotly_bundle": bundle,
        "plotly_version": version, "colors": VERDICT_COLORS,
    }


def _verdict_row(verdict: Verdict) -> dict[str, Any]:
    return {
        "test_id": verdict.nodeid.split("::")[-1], "nodeid": verdict.nodeid, "kpi": verdict.kpi,
        "value": f"{format_value(verdict.value, verdict.format)} {verdict.unit}".strip(),
        "reference": "" if verdict.reference is None else format_value(verdict.reference, verdict.format),
        "change": "" if verdict.change_percent is None else f"{verdict.change_percent:+.1f}%",
        "pvalue": "" if verdict.pvalue is None else f"{verdict.pvalue:.2g}",
        "history_size": verdict.history_size, "method": verdict.method, "status": verdict.status,
        "direction": "higher is better" if verdict.higher_better else "lower is better",
        "labels": ", ".join(f"{k}={v}" for k, v in sorted(verdict.labels.items())),
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
