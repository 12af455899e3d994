"""Benchmark of the regression verdicts (not part of the test run).

    python benchmarks/report_regression.py [--series 1000] [--points 100] [--repeat 3]

Analyses S KPI series of P points each (history of P-1 records + the current value) with ``judge`` and the
built-in E-divisive engine (goal: 1,000 series x 100 points <= 5 s). Printed beside the same loop with the
short-history rule (mean of the history, no change-point detection), measured side by side in the same run.
Medians of ``--repeat`` runs. ``--engine otava`` times apache-otava instead (when installed).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from pytest_topsail.regression import RegressionSettings, judge

GOAL_SECONDS = 5.0


def make_series(count: int, points: int, seed: int = 1) -> list[tuple[list[dict], dict]]:
    """Series with realistic shapes: flat noise, an old step, a step at the current value."""
    rng = random.Random(seed)
    cases = []
    for index in range(count):
        level = rng.uniform(10, 1000)
        shape = index % 3
        values = [rng.gauss(level, level * 0.02) for _ in range(points)]
        if shape == 1:
            at = rng.randint(10, points - 10)
            values[at:] = [v * 0.8 for v in values[at:]]
        elif shape == 2:
            values[-1] *= 0.7
        records = [{"name": f"kpi{index}", "value": v, "timestamp": float(t), "test_uuid": f"{index}-{t}",
                    "higher_better": True, "unit": "x", "labels": {}} for t, v in enumerate(values)]
        cases.append((records[:-1], records[-1]))
    return cases


def analyse(cases: list[tuple[list[dict], dict]], settings: RegressionSettings) -> tuple[float, dict[str, int]]:
    start = time.perf_counter()
    counts: dict[str, int] = {}
    for history, current in cases:
        status = judge(current, history, settings).status
        counts[status] = counts.get(status, 0) + 1
    return time.perf_counter() - start, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engine", choices=("builtin", "otava"), default="builtin",
                        help="otava needs apache-otava installed (optional extra)")
    args = parser.parse_args()
    cases = make_series(args.series, args.points)
    edivisive = RegressionSettings(engine=args.engine)
    baseline = RegressionSettings(engine="builtin", min_history=args.points + 1)  # not judged: no change points
    times, base_times = [], []
    counts: dict[str, int] = {}
    for _ in range(args.repeat):
        seconds, counts = analyse(cases, edivisive)
        times.append(seconds)
        base_times.append(analyse(cases, baseline)[0])
    median, base = statistics.median(times), statistics.median(base_times)
    print(f"{args.series} series x {args.points} points, e-divisive + t-test ({args.engine}): median {median:.2f} s "
          f"(goal <= {GOAL_SECONDS} s: {'OK' if median <= GOAL_SECONDS else 'MISSED'}); verdicts {counts}")
    print(f"baseline, insufficient-history path (mean only) on the same series: median {base:.3f} s; "
          f"ratio {median / base:.1f}x")


if __name__ == "__main__":
    main()
