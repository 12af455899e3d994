"""The server's own TTFT and queue time per point (llmload/server_metrics.py: vLLM's histograms on /metrics, the
point's difference of their counters) beside the client's, and the audit's check that the two agree
(llmload/audit.py): against the reference server they do; against a server whose clock runs 4x the client's (a
simulated time scale of 0.25) the point is flagged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_topsail.llmload import audit_point
from pytest_topsail.llmload.audit import ttft_agreement
from pytest_topsail.llmload.backends.openai_http import OpenAIBackend
from pytest_topsail.llmload.dataset import synthetic
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.run import run_load_test
from pytest_topsail.llmload.server_metrics import ServerSampler, histogram_quantile, point_server_metrics
from pytest_topsail.tgis.serving import ModelServer
from pytest_topsail.tgis.vllm_metrics import TTFT_BUCKETS

MODEL = "bigscience/bloom-560m"
PROMPTS = synthetic(16, (200, 400), (4, 8), seed=3)


def test_histogram_quantile_interpolates_inside_the_bucket_as_prometheus_does() -> None:
    buckets = [(0.01, 0.0), (0.02, 10.0), (0.04, 20.0), (float("inf"), 20.0)]
    assert histogram_quantile(0.5, buckets) == 0.02
    assert abs(histogram_quantile(0.99, buckets) - 0.0396) < 1e-12  # type: ignore[operator]
    assert histogram_quantile(0.5, [(0.01, 0.0), (float("inf"), 4.0)]) == 0.01  # the +Inf bucket: its lower bound
    assert histogram_quantile(0.5, [(0.01, 0.0), (float("inf"), 0.0)]) is None


def test_point_quantiles_come_from_the_points_own_bucket_counts() -> None:
    first = {"vllm:time_to_first_token_seconds_bucket|le=0.01": 5.0,
             "vllm:time_to_first_token_seconds_bucket|le=0.02": 5.0,
             "vllm:time_to_first_token_seconds_bucket|le=+Inf": 5.0}
    last = {"vllm:time_to_first_token_seconds_bucket|le=0.01": 5.0,  # the earlier point's 5 fast requests
            "vllm:time_to_first_token_seconds_bucket|le=0.02": 15.0,
            "vllm:time_to_first_token_seconds_bucket|le=+Inf": 15.0}
    figures = point_server_metrics(first, [], last)
    assert figures["ttft_p50_ms"] == 15.0 and abs(figures["ttft_p99_ms"] - 19.9) < 1e-9


def run_point(url: str, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    with ServerSampler(url, 0.05) as sampler:
        [summary] = run_load_test(OpenAIBackend(url, MODEL), PROMPTS, [LoadPoint(concurrency=4, requests=48)],
                                  tmp_path)
    return summary, sampler.figures()


def test_the_servers_ttft_agrees_with_the_clients(serve_front: Any, tmp_path: Path) -> None:
    summary, server = run_point(serve_front(ModelServer(MODEL)), tmp_path)
    client = summary["stats"]["ttft_ms"]
    assert summary["succeeded"] == 48 and server["ttft_mean_ms"] is not None
    assert server["ttft_mean_ms"] <= client["mean"]  # the server's clock starts when the request arrives
    # (the whole audit may also find the client saturated on a loaded machine: server and client share a process)
    assert ttft_agreement(summary, server) is None, (client, server)
    # the quantiles are the buckets' (vLLM's bounds): the median lies in the bucket of the client's median or below
    upper = next(bound for bound in TTFT_BUCKETS if bound * 1000 >= client["median"])
    assert 0 < server["ttft_p50_ms"] <= upper * 1000 and server["ttft_p50_ms"] <= server["ttft_p99_ms"]
    assert server["queue_time_mean_ms"] is not None and server["queue_time_mean_ms"] >= 0


def test_a_server_on_another_clock_is_flagged(serve_front: Any, tmp_path: Path) -> None:
    summary, server = run_point(serve_front(ModelServer(MODEL, time_scale=0.25)), tmp_path)
    reasons = audit_point(summary, server)
    assert any(reason.startswith("server and client disagree on TTFT: mean ") for reason in reasons), reasons
    assert server["ttft_mean_ms"] > 2 * summary["stats"]["ttft_ms"]["mean"]
