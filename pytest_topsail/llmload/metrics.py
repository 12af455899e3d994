"""Metrics of a load test, computed from the saved request records only (so a replot recomputes all of them).

Definitions (docs/llm-load.md has the formulas and how they relate to llm-load-test, vLLM's benchmark and guidellm):
per request, over the successful, measured (not warm-up) requests of a point:
- ``ttft``: first_token - start (streaming only)
- ``tpot``: (end - first_token) / (output_tokens - 1), requests with >= 2 output tokens (streaming only)
- ``itl``: every gap between consecutive token-carrying chunks, divided by the tokens of the later chunk, pooled
  over all requests (streaming only)
- ``e2e``: end - start; ``input_tokens``, ``output_tokens`` as the server reported them
- ``tt_ack``: ack - start, the first response message even without a token (HTTP headers, a gRPC stream's first
  message, a unary answer): how long the server took to take the request, apart from its prefill and queue
per point, over the measurement window W = [measure_start, measure_end] (ramp-up, cool-down and drain excluded;
``measure_end`` defaults to ``stop`` in files written before it existed; measured: neither warm-up nor cool-down):
- ``output_tokens_per_s``: tokens of successful requests that arrived inside W / |W|
- ``requests_per_s``: successful requests that ended inside W / |W|
- ``achieved_rate``: measured requests started inside W / |W|; ``offered_rate``: the open loop's rate
- ``turns`` (conversations): per turn index, its requests, mean input tokens, cached share, TTFT and e2e statistics
- ``window_halves``: successful requests that ended in W's first half, and in its second (steady state: audit.py)
- ``failures``: measured requests by status; ``failure_rate``: failed / measured
with service-level objectives (the point's ``slo``: ``ttft_ms``, ``itl_ms``, ``e2e_ms`` targets), a measured request
is good when it succeeded and meets every target given (its TTFT, its TPOT as its inter-token latency, its e2e; a
TTFT or ITL target is unmet by an unstreamed request, which has none):
- ``slo.attainment``: good / measured; ``slo.attainment_by_target``: the same per target
- ``slo.goodput``: good requests that ended inside W / |W| (requests/s; counted as ``requests_per_s``)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from pytest_topsail.llmload.records import OK

STATISTICS = ("min", "max", "median", "mean", "p80", "p90", "p95", "p99")
LATENCIES = ("ttft", "tpot", "itl", "e2e", "tt_ack")  # seconds in the records, milliseconds in the summaries
COUNTS = ("input_tokens", "output_tokens")


def statistics(values: Sequence[float]) -> dict[str, float] | None:
    """min/max/median/mean/p80/p90/p95/p99 (linear interpolation between order statistics); None when empty."""
    if not values:
        return None
    array = np.asarray(values, dtype=float)
    p50, p80, p90, p95, p99 = np.percentile(array, [50, 80, 90, 95, 99])
    return {"min": float(array.min()), "max": float(array.max()), "median": float(p50), "mean": float(array.mean()),
            "p80": float(p80), "p90": float(p90), "p95": float(p95), "p99": float(p99)}


def request_latencies(record: dict[str, Any]) -> dict[str, Any]:
    """ttft, tpot, e2e, tt_ack (s) and the itl gaps (list, s) of one record; None where undefined."""
    first = record.get("first_token")
    e2e = record["end"] - record["start"]
    ack = record.get("ack")
    tt_ack = None if ack is None else ack - record["start"]
    if first is None:
        return {"ttft": None, "tpot": None, "e2e": e2e, "itl": [], "tt_ack": tt_ack}
    tokens = record.get("output_tokens") or 0
    tpot = (record["end"] - first) / (tokens - 1) if tokens >= 2 else None
    gaps = []
    chunks = record.get("chunks") or []
    for (before, _), (after, count) in zip(chunks, chunks[1:], strict=False):
        gaps.extend([(after - before) / count] * int(count) if count > 1 else [after - before])
    return {"ttft": first - record["start"], "tpot": tpot, "e2e": e2e, "itl": gaps, "tt_ack": tt_ack}


def latency_samples(succeeded: Iterable[dict[str, Any]]) -> dict[str, list[float]]:
    """The samples (s) of each latency's statistics over the measured requests that succeeded: one ttft, tpot, e2e
    and tt_ack per request (where defined), one itl per token gap."""
    latencies: dict[str, list[float]] = {name: [] for name in LATENCIES}
    for record in succeeded:
        values = request_latencies(record)
        latencies["itl"].extend(values["itl"])
        for name in ("ttft", "tpot", "e2e", "tt_ack"):
            if values[name] is not None:
                latencies[name].append(values[name])
    return latencies


def measured_successes(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The requests a point's statistics are taken from: measured (no warm-up, no cool-down) and ok."""
    return [r for r in records if is_measured(r) and r["status"] == OK]


