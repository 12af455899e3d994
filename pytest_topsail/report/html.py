"""The HTML report: one self-contained offline file.

plotly.js (from the installed plotly package) is embedded once, gzip-compressed and base64-encoded, and decoded in
the browser with ``DecompressionStream``; figures are embedded as JSON and drawn after it loads. Every text goes
through Jinja2 autoescaping; JSON inside ``<script>`` has ``<``, ``>`` and ``&`` escaped. A content security policy
forbids any network access, so the page behaves the same with and without a network.
"""

from __future__ import annotations

import datetime
import functools
import gzip
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jinja2

from pytest_topsail.kpi import format_value
from pytest_topsail.regression import Verdict
from pytest_topsail.verdict_states import ORDER, State

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord

SERIES_COLORS = ("#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#393b79")
VERDICT_COLORS = {State.REGRESSION.value: "#d62728", State.IMPROVEMENT.value: "#2ca02c",
                  State.ACCEPTED.value: "#6b7280", State.INSUFFICIENT_HISTORY.value: "#9ca3af",
                  State.NO_HISTORY.value: "#9ca3af", State.IGNORED.value: "#9ca3af"}


# plotly.js travels as its gzip bytes, written raw into a windows-1252 page (1.5 MB; base64 would be 2 MB): the
# browser decodes each byte to one character; the script maps the characters back to bytes (CP1252_BYTES for the
# 32 code points of 0x80-0x9F) and undoes the escapes of the few bytes an HTML parser would change or read as
# markup (NUL, CR, "<") and of the escape byte itself.
ESCAPE = 0x1B
ESCAPED = {0x00: ord("0"), 0x0D: ord("r"), 0x3C: ord("l"), ESCAPE: ord("e")}
ESCAPE_JS = {chr(code): byte for byte, code in ESCAPED.items()}
CP1252_BYTES = {ord(bytes([b]).decode("cp1252", errors="ignore") or chr(b)): b for b in range(0x80, 0xA0)}
PAGE_ENCODING = "cp1252"
BUNDLE_MARK = "@@TOPSAIL-PLOTLY-BYTES@@"


BUNDLE_FORMAT = 1  # bump when ESCAPED or the compression changes: cached bundles of another format are not used


