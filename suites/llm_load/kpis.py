"""KPIs of the LLM load suite, one set per load point (item), computed from the point's summary
(pytest_topsail.llmload.metrics; definitions in docs/llm-load.md).

- ``throughput``: output tokens/s over the measurement window; ``requests_per_s``: successful requests/s
- ``ttft_<stat>_ms``, ``itl_<stat>_ms``, ``tpot_<stat>_ms``, ``e2e_<stat>_ms`` for min max median mean p80 p90 p95
  p99; mean, p80, p90 and p95 are ignored for regression (TOPSAIL's choice: the median, the tails and the extremes
  carry the verdicts); TTFT, ITL and TPOT exist only for streamed points
- ``failures``: failed requests (count); ``model_load_duration``: seconds until the model served
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_topsail.kpi import kpi
from pytest_topsail.llmload.metrics import STATISTICS
from pytest_topsail.llmload.run import analyse_directory

IGNORED_STATISTICS = ("mean", "p80", "p90", "p95")
LATENCIES = {"ttft": "time to first token", "itl": "inter-token latency (every token gap)",
             "tpot": "time per output token after the first, per request", "e2e": "end-to-end request latency"}
LOAD_DIR = "load"
SERVING_FILE = "serving.json"


PointResult = dict[str, Any]  # {"summary": the point's summary (metrics.summarize_point), "serving": serving.json}


def latency_kpi(metric: str, statistic: str) -> Callable[[PointResult], float | None]:
    def value(result: PointResult) -> float | None:
        stats = result["summary"]["stats"].get(f"{metric}_ms")
        return None if stats is None else stats[statistic]

    return value


for _metric, _text in LATENCIES.items():
    for _statistic in STATISTICS:
        _function = latency_kpi(_metric, _statistic)
        _function.__name__ = f"{_metric}_{_statistic}_ms"
        globals()[_function.__name__] = kpi(
            unit="ms", help=f"{_statistic} of the {_text}", lower_better=True, format="{:.2f}",
            ignored_for_regression=_statistic in IGNORED_STATISTICS)(_function)


@kpi(unit="tokens/s", help="Output tokens received per second of the measurement window", higher_better=True,
     format="{:.1f}")
def throughput(result: PointResult) -> float:
    return result["summary"]["output_tokens_per_s"]


@kpi(unit="requests/s", help="Successful requests ended per second of the measurement window", higher_better=True,
     format="{:.2f}")
def requests_per_s(result: PointResult) -> float:
    return result["summary"]["requests_per_s"]


@kpi(unit="requests", help="Measured requests that failed (any status but ok)", lower_better=True, format="{:.0f}")
def failures(result: PointResult) -> float:
    return float(sum(result["summary"]["failures"].values()))


@kpi(unit="s", help="Seconds from starting the model server until it served", lower_better=True, format="{:.2f}")
def model_load_duration(result: PointResult) -> float | None:
    return result["serving"].get("load_duration_s")


def parse(artifact_dir: Path) -> PointResult:
    """--topsail-replot: the point's summary again from its saved records."""
    summaries = analyse_directory(Path(artifact_dir) / LOAD_DIR)
    serving_path = Path(artifact_dir) / SERVING_FILE
    serving = json.loads(serving_path.read_text(encoding="utf-8")) if serving_path.is_file() else {}
    return {"summary": summaries[0], "serving": serving}
