"""KPIs of the TGIS suite, and its run table: configs x cases (pass, fail, skip) as tgis-tester prints it."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

import pytest_topsail as topsail

OUTCOME_CODES = {"passed": 2, "skipped": 1, "failed": 0}


@topsail.kpi(unit="ms", lower_better=True, format="{:.1f}",
             help="Latency of the case's request: Generate (whole batch), or GenerateStream to its last message",
             ignored_for_regression=True,
             why="one request's round trip: a sample of one moves with any hiccup of this machine (the suite judges "
                 "answers; llm_load measures latency over many requests)")
def request_latency_ms(data: dict[str, Any]) -> float:
    return float(data["latency_ms"])


@topsail.kpi(unit="s", help="worker pod created -> model loaded and served, in the cluster's time (the simulator's "
                             "model-load stage, a real cluster's pod timestamps)",
             lower_better=True, format="{:.1f}", scope="worker")
def model_load_seconds(data: dict[str, Any]) -> float | None:
    return None if data.get("load_seconds") is None else float(data["load_seconds"])


def figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The run table: one row per worker (model/config), one column per case, coloured by outcome."""
    cells: dict[tuple[str, str], str] = {}
    for record in records:
        settings = (record.get("case") or {}).get("settings") or {}
        if "config_name" not in settings:
            continue
        worker = f"{settings['model'].rsplit('/', 1)[-1]}/{settings['config_name']}"
        name = settings["case"]["name"] + (" [stream]" if settings.get("stream") else "")
        cells[(worker, name)] = record.get("outcome", "unknown")
    if not cells:
        return {}
    workers = sorted({worker for worker, _ in cells})
    cases = sorted({name for _, name in cells})
    z = [[OUTCOME_CODES.get(cells.get((worker, name), ""), None) for name in cases] for worker in workers]
    text = [[cells.get((worker, name), "") for name in cases] for worker in workers]
    figure = go.Figure(go.Heatmap(
        z=z, x=cases, y=workers, text=text, texttemplate="%{text}", zmin=0, zmax=2, showscale=False,
        colorscale=[[0, "#d62728"], [0.5, "#bbbbbb"], [1, "#2ca02c"]],
        hovertemplate="%{y}<br>%{x}: %{text}<extra></extra>"))
    # room under the cells for the slanted case names (at 200 px they ran out of the figure)
    figure.update_layout(title="TGIS run table: configs x cases",
                         xaxis={"title": "case", "tickangle": -45, "automargin": True},
                         yaxis={"title": "model/config", "automargin": True}, height=360 + 30 * len(workers))
    return {"TGIS run table (configs x cases)": figure}