@functools.lru_cache(maxsize=1)
def plotly_bundle() -> tuple[bytes, str]:
    """(escaped gzip(plotly.min.js), plotly.js version) from the installed plotly package.

    Compressing takes about a second, so the result is kept once per installation in the user's cache directory
    (``$XDG_CACHE_HOME/pytest-topsail``, keyed by plotly's version and the file's size); an unwritable cache only
    means compressing every time."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    with path.open("rb") as file:
        head = file.read(300).decode("utf-8", "replace")
    version = head.split("plotly.js v", 1)[1].split()[0] if "plotly.js v" in head else "unknown"
    cached = bundle_cache_dir() / f"plotly-{plotly.__version__}-{path.stat().st_size}-f{BUNDLE_FORMAT}.bin"
    try:
        return cached.read_bytes(), version
    except OSError:
        pass
    escaped = escape_bundle(gzip.compress(path.read_bytes(), compresslevel=9, mtime=0))
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        partial.write_bytes(escaped)
        partial.replace(cached)  # atomic: concurrent sessions never read half a file
    except OSError:
        pass
    return escaped, version


def bundle_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-topsail"


def escape_bundle(packed: bytes) -> bytes:
    escaped = bytearray()
    for byte in packed:
        if byte in ESCAPED:
            escaped += bytes((ESCAPE, ESCAPED[byte]))
        else:
            escaped.append(byte)
    return bytes(escaped)


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
    records: list[ItemRecord]  # item records (report.topsail)
    verdicts: list[Verdict]
    summary: dict[str, Any]
    run_info: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    suite_figures: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # suite -> [{title, path}]
    needed_history: dict[str, int] = field(default_factory=dict)  # suite -> regression.min_history
    suite_settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # suite -> its report: settings
    interrupted: str | None = None  # why the run stopped before every item ran
    expected: int = 0  # items selected
    baseline: dict[str, Any] | None = None  # --topsail-baseline: compare.plugin.BaselineJudgement.report_context


def relative_link(target: str | None, report_dir: Path) -> str | None:
    if not target:
        return None
    try:
        relative = os.path.relpath(target, report_dir)
    except ValueError:
        relative = target
    return quote(Path(relative).as_posix() + "/")


def trend_figure(suite: str, kpi: str, verdicts: Sequence[Verdict], now: float,
                 names: dict[str, str] | None = None) -> dict[str, Any]:
    """History of one KPI, one trace per item, on a shared time axis: every series' current value sits at ``now``
    (this run), baseline points filled, points left out of the baseline (unacknowledged regressions) hollow,
    change points circled; hovering a point shows its run id, presets and git sha."""
    data: list[dict[str, Any]] = []
    unit = verdicts[0].unit if verdicts else ""
    hover = "%{x}<br>%{y} " + unit + "<br>run %{customdata[0]}<br>presets %{customdata[1]}<br>git %{customdata[2]}"
    for number, verdict in enumerate(verdicts):
        color = SERIES_COLORS[number % len(SERIES_COLORS)]
        name = (names or {}).get(verdict.nodeid) or verdict.nodeid.split("::")[-1]
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


class _Figures:
    """Every figure of the page, numbered in page order; ``lazy`` ones are drawn when their fold opens."""

    def __init__(self, problems: list[str]) -> None:
        self.items: list[Figure] = []
        self.problems = problems

    def add(self, title: str, spec: dict[str, Any]) -> Figure:
        figure = Figure(title=title, spec=spec, id=f"fig-{len(self.items)}")
        self.items.append(figure)
        return figure

    def load(self, title: str, path: str) -> Figure | None:
        spec = load_figure(path, self.problems)
        return None if spec is None else self.add(title, spec)


def build_context(report: ReportInput, report_dir: Path) -> dict[str, Any]:
    problems = list(report.problems)
    figures = _Figures(problems)
    by_suite: dict[str, list[ItemRecord]] = defaultdict(list)
    for record in report.records:
        by_suite[record.suite].append(record)
    verdicts_by_suite: dict[str, list[Verdict]] = defaultdict(list)
    for verdict in report.verdicts:
        verdicts_by_suite[verdict.suite].append(verdict)
    now = max((v.timestamp for v in report.verdicts), default=0.0)  # this run: one x for every series
    names: dict[str, str] = {}
    suites = []
    for suite in sorted(set(by_suite) | set(verdicts_by_suite)):
        records = sorted(by_suite[suite], key=lambda r: r.start)
        suites.append(_suite_context(suite, records, verdicts_by_suite[suite], report, report_dir, figures, now,
                                     problems))
        names.update(suites[-1]["names"])
    outcomes: dict[str, int] = defaultdict(int)
    for record in report.records:
        outcomes[record.outcome] += 1
    failed = [{"name": names.get(r.nodeid, r.test_id or r.nodeid), "nodeid": r.nodeid,
               "suite": r.suite, "anchor": _anchor(r.nodeid), "link": relative_link(r.artifact_dir, report_dir)}
              for r in report.records if r.outcome == "failed"]
    changes = {state: _grouped([v for v in report.verdicts if v.status == state], names)
               for state in (State.REGRESSION.value, State.IMPROVEMENT.value)}
    return {
        **figure_context(figures.items),
        "title": report.title, "summary": report.summary, "run_info": report.run_info, "suites": suites,
        "banner": banner(report.summary, outcomes), "failed": failed, "changes": changes,
        "change_counts": {state: sum(len(g["rows"]) for g in groups) for state, groups in changes.items()},
        "interrupted": _interrupted(report), "outcomes": dict(sorted(outcomes.items())), "problems": problems,
        "colors": VERDICT_COLORS, "states": list(State), "baseline": report.baseline,
    }


def _interrupted(report: ReportInput) -> str:
    if not report.interrupted:
        return ""
    expected = f" of {report.expected}" if report.expected else ""
    return (f"Run interrupted ({report.interrupted}): this report covers the {len(report.records)}{expected} "
            "items that finished.")


def _anchor(nodeid: str) -> str:
    import hashlib

    return "item-" + hashlib.sha1(nodeid.encode(), usedforsecurity=False).hexdigest()[:10]


def _suite_context(suite: str, records: list[ItemRecord], verdicts: list[Verdict], report: ReportInput,
                   report_dir: Path, figures: _Figures, now: float, problems: list[str]) -> dict[str, Any]:
    from pytest_topsail.report.matrix import build_matrix

    settings = report.suite_settings.get(suite, {})
    matrix = build_matrix(suite, records, settings, problems)
    by_item: dict[str, dict[str, Verdict]] = defaultdict(dict)
    for verdict in verdicts:
        by_item[verdict.nodeid][verdict.kpi] = verdict
    top = [f for entry in report.suite_figures.get(suite, []) if (f := figures.load(entry["title"], entry["path"]))]
    shown_open = not top  # a suite without figures of its own shows its items' figures in their place
    rows = []
    for record in records:
        nodeid = record.nodeid
        item_figures: list[Figure] = []
        for number, entry in enumerate(record.figures):
            title = f"{matrix.names[nodeid]}: {entry.get('title', '').split(': ', 1)[-1]}"
            figure = figures.load(title, entry.get("path", ""))
            if figure is None:
                continue
            # a suite without figures of its own shows its first items' first figure at the top (not repeated
            # in the row's details), the others in their rows
            opened = shown_open and number == 0 and len(top) < MAX_OPEN_FIGURES
            (top if opened else item_figures).append(figure)
        rows.append(_row(record, matrix, by_item.get(nodeid, {}), item_figures, report_dir))
    units = {k["name"]: k.get("unit", "") for r in records for k in r.kpis}
    ordered = sorted(verdicts, key=lambda v: (ORDER.get(v.status, 9), v.nodeid, v.kpi))
    changed = [v for v in ordered if v.status in (State.REGRESSION, State.IMPROVEMENT)]
    trends = {kpi: figures.add(f"{kpi} history",
                               trend_figure(suite, kpi, [v for v in verdicts if v.kpi == kpi and v.history], now,
                                            matrix.names))
              for kpi in dict.fromkeys(v.kpi for v in changed) if any(v.history for v in verdicts if v.kpi == kpi)}
    counts = {state.value: sum(v.status == state for v in verdicts) for state in State}
    return {
        "name": suite, "id": f"suite-{suite}", "figures": top[:MAX_OPEN_FIGURES],
        "more_figures": top[MAX_OPEN_FIGURES:], "dimensions": matrix.dimensions,
        "constant": matrix.constant, "headline": [{"name": k, "unit": units.get(k, ""), "html": _breakable(k)}
                                                  for k in matrix.headline],
        "rows": rows, "names": matrix.names, "counts": counts, "item_count": len(records),
        "needed": report.needed_history.get(suite),
        "changed": [_verdict_row(v, matrix.names, trends) for v in changed],
        "all_verdicts": [_verdict_row(v, matrix.names, trends) for v in ordered],
        "trends": list(trends.values()),
        "failed": sum(r.outcome == "failed" for r in records),
    }


MAX_OPEN_FIGURES = 4  # per suite; the others one click away
MAX_LOG_LINKS = 12


def _breakable(name: str) -> str:
    """A KPI name that may wrap after its underscores (a narrow column instead of a wide table)."""
    from markupsafe import Markup, escape

    return Markup("_<wbr>".join(escape(part) for part in name.split("_")))


def _row(record: ItemRecord, matrix: Any, verdicts: dict[str, Verdict], item_figures: list[Figure],
         report_dir: Path) -> dict[str, Any]:
    values = {k["name"]: k for k in record.kpis}
    cells = []
    for name in matrix.headline:
        kpi, verdict = values.get(name), verdicts.get(name)
        cells.append({"text": format_value(kpi["value"], kpi.get("format")) if kpi else "",
                      "state": verdict.status if verdict else "",
                      "title": _cell_title(verdict) if verdict else ""})
    states = [v.status for v in verdicts.values()]
    worst = min(states, key=lambda s: ORDER.get(s, 9)) if states else ""
    return {
        "nodeid": record.nodeid, "anchor": _anchor(record.nodeid), "name": matrix.names[record.nodeid],
        "dims": [matrix.cells[record.nodeid][d] for d in matrix.dimensions], "cells": cells,
        "outcome": record.outcome, "state": worst,
        "regressions": sum(s == State.REGRESSION for s in states),
        "labels": matrix.varying[record.nodeid], "figures": item_figures,
        "link": relative_link(record.artifact_dir, report_dir),
        "logs": _log_links(record.artifact_dir, report_dir),
    }


def _cell_title(verdict: Verdict) -> str:
    change = verdict.change_text()
    reference = "" if verdict.reference is None else f" vs {format_value(verdict.reference, verdict.format)}"
    explained = f"; {verdict.explanation}" if verdict.explanation else ""
    return (f"{verdict.status}{': ' + change if change else ''}{reference} ({verdict.history_size} earlier runs)"
            f"{explained}")


def _log_links(directory: str | None, report_dir: Path) -> list[dict[str, str]]:
    """The item's log files (``*.log``, ``events.txt``), linked relative to the report."""
    if not directory or not Path(directory).is_dir():
        return []
    found = []
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file() and (path.suffix == ".log" or path.name == "events.txt"):
            found.append({"name": path.relative_to(directory).as_posix(),
                          "href": quote(Path(os.path.relpath(path, report_dir)).as_posix())})
        if len(found) >= MAX_LOG_LINKS:
            break
    return found


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


