"""Figures of a load test, drawn from the saved records and summaries (docs/llm-load.md, "Reading the figures").

- throughput: output tokens/s, requests/s (and goodput with SLOs) against the load (concurrency, or offered rate for
  open loops; an automatic sweep: its completed requests/s)
- latency: median, p90 and p99 of TTFT, ITL, TPOT and end-to-end latency against the load
- ttft / itl distributions: one box per load point, from every request (every gap for ITL)
- rate: achieved request rate against the load, with the offered rate when the loop is open
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pytest_topsail.llmload.metrics import is_measured, request_latencies
from pytest_topsail.llmload.records import OK

QUANTILE_LINES = (("median", "median"), ("p90", "p90"), ("p99", "p99"))
LATENCY_PANELS = (("ttft_ms", "TTFT"), ("itl_ms", "ITL"), ("tpot_ms", "TPOT"), ("e2e_ms", "end-to-end latency"))


def load_axis(summaries: Sequence[dict[str, Any]]) -> tuple[list[Any], str]:
    """x values of the points: concurrency for closed loops, offered rate for open ones, else the point label."""
    if all(s["mode"] == "concurrency" for s in summaries):
        return [s["concurrency"] for s in summaries], "concurrency (requests in flight)"
    if all(s["offered_rate"] for s in summaries):
        return [s["offered_rate"] for s in summaries], "offered rate (requests/s)"
    return [round(s["requests_per_s"], 3) for s in summaries], "completed requests/s (automatic sweep)"


def throughput_figure(summaries: Sequence[dict[str, Any]]) -> go.Figure:
    x, title = load_axis(summaries)
    figure = make_subplots(specs=[[{"secondary_y": True}]])
    figure.add_trace(go.Scatter(x=x, y=[s["output_tokens_per_s"] for s in summaries], name="output tokens/s",
                                mode="lines+markers"), secondary_y=False)
    figure.add_trace(go.Scatter(x=x, y=[s["requests_per_s"] for s in summaries], name="requests/s",
                                mode="lines+markers"), secondary_y=True)
    if any(s.get("slo") for s in summaries):
        figure.add_trace(go.Scatter(x=x, y=[(s.get("slo") or {}).get("goodput") for s in summaries],
                                    name="goodput (requests/s within the SLOs)", mode="lines+markers",
                                    line={"dash": "dot"}), secondary_y=True)
    figure.update_layout(title="Throughput against load", xaxis_title=title, template="plotly_white", height=420)
    figure.update_yaxes(title_text="output tokens/s", secondary_y=False)
    figure.update_yaxes(title_text="requests/s", secondary_y=True)
    return figure


def latency_figure(summaries: Sequence[dict[str, Any]]) -> go.Figure:
    x, title = load_axis(summaries)
    # spacing leaves room for the right column's y-axis title and the first row's x-axis titles
    figure = make_subplots(rows=2, cols=2, subplot_titles=[name for _, name in LATENCY_PANELS],
                           horizontal_spacing=0.14, vertical_spacing=0.2)
    for number, (key, name) in enumerate(LATENCY_PANELS):
        row, col = number // 2 + 1, number % 2 + 1
        for statistic, line in QUANTILE_LINES:
            values = [(s["stats"].get(key) or {}).get(statistic) for s in summaries]
            figure.add_trace(go.Scatter(x=x, y=values, name=f"{name} {line}", mode="lines+markers",
                                        legendgroup=line), row=row, col=col)
        figure.update_yaxes(title_text="ms", row=row, col=col)
        figure.update_xaxes(title_text=title, row=row, col=col)
    figure.update_layout(title="Latency quantiles against load", template="plotly_white", height=760,
                         legend={"orientation": "h", "x": 0, "y": -0.12, "yanchor": "top"})
    return figure


def distribution_figure(points: Sequence[dict[str, Any]], by_point: dict[int, list[dict[str, Any]]],
                        metric: str) -> go.Figure:
    """One box per point of ``ttft`` (per request) or ``itl`` (every gap), measured successful requests only."""
    figure = go.Figure()
    for point in points:
        values: list[float] = []
        for record in by_point.get(point["index"], []):
            if not is_measured(record) or record["status"] != OK:
                continue
            latency = request_latencies(record)[metric]
            if isinstance(latency, list):
                values.extend(latency)
            elif latency is not None:
                values.append(latency)
        figure.add_trace(go.Box(y=[v * 1000.0 for v in values], name=point.get("label", str(point["index"])),
                                boxpoints=False))
    name = {"ttft": "TTFT per request", "itl": "ITL per token gap"}[metric]
    figure.update_layout(title=f"{name}: distribution per load point", yaxis_title="ms", template="plotly_white",
                         height=420, showlegend=False)
    return figure


def rate_figure(summaries: Sequence[dict[str, Any]]) -> go.Figure:
    x, title = load_axis(summaries)
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=x, y=[s["achieved_rate"] for s in summaries], name="achieved",
                                mode="lines+markers"))
    if any(s["offered_rate"] for s in summaries):
        figure.add_trace(go.Scatter(x=x, y=[s["offered_rate"] for s in summaries], name="offered",
                                    mode="lines", line={"dash": "dash"}))
    figure.update_layout(title="Request rate: achieved (requests started per second of the window) vs offered",
                         xaxis_title=title, yaxis_title="requests/s", template="plotly_white", height=420)
    return figure


def figures(points: Sequence[dict[str, Any]], by_point: dict[int, list[dict[str, Any]]],
            summaries: Sequence[dict[str, Any]]) -> dict[str, go.Figure]:
    """The figures of a sweep; an automatic sweep's points (closed and open loops mixed) in the order of their
    completed requests/s."""
    if len({s["mode"] for s in summaries}) > 1:
        order = sorted(range(len(summaries)), key=lambda i: summaries[i]["requests_per_s"])
        points, summaries = [points[i] for i in order], [summaries[i] for i in order]
    return {
        "throughput": throughput_figure(summaries),
        "latency quantiles": latency_figure(summaries),
        "TTFT distribution": distribution_figure(points, by_point, "ttft"),
        "ITL distribution": distribution_figure(points, by_point, "itl"),
        "achieved vs offered rate": rate_figure(summaries),
    }
