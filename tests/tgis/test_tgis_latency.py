"""The latency model on a virtual clock: prefill grows with input, ITL with the batch, a knee at max_batch_size."""

from __future__ import annotations

import pytest

from pytest_topsail.tgis.latency import LatencyModel, simulate_closed_loop
from pytest_topsail.tgis.model_config import ModelConfig


def model(**config: object) -> LatencyModel:
    return LatencyModel.for_config(ModelConfig.model_validate(config), "a100", 7.0)


def test_prefill_and_inter_token_latency_grow() -> None:
    latency = model()
    assert latency.prefill_seconds(1000) > latency.prefill_seconds(10) > 0
    assert latency.inter_token_seconds(8) > latency.inter_token_seconds(1) > 0


def test_config_changes_latency() -> None:
    base = model().inter_token_seconds(1)
    assert model(dtype_str="float32").inter_token_seconds(1) > base
    assert model(num_shard=4, resources={"gpu": 4}).inter_token_seconds(1) < base
    assert model(flash_attention=True).inter_token_seconds(1) < base
    assert model(deployment_framework="hf_transformers").inter_token_seconds(1) > base
    h100 = LatencyModel.for_config(ModelConfig(), "h100", 7.0).inter_token_seconds(1)
    assert h100 < base
    with pytest.raises(ValueError, match="no latency coefficients for GPU profile 'tpu'"):
        LatencyModel.for_config(ModelConfig(), "tpu", 7.0)


def test_concurrency_sweep_shows_a_knee_at_max_batch_size() -> None:
    latency = model(max_batch_size=8)
    points = {c: simulate_closed_loop(latency, c) for c in (1, 2, 4, 8, 16, 32)}
    throughput = {c: p.throughput_tokens_per_s for c, p in points.items()}
    assert throughput[1] < throughput[2] < throughput[4] < throughput[8]
    assert throughput[16] == pytest.approx(throughput[8], rel=0.05)  # saturated
    assert points[8].mean_ttft_s == pytest.approx(points[1].mean_ttft_s)  # no queueing below the knee
    assert points[32].mean_ttft_s > 2 * points[16].mean_ttft_s > 0  # queueing beyond it


def test_requests_over_max_concurrent_are_refused() -> None:
    point = simulate_closed_loop(model(max_concurrent_requests=10), 12, requests_per_user=1)
    assert (point.requests, point.rejected) == (10, 2)


def test_zero_latency() -> None:
    zero = LatencyModel.zero()
    assert zero.is_zero and zero.prefill_seconds(5000) == 0 and zero.inter_token_seconds(64) == 0
    assert not model().is_zero