def _grouped(verdicts: Sequence[Verdict], names: dict[str, str]) -> list[dict[str, Any]]:
    """Changes grouped by item (named by its dimensions), one row per KPI."""
    groups: dict[str, list[Verdict]] = defaultdict(list)
    for verdict in verdicts:
        groups[verdict.nodeid].append(verdict)
    return [{"name": names.get(nodeid, nodeid.split("::")[-1]), "nodeid": nodeid, "suite": items[0].suite,
             "anchor": _anchor(nodeid),
             "rows": [_verdict_row(v, names, {}) for v in sorted(items, key=lambda v: v.kpi)]}
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


def _verdict_row(verdict: Verdict, names: dict[str, str], trends: dict[str, Figure]) -> dict[str, Any]:
    figure = trends.get(verdict.kpi)
    return {
        "name": names.get(verdict.nodeid, verdict.nodeid.split("::")[-1]), "nodeid": verdict.nodeid,
        "kpi": verdict.kpi, "value": f"{format_value(verdict.value, verdict.format)} {verdict.unit}".strip(),
        "reference": "" if verdict.reference is None else format_value(verdict.reference, verdict.format),
        "change": verdict.change_text(),
        "pvalue": "" if verdict.pvalue is None else f"{verdict.pvalue:.2g}",
        "history_size": verdict.history_size, "excluded": verdict.excluded,
        "method": verdict.explanation or verdict.method,
        "status": verdict.status, "noise_floor": "" if verdict.noise_floor is None
        else format_value(verdict.noise_floor, verdict.format),
        "direction": "higher is better" if verdict.higher_better else "lower is better",
        "stats": _baseline_stats(verdict), "trend": figure.id if figure else None,
    }


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_topsail.report", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_report(report: ReportInput, path: Path) -> Path:
    """Write the report to ``path`` and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_page("report.html.j2", build_context(report, path.parent.resolve()), path)


def figure_context(figures: Sequence[Figure]) -> dict[str, Any]:
    """What figures_script.html.j2 needs to draw ``figures``."""
    bundle, version = plotly_bundle()
    specs, templates = shared_templates({f.id: f.spec for f in figures})
    return {"figures": list(figures), "figures_json": {key: script_json(spec) for key, spec in specs.items()},
            "templates_json": {key: script_json(template) for key, template in templates.items()},
            "plotly_bundle": bundle, "plotly_version": version, "byte_map": script_json(CP1252_BYTES),
            "escape": ESCAPE_JS}


def shared_templates(specs: dict[str, dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Each distinct ``layout.template`` once: plotly puts its whole theme (about 6.5 KB) into every figure, most of
    a small figure's bytes. The specs come back with ``template_ref`` naming their template in the second mapping
    (the page's script puts it back before drawing); the caller's specs are left as they are."""
    ids: dict[str, str] = {}
    templates: dict[str, Any] = {}
    shared: dict[str, dict[str, Any]] = {}
    for key, spec in specs.items():
        layout = spec.get("layout") if isinstance(spec, dict) else None
        if not isinstance(layout, dict) or not isinstance(layout.get("template"), dict):
            shared[key] = spec
            continue
        text = json.dumps(layout["template"], sort_keys=True, default=str)
        if text not in ids:
            ids[text] = f"template-{len(ids)}"
            templates[ids[text]] = layout["template"]
        layout = {name: value for name, value in layout.items() if name != "template"}
        shared[key] = {**spec, "layout": layout, "template_ref": ids[text]}
    return shared, templates


def write_page(template: str, context: dict[str, Any], path: Path) -> Path:
    """Render ``template`` as a windows-1252 page with plotly.js as raw bytes (see ESCAPED) and write it."""
    context = dict(context)
    bundle = context.pop("plotly_bundle")
    html = _environment().get_template(template).render(**context, bundle_mark=BUNDLE_MARK)
    page = html.encode(PAGE_ENCODING, errors="xmlcharrefreplace")  # text outside scripts: character references
    path.write_bytes(page.replace(BUNDLE_MARK.encode("ascii"), bundle, 1))
    return path
