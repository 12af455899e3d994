"""KPIs of the LLM load suite, one set per load point (item), computed from the point's summary
(pytest_topsail.llmload.metrics; definitions in docs/llm-load.md), and the suite figures: one set per sweep.

- ``throughput``: output tokens/s over the measurement window; ``requests_per_s``: successful requests/s
- ``ttft_<stat>_ms``, ``itl_<stat>_ms``, ``tpot_<stat>_ms``, ``e2e_<stat>_ms`` for min max median mean p80 p90 p95
  p99; mean, p80, p90 and p95 are ignored for regression (TOPSAIL's choice: the median carries the verdict);
  min and max are informational (extremes: one fast or slow token or a scheduling hiccup moves them; in 8 identical
  runs itl_min_ms went 0.24 -> 6.2 ms and e2e_min_ms of 4 requests +178 %), p99 is judged from 1,000 samples on
  (10 beyond it), e2e_median from 10 requests (an answer's length sets its e2e); requests_per_s from 100 requests
  on (a count of a few requests per second is quantized); TTFT, ITL and TPOT exist only for streamed points
- ``goodput`` (requests/s) and ``slo_attainment`` (%): against ``tests.llm_load.slo``, only when targets are given
- an automatic sweep (``mode: sweep``, one item): every KPI of its max-throughput point (its second), but
  ``goodput``: the best of its points
- a point failing its validity audit (pytest_topsail/llmload/audit.py: load client saturated, no steady state, the
  server's TTFT far from the client's) has every KPI its client measured (latencies, throughput, requests_per_s,
  goodput, slo_attainment) recorded as untrusted: verdict ``ignored`` with the reason, kept out of later baselines
- conversations (``dataset: multi-turn``): ``turn<k>_ttft_median_ms``, ``turn<k>_e2e_median_ms``,
  ``turn<k>_input_tokens`` (mean) and ``turn<k>_cached_share`` (0..1, when the server reports its cached tokens) for
  the turns 1 to 8, informational (the history grows the input turn after turn)
- ``failures``: failed requests (count); ``model_load_duration``: seconds until the model served, per served model
  (scope ``worker``: judged once per run however many load points use the model), in the cluster's own time (the
  simulator's model-load stage; a real cluster's pod timestamps), never the client's wall clock
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_topsail import kpi
from pytest_topsail.llmload import (
    SERVER_METRICS,
    STATISTICS,
    analyse_directory,
    audit_point,
    latency_samples,
    measured_successes,
    merge_directories,
    summarize_point,
)
from pytest_topsail.llmload import figures as sweep_figures

IGNORED_STATISTICS = ("mean", "p80", "p90", "p95")
EXTREME_WHY = "an extreme (min or max) moves with a single fast or slow token or scheduling hiccup"
LATENCIES = {"ttft": "time to first token", "itl": "inter-token latency (every token gap)",
             "tpot": "time per output token after the first, per request", "e2e": "end-to-end request latency",
             "tt_ack": "time to the first response message, even one without a token"}
LOAD_DIR = "load"
SWEPT = ("concurrency", "rate")  # the case settings a sweep varies: one item per value
SERVING_FILE = "serving.json"


PointResult = dict[str, Any]  # {"summary": the point's summary (metrics.summarize_point), "serving": serving.json,
# "server": the server's figures (server_metrics.json, llmload/server_metrics.py)}


def untrusted(result: PointResult) -> str | None:
    """Why the point's client-measured KPIs cannot be trusted (its validity audit, pytest_topsail/llmload/audit.py:
    a saturated load client, no steady state, the server's TTFT far from the client's), or None: judged."""
    server = None if result.get("sweep") else result.get("server")  # a sweep's server figures span its points
    return "; ".join(audit_point(result["summary"], server)) or None


def latency_kpi(metric: str, statistic: str) -> Callable[[PointResult], float | None]:
    def value(result: PointResult) -> float | None:
        stats = result["summary"]["stats"].get(f"{metric}_ms")
        return None if stats is None else stats[statistic]

    return value


def sample_size(metric: str) -> Callable[[PointResult], float | None]:
    """How many values a latency statistic of the point is taken from: requests, or token gaps for ITL."""
    def size(result: PointResult) -> float | None:
        summary = result["summary"]
        requests = float(summary.get("succeeded") or 0)
        if metric != "itl":
            return requests
        tokens = (summary["stats"].get("output_tokens") or {}).get("mean") or 0.0
        return requests * max(tokens - 1.0, 0.0)

    return size


# The smallest sample a statistic is judged from: 10 samples beyond a P99; the median of the end-to-end latency from
# 10 requests, because a request's e2e grows with its answer's length and the median of a few requests depends on
# which answers ended in the window (identical runs, concurrency 1 for 1 s: e2e_median_ms 323 -> 204 ms).
MIN_SAMPLES = {("p99", None): 1000, ("median", "e2e"): 10}


def min_samples(metric: str, statistic: str) -> int | None:
    return MIN_SAMPLES.get((statistic, None)) or MIN_SAMPLES.get((statistic, metric))


for _metric, _text in LATENCIES.items():
    for _statistic in STATISTICS:
        _function = latency_kpi(_metric, _statistic)
        _function.__name__ = f"{_metric}_{_statistic}_ms"
        _minimum = min_samples(_metric, _statistic)
        globals()[_function.__name__] = kpi(
            unit="ms", help=f"{_statistic} of the {_text}", lower_better=True, format="{:.2f}",
            ignored_for_regression=_statistic in (*IGNORED_STATISTICS, "min", "max"),
            why=EXTREME_WHY if _statistic in ("min", "max") else "TOPSAIL's choice: the median carries the verdict",
            samples=sample_size(_metric) if _minimum else None, min_samples=_minimum, untrusted=untrusted)(_function)


@kpi(unit="tokens/s", help="Output tokens received per second of the measurement window", higher_better=True,
     format="{:.1f}", untrusted=untrusted)
def throughput(result: PointResult) -> float:
    return result["summary"]["output_tokens_per_s"]


@kpi(unit="requests/s", help="Successful requests ended per second of the measurement window", higher_better=True,
     format="{:.2f}", samples=lambda result: result["summary"]["succeeded"], untrusted=untrusted)
def requests_per_s(result: PointResult) -> float:
    return result["summary"]["requests_per_s"]


@kpi(unit="requests/s", help="Requests meeting every SLO target (tests.llm_load.slo) ended per second of the "
     "measurement window (an automatic sweep: its best point)", higher_better=True, format="{:.2f}",
     untrusted=untrusted)
def goodput(result: PointResult) -> float | None:
    """An automatic sweep's: the best of its points (the highest load still served within the SLOs)."""
    slos = [s["slo"] for s in result.get("sweep") or [result["summary"]] if s.get("slo")]
    return max(slo["goodput"] for slo in slos) if slos else None


