"""The simulated vLLM's /metrics on the OpenAI-compatible front: vLLM's names, types and labels, parsed with
prometheus_client's own parser, and what they count under load (KV-cache pressure, prefix caching, LoRA slots,
aborted streams)."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from pytest_topsail.tgis.latency import LatencyModel
from pytest_topsail.tgis.model_config import ModelConfig
from pytest_topsail.tgis.serving import ModelServer

MODEL = "bigscience/bloom-560m"
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi".split()


def scrape(url: str) -> dict[str, Any]:
    """name -> family, from /metrics as prometheus_client parses it."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(families: dict[str, Any], name: str, sample: str | None = None, **labels: str) -> float:
    family = families[name]
    return sum(s.value for s in family.samples if s.name == (sample or name)
               and all(s.labels.get(k) == v for k, v in labels.items()))


def words(count: int, offset: int = 0) -> str:
    return " ".join(WORDS[(offset + i) % len(WORDS)] for i in range(count))


async def send_all(url: str, bodies: list[dict[str, Any]]) -> list[int]:
    """Send every body at once (streamed); the tokens each stream carried."""
    async with aiohttp.ClientSession() as session:
        async def one(body: dict[str, Any]) -> int:
            async with session.post(url + "/v1/completions", json={**body, "stream": True}) as response:
                assert response.status == 200, await response.text()
                return len([line async for line in response.content if line.startswith(b"data: {")])

        return await asyncio.gather(*(one(body) for body in bodies))


def test_metrics_carry_vllms_names_types_and_labels(serve_front: Any) -> None:
    url = serve_front(ModelServer(MODEL, zero_latency=True))
    asyncio.run(send_all(url, [{"model": MODEL, "prompt": words(12), "max_tokens": 8, "ignore_eos": True}] * 3))
    families = scrape(url)
    kinds = {"vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
             "vllm:kv_cache_usage_perc": "gauge", "vllm:num_preemptions": "counter",
             "vllm:prompt_tokens": "counter", "vllm:generation_tokens": "counter",
             "vllm:request_success": "counter", "vllm:prefix_cache_queries": "counter",
             "vllm:prefix_cache_hits": "counter", "vllm:time_to_first_token_seconds": "histogram",
             "vllm:inter_token_latency_seconds": "histogram", "vllm:e2e_request_latency_seconds": "histogram",
             "vllm:request_queue_time_seconds": "histogram", "vllm:cache_config_info": "gauge"}
    assert {name: families[name].type for name in kinds} == kinds
    running = families["vllm:num_requests_running"].samples[0]
    assert running.labels == {"model_name": MODEL, "engine": "0"} and running.value == 0
    assert value(families, "vllm:prompt_tokens", "vllm:prompt_tokens_total") == 36
    assert value(families, "vllm:generation_tokens", "vllm:generation_tokens_total") == 24
    assert value(families, "vllm:request_success", "vllm:request_success_total", finished_reason="length") == 3
    assert value(families, "vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_count") == 3
    assert value(families, "vllm:inter_token_latency_seconds", "vllm:inter_token_latency_seconds_count") == 21
    info = families["vllm:cache_config_info"].samples[0].labels
    assert info["block_size"] == "16" and int(info["num_gpu_blocks"]) > 10_000


def test_a_cache_too_small_for_the_batch_preempts_and_queues(serve_front: Any) -> None:
    config = ModelConfig(max_sequence_length=128, num_gpu_blocks_override=12, max_batch_size=8)
    server = ModelServer(MODEL, config)
    server.latency = LatencyModel(prefill_base_ms=2, itl_base_ms=2, max_batch_size=8)
    url = serve_front(server)
    seen_waiting = []

    async def load() -> list[int]:
        sending = asyncio.ensure_future(send_all(url, [
            {"model": MODEL, "prompt": words(40, i), "max_tokens": 40, "ignore_eos": True} for i in range(4)]))
        while not sending.done():
            families = await asyncio.to_thread(scrape, url)
            seen_waiting.append(value(families, "vllm:num_requests_waiting"))
            assert 0 <= value(families, "vllm:kv_cache_usage_perc") <= 1
            await asyncio.sleep(0.01)
        return await sending

    assert asyncio.run(load()) == [40] * 4  # every answer whole, despite the preemptions
    families = scrape(url)
    assert value(families, "vllm:num_preemptions", "vllm:num_preemptions_total") > 0
    assert max(seen_waiting) > 0
    assert value(families, "vllm:kv_cache_usage_perc") == 0.0


def test_shared_prefixes_hit_the_prefix_cache(serve_front: Any) -> None:
    server = ModelServer(MODEL, ModelConfig(enable_prefix_caching=True), zero_latency=True)
    url = serve_front(server)
    shared = words(64)  # 4 blocks of 16
    for suffix in range(4):
        asyncio.run(send_all(url, [{"model": MODEL, "prompt": f"{shared} {words(16, suffix + 3)}",
                                    "max_tokens": 2}]))
    families = scrape(url)
    queries = value(families, "vllm:prefix_cache_queries", "vllm:prefix_cache_queries_total")
    hits = value(families, "vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total")
    assert queries == 4 * 80 and hits == 3 * 64  # the first request fills the cache, the three others reuse it


def test_lora_adapters_are_models_with_slots(serve_front: Any) -> None:
    config = ModelConfig(lora_adapters="a1,a2,a3,a4", max_loras=2)
    url = serve_front(ModelServer(MODEL, config, zero_latency=True))
    with urllib.request.urlopen(url + "/v1/models", timeout=10) as response:
        cards = json.loads(response.read())["data"]
    assert [(c["id"], c["parent"]) for c in cards] == [(MODEL, None)] + [(f"a{i}", MODEL) for i in range(1, 5)]
    for adapter in ("a1", "a2", "a3", "a1", "a4", "a4"):
        asyncio.run(send_all(url, [{"model": adapter, "prompt": "hi", "max_tokens": 2}]))
    families = scrape(url)
    assert value(families, "topsail_sim:lora_loads", "topsail_sim:lora_loads_total") == 5  # a1 evicted by a3
    assert value(families, "topsail_sim:lora_requests", "topsail_sim:lora_requests_total", lora_name="a4") == 2
    assert families["vllm:lora_requests_info"].samples[0].labels["max_lora"] == "2"


def test_a_client_going_away_mid_stream_is_an_aborted_request(serve_front: Any) -> None:
    server = ModelServer(MODEL)
    server.latency = LatencyModel(itl_base_ms=20, max_batch_size=8)
    url = serve_front(server)

    async def leave_early() -> None:
        async with aiohttp.ClientSession() as session, session.post(url + "/v1/completions", json={
                "model": MODEL, "prompt": "hi", "max_tokens": 200, "ignore_eos": True, "stream": True}) as response:
            await response.content.readline()

    asyncio.run(leave_early())
    for _ in range(100):
        families = scrape(url)
        if value(families, "vllm:request_success", "vllm:request_success_total", finished_reason="abort"):
            break
        asyncio.run(asyncio.sleep(0.02))
    assert value(families, "vllm:request_success", "vllm:request_success_total", finished_reason="abort") == 1
    assert value(families, "vllm:num_requests_running") == 0
