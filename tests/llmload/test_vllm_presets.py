"""The simulated vLLM's mechanisms through the llm_load suite as a user runs it (`pytest -m llm_load --preset ...`
in a subprocess, on the simulator), one run per preset shared by its tests: prefix caching (TTFT and the server's hit
rate follow the shared share), KV-cache pressure (preemptions and a queue past the capacity only), multi-LoRA (swaps
and per-adapter counts). Orders and ratios only: they hold at any machine load."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.llmload.test_llm_load_suite import item_dirs, run_pytest

pytestmark = pytest.mark.xdist_group("llm_load_vllm_presets")  # -n N: each module-scoped run once


def preset_run(tmp_path_factory: pytest.TempPathFactory, preset: str) -> dict[str, dict[str, Any]]:
    """Each item's (case id ->) summary, KPIs and server figures of one run of the preset."""
    tmp = tmp_path_factory.mktemp(preset)
    result: subprocess.CompletedProcess[str] = run_pytest(tmp, "artifacts", "-m", "llm_load", "--preset", preset,
                                                          "-q")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    items = {}
    for directory in item_dirs(tmp / "artifacts"):
        name = directory.name.split("__", 1)[1].removeprefix("test_llm_load_")
        items[name] = {
            "summary": json.loads((directory / "load" / "summary.json").read_text())[0],
            "kpis": {k["name"]: k["value"] for k in json.loads((directory / "kpis.json").read_text())},
            "server": json.loads((directory / "server_metrics.json").read_text()),
            "output": result.stdout + result.stderr,
        }
    return items


@pytest.fixture(scope="module")
def prefix_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return preset_run(tmp_path_factory, "prefix-cache")


@pytest.fixture(scope="module")
def kv_pressure(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return preset_run(tmp_path_factory, "kv-pressure")


@pytest.fixture(scope="module")
def multi_lora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return preset_run(tmp_path_factory, "multi-lora")


SHARED = {"prefix-0": 0 / 512, "prefix-50": 256 / 512, "prefix-90": 464 / 512}  # cases/llm_load/prefix-cache.yaml


def test_a_shared_prefix_shortens_ttft_and_hits_the_servers_cache(prefix_cache: dict[str, dict[str, Any]]) -> None:
    assert sorted(prefix_cache) == sorted(SHARED)
    ttft = {name: item["kpis"]["ttft_median_ms"] for name, item in prefix_cache.items()}
    assert ttft["prefix-90"] < ttft["prefix-50"] < ttft["prefix-0"]
    for name, share in SHARED.items():
        hit_rate = prefix_cache[name]["kpis"].get("server_prefix_cache_hit_rate")
        assert hit_rate is not None and abs(hit_rate - 100 * share) <= 5, (name, hit_rate, share)


def test_past_the_kv_cache_the_server_preempts_and_queues(kv_pressure: dict[str, dict[str, Any]]) -> None:
    points = {int(name.rsplit("=", 1)[1]): item for name, item in kv_pressure.items()}
    assert sorted(points) == [2, 4, 16]
    for concurrency, item in points.items():
        server, summary = item["server"], item["summary"]
        assert summary["failures"] == {} and 0 < server["kv_cache_usage_max"] <= 1
        if concurrency < 16:
            assert server["preemptions"] == 0 and server["waiting_max"] == 0, (concurrency, server)
    past = points[16]
    assert past["kpis"]["server_preemptions"] > 0 and past["server"]["waiting_max"] > 0
    assert past["kpis"]["ttft_median_ms"] > points[4]["kpis"]["ttft_median_ms"]
    assert "preemptions" in past["output"]


def test_lora_adapters_are_swapped_and_counted(multi_lora: dict[str, dict[str, Any]]) -> None:
    (item,) = multi_lora.values()
    server = item["server"]
    assert sorted(server["lora_requests"]) == ["a1", "a2", "a3", "a4"]
    assert sum(server["lora_requests"].values()) == item["summary"]["requests"]
    assert item["kpis"]["server_lora_loads"] > 2  # 4 adapters through 2 slots: more loads than slots
    assert "requests per adapter a1" in item["output"]