@kpi(unit="%", help="Share of the measured requests meeting every SLO target (tests.llm_load.slo)",
     higher_better=True, format="{:.1f}", untrusted=untrusted)
def slo_attainment(result: PointResult) -> float | None:
    slo = result["summary"].get("slo")
    return None if slo is None else 100.0 * slo["attainment"]


@kpi(unit="requests", help="Measured requests that failed (any status but ok)", lower_better=True, format="{:.0f}")
def failures(result: PointResult) -> float:
    return float(sum(result["summary"]["failures"].values()))


@kpi(unit="s", help="Seconds from creating the served model until it served (the cluster's time)", lower_better=True,
     format="{:.2f}", scope="worker")
def model_load_duration(result: PointResult) -> float | None:
    return result["serving"].get("load_duration_s")


SERVER_WHY = ("the server's own view of the point (its /metrics): what explains the latencies, which are the judged "
              "KPIs")


def server_figure(name: str, scale: float = 1.0) -> Callable[[PointResult], float | None]:
    def value(result: PointResult) -> float | None:
        figure = (result.get("server") or {}).get(name)
        return None if figure is None else figure * scale

    return value


for _name, _figure, _unit, _help, _scale in (
        ("server_kv_cache_usage_max", "kv_cache_usage_max", "ratio", "Highest KV-cache usage the server reported "
         "during the point (vllm:kv_cache_usage_perc, 0..1)", 1.0),
        ("server_preemptions", "preemptions", "requests", "Requests the server preempted during the point "
         "(vllm:num_preemptions)", 1.0),
        ("server_prefix_cache_hit_rate", "prefix_cache_hit_rate", "%", "Prompt tokens found in the server's prefix "
         "cache during the point (vllm:prefix_cache_hits / queries)", 100.0),
        ("server_waiting_p95", "waiting_p95", "requests", "Requests waiting in the server's queue, 95th percentile "
         "of the point's scrapes (vllm:num_requests_waiting)", 1.0),
        ("server_lora_loads", "lora_loads", "loads", "LoRA adapters loaded into a slot during the point (the "
         "simulator's topsail_sim:lora_loads)", 1.0),
        ("server_ttft_mean_ms", "ttft_mean_ms", "ms", "Mean time to first token as the server measured it, from the "
         "request's arrival (vllm:time_to_first_token_seconds sum / count over the point)", 1.0),
        ("server_ttft_median_ms", "ttft_p50_ms", "ms", "Median time to first token as the server measured it "
         "(vllm:time_to_first_token_seconds buckets over the point, interpolated as histogram_quantile)", 1.0),
        ("server_ttft_p99_ms", "ttft_p99_ms", "ms", "99th percentile of the time to first token as the server "
         "measured it (vllm:time_to_first_token_seconds buckets, interpolated)", 1.0),
        ("server_queue_time_mean_ms", "queue_time_mean_ms", "ms", "Mean time requests waited in the server's queue "
         "(vllm:request_queue_time_seconds sum / count over the point)", 1.0),
        ("server_queue_time_p99_ms", "queue_time_p99_ms", "ms", "99th percentile of the time requests waited in the "
         "server's queue (vllm:request_queue_time_seconds buckets, interpolated)", 1.0)):
    _function = server_figure(_figure, _scale)
    _function.__name__ = _name
    globals()[_name] = kpi(unit=_unit, help=_help, lower_better=_name != "server_prefix_cache_hit_rate",
                           higher_better=_name == "server_prefix_cache_hit_rate", ignored_for_regression=True,
                           why=SERVER_WHY, format="{:.3g}")(_function)


