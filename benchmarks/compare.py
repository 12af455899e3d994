"""Benchmark of ``python -m pytest_topsail.compare`` (not part of the test run).

    python benchmarks/compare.py [--points 128] [--requests 50000] [--tokens 32] [--repeat 3] [--html]

Writes two synthetic llm_load sweeps in the real artifacts layout (per point: ``item.json`` with its KPIs,
``load/points.json``, ``load/records.jsonl`` with every request's chunks), the second with a 10 % slower ITL, then
times the comparison as the command runs it: both runs loaded, every request's samples read back by the suite's
``samples(artifact_dir)``, every KPI judged with its bootstrap interval, the terminal table (``--html``: the page
too). Goal: two 128-point sweeps of ~50k requests each in <= 5 s CPU. Medians of ``--repeat`` rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from pytest_topsail.compare.load import load_runs
from pytest_topsail.compare.output import terminal_report, write_html
from pytest_topsail.compare.pairs import compare_runs, exit_code, summary_line

REPO = Path(__file__).resolve().parents[1]
GOAL_SECONDS = 5.0
KPIS = {"ttft": "ttft_median_ms", "itl": "itl_median_ms", "tpot": "tpot_median_ms", "e2e": "e2e_p99_ms"}


def write_sweep(root: Path, points: int, requests: int, tokens: int, itl_factor: float, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    per_point = requests // points
    for index in range(points):
        concurrency = index + 1
        directory = root / "llm_load" / f"{index + 1:03d}__test_llm_load[concurrency={concurrency}]"
        (directory / "load").mkdir(parents=True)
        ttft = rng.lognormal(np.log(0.020), 0.3, per_point)
        gaps = rng.lognormal(np.log(0.007 * itl_factor), 0.2, (per_point, tokens - 1))
        starts = np.sort(rng.uniform(0, 60, per_point))
        lines = []
        samples: dict[str, list[float]] = {"ttft": [], "itl": [], "tpot": [], "e2e": []}
        for request in range(per_point):
            times = starts[request] + ttft[request] + np.concatenate([[0.0], np.cumsum(gaps[request])])
            end = float(times[-1])
            lines.append(json.dumps({
                "point": 0, "index": request, "start": float(starts[request]), "end": end,
                "first_token": float(times[0]), "ack": float(times[0]), "status": "ok", "warmup": False,
                "cooldown": False, "output_tokens": tokens, "chunks": [[round(float(t), 6), 1] for t in times]}))
            samples["ttft"].append(ttft[request] * 1000)
            samples["itl"].extend(gaps[request] * 1000)
            samples["tpot"].append((end - times[0]) / (tokens - 1) * 1000)
            samples["e2e"].append((end - starts[request]) * 1000)
        (directory / "load" / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        point = {"index": 0, "label": f"concurrency={concurrency}", "point": {"mode": "concurrency",
                 "concurrency": concurrency}, "measure_start": 0.0, "stop": 61.0}
        (directory / "load" / "points.json").write_text(json.dumps([point]), encoding="utf-8")
        kpis = [{"name": name, "value": float(np.quantile(samples[metric], 0.99 if name.endswith("p99_ms") else 0.5)),
                 "unit": "ms", "higher_better": False, "format": "{:.2f}", "suite": "llm_load",
                 "labels": {"concurrency": concurrency, "model": "synthetic"}, "run_id": root.name}
                for metric, name in KPIS.items()]
        record = {"suite": "llm_load", "nodeid": f"suites/llm_load/test_llm_load.py::{directory.name[5:]}",
                  "test_id": directory.name[5:], "artifact_dir": str(directory), "kpis": kpis,
                  "case": {"name": "synthetic", "id": f"concurrency={concurrency}",
                           "settings": {"concurrency": concurrency}}}
        (directory / "item.json").write_text(json.dumps(record), encoding="utf-8")
    return root


def one_round(run_a: Path, run_b: Path, html: Path | None) -> tuple[float, float, str, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    runs = load_runs(str(run_a)) + load_runs(str(run_b))
    comparisons = compare_runs(runs, REPO / "suites", history=None)
    code = exit_code(comparisons)
    terminal_report(runs, comparisons)
    if html is not None:
        write_html(html, runs, comparisons, [], REPO / "suites", code)
    return time.process_time() - cpu, time.perf_counter() - wall, summary_line(comparisons), code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=128)
    parser.add_argument("--requests", type=int, default=50_000, help="requests per sweep")
    parser.add_argument("--tokens", type=int, default=32, help="output tokens per request")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--html", action="store_true", help="write the HTML page too")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        run_a = write_sweep(root / "a", options.points, options.requests, options.tokens, 1.0, seed=1)
        run_b = write_sweep(root / "b", options.points, options.requests, options.tokens, 1.1, seed=2)
        size = sum(p.stat().st_size for p in root.rglob("records.jsonl")) / 2 / 1e6
        print(f"two sweeps of {options.points} points, {options.requests} requests x {options.tokens} tokens each "
              f"({size:.0f} MB of records per sweep)")
        rounds = [one_round(run_a, run_b, root / "compare.html" if options.html else None)
                  for _ in range(options.repeat)]
    cpu, wall = statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds)
    print(f"{rounds[0][2]}; exit code {rounds[0][3]}")
    print(f"compare: median {cpu:.2f} s CPU, {wall:.2f} s wall over {options.repeat} rounds "
          f"(goal <= {GOAL_SECONDS:g} s CPU): {'met' if cpu <= GOAL_SECONDS else 'NOT met'}")


if __name__ == "__main__":
    main()
