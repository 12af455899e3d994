"""The reference server's latency model: pure logic (no I/O, no clock), coefficients as data (latency.yaml).

- time to first token: prefill, growing with the input tokens;
- inter-token latency: grows with the number of requests decoding together (continuous batching);
- admission: at most max_batch_size requests decode at once, the rest wait in a FIFO queue; more than
  max_concurrent_requests in the server are refused ("Model is overloaded"). So a concurrency sweep shows a knee at
  max_batch_size: beyond it, latency grows with the queue while throughput stays flat.
Coefficients are per GPU profile for a 1B model in tgis_native float16 on one GPU, scaled by model size, dtype,
framework, flash attention, pt2 compile, GPTQ and sharding. `LatencyModel.zero()` answers 0 everywhere (benchmarks).
`simulate_closed_loop()` runs the same rules on a virtual clock, for tests and for planning a sweep.
"""

from __future__ import annotations

import difflib
import heapq
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from pytest_topsail.tgis.model_config import ModelConfig

COEFFICIENTS_FILE = Path(__file__).with_name("latency.yaml")


@cache
def coefficients() -> dict[str, Any]:
    with COEFFICIENTS_FILE.open() as stream:
        return yaml.safe_load(stream)


def check_gpu_profile(name: str) -> str:
    """``name`` when latency.yaml has coefficients for it, else a ValueError naming the closest known profiles."""
    known = sorted(coefficients()["gpu_profiles"])
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"no latency coefficients for GPU profile {name!r} (known: {', '.join(known)}){hint}")
    return name


@dataclass(frozen=True)
class LatencyModel:
    prefill_base_ms: float = 0.0
    prefill_ms_per_token: float = 0.0
    itl_base_ms: float = 0.0
    itl_ms_per_running: float = 0.0
    max_batch_size: int = 8
    max_concurrent_requests: int = 96

    @classmethod
    def zero(cls, max_batch_size: int = 8, max_concurrent_requests: int = 96) -> LatencyModel:
        return cls(max_batch_size=max_batch_size, max_concurrent_requests=max_concurrent_requests)

    @classmethod
    def for_config(cls, config: ModelConfig, gpu_profile: str, params_billions: float) -> LatencyModel:
        data = coefficients()
        profile_name = "none" if config.is_cpu_only else gpu_profile
        profile = data["gpu_profiles"][check_gpu_profile(profile_name)]
        factor = config_factor(config, params_billions)
        overhead = data["shard_overhead_ms"] * (config.num_shard - 1)
        return cls(
            prefill_base_ms=profile["prefill_base_ms"] * factor,
            prefill_ms_per_token=profile["prefill_ms_per_token"] * factor,
            itl_base_ms=profile["itl_base_ms"] * factor + overhead,
            itl_ms_per_running=profile["itl_ms_per_running"] * factor,
            max_batch_size=config.max_batch_size,
            max_concurrent_requests=config.max_concurrent_requests,
        )

    def prefill_seconds(self, input_tokens: int) -> float:
        return (self.prefill_base_ms + self.prefill_ms_per_token * input_tokens) / 1000

    def inter_token_seconds(self, running: int) -> float:
        return (self.itl_base_ms + self.itl_ms_per_running * max(running - 1, 0)) / 1000

    @property
    def is_zero(self) -> bool:
        return not (self.prefill_base_ms or self.prefill_ms_per_token or self.itl_base_ms or self.itl_ms_per_running)


def config_factor(config: ModelConfig, params_billions: float) -> float:
    """How much slower than a 1B tgis_native float16 model on one GPU this config is."""
    data = coefficients()
    factor = max(params_billions, 0.05) ** data["size_exponent"]
    factor *= data["dtype_factor"][config.dtype_str] * data["framework_factor"][config.deployment_framework.value]
    if config.flash_attention:
        factor *= data["flash_attention_factor"]
    if config.pt2_compile:
        factor *= data["pt2_compile_factor"]
    if config.quantize:
        factor *= data["gptq_factor"]
    return factor / config.num_shard ** data["shard_exponent"]


@dataclass(frozen=True)
class SweepPoint:
    concurrency: int
    requests: int
    rejected: int
    mean_latency_s: float
    mean_ttft_s: float
    throughput_tokens_per_s: float


def simulate_closed_loop(model: LatencyModel, concurrency: int, *, requests_per_user: int = 4,
                         input_tokens: int = 100, output_tokens: int = 50) -> SweepPoint:
    """`concurrency` users each sending requests back to back, on a virtual clock, under the admission rules.

    Decoding is simulated token by token: at every token, the inter-token latency is that of the current batch.
    """
    clock = 0.0
    waiting: list[tuple[float, int]] = []  # (arrival, user) in FIFO order
    running: dict[int, tuple[float, float, int]] = {}  # user -> (arrival, first token time, tokens left)
    events: list[tuple[float, int]] = []  # (time, user) of each running user's next token
    sent = dict.fromkeys(range(concurrency), 0)
    latencies: list[float] = []
    ttfts: list[float] = []
    rejected = tokens_done = 0

    def arrive(user: int, now: float) -> None:
        nonlocal rejected
        sent[user] += 1
        if len(waiting) + len(running) >= model.max_concurrent_requests:
            rejected += 1
            if sent[user] < requests_per_user:
                arrive(user, now)
            return
        waiting.append((now, user))

    def admit(now: float) -> None:
        while waiting and len(running) < model.max_batch_size:
            arrival, user = waiting.pop(0)
            first = now + model.prefill_seconds(input_tokens)
            running[user] = (arrival, first, output_tokens)
            heapq.heappush(events, (first, user))

    for user in range(concurrency):
        arrive(user, 0.0)
    admit(0.0)
    while events:
        clock, user = heapq.heappop(events)
        arrival, first, left = running[user]
        left -= 1
        tokens_done += 1
        if left > 0:
            running[user] = (arrival, first, left)
            heapq.heappush(events, (clock + model.inter_token_seconds(len(running)), user))
            continue
        del running[user]
        latencies.append(clock - arrival)
        ttfts.append(first - arrival)
        if sent[user] < requests_per_user:
            arrive(user, clock)
        admit(clock)
    served = len(latencies)
    return SweepPoint(concurrency, served, rejected, sum(latencies) / max(served, 1), sum(ttfts) / max(served, 1),
                      tokens_done / clock if clock else float("inf"))
