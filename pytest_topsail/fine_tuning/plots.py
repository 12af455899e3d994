"""Figures of the fine-tuning suite (plotly): the loss curve of a point; throughput against GPU count with the
perfect-scaling line and the scaling efficiency; an efficiency (MFU, scaling efficiency) against GPU count;
tokens/s/GPU by the dimensions that vary."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_topsail.fine_tuning.metrics import scaling_efficiency
from pytest_topsail.fine_tuning.trainer_log import Progress


def loss_curve(progress: list[Progress], title: str) -> dict[str, Any]:
    """Loss and grad norm against the epoch (nan points left out), learning rate on a second axis."""
    def series(attribute: str) -> tuple[list[float], list[float]]:
        points = [(p.epoch, getattr(p, attribute)) for p in progress if p.epoch is not None]
        kept = [(x, y) for x, y in points if y is not None and math.isfinite(y)]
        return [x for x, _ in kept], [y for _, y in kept]

    traces = []
    for attribute, axis in (("loss", "y"), ("grad_norm", "y"), ("learning_rate", "y2")):
        xs, ys = series(attribute)
        traces.append({"type": "scatter", "mode": "lines+markers", "name": attribute, "x": xs, "y": ys,
                       "yaxis": axis})
    # the legend goes under the plot (not over the title) and every axis makes room for its tick labels: the
    # learning rate's exponent labels (2e-05) were clipped at the right edge
    return {"data": traces, "layout": {"title": {"text": title}, "xaxis": {"title": {"text": "epoch"},
                                                                           "automargin": True},
                                       "yaxis": {"title": {"text": "loss, grad norm"}, "automargin": True},
                                       "yaxis2": {"title": {"text": "learning rate"}, "overlaying": "y",
                                                  "side": "right", "automargin": True, "exponentformat": "e"},
                                       "legend": {"orientation": "h", "x": 0, "y": -0.2, "yanchor": "top"},
                                       "margin": {"t": 60, "r": 80}}}


def scaling_figure(points: Iterable[Mapping[str, Any]], kpi: str, higher_better: bool = True) -> dict[str, Any]:
    """`points`: {gpus, value, series} per point. One line per series (the other varying settings), its
    perfect-scaling line from its smallest GPU count, and the efficiency of each point in the hover text."""
    by_series: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for point in points:
        by_series[str(point["series"])].append((float(point["gpus"]), float(point["value"])))
    traces: list[dict[str, Any]] = []
    for name, values in sorted(by_series.items()):
        values.sort()
        base_gpus, base = values[0]
        efficiency = [scaling_efficiency(v, base, g, base_gpus, higher_better) for g, v in values]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": name, "x": [g for g, _ in values],
                       "y": [v for _, v in values], "legendgroup": name,
                       "text": [f"efficiency {e:.0%}" for e in efficiency]})
        perfect = [base * g / base_gpus if higher_better else base * base_gpus / g for g, _ in values]
        perfect_trace: dict[str, Any] = {"type": "scatter", "mode": "lines", "name": f"{name} (perfect scaling)",
                                         "legendgroup": name, "x": [g for g, _ in values], "y": perfect,
                                         "line": {"dash": "dot"}, "showlegend": False}
        traces.append(perfect_trace)
    direction = "higher is better" if higher_better else "lower is better"
    # the legend (long series names) under the plot, where it has the figure's width
    return {"data": traces, "layout": {"title": {"text": f"{kpi} vs GPU count ({direction}; dotted: perfect "
                                                         "scaling)"},
                                       "xaxis": {"title": {"text": "GPUs (pods x GPUs per pod)"}, "type": "log",
                                                 "dtick": math.log10(2)},
                                       "yaxis": {"title": {"text": kpi}},
                                       "legend": {"orientation": "h", "x": 0, "y": -0.2, "yanchor": "top"},
                                       "height": 460 + 24 * len(by_series)}}


def by_dimension_figure(points: Iterable[Mapping[str, Any]], dimension: str, kpi: str) -> dict[str, Any]:
    """Bars of `kpi` for each value of `dimension`, one bar group per series."""
    by_series: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for point in points:
        by_series[str(point["series"])].append((str(point[dimension]), float(point["value"])))
    traces = [{"type": "bar", "name": name, "x": [x for x, _ in values], "y": [y for _, y in values]}
              for name, values in sorted(by_series.items())]
    return {"data": traces, "layout": {"title": {"text": f"{kpi} by {dimension}"}, "barmode": "group",
                                       "xaxis": {"title": {"text": dimension}}, "yaxis": {"title": {"text": kpi}}}}


def efficiency_figure(points: Iterable[Mapping[str, Any]], title: str, y_title: str,
                      reference: float | None = None) -> dict[str, Any]:
    """`points`: {gpus, value, series, text (hover, optional)} per point: one line per series against the GPU count;
    `reference`: a dotted horizontal line (1.0: perfect scaling)."""
    by_series: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for point in points:
        hover = str(point.get("text", ""))
        by_series[str(point["series"])].append((float(point["gpus"]), float(point["value"]), hover))
    traces: list[dict[str, Any]] = []
    for name, values in sorted(by_series.items()):
        values.sort()
        traces.append({"type": "scatter", "mode": "lines+markers", "name": name, "x": [g for g, _, _ in values],
                       "y": [v for _, v, _ in values], "text": [t for _, _, t in values]})
    gpus = sorted({g for values in by_series.values() for g, _, _ in values})
    if reference is not None and gpus:
        traces.append({"type": "scatter", "mode": "lines", "name": "perfect", "x": [gpus[0], gpus[-1]],
                       "y": [reference, reference], "line": {"dash": "dot"}})
    return {"data": traces, "layout": {"title": {"text": f"{title} (higher is better)"},
                                       "xaxis": {"title": {"text": "GPUs (pods x GPUs per pod)"}, "type": "log",
                                                 "dtick": math.log10(2)},
                                       "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
                                       "legend": {"orientation": "h", "x": 0, "y": -0.2, "yanchor": "top"},
                                       "height": 460 + 24 * len(by_series)}}
