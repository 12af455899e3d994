"""Benchmark of the HTML report size and build time (not part of the test run).

    python benchmarks/report_html.py [--figures 50] [--points 500] [--repeat 3]

Builds a report with F figures: half KPI history trends (100-point histories with verdicts), half suite figures
(scatter plots of ``--points`` points, like the scale suite's latency plots). Goal: 50 figures <= 6 MB.
Printed beside the size of the same figures written the naive way, measured in the same run: each figure as its own
``plotly.io.to_html(include_plotlyjs=True)`` document (what made MatrixBenchmarking's plots cost ~4.5 MB each).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import plotly.graph_objects as go
import plotly.io

from pytest_topsail.regression import RegressionSettings, judge
from pytest_topsail.report.html import ReportInput, render_report

GOAL_BYTES = 6 * 1024 * 1024


def suite_figure(rng: random.Random, points: int) -> dict:
    xs = list(range(points))
    return {"data": [{"type": "scatter", "mode": "markers", "name": step, "x": xs,
                      "y": [round(rng.expovariate(1 / 800), 1) for _ in xs]} for step in ("Scheduled", "Ready")],
            "layout": {"title": {"text": "pod latency"}, "yaxis": {"title": {"text": "ms"}}}}


def build_input(directory: Path, figures: int, points: int) -> ReportInput:
    rng = random.Random(5)
    records, verdicts = [], []
    for index in range(figures // 2):
        figure_path = directory / f"figure_{index}.json"
        figure_path.write_text(json.dumps(suite_figure(rng, points)))
        history = [{"name": f"kpi_{index}", "value": rng.gauss(100, 2), "timestamp": float(t), "test_uuid": f"u{t}",
                    "higher_better": True, "unit": "ms", "labels": {}} for t in range(100)]
        current = {**history[-1], "timestamp": 1000.0, "test_uuid": "now", "suite": "scale",
                   "nodeid": f"suites/scale/test_scale.py::test_jobs[case-{index}]"}
        verdicts.append(judge(current, history[:-1], RegressionSettings(engine="builtin")))
        records.append({"suite": "scale", "nodeid": current["nodeid"], "test_id": f"test_jobs[case-{index}]",
                        "artifact_dir": str(directory), "outcome": "passed", "kpis": [current],
                        "figures": [{"title": f"latency {index}", "path": str(figure_path)}], "labels": {}})
    return ReportInput(title="benchmark", records=records, verdicts=verdicts, summary={"kpis_count": len(verdicts)})


def naive_size(report: ReportInput) -> int:
    total = 0
    for record in report.records:
        for entry in record["figures"]:
            figure = go.Figure(json.loads(Path(entry["path"]).read_text()))
            total += len(plotly.io.to_html(figure, include_plotlyjs=True, full_html=True).encode())
    return total * 2  # the trend figures would cost as much again


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--figures", type=int, default=50)
    parser.add_argument("--points", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="topsail-bench-") as name:
        directory = Path(name)
        report = build_input(directory, args.figures, args.points)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            path = render_report(report, directory / "report.html")
            times.append(time.perf_counter() - start)
        size = path.stat().st_size
        html = path.read_text()
        embedded = html.count('type="application/json" id="fig-')
        naive = naive_size(report)
    print(f"report with {embedded} figures: {size / 1024 / 1024:.2f} MB (goal <= {GOAL_BYTES / 1024 / 1024:.0f} MB: "
          f"{'OK' if size <= GOAL_BYTES else 'MISSED'}); built in median {statistics.median(times):.2f} s")
    print(f"baseline, one plotly to_html(include_plotlyjs=True) document per figure: {naive / 1024 / 1024:.1f} MB; "
          f"ratio {size / naive:.3f}")


if __name__ == "__main__":
    main()
