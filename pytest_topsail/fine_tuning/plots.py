"""Figures of the fine-tuning suite (plotly): the loss curve of a point; throughput against GPU count with the
perfect-scaling line and the scaling efficiency; an efficiency (MFU, scaling efficiency) against GPU count;
tokens/s/GPU by the dimensions that vary; the loss curves and tokens/s by GPU count of several runs overlaid
(``runs_figures``, for python -m pytest_topsail.compare)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.fine_tuning.metrics import scaling_efficiency
from pytest_topsail.fine_tuning.trainer_log import Progress, parse_file


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


SERIES_LABELS = ("model_name", "tuning_method", "per_device_train_batch_size", "max_seq_length")  # not GPU-bound


def runs_figures(runs: Mapping[str, list[dict[str, Any]]], master_log: str) -> dict[str, Any]:
    """Figures overlaying runs (python -m pytest_topsail.compare; `runs`: each run's item records by run name, in
    order): per point found in two runs or more (same case settings), the loss of each run against the epoch (from
    its `master_log`); and the job's tokens/s against its GPU count, one line per run and per value of the other
    settings that vary (model, tuning method, batch size, sequence length)."""
    curves: dict[str, dict[str, Any]] = defaultdict(dict)  # point -> run -> (title, progress)
    throughput: list[tuple[str, float, float, dict[str, Any]]] = []  # run, GPUs, tokens/s, labels
    for name, records in runs.items():
        for record in records:
            case = record.get("case") or {}
            key = json.dumps([case.get("name"), case.get("settings")], sort_keys=True, default=str)
            log = Path(str(record.get("artifact_dir") or "-")) / master_log
            try:
                curves[key][name] = (case.get("id") or record.get("test_id") or key, parse_file(log).progress)
            except (OSError, TopsailError):
                pass  # a failed point (no log, or no summary in it): no curve
            for kpi in record.get("kpis") or []:
                gpus = (kpi.get("labels") or {}).get("accelerator_count")
                if kpi.get("name") == "train_tokens_per_second" and isinstance(gpus, int | float):
                    throughput.append((name, float(gpus), float(kpi["value"]), kpi.get("labels") or {}))
    built: dict[str, Any] = {}
    for by_run in curves.values():
        if len(by_run) < 2:
            continue
        title = next(iter(by_run.values()))[0]
        traces = [{"type": "scatter", "mode": "lines+markers", "name": run,
                   "x": [p.epoch for p in progress if _plotted(p)], "y": [p.loss for p in progress if _plotted(p)]}
                  for run, (_, progress) in by_run.items()]
        built[f"{title}: loss by run"] = {"data": traces, "layout": {
            "title": {"text": f"{title}: loss"}, "xaxis": {"title": {"text": "epoch"}},
            "yaxis": {"title": {"text": "loss"}}, "legend": {"orientation": "h"}, "margin": {"t": 60}}}
    if len({run for run, *_ in throughput}) > 1:
        varying = [d for d in SERIES_LABELS if len({str(labels.get(d)) for *_, labels in throughput}) > 1]
        lines: dict[str, list[tuple[float, float]]] = defaultdict(list)  # a line per run and other settings
        for run, gpus, value, labels in throughput:
            lines[" ".join([run, *(f"{d}={labels.get(d)}" for d in varying)])].append((gpus, value))
        traces = [{"type": "scatter", "mode": "lines+markers", "name": line, "x": [g for g, _ in sorted(points)],
                   "y": [v for _, v in sorted(points)]} for line, points in lines.items()]
        built["train_tokens_per_second by GPU count and run"] = {"data": traces, "layout": {
            "title": {"text": "train_tokens_per_second by GPU count"}, "xaxis": {"title": {"text": "GPUs"}},
            "yaxis": {"title": {"text": "tokens/s"}, "rangemode": "tozero"}, "legend": {"orientation": "h"},
            "margin": {"t": 60}}}
    return built


def _plotted(progress: Progress) -> bool:
    return progress.epoch is not None and progress.loss is not None and math.isfinite(progress.loss)
