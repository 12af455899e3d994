"""The history page (``python -m pytest_topsail.history report``): per KPI, every item's runs over time, the change
points of its baseline (when a level changed: the first run of the new level), the regressions nobody acknowledged
(hollow) and the acknowledged ones (a star, with the reason) — so "when did this start" needs no spreadsheet.
One offline file, drawn like the report (html.write_page)."""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_topsail.regression import RegressionSettings, change_points, in_baseline
from pytest_topsail.report.html import SERIES_COLORS, Figure, _iso, figure_context, write_page


def series_of(records: Sequence[dict[str, Any]], kpis: Sequence[str]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """KPI name -> item (nodeid) -> its records, oldest first; only the KPIs matching ``kpis`` (globs) if given."""
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        if kpis and not any(fnmatch.fnmatchcase(record["name"], pattern) for pattern in kpis):
            continue
        grouped[record["name"]][str(record.get("nodeid") or "-")].append(record)
    for items in grouped.values():
        for points in items.values():
            points.sort(key=lambda r: float(r["timestamp"]))
    return {name: dict(sorted(items.items())) for name, items in sorted(grouped.items())}


def level_changes(points: Sequence[dict[str, Any]], settings: RegressionSettings) -> list[dict[str, Any]]:
    """The change points of a series' baseline (its unacknowledged regressions left out, as the verdicts do)."""
    baseline = [p for p in points if in_baseline(p)]
    if len(baseline) < 3:
        return []
    values = [float(p["value"]) for p in baseline]
    found = []
    for point in change_points(values, settings):
        first = baseline[point.index]
        found.append({"index": point.index, "record": first, "before": point.mean_before, "after": point.mean_after,
                      "pvalue": point.pvalue})
    return found


def _point_text(record: dict[str, Any]) -> str:
    parts = [f"run {record.get('run_id') or '-'}", f"git {(record.get('git_sha') or '-')[:12]}",
             f"verdict {record.get('verdict') or '-'}"]
    ack = record.get("acknowledged")
    if ack:
        parts.append(f"acknowledged: {ack.get('reason', '') if isinstance(ack, dict) else ack}")
    return "<br>".join(parts)


def kpi_figure(name: str, items: dict[str, list[dict[str, Any]]], settings: RegressionSettings,
               names: dict[str, str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    data: list[dict[str, Any]] = []
    changes: list[dict[str, Any]] = []
    unit = next((p.get("unit", "") for points in items.values() for p in points), "")
    for number, (nodeid, points) in enumerate(items.items()):
        color = SERIES_COLORS[number % len(SERIES_COLORS)]
        label = names.get(nodeid, nodeid.split("::")[-1])
        symbols = ["star" if p.get("acknowledged") else "circle" if in_baseline(p) else "circle-open"
                   for p in points]
        data.append({"type": "scatter", "mode": "lines+markers", "name": label, "legendgroup": label,
                     "x": [_iso(float(p["timestamp"])) for p in points], "y": [p["value"] for p in points],
                     "text": [_point_text(p) for p in points], "line": {"color": color},
                     "marker": {"color": color, "symbol": symbols, "size": [11 if s == "star" else 7 for s in symbols]},
                     "hovertemplate": "%{x}<br>%{y} " + unit + "<br>%{text}<extra>" + label + "</extra>"})
        found = level_changes(points, settings)
        if found:
            data.append({"type": "scatter", "mode": "markers", "name": f"{label}: level changes",
                         "legendgroup": label, "showlegend": False, "hoverinfo": "skip",
                         "x": [_iso(float(c["record"]["timestamp"])) for c in found],
                         "y": [c["record"]["value"] for c in found],
                         "marker": {"size": 18, "symbol": "circle-open", "color": "#ff7f0e", "line": {"width": 2}}})
        changes.extend({"item": label, **c} for c in found)
    layout = {"title": {"text": name}, "height": 380, "yaxis": {"title": {"text": unit}, "rangemode": "tozero"},
              "xaxis": {"type": "date", "title": {"text": "run time (UTC)"}},
              "legend": {"orientation": "h", "x": 0, "y": -0.25, "yanchor": "top"}}
    return {"data": data, "layout": layout}, changes


def render_history(records: Sequence[dict[str, Any]], suite: str, path: Path, kpis: Sequence[str] = (),
                   settings: RegressionSettings | None = None) -> tuple[Path, int]:
    """Write the history page of ``suite`` to ``path``; return it and the number of KPIs drawn."""
    from pytest_topsail.items import CaseRecord, ItemRecord
    from pytest_topsail.report.matrix import build_matrix

    settings = settings or RegressionSettings()
    grouped = series_of(records, kpis)
    latest: dict[str, ItemRecord] = {}
    for record in records:
        # items named by the labels that vary between them (the dimensions), as in the report
        nodeid, labels = str(record.get("nodeid") or "-"), record.get("labels") or {}
        latest[nodeid] = ItemRecord(suite=suite, nodeid=nodeid, test_id=str(record.get("test_id") or ""),
                                    case=CaseRecord(name=suite, id="", settings=labels), labels=labels)
    names = build_matrix(suite, list(latest.values()), {}, []).names if len(latest) > 1 else {}
    figures: list[Figure] = []
    sections: list[dict[str, Any]] = []
    for name, items in grouped.items():
        spec, changes = kpi_figure(name, items, settings, names)
        figure = Figure(title=name, spec=spec, id=f"fig-{len(figures)}")
        figures.append(figure)
        sections.append({"name": name, "figure": figure, "runs": sum(len(p) for p in items.values()),
                         "item_count": len(items), "changes": [_change_row(c) for c in changes],
                         "pending": sum(1 for p in items.values() for r in p if not in_baseline(r)),
                         "acknowledged": sum(1 for p in items.values() for r in p if r.get("acknowledged"))})
    path.parent.mkdir(parents=True, exist_ok=True)
    context = {**figure_context(figures), "title": f"KPI history of suite {suite}", "suite": suite,
               "sections": sections, "records": len(records)}
    return write_page("history.html.j2", context, path), len(sections)


def _change_row(change: dict[str, Any]) -> dict[str, Any]:
    record = change["record"]
    before, after = change["before"], change["after"]
    relative = "" if before == 0 else f"{(after / before - 1) * 100:+.1f}%"
    return {"item": change["item"], "when": _iso(float(record["timestamp"])), "run": record.get("run_id") or "-",
            "git": (record.get("git_sha") or "-")[:12], "before": f"{before:.4g}", "after": f"{after:.4g}",
            "change": relative, "pvalue": f"{change['pvalue']:.2g}"}
