"""tgis-tester's ModelConfig: defaults, short names, every rule, pod resources; and the GPU fit / load time."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.tgis.model_config import ModelConfig, load_model_config
from pytest_topsail.tgis.sizing import check_fit, load_seconds, params_billions

WHERE = "cases/tgis/flan.yaml: configs[2]"


def test_defaults_are_tgis_testers() -> None:
    config = load_model_config({}, WHERE)
    assert (config.deployment_framework, config.dtype_str, config.num_shard) == ("tgis_native", "float16", 1)
    assert (config.port, config.grpc_port, config.master_port) == (5001, 8001, 29500)
    assert (config.max_batch_size, config.max_concurrent_requests) == (8, 96)
    assert (config.max_sequence_length, config.max_new_tokens) == (2048, 1024)
    assert not (config.flash_attention or config.pt2_compile or config.output_special_tokens or config.quantize)
    assert config.resources.model_dump() == {"request_cpu": 2, "request_memory_gb": 4, "limit_cpu": 4,
                                             "limit_memory_gb": 96, "gpu": 1}


@pytest.mark.parametrize(("data", "name"), [
    ({}, "tgis_native|f16"),
    ({"deployment_framework": "hf_transformers", "dtype_str": "float32"}, "hf_transformers|f32"),
    ({"num_shard": 2, "resources": {"gpu": 2}}, "tgis_native|f16|sharded(2)"),
    ({"dtype_str": "float32", "resources": {"gpu": None}}, "tgis_native|f32|cpu"),
    ({"deployment_framework": "hf_transformers", "pt2_compile": True}, "hf_transformers|f16|pt2c"),
    ({"flash_attention": True, "dtype_str": "bfloat16"}, "tgis_native|bf16|flash"),
    ({"quantize": "gptq", "flash_attention": True}, "tgis_native|f16|flash|gptq"),
])
def test_short_names(data: dict[str, Any], name: str) -> None:
    assert load_model_config(data, WHERE).name == name


@pytest.mark.parametrize(("data", "message"), [
    ({"flash_attention": True, "resources": {"gpu": None}, "dtype_str": "float32"},
     "model config tgis_native|f32|cpu|flash: flash_attention requires gpu >= 1"),
    ({"flash_attention": True, "dtype_str": "float32"},
     "model config tgis_native|f32|flash: flash_attention requires dtype_str float16 or bfloat16"),
    ({"flash_attention": True, "deployment_framework": "hf_accelerate"},
     "model config hf_accelerate|f16|flash: flash_attention requires deployment_framework tgis_native"),
    ({"pt2_compile": True},
     "model config tgis_native|f16|pt2c: pt2_compile requires deployment_framework hf_transformers"),
    ({"quantize": "gptq", "deployment_framework": "ibm_fms"},
     "model config ibm_fms|f16|gptq: quantize requires deployment_framework tgis_native"),
    ({"resources": {"gpu": None}},
     "model config tgis_native|f16|cpu: CPU only (gpu: null) requires dtype_str float32"),
    ({"num_shard": 2},
     "model config tgis_native|f16|sharded(2): num_shard 2 requires a non-MIG gpu count equal to num_shard"),
    ({"num_shard": 2, "resources": {"gpu": {"mig_3g_40gb": 2}}},
     "num_shard 2 requires a non-MIG gpu count equal to num_shard"),
    ({"grpc_port": 5001}, "port (5001), grpc_port (5001) and master_port (29500) must differ"),
    ({"cuda_process_memory_fraction": 1.5}, "cuda_process_memory_fraction must be <= 1.0"),
    ({"dtype_str": "float8"}, "dtype_str: Input should be 'float16', 'float32' or 'bfloat16'"),
    ({"max_batch_sise": 4}, "key configs[2].max_batch_sise: unknown key; known: "),
    ({"resources": {"gpu": {"mig_1g_10gb": 1, "mig_2g_20gb": 1}}}, "gpu takes one MIG profile"),
])
def test_each_rule_is_rejected_naming_config_and_rule(data: dict[str, Any], message: str) -> None:
    with pytest.raises(TopsailError) as raised:
        load_model_config(data, WHERE)
    # the location's section is part of every key: configs[2].max_batch_sise, configs[2]: <a rule of the config>
    assert str(raised.value).startswith("cases/tgis/flan.yaml: invalid TGIS model config: "), str(raised.value)
    assert message in str(raised.value)


def test_pod_resources_and_env() -> None:
    gpu = load_model_config({"num_shard": 2, "resources": {"gpu": 2}}, WHERE)
    assert gpu.pod_resources() == {"requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "2"},
                                   "limits": {"cpu": "4", "memory": "96Gi", "nvidia.com/gpu": "2"}}
    mig = load_model_config({"resources": {"gpu": {"mig_2g_20gb": 1}}}, WHERE)
    assert mig.pod_resources()["requests"]["nvidia.com/mig-2g.20gb"] == "1"
    cpu = load_model_config({"dtype_str": "float32", "resources": {"gpu": None, "limit_memory_gb": 32}}, WHERE)
    assert cpu.pod_resources()["limits"] == {"cpu": "4", "memory": "32Gi"}
    assert cpu.worker_env("gpt2")["CUDA_VISIBLE_DEVICES"] == "-1"
    env = gpu.worker_env("google/flan-t5-xl")
    assert env["MODEL_NAME"] == "google/flan-t5-xl" and env["NUM_SHARD"] == "2" and env["DTYPE_STR"] == "float16"


@pytest.mark.parametrize(("name", "billions"), [
    ("bigscience/bloom-560m", 0.56), ("meta-llama/Llama-2-7b-hf", 6.74), ("google/flan-t5-xl", 3.0),
    ("FLAN-T5-XL", 3.0), ("s3://models/google/flan-t5-xl", 3.0),  # any case; the storageUri tail
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", 46.7), ("EleutherAI/gpt-neox-20b", 20.0),
    ("my-org/llama-7b-custom", 1.0)])  # not in the catalog: never guessed from the name ("7b")
def test_parameter_count_comes_from_the_catalog(name: str, billions: float) -> None:
    assert params_billions(name) == pytest.approx(billions)


def test_fit_reports_why_a_model_does_not_fit() -> None:
    config = ModelConfig()
    assert check_fit(config, "a100", "meta-llama/Llama-2-7b-hf").fits
    too_big = check_fit(config, "a100", "EleutherAI/gpt-neox-20b")
    assert not too_big.fits
    assert too_big.reason == ("model EleutherAI/gpt-neox-20b (20B parameters, float16) needs 44.7 GiB per GPU with "
                              "num_shard=1, more than one NVIDIA A100-SXM4-40GB GPU (40.0 GiB usable)")
    sharded = ModelConfig.model_validate({"num_shard": 2, "resources": {"gpu": 2}})
    assert check_fit(sharded, "a100", "EleutherAI/gpt-neox-20b").fits
    assert check_fit(config, "a100-80gb", "EleutherAI/gpt-neox-20b").fits
    mig = ModelConfig.model_validate({"resources": {"gpu": {"mig_1g_10gb": 1}}})
    assert "one mig_1g_10gb slice (10.0 GiB usable)" in check_fit(mig, "a100", "meta-llama/Llama-2-7b-hf").reason
    assert check_fit(ModelConfig(quantize="gptq"), "t4", "meta-llama/Llama-2-13b-hf").fits


def test_load_time_grows_with_size_and_shrinks_with_shards() -> None:
    small = load_seconds(ModelConfig(), "a100", "bigscience/bloom-560m")
    big = load_seconds(ModelConfig(), "a100", "meta-llama/Llama-2-13b-hf")
    two_gpus = ModelConfig.model_validate({"num_shard": 2, "resources": {"gpu": 2}})
    sharded = load_seconds(two_gpus, "a100", "meta-llama/Llama-2-13b-hf")
    assert small < sharded < big
