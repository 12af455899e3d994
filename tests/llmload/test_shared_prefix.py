"""Shared-prefix prompts, per-request models, and the server figures of a point (llmload/shared_prefix.py,
llmload/server_metrics.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.server_metrics import point_server_metrics
from pytest_topsail.llmload.settings import case_load_settings
from pytest_topsail.tgis.tokenizer import tokenize


def settings(**values: Any) -> Any:
    return case_load_settings({"model": "m", "concurrency": 1, "requests": 4, **values}, "case x", {})


def test_shared_prefix_prompts_share_exactly_their_prefix() -> None:
    case = settings(dataset="shared-prefix", shared_prefix={
        "prefixes": 3, "prompts_per_prefix": 5, "prefix_tokens": 32, "suffix_tokens": 8, "output_tokens": 4})
    prompts = case.prompts(".")
    assert len(prompts) == 15 and len({p.text for p in prompts}) == 15
    assert all(len(tokenize(p.text)) == p.input_tokens == 40 and p.output_tokens == 4 for p in prompts)
    prefixes = Counter(" ".join(p.text.split()[:32]) for p in prompts)
    assert sorted(prefixes.values()) == [5, 5, 5]
    assert prompts == case.prompts(".")  # seeded


def test_shared_prefix_needs_its_settings() -> None:
    with pytest.raises(TopsailError, match="dataset: shared-prefix and the shared_prefix"):
        settings(dataset="shared-prefix")


def test_requests_name_models_by_weight() -> None:
    case = settings(dataset="synthetic", synthetic={"prompts": 400, "input_tokens": 4, "output_tokens": 2},
                    models={"a1": 3, "a2": 1})
    counts = Counter(p.model for p in case.prompts("."))
    assert set(counts) == {"a1", "a2"} and 2 < counts["a1"] / counts["a2"] < 4.5


def test_point_figures_are_the_points_own() -> None:
    first: dict[str, float] = {"vllm:num_preemptions_total": 5, "vllm:prefix_cache_queries_total": 100,
             "vllm:prefix_cache_hits_total": 10, "topsail_sim:lora_requests_total|a1": 2}
    samples = [{"vllm:kv_cache_usage_perc": usage, "vllm:num_requests_waiting": waiting,
                "vllm:num_requests_running": 1} for usage, waiting in ((0.2, 0), (0.9, 3), (0.5, 1))]
    last: dict[str, float] = {"vllm:num_preemptions_total": 8, "vllm:prefix_cache_queries_total": 300,
            "vllm:prefix_cache_hits_total": 160, "topsail_sim:lora_requests_total|a1": 7,
            "topsail_sim:lora_loads_total": 4}
    figures = point_server_metrics(first, samples, last)
    assert figures["preemptions"] == 3 and figures["prefix_cache_hit_rate"] == 0.75
    assert figures["kv_cache_usage_max"] == 0.9 and figures["waiting_max"] == 3
    assert figures["lora_requests"] == {"a1": 5} and figures["lora_loads"] == 4
