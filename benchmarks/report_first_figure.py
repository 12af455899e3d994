"""Benchmark: how soon the report draws its first figure in headless Chromium (not part of the test run).

    python benchmarks/report_first_figure.py [--report PATH] [--rounds 5]

Without ``--report``, runs ``pytest -m fine_tuning --preset dgx`` into a temporary directory and uses its report
(48 items, 53 figures). Each round opens, side by side, the report and the floor: one figure written by plotly
itself (``plotly.io.to_html(include_plotlyjs=True)``: plotly.js inline, nothing else), and reads the time from
navigation start to the first figure drawn. Goal: the report's first figure within 2 s of load; printed as medians
and as the ratio report / floor (what the page adds over loading plotly.js at all).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import plotly.io

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.report.chromium import visit_page  # noqa: E402

GOAL_MS = 2000
READY = "document.body.dataset.firstFigureMs !== undefined"
FIRST = "Number(document.body.dataset.firstFigureMs)"


def dgx_report(directory: Path) -> Path:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "pytest", "suites", "-m", "fine_tuning", "--preset", "dgx", "-q",
                    "-p", "no:randomly", "-p", "no:cacheprovider", f"--artifacts={directory / 'artifacts'}",
                    f"--topsail-history={directory / 'h.sqlite'}"], cwd=ROOT, env=env, check=True, timeout=600,
                   capture_output=True)
    return directory / "artifacts" / "report.html"


def floor_page(report: Path, directory: Path) -> Path:
    """The report's first suite figure as plotly writes a standalone page, timed the same way."""
    figure = next(sorted((report.parent / "fine_tuning" / "figures").glob("*.json")).__iter__())
    spec = json.loads(figure.read_text())
    html = plotly.io.to_html(spec, include_plotlyjs=True, full_html=True,
                             post_script="document.body.dataset.firstFigureMs = String(Math.round(performance.now()));")
    path = directory / "floor.html"
    path.write_text(html, encoding="utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--report", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="topsail-first-figure-") as temporary:
        directory = Path(temporary)
        report = args.report or dgx_report(directory)
        floor = floor_page(report, directory)
        times: dict[str, list[float]] = {"report": [], "floor": []}
        for _ in range(args.rounds):
            for name, page in (("report", report), ("floor", floor)):
                times[name].append(float(visit_page(page, READY, FIRST, timeout=120).result))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"report {report.stat().st_size / 1e6:.2f} MB; first figure drawn after (ms, {args.rounds} rounds each, "
          "alternating):")
    for name, values in times.items():
        print(f"  {name:7s} median {medians[name]:6.0f}  all {', '.join(f'{v:.0f}' for v in values)}")
    print(f"  ratio report / floor: {medians['report'] / medians['floor']:.2f}; goal: report <= {GOAL_MS} ms "
          f"({'met' if medians['report'] <= GOAL_MS else 'NOT met'} on this machine, load "
          f"{os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
