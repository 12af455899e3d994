"""Plotly figures of a scale run (Run:ai's plotter, on our steps and both timestamp sources).

- general: total delay to scheduling (and to Ready) per job index.
- detailed: one row per step; left, the delta against the job's submit time; right, a histogram of the delta.
- lifecycle: the same rows for a configured lifecycle, one per transition between consecutive steps.
"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pytest_topsail.scale.lifecycle import Lifecycle
from pytest_topsail.scale.timelines import LIFECYCLE, SOURCE_STEPS, Timeline, transitions

GENERAL_STEPS = ("Scheduled", "Ready")


def general_figure(timelines: list[Timeline], source: str = "watch") -> go.Figure:
    figure = go.Figure()
    for step in GENERAL_STEPS:
        points = [(t.index, t.delta(source, step)) for t in timelines if step in t.applicable]
        points = [(i, d) for i, d in points if d is not None]
        figure.add_trace(
            go.Scatter(
                x=[i for i, _ in points],
                y=[d for _, d in points],
                mode="markers",
                name=f"submit -> {step}" if source == "watch" else f"created -> {step}",
                marker={"size": 4},
            )
        )
    base = "submission" if source == "watch" else "workload creation"
    figure.update_layout(
        title=f"Total delay per job: from {base} to all pods scheduled / ready ({source} times)",
        xaxis_title="job index (submission order)",
        yaxis_title="delay (ms)",
        template="plotly_white",
        height=450,
    )
    return figure


ROW_HEIGHT = 300  # px per step row of the detailed figure


def detailed_figure(timelines: list[Timeline], source: str = "watch") -> go.Figure:
    steps = [s for s in SOURCE_STEPS[source] if any(s in t.applicable for t in timelines)]
    first_submit = min((b for t in timelines if (b := t.base.get("watch")) is not None), default=0.0)
    rows = []
    for step in steps:
        points = [
            ((submitted - first_submit) / 1000.0, t.delta(source, step))
            for t in timelines
            if step in t.applicable and (submitted := t.base.get("watch")) is not None
        ]
        rows.append((step, f"{step}: delay vs submit time", [(x, d) for x, d in points if d is not None]))
    base = "submission" if source == "watch" else "workload creation"
    return rows_figure(rows, f"Per-step delay from {base} ({source} times)", "submit time (s from first)")


def lifecycle_figure(lifecycle: Lifecycle, timelines: list[Timeline]) -> go.Figure:
    """The detailed figure of a configured lifecycle: one row per transition, its delta against the time the object
    reached its first step, and its histogram."""
    first = min((b for t in timelines if (b := t.base.get(LIFECYCLE)) is not None), default=0.0)
    rows = []
    for step, following in transitions(lifecycle):
        points = [((start - first) / 1000.0, t.between(LIFECYCLE, step, following)) for t in timelines
                  if following in t.applicable and (start := t.base.get(LIFECYCLE)) is not None]
        rows.append((f"{step}->{following}", f"{step} -> {following}: delay vs {lifecycle.chain[0].name} time",
                     [(x, d) for x, d in points if d is not None]))
    return rows_figure(rows, f"{lifecycle.kind} lifecycle ({lifecycle.name}): delay between consecutive steps",
                       f"{lifecycle.chain[0].name} time (s from the first)")


def rows_figure(rows: list[tuple[str, str, list[tuple[float, float]]]], title: str, x_title: str) -> go.Figure:
    """One row per (name, title, points): the points' delays (ms) against x on the left, their histogram right."""
    figure = make_subplots(
        rows=max(len(rows), 1),
        cols=2,
        column_widths=[0.7, 0.3],
        subplot_titles=[text for _, row_title, _ in rows for text in (row_title, f"{row_title.split(':')[0]}: "
                                                                                  "histogram")],
        horizontal_spacing=0.06,
        # room between rows for a row's x-axis title and the next row's subplot titles (about 110 px)
        vertical_spacing=min(0.3, 110 / (ROW_HEIGHT * max(len(rows), 1))),
    )
    for row, (name, _, points) in enumerate(rows, start=1):
        figure.add_trace(
            go.Scatter(
                x=[x for x, _ in points],
                y=[d for _, d in points],
                mode="markers",
                marker={"size": 3},
                name=name,
                showlegend=False,
            ),
            row=row,
            col=1,
        )
        figure.add_trace(go.Histogram(x=[d for _, d in points], name=name, showlegend=False), row=row, col=2)
        figure.update_yaxes(title_text="ms", row=row, col=1)
        figure.update_xaxes(title_text=x_title, row=row, col=1)
        figure.update_xaxes(title_text="ms", row=row, col=2)
    figure.update_layout(
        title=title,
        template="plotly_white",
        height=ROW_HEIGHT * max(len(rows), 1) + 120,
        bargap=0.05,
    )
    return figure


def save_html(figure: go.Figure, path: Path, include_plotlyjs: str | bool = "shared",
              plotly_js: Path | None = None) -> Path:
    """Write a figure as HTML that works offline: "shared" loads the run's one plotly.min.js (``plotly_js``, else
    found above ``path``), True embeds plotly.js, "directory" puts a plotly.min.js beside the file."""
    if include_plotlyjs == "shared":
        from pytest_topsail.report.figures import write_figure_html

        return write_figure_html(figure, path, plotly_js)
    figure.write_html(str(path), include_plotlyjs=include_plotlyjs, full_html=True)
    return path