def tokens_inside(record: dict[str, Any], low: float, high: float) -> int:
    """Output tokens of the record that arrived inside [low, high] (unstreamed tokens arrive at the end)."""
    chunks = record.get("chunks") or []
    inside = sum(int(count) for at, count in chunks if low <= at <= high)
    rest = max(0, (record.get("output_tokens") or 0) - sum(int(count) for _, count in chunks))
    if rest and low <= record["end"] <= high:
        inside += rest
    return inside


def summarize_point(point: dict[str, Any], records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The summary of one load point: its settings, window, throughputs, rates, failures and statistics."""
    records = list(records)
    low, high = point["measure_start"], point.get("measure_end", point["stop"])
    window = max(high - low, 1e-9)
    measured = [r for r in records if is_measured(r)]
    succeeded = [r for r in measured if r["status"] == OK]
    stats: dict[str, dict[str, float] | None] = {
        f"{name}_ms": scale(statistics(values), 1000.0) for name, values in latency_samples(succeeded).items()}
    for name in COUNTS:
        stats[name] = statistics([float(r.get(name) or 0) for r in succeeded])
    ok_all = [r for r in records if r["status"] == OK]
    failures = Counter(r["status"] for r in measured if r["status"] != OK)
    settings = point.get("point", {})
    return {
        "index": point["index"],
        "label": point.get("label", ""),
        "mode": settings.get("mode"),
        "concurrency": settings.get("concurrency"),
        "offered_rate": settings.get("rate") if settings.get("mode") != "concurrency" else None,
        "window_s": window,
        "requests": len(measured),
        "succeeded": len(succeeded),
        "warmup_requests": sum(1 for r in records if r.get("warmup")),
        "cooldown_requests": sum(1 for r in records if r.get("cooldown") and not r.get("warmup")),
        "failures": dict(sorted(failures.items())),
        "failure_rate": (len(measured) - len(succeeded)) / len(measured) if measured else 0.0,
        "achieved_rate": sum(1 for r in measured if low <= r["start"] <= high) / window,
        "requests_per_s": sum(1 for r in ok_all if low <= r["end"] <= high) / window,
        "window_halves": [sum(1 for r in ok_all if low <= r["end"] < (low + high) / 2),
                          sum(1 for r in ok_all if (low + high) / 2 <= r["end"] <= high)],
        "output_tokens_per_s": sum(tokens_inside(r, low, high) for r in ok_all) / window,
        "send_lag_ms": scale(statistics([r["start"] - r["scheduled"] for r in measured
                                         if r.get("scheduled") is not None]), 1000.0),
        "stats": stats,
        "stopped_by": point.get("stopped_by"),  # the stop rule that ended the point early, if one did
        "slo": slo_summary(point.get("slo") or {}, records, low, high, window),
        "client": client_summary(point.get("client") or {}, settings),
        "turns": turn_summaries(succeeded),
    }


def turn_summaries(succeeded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Conversations: per turn index (1: the first), its successful measured requests, their mean input tokens (the
    history grows them), the share of their prompt tokens the server's prefix cache held (``cached_share``, when the
    server reports ``cached_tokens``) and their TTFT and e2e statistics (ms); empty without conversations."""
    by_turn: dict[int, list[dict[str, Any]]] = {}
    for record in succeeded:
        if record.get("turn") is not None:
            by_turn.setdefault(record["turn"], []).append(record)
    turns = []
    for turn, records in sorted(by_turn.items()):
        latencies = latency_samples(records)
        told = [r for r in records if r.get("cached_tokens") is not None]
        prompt_tokens = sum(r.get("input_tokens") or 0 for r in told)
        turns.append({"turn": turn, "requests": len(records),
                      "input_tokens_mean": float(np.mean([r.get("input_tokens") or 0 for r in records])),
                      "cached_share": sum(r["cached_tokens"] for r in told) / prompt_tokens if prompt_tokens else None,
                      "ttft_ms": scale(statistics(latencies["ttft"]), 1000.0),
                      "e2e_ms": scale(statistics(latencies["e2e"]), 1000.0)})
    return turns


def client_summary(client: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """The client's own load during the point, with a ``warning`` when it was over the point's limits
    (``client_max_cpu_share``, ``client_max_loop_lag_ms``): then the client may be what limits the figures."""
    if not client:
        return {"warning": None}
    over = []
    cpu_limit = settings.get("client_max_cpu_share", 0.9)
    lag_limit = settings.get("client_max_loop_lag_ms", 50.0)
    if client["cpu_share"] > cpu_limit:
        over.append(f"its CPU was {client['cpu_share']:.0%} of a core > client_max_cpu_share {cpu_limit:.0%}")
    if client["loop_lag_p99_ms"] > lag_limit:
        over.append(f"its event loop woke up {client['loop_lag_p99_ms']:.0f} ms late (p99) > client_max_loop_lag_ms "
                    f"{lag_limit:g}")
    warning = ("load client saturated: " + " and ".join(over) + "; the client, not the server, may limit these "
               "figures (fewer users per process: tests.llm_load.generators)") if over else None
    return {**client, "warning": warning}


SLO_METRICS = {"ttft_ms": "ttft", "itl_ms": "tpot", "e2e_ms": "e2e"}  # target -> the request's latency judged


def slo_summary(targets: dict[str, float | None], records: list[dict[str, Any]], low: float, high: float,
                window: float) -> dict[str, Any] | None:
    """Attainment (of the measured requests) and goodput (of the requests ending inside the window, as
    requests_per_s counts them) against the point's SLO targets; None when it has none."""
    targets = {name: value for name, value in targets.items() if value is not None}
    if not targets:
        return None
    met: dict[str, list[bool]] = {name: [] for name in targets}
    good, goodput = 0, 0
    for record in records:
        latencies = request_latencies(record) if record["status"] == OK else {}
        verdicts = {}
        for name, target in targets.items():
            value = latencies.get(SLO_METRICS[name])
            verdicts[name] = value is not None and value * 1000.0 <= target
        meets = all(verdicts.values())
        goodput += meets and low <= record["end"] <= high
        if is_measured(record):
            good += meets
            for name, verdict in verdicts.items():
                met[name].append(verdict)
    measured = sum(1 for r in records if is_measured(r))
    count = max(measured, 1)
    return {"targets": targets, "good_requests": good, "attainment": good / count if measured else 0.0,
            "attainment_by_target": {name: sum(values) / count for name, values in met.items()},
            "goodput": goodput / window}


def is_measured(record: dict[str, Any]) -> bool:
    """Neither ramp-up (warm-up) nor cool-down."""
    return not (record.get("warmup") or record.get("cooldown"))


def scale(values: dict[str, float] | None, factor: float) -> dict[str, float] | None:
    return None if values is None else {key: value * factor for key, value in values.items()}


def sweep_table(summaries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per point: settings, throughputs, rates, failures and every statistic (``ttft_ms_p99``...)."""
    rows = []
    for summary in summaries:
        row = {key: summary[key] for key in ("index", "label", "mode", "concurrency", "offered_rate", "requests",
                                            "succeeded", "failure_rate", "achieved_rate", "requests_per_s",
                                            "output_tokens_per_s")}
        row["goodput"] = (summary.get("slo") or {}).get("goodput")
        for name, values in summary["stats"].items():
            for statistic in STATISTICS:
                row[f"{name}_{statistic}"] = None if values is None else values[statistic]
        rows.append(row)
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A fixed-width text table of the main figures of a sweep (the item's ``summary.txt``)."""
    columns = [("point", "label", "{}"), ("req", "requests", "{}"), ("fail", "failure_rate", "{:.1%}"),
               ("rate/s", "achieved_rate", "{:.2f}"), ("done/s", "requests_per_s", "{:.2f}"),
               ("good/s", "goodput", "{:.2f}"), ("tok/s", "output_tokens_per_s", "{:.1f}"),
               ("ttft p50", "ttft_ms_median", "{:.1f}"), ("ttft p99", "ttft_ms_p99", "{:.1f}"),
               ("itl p50", "itl_ms_median", "{:.2f}"), ("itl p99", "itl_ms_p99", "{:.2f}"),
               ("tpot p50", "tpot_ms_median", "{:.2f}"), ("e2e p50", "e2e_ms_median", "{:.1f}"),
               ("e2e p99", "e2e_ms_p99", "{:.1f}")]
    cells = [[title for title, _, _ in columns]]
    for row in rows:
        cells.append([cell(row.get(key), fmt) for _, key, fmt in columns])
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("  ".join(text.rjust(width) for text, width in zip(line, widths, strict=True))
                     for line in cells) + "\n"


def cell(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)
