"""What the simulated vLLM counts and how its ``/metrics`` reads: vLLM V1's metric names, types, labels and buckets
(Prometheus text format, names prefixed ``vllm:``, every series labelled ``model_name`` and ``engine``).

``ServingMetrics`` is fed by serving.py (one call per request event, one bucket search per inter-token gap: O(1)
work per token) and rendered with the scheduler's state (kvcache.py) by ``render``: gauges
``num_requests_running``, ``num_requests_waiting`` (preempted requests included), ``kv_cache_usage_perc`` (0..1),
``cache_config_info``, ``lora_requests_info``; counters ``num_preemptions``, ``prompt_tokens``,
``generation_tokens``, ``request_success`` (by ``finished_reason``: stop, length, abort), ``prefix_cache_queries``
and ``prefix_cache_hits`` (tokens); histograms (seconds) ``time_to_first_token_seconds``,
``inter_token_latency_seconds``, ``e2e_request_latency_seconds``, ``request_queue_time_seconds``,
``request_prefill_time_seconds``, ``request_decode_time_seconds``, and token histograms ``request_prompt_tokens``
and ``request_generation_tokens``. Simulator-only counters, outside vLLM's namespace: ``topsail_sim:lora_loads``
(adapter loads into a slot) and ``topsail_sim:lora_requests`` (by ``lora_name``). Times are simulated seconds
(real seconds over the server's time scale).
"""

from __future__ import annotations

import bisect
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_topsail.tgis.kvcache import Scheduler

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
               80.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                   480.0, 960.0, 1920.0, 7680.0)
FINISHED_REASONS = ("stop", "length", "abort")


def token_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 buckets up to max_model_len."""
    buckets: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_model_len:
                return tuple(buckets)
            buckets.append(float(value))
        exponent += 1


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)  # the last one: above every bound (+Inf)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value

    def lines(self, name: str, labels: str) -> list[str]:
        lines, cumulative = [], 0
        bounds = [repr(float(bound)) for bound in self.buckets] + ["+Inf"]
        for le, count in zip(bounds, self.counts, strict=True):
            cumulative += count
            lines.append(f'{name}_bucket{{{labels},le="{le}"}} {cumulative}')
        lines.append(f"{name}_sum{{{labels}}} {self.total!r}")
        lines.append(f"{name}_count{{{labels}}} {cumulative}")
        return lines


HISTOGRAMS = {  # name -> help
    "time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "e2e_request_latency_seconds": "Histogram of e2e request latency in seconds.",
    "request_queue_time_seconds": "Histogram of time spent in WAITING phase for request.",
    "request_prefill_time_seconds": "Histogram of time spent in PREFILL phase for request.",
    "request_decode_time_seconds": "Histogram of time spent in DECODE phase for request.",
    "request_prompt_tokens": "Number of prefill tokens processed.",
    "request_generation_tokens": "Number of generation tokens processed.",
}


class ServingMetrics:
    """The histograms and counters of one served model; ``render`` adds the scheduler's gauges and counters."""

    def __init__(self, model_name: str, max_model_len: int) -> None:
        self.model_name = model_name
        tokens = token_buckets(max_model_len)
        buckets = {"time_to_first_token_seconds": TTFT_BUCKETS, "inter_token_latency_seconds": ITL_BUCKETS,
                   "request_prompt_tokens": tokens, "request_generation_tokens": tokens}
        self.histograms = {name: Histogram(buckets.get(name, REQUEST_BUCKETS)) for name in HISTOGRAMS}
        self.itl = self.histograms["inter_token_latency_seconds"]
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished: Counter[str] = Counter()

    def observe(self, name: str, value: float) -> None:
        self.histograms[name].observe(value)

    def request_done(self, reason: str, prompt_tokens: int, generation_tokens: int, e2e_s: float,
                     decode_s: float) -> None:
        self.finished[reason] += 1
        self.prompt_tokens += prompt_tokens
        self.generation_tokens += generation_tokens
        self.observe("request_prompt_tokens", prompt_tokens)
        self.observe("request_generation_tokens", generation_tokens)
        self.observe("e2e_request_latency_seconds", e2e_s)
        self.observe("request_decode_time_seconds", decode_s)

    def render(self, scheduler: Scheduler, extra_config: dict[str, str] | None = None) -> str:
        """The ``/metrics`` text."""
        labels = f'engine="0",model_name="{self.model_name}"'
        config = scheduler.config
        counters = scheduler.counters
        out: list[str] = []

        def metric(name: str, kind: str, help_text: str, lines: Sequence[str]) -> None:
            named = f"{name}_total" if kind == "counter" else name  # as prometheus_client exposes counters
            out.extend((f"# HELP {named} {help_text}", f"# TYPE {named} {kind}", *lines))

        metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
               [f"vllm:num_requests_running{{{labels}}} {len(scheduler.running)}"])
        metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
               [f"vllm:num_requests_waiting{{{labels}}} {len(scheduler.waiting)}"])
        metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
               [f"vllm:kv_cache_usage_perc{{{labels}}} {scheduler.usage!r}"])
        info = {"block_size": str(config.block_size), "num_gpu_blocks": str(config.num_blocks),
                "enable_prefix_caching": str(config.enable_prefix_caching), **(extra_config or {})}
        info_labels = ",".join(f'{key}="{value}"' for key, value in sorted(info.items()))
        metric("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig",
               [f"vllm:cache_config_info{{{info_labels},{labels}}} 1.0"])
        running = ",".join(name for name, count in scheduler.adapter_running.items() if count)
        waiting = ",".join(dict.fromkeys(r.adapter for r in scheduler.waiting if r.adapter))
        metric("vllm:lora_requests_info", "gauge", "Running stats on lora requests.",
               [f'vllm:lora_requests_info{{max_lora="{config.max_loras}",running_lora_adapters="{running}",'
                f'waiting_lora_adapters="{waiting}"}} {time.time()!r}'])
        for name, help_text, value in (
                ("num_preemptions", "Cumulative number of preemption from the engine.", counters.preemptions),
                ("prompt_tokens", "Number of prefill tokens processed.", self.prompt_tokens),
                ("generation_tokens", "Number of generation tokens processed.", self.generation_tokens),
                ("prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
                 counters.prefix_queries),
                ("prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                 counters.prefix_hits)):
            metric(f"vllm:{name}", "counter", help_text, [f"vllm:{name}_total{{{labels}}} {value}"])
        metric("vllm:request_success", "counter", "Count of successfully processed requests.",
               [f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {self.finished[reason]}'
                for reason in FINISHED_REASONS])
        for name, help_text in HISTOGRAMS.items():
            metric(f"vllm:{name}", "histogram", help_text, self.histograms[name].lines(f"vllm:{name}", labels))
        metric("topsail_sim:lora_loads", "counter", "LoRA adapter loads into a GPU slot (simulator only).",
               [f"topsail_sim:lora_loads_total{{{labels}}} {counters.lora_loads}"])
        metric("topsail_sim:lora_requests", "counter", "Requests per LoRA adapter (simulator only).",
               [f'topsail_sim:lora_requests_total{{{labels},lora_name="{name}"}} {count}'
                for name, count in sorted(counters.lora_requests.items())])
        return "\n".join(out) + "\n"
