"""Regenerate otava_corpus.json: series and the change points apache-otava finds in them.

Run with a Python that has apache-otava installed (it pins numpy 2.2, so use a separate venv):
    python -m venv /tmp/otava-venv && /tmp/otava-venv/bin/pip install apache-otava
    /tmp/otava-venv/bin/python tests/report/data/make_otava_corpus.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path


def corpus() -> list[dict]:
    rng = random.Random(20261122)
    cases = []

    def noisy(mean: float, sd: float, count: int) -> list[float]:
        return [round(rng.gauss(mean, sd), 4) for _ in range(count)]

    for i in range(12):  # one step somewhere
        length = rng.randint(20, 120)
        at = rng.randint(5, length - 3)
        shift = rng.choice([-1, 1]) * rng.uniform(0.05, 0.4)
        cases.append({"name": f"step_{i}", "series": noisy(100, 2, at) + noisy(100 * (1 + shift), 2, length - at)})
    for i in range(8):  # several steps
        series: list[float] = []
        level = 50.0
        for _ in range(rng.randint(2, 4)):
            series += noisy(level, 1.0, rng.randint(8, 40))
            level *= 1 + rng.choice([-1, 1]) * rng.uniform(0.05, 0.3)
        cases.append({"name": f"multi_{i}", "series": series})
    for i in range(8):  # stable noise only
        cases.append({"name": f"flat_{i}", "series": noisy(10, rng.uniform(0.1, 1.0), rng.randint(10, 110))})
    for i in range(8):  # current value (last point) off
        history = noisy(200, 3, rng.randint(5, 60))
        last = 200 * (1 + rng.choice([-1, 1]) * rng.uniform(0.0, 0.3))
        cases.append({"name": f"last_{i}", "series": history + [round(last, 4)]})
    for i in range(4):  # outliers
        series = noisy(30, 0.5, rng.randint(20, 80))
        for _ in range(3):
            series[rng.randrange(len(series))] *= 1.5
        cases.append({"name": f"outliers_{i}", "series": series})
    return cases


def main() -> None:
    from otava.analysis import compute_change_points

    cases = corpus()
    for case in cases:
        for params in ({"window_len": 50, "max_pvalue": 0.001, "min_magnitude": 0.0},
                       {"window_len": 30, "max_pvalue": 0.01, "min_magnitude": 0.05}):
            points, _ = compute_change_points(list(case["series"]), **params)
            key = f"w{params['window_len']}_p{params['max_pvalue']}_m{params['min_magnitude']}"
            case.setdefault("otava", {})[key] = {
                "params": params,
                "change_points": [{"index": int(p.index), "pvalue": float(p.stats.pvalue)} for p in points],
            }
    out = Path(__file__).with_name("otava_corpus.json")
    out.write_text(json.dumps({"generator": "apache-otava 0.8.0", "cases": cases}, indent=1))
    print(f"wrote {out} ({len(cases)} series)")


if __name__ == "__main__":
    main()
