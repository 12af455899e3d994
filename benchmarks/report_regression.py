"""Benchmark of the regression verdicts (not part of the test run).

    python benchmarks/report_regression.py [--series 1000] [--points 100] [--repeat 3] [--otava-python PATH]

Judges S KPI series of P points each (history of P-1 records + the current value) with ``judge_many`` and the
built-in engine, which computes the change points of all series together. Goals: 1,000 series x 100 points
<= 1 s wall, and >= 5x apache-otava's CPU time on the same series with the same verdicts (CPU: the rounds
alternate on a machine shared with other jobs, whose load the wall times measure as well).

apache-otava pins numpy (2.2), so it usually lives in its own virtualenv:
``python -m venv /tmp/otava-venv && /tmp/otava-venv/bin/pip install apache-otava pydantic pyyaml``, then
``--otava-python /tmp/otava-venv/bin/python``: each otava round runs in that interpreter (this file with
``--engine otava --json``), alternating with the built-in rounds, so both are measured side by side in one run.
Without it, otava is timed in-process when importable, else skipped. Medians of ``--repeat`` rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

from pytest_topsail.regression import RegressionSettings, judge_many, otava_available

GOAL_SECONDS = 1.0
GOAL_RATIO = 5.0


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


def analyse(cases: list[tuple[list[dict], dict]], engine: Literal["builtin", "otava"]
            ) -> tuple[float, float, list[list]]:
    """(wall seconds, CPU seconds, [status, change points] per series)."""
    settings = RegressionSettings(engine=engine)
    wall, cpu = time.perf_counter(), time.process_time()
    verdicts = judge_many([(current, history) for history, current in cases], settings)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, [[v.status, v.change_points] for v in verdicts]


def otava_round(cases_args: list[str], python: str | None) -> tuple[float, float, list[list]]:
    if python is None:
        raise RuntimeError("no otava")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run([python, __file__, "--engine", "otava", "--json", "--repeat", "1", *cases_args],
                            capture_output=True, text=True, timeout=600, env=env, check=False)
    if result.returncode != 0:
        sys.exit(f"otava round failed ({python}):\n{result.stderr[-2000:]}")
    data = json.loads(result.stdout)
    return data["wall"], data["cpu"], data["verdicts"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engine", choices=("builtin", "otava"), default="builtin", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--otava-python", default=None, metavar="PATH",
                        help="an interpreter with apache-otava installed (its own venv: otava pins numpy)")
    args = parser.parse_args()
    cases = make_series(args.series, args.points)
    if args.json:  # one round in this interpreter, for the side-by-side driver
        wall, cpu, verdicts = analyse(cases, args.engine)
        print(json.dumps({"wall": wall, "cpu": cpu, "verdicts": verdicts}))
        return
    size = ["--series", str(args.series), "--points", str(args.points)]
    otava = args.otava_python or (sys.executable if otava_available() else None)
    mine: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    same = True
    for _ in range(args.repeat):
        wall, cpu, verdicts = analyse(cases, "builtin")
        mine.append((wall, cpu))
        if otava is not None:
            o_wall, o_cpu, o_verdicts = otava_round(size, otava)
            theirs.append((o_wall, o_cpu))
            same = same and o_verdicts == verdicts
    counts: dict[str, int] = {}
    for status, _ in verdicts:
        counts[status] = counts.get(status, 0) + 1
    wall, cpu = (statistics.median(x[i] for x in mine) for i in (0, 1))
    print(f"{args.series} series x {args.points} points, built-in engine (batched): median {wall:.3f} s wall, "
          f"{cpu:.3f} s CPU (goal <= {GOAL_SECONDS} s: {'OK' if wall <= GOAL_SECONDS else 'MISSED'}); "
          f"verdicts {counts}")
    if not theirs:
        print("apache-otava: not installed (give --otava-python PATH), ratio not measured")
        return
    o_wall, o_cpu = (statistics.median(x[i] for x in theirs) for i in (0, 1))
    ratio = o_cpu / cpu  # CPU: on a shared machine the wall time measures the other jobs as much as the engine
    print(f"apache-otava on the same series: median {o_wall:.3f} s wall, {o_cpu:.3f} s CPU; ratio {ratio:.1f}x CPU "
          f"(goal >= {GOAL_RATIO}x: {'OK' if ratio >= GOAL_RATIO else 'MISSED'}), {o_wall / wall:.1f}x wall; "
          f"same verdicts and change points: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
