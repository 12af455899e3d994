"""One item's metrics: the queries over its window, the raw series saved in its artifacts, KPIs and figures from them.

``fetch(prometheus, queries, window)`` asks Prometheus and returns the series document, saved as
``<item>/metrics/series.json``; ``kpi_values(document)`` and ``figures(document)`` read only that document, so
``--topsail-replot`` recomputes the same KPIs and figures with no cluster and no Prometheus.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_topsail.metrics.client import Prometheus
from pytest_topsail.metrics.settings import Query, render

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord

SERIES_DIR = "metrics"
SERIES_FILE = "series.json"
NOTE_FILE = "NOTE.txt"


@dataclass(frozen=True)
class Window:
    start: float  # epoch seconds
    end: float
    namespace: str
    pod: str  # a regular expression
    step: float
    rate_window: float

    def placeholders(self) -> dict[str, str]:
        return {"namespace": self.namespace, "pod": self.pod, "start": f"{self.start:.3f}", "end": f"{self.end:.3f}",
                "duration": f"{max(1, math.ceil(self.end - self.start))}s", "rate_window": f"{self.rate_window:g}s"}


def fetch(prometheus: Prometheus, queries: list[Query], window: Window, source: str) -> dict[str, Any]:
    """Every query over the window; a Prometheus failure stops at the first query and is raised (one cause)."""
    entries = []
    for query in queries:
        text = render(query.query, window.placeholders())
        result = prometheus.query_range(text, window.start, window.end + window.step, window.step)
        entries.append({"spec": query.model_dump(mode="json"), "query": text, "result": result})
    return {"source": source, "start": window.start, "end": window.end, "step": window.step,
            "namespace": window.namespace, "pod": window.pod, "queries": entries}


def save(directory: Path, document: dict[str, Any]) -> Path:
    folder = directory / SERIES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SERIES_FILE
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


def load(directory: Path) -> dict[str, Any] | None:
    path = directory / SERIES_DIR / SERIES_FILE
    if not path.is_file():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) and isinstance(document.get("queries"), list) else None


def note(directory: Path | None, text: str) -> None:
    """Why this item has no metric KPIs, in its artifacts."""
    if directory is None:
        return
    folder = directory / SERIES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NOTE_FILE).write_text(text + "\n", encoding="utf-8")


def _samples(result: list[dict[str, Any]], scale: float) -> list[list[tuple[float, float]]]:
    series = []
    for item in result:
        points = []
        for stamp, value in item.get("values") or ():
            number = float(value)
            if math.isfinite(number):
                points.append((float(stamp), number * scale))
        if points:
            series.append(points)
    return series


def _aggregate(series: list[list[tuple[float, float]]], how: str) -> float | None:
    values = [value for points in series for _, value in points]
    if not values:
        return None
    if how == "max":
        return max(values)
    if how == "min":
        return min(values)
    if how == "last":
        return sum(points[-1][1] for points in series) / len(series)
    return sum(values) / len(values)


@dataclass(frozen=True)
class MetricKpi:
    query: Query
    value: float
    samples: int = 0  # values in the window (every series): the sample size the verdict rules look at


def kpi_values(document: dict[str, Any]) -> list[MetricKpi]:
    """The KPIs of a series document; a query without samples in the window gives none (absent, never 0)."""
    found = []
    for entry in document.get("queries") or ():
        try:
            query = Query.model_validate(entry["spec"])
        except (KeyError, TypeError, ValueError):
            continue
        series = _samples(entry.get("result") or [], query.scale)
        value = _aggregate(series, query.aggregation)
        if value is not None:
            found.append(MetricKpi(query, value, sum(len(points) for points in series)))
    return found


def record_kpis(recorder: Any, document: dict[str, Any]) -> list[str]:
    """Record the document's KPIs through the item's KpiRecorder (so they get labels and verdicts)."""
    names = []
    for metric in kpi_values(document):
        query = metric.query
        direction = {"higher_better": True} if query.direction == "higher" else {"lower_better": True}
        extreme = query.aggregation in ("max", "min")  # docs/kpis-and-regressions.md: extremes are informational
        recorder.record(query.kpi, metric.value, unit=query.unit, help=query.help or query.kpi, format=query.format,
                        ignored_for_regression=extreme or None, samples=None if extreme else metric.samples,
                        why="an extreme of the window's samples moves with one scrape" if extreme else None,
                        **direction)
        names.append(query.kpi)
    return names


def _series_name(labels: dict[str, str]) -> str:
    shown = {key: value for key, value in labels.items() if key != "__name__"}
    if "pod" in shown:
        return shown["pod"] + (f"/{shown['container']}" if shown.get("container") else "")
    return ",".join(f"{key}={value}" for key, value in sorted(shown.items())) or "value"


def figures(document: dict[str, Any], title_prefix: str = "") -> dict[str, Any]:
    """One over-time figure per query with a ``figure`` title: a line per series (pod), x = seconds into the item."""
    import plotly.graph_objects as go

    built: dict[str, Any] = {}
    start = float(document.get("start") or 0)
    for entry in document.get("queries") or ():
        spec = entry.get("spec") or {}
        if not spec.get("figure"):
            continue
        figure = go.Figure()
        for labels, points in zip(entry.get("result") or [], _raw_points(entry, spec), strict=False):
            if points:
                figure.add_trace(go.Scatter(x=[t - start for t, _ in points], y=[v for _, v in points],
                                            mode="lines+markers", name=_series_name(labels.get("metric") or {})))
        if not figure.data:
            continue
        # the item's name prefixes the figure's name (the report's caption, which wraps), not its plotly title,
        # which does not wrap: a long test id ran out of a report's figure box
        figure.update_layout(title=spec["figure"], xaxis_title="seconds into the item",
                             yaxis_title=spec.get("unit", ""), template="plotly_white")
        built[f"{title_prefix}{spec['figure']}"] = figure
    return built


def _raw_points(entry: dict[str, Any], spec: dict[str, Any]) -> list[list[tuple[float, float]]]:
    scale = float(spec.get("scale") or 1.0)
    return [[(float(t), float(v) * scale) for t, v in item.get("values") or () if math.isfinite(float(v))]
            for item in entry.get("result") or []]


MAX_LEGEND = 8  # lines of a suite figure with a legend; beyond, the names are on hover only (a legend of 40 items
# does not fit a figure's box)


def suite_figures(records: list[ItemRecord], names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The suite's over-time figures: every item's series on one wall-clock axis, a line per item and pod, each
    named by ``names`` (nodeid -> the item's name in the report, by its varying settings) or its test id."""
    import datetime

    import plotly.graph_objects as go

    names = names or {}
    built: dict[str, Any] = {}
    for record in records:
        document = load(record.directory) if record.directory is not None else None
        if document is None:
            continue
        for entry in document.get("queries") or ():
            spec = entry.get("spec") or {}
            if not spec.get("figure"):
                continue
            title = f"metrics: {spec['figure']}"
            figure = built.get(title)
            if figure is None:
                figure = built[title] = go.Figure()
                figure.update_layout(title=title, xaxis_title="time (UTC)", yaxis_title=spec.get("unit", ""),
                                     template="plotly_white")
            for item, points in zip(entry.get("result") or [], _raw_points(entry, spec), strict=False):
                if points:
                    figure.add_trace(go.Scatter(
                        x=[datetime.datetime.fromtimestamp(t, datetime.UTC) for t, _ in points],
                        y=[v for _, v in points], mode="lines",
                        name=f"{names.get(record.nodeid) or record.test_id}: "
                             f"{_series_name(item.get('metric') or {})}"))
    for figure in built.values():
        figure.update_layout(showlegend=len(figure.data) <= MAX_LEGEND, hoverlabel={"namelength": -1})
    return {title: figure for title, figure in built.items() if figure.data}


def replot(record: ItemRecord, saved_kpis: list[dict[str, Any]], suite_kpis: Any) -> None:
    """``--topsail-replot``: the item's metric KPIs and figures again from its saved series (no Prometheus); each
    KPI keeps the labels, time stamp and uuid it was recorded with."""
    from pytest_topsail.kpi import KpiRecorder

    document = load(record.directory) if record.directory is not None else None
    if document is None:
        return
    old = {entry["name"]: entry for entry in saved_kpis}
    test_uuid = next((entry.get("test_uuid") for entry in saved_kpis if entry.get("test_uuid")), None)
    recorder = KpiRecorder(record, suite_kpis, test_uuid=test_uuid)
    for name in record_kpis(recorder, document):
        entry = next(e for e in record.kpis if e["name"] == name)
        for key in ("labels", "timestamp", "test_uuid"):
            if key in old.get(name, {}):
                entry[key] = old[name][key]
    titles = {figure["title"]: figure["path"] for figure in record.figures}
    for title, figure in figures(document, f"{record.test_id}: ").items():
        if title in titles and Path(titles[title]).parent.is_dir():
            Path(titles[title]).write_text(figure.to_json(), encoding="utf-8")
        else:
            recorder.add_figure(title, figure)