MAX_TURN_KPIS = 8  # conversations: KPIs of their first turns, one set per turn index
TURN_WHY = "the per-turn view of the point's latencies (ttft_median_ms carries the verdict)"


def turn_figure(turn: int, name: str, statistic: str | None) -> Callable[[PointResult], float | None]:
    def value(result: PointResult) -> float | None:
        found = next((t for t in result["summary"].get("turns") or [] if t["turn"] == turn), None)
        if found is None or found[name] is None:
            return None
        return found[name][statistic] if statistic else found[name]

    return value


TURN_KPIS: list[tuple[str, str, str | None, str, str]] = [  # name, the turn's figure, its statistic, unit, help
    ("ttft_median_ms", "ttft_ms", "median", "ms", "median of the time to first token"),
    ("e2e_median_ms", "e2e_ms", "median", "ms", "median of the end-to-end request latency"),
    ("input_tokens", "input_tokens_mean", None, "tokens", "mean input tokens (the conversation so far)"),
    ("cached_share", "cached_share", None, "ratio", "share of the prompt tokens the server's prefix cache held "
     "(usage.prompt_tokens_details.cached_tokens)")]
for _turn in range(1, MAX_TURN_KPIS + 1):
    for _name, _figure, _which, _unit, _help in TURN_KPIS:
        _function = turn_figure(_turn, _figure, _which)
        _function.__name__ = f"turn{_turn}_{_name}"
        globals()[_function.__name__] = kpi(
            unit=_unit, help=f"Conversations: {_help} of their turn {_turn}", lower_better=_name != "cached_share",
            higher_better=_name == "cached_share", format="{:.0f}" if _unit == "tokens" else "{:.2f}",
            ignored_for_regression=True, why=TURN_WHY)(_function)


def parse(artifact_dir: Path) -> PointResult:
    """--topsail-replot: the point's summary again from its saved records."""
    summaries = analyse_directory(Path(artifact_dir) / LOAD_DIR)
    serving_path = Path(artifact_dir) / SERVING_FILE
    serving = json.loads(serving_path.read_text(encoding="utf-8")) if serving_path.is_file() else {}
    server_path = Path(artifact_dir) / SERVER_METRICS
    server = json.loads(server_path.read_text(encoding="utf-8")) if server_path.is_file() else {}
    sweep = summaries if len(summaries) > 1 else []  # an automatic sweep's points (mode sweep)
    return {"summary": summaries[min(1, len(summaries) - 1)], "sweep": sweep, "serving": serving, "server": server}


def samples(artifact_dir: Path) -> dict[str, list[float]]:
    """The raw samples (ms) of the latency KPIs of the item's point (an automatic sweep: its max-throughput point, as
    its KPIs): ``ttft``, ``tpot``, ``e2e``, ``tt_ack`` one per request, ``itl`` one per token gap."""
    load_dir = Path(artifact_dir) / LOAD_DIR
    if not (load_dir / "points.json").is_file():
        return {}
    points, by_point = merge_directories([load_dir])
    point = points[min(1, len(points) - 1)]
    seconds = latency_samples(measured_successes(by_point.get(point["index"], [])))
    return {name: [value * 1000.0 for value in values] for name, values in seconds.items()}


def figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of each sweep (the items of one case whose settings differ only in concurrency or rate), drawn
    from the items' saved records in the order of the swept value: throughput and latency quantiles against load,
    TTFT and ITL distributions per point, achieved vs offered rate. Also on --topsail-replot, and under xdist."""
    sweeps: dict[str, list[Path]] = defaultdict(list)
    titles: dict[str, str] = {}
    for record in records:
        case = record.get("case") or {}
        load_dir = Path(record.get("artifact_dir") or "-") / LOAD_DIR
        if not (load_dir / "points.json").is_file():
            continue
        settings = {k: v for k, v in (case.get("settings") or {}).items() if k not in SWEPT}
        key = json.dumps([case.get("name"), settings], sort_keys=True, default=str)
        sweeps[key].append(load_dir)
        titles[key] = re.sub(rf"-({'|'.join(SWEPT)})=[^-]+", "", str(case.get("id") or case.get("name")))
    built: dict[str, Any] = {}
    for key, directories in sweeps.items():
        points, by_point = merge_directories(sorted(directories, key=swept_value))
        summaries = [summarize_point(point, by_point.get(point["index"], [])) for point in points]
        for name, figure in sweep_figures(points, by_point, summaries).items():
            built[f"{titles[key]}: {name}"] = figure
    return built


def swept_value(load_dir: Path) -> float:
    point = json.loads((load_dir / "points.json").read_text(encoding="utf-8"))[0]["point"]
    return float(point.get("concurrency") or point.get("rate") or 0)
