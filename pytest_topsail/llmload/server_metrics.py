"""The serving pod's own view of a load point: its ``/metrics`` (vLLM's names, tgis/vllm_metrics.py on the simulator)
scraped at the point's start, every ``interval_s`` during it (a thread beside the load) and at its end, through the
address the load client reaches the server by; ``point_server_metrics`` turns them into the point's figures:
KV-cache usage max and mean, running and waiting requests (max, p95), preemptions, prefix-cache hit rate (hits over
queries, tokens), prompt and generation tokens, server-side TTFT and queue time (mean, from the histograms' sums, and
p50 / p99, from their buckets as Prometheus's histogram_quantile interpolates them), and, on the simulator, LoRA
adapter loads and requests per adapter. Counters are differences between the end and the start: a server serving
several points in turn reports each point's own.
"""

from __future__ import annotations

import statistics
import threading
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from pytest_topsail.errors import TopsailError

SERVER_METRICS = "server_metrics.json"  # an item's figures, beside its load/ directory
Snapshot = dict[str, float]  # sample name (summed over its label sets) -> value; "name|lora_name" per adapter


def scrape(url: str, timeout_s: float = 5.0) -> Snapshot:
    """One scrape of ``{url}/metrics``; a TopsailError naming the URL when it cannot be read or parsed."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=timeout_s) as response:
            text = response.read().decode("utf-8")
        snapshot: Snapshot = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                key = sample.name + (f"|{sample.labels['lora_name']}" if "lora_name" in sample.labels else
                                     f"|le={sample.labels['le']}" if "le" in sample.labels else "")
                snapshot[key] = snapshot.get(key, 0.0) + sample.value
        return snapshot
    except (OSError, ValueError) as error:
        raise TopsailError(f"server metrics: cannot read {url}/metrics: {error}") from None


class ServerSampler:
    """``with ServerSampler(url, 0.1) as sampler: <run the point>``; then ``sampler.figures()``."""

    def __init__(self, url: str, interval_s: float) -> None:
        self.url, self.interval_s = url, interval_s
        self.first: Snapshot = {}
        self.last: Snapshot = {}
        self.samples: list[Snapshot] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="server-metrics", daemon=True)

    def __enter__(self) -> ServerSampler:
        self.first = scrape(self.url)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.last = scrape(self.url)
        self.samples.append(self.last)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.samples.append(scrape(self.url, timeout_s=max(self.interval_s * 10, 1.0)))
            except TopsailError:
                continue  # a missed sample; the end's scrape says whether the server is gone

    def figures(self) -> dict[str, Any]:
        return point_server_metrics(self.first, self.samples, self.last)


def delta(first: Snapshot, last: Snapshot, name: str) -> float:
    return last.get(name, 0.0) - first.get(name, 0.0)


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def point_server_metrics(first: Snapshot, samples: list[Snapshot], last: Snapshot) -> dict[str, Any]:
    """The point's server figures (None where the server does not expose the metric)."""
    def gauge(name: str) -> list[float]:
        return [sample[name] for sample in samples if name in sample]

    usage, running, waiting = (gauge(f"vllm:{name}") for name in
                               ("kv_cache_usage_perc", "num_requests_running", "num_requests_waiting"))
    queries = delta(first, last, "vllm:prefix_cache_queries_total")
    hits = delta(first, last, "vllm:prefix_cache_hits_total")

    def mean_ms(histogram: str) -> float | None:
        count = delta(first, last, f"vllm:{histogram}_count")
        return delta(first, last, f"vllm:{histogram}_sum") / count * 1000.0 if count else None

    def quantile_ms(histogram: str, q: float) -> float | None:
        value = histogram_quantile(q, buckets_delta(first, last, f"vllm:{histogram}_bucket"))
        return None if value is None else value * 1000.0

    adapters = sorted({key.split("|", 1)[1] for key in last if key.startswith("topsail_sim:lora_requests_total|")})
    return {
        "samples": len(samples),
        "kv_cache_usage_max": max(usage) if usage else None,
        "kv_cache_usage_mean": statistics.fmean(usage) if usage else None,
        "running_max": max(running) if running else None,
        "waiting_max": max(waiting) if waiting else None,
        "waiting_p95": p95(waiting) if waiting else None,
        "preemptions": delta(first, last, "vllm:num_preemptions_total") if last else None,
        "prefix_cache_queries": queries,
        "prefix_cache_hit_rate": hits / queries if queries else None,
        "prompt_tokens": delta(first, last, "vllm:prompt_tokens_total"),
        "generation_tokens": delta(first, last, "vllm:generation_tokens_total"),
        "ttft_mean_ms": mean_ms("time_to_first_token_seconds"),
        "ttft_p50_ms": quantile_ms("time_to_first_token_seconds", 0.5),
        "ttft_p99_ms": quantile_ms("time_to_first_token_seconds", 0.99),
        "queue_time_mean_ms": mean_ms("request_queue_time_seconds"),
        "queue_time_p50_ms": quantile_ms("request_queue_time_seconds", 0.5),
        "queue_time_p99_ms": quantile_ms("request_queue_time_seconds", 0.99),
        "lora_loads": delta(first, last, "topsail_sim:lora_loads_total") if adapters else None,
        "lora_requests": {name: delta(first, last, f"topsail_sim:lora_requests_total|{name}") for name in adapters},
    }


def buckets_delta(first: Snapshot, last: Snapshot, bucket: str) -> list[tuple[float, float]]:
    """A histogram's (upper bound, cumulative count) over the point: the end's buckets minus the start's."""
    keys = [key for key in last if key.startswith(f"{bucket}|le=")]
    return sorted((float(key.split("|le=", 1)[1]), delta(first, last, key)) for key in keys)


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus's histogram_quantile: the bucket holding rank q x count, linearly interpolated between its
    bounds (the first bucket's lower bound 0); in the +Inf bucket, the highest finite bound. None without counts."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * ((rank - below) / (count - below) if count > below else 1.0)
        lower, below = bound, count
    return lower
