"""tgis-tester's ModelConfig: one way of serving a model (framework, dtype, sharding, limits, pod resources).

Defaults and rules are tgis-tester's. A config that breaks a rule is rejected with a message naming the config (its
short name `fw|dtype[|sharded(n)][|cpu][|pt2c][|flash][|gptq]`) and the rule. `pod_resources()` gives the worker's
Kubernetes requests and limits: `gpu: n` asks for nvidia.com/gpu, `gpu: {mig_1g_10gb: n}` for a MIG slice,
`gpu: null` (or 0) runs on CPU only.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from pytest_topsail.settings import validate

MIG_PROFILES = ("mig_1g_10gb", "mig_2g_20gb", "mig_3g_40gb")
MIG_MEMORY_GIB = {"mig_1g_10gb": 10, "mig_2g_20gb": 20, "mig_3g_40gb": 40}
DTYPE_SHORT_NAMES = {"float16": "f16", "float32": "f32", "bfloat16": "bf16"}


# The worker container's environment variable of each ModelConfig field (tgis-tester's worker pod); the simulator
# reads a TGIS container's config back from the same names.
ENV_OF_FIELD = {"deployment_framework": "DEPLOYMENT_FRAMEWORK", "dtype_str": "DTYPE_STR", "num_shard": "NUM_SHARD",
                "max_concurrent_requests": "MAX_CONCURRENT_REQUESTS", "max_sequence_length": "MAX_SEQUENCE_LENGTH",
                "max_batch_size": "MAX_BATCH_SIZE", "max_new_tokens": "MAX_NEW_TOKENS",
                "flash_attention": "FLASH_ATTENTION", "pt2_compile": "PT2_COMPILE", "port": "PORT",
                "grpc_port": "GRPC_PORT", "quantize": "QUANTIZE",
                # the simulated vLLM's KV cache, prefix cache and LoRA slots (tgis/kvcache.py)
                "block_size": "BLOCK_SIZE",
                "num_gpu_blocks_override": "NUM_GPU_BLOCKS_OVERRIDE", "enable_prefix_caching": "ENABLE_PREFIX_CACHING",
                "lora_adapters": "LORA_ADAPTERS", "max_loras": "MAX_LORAS", "lora_load_ms": "LORA_LOAD_MS"}


class DeploymentFramework(StrEnum):
    HF_TRANSFORMERS = "hf_transformers"
    HF_ACCELERATE = "hf_accelerate"
    HF_OPTIMUM_BT = "hf_optimum_bt"
    HF_OPTIMUM_ORT = "hf_optimum_ort"
    TGIS_NATIVE = "tgis_native"
    IBM_FMS = "ibm_fms"
    GPT_MEGATRON = "gpt_megatron"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResourceSpec(_Strict):
    request_cpu: int = Field(default=2, ge=0)
    request_memory_gb: int = Field(default=4, ge=0)
    limit_cpu: int = Field(default=4, ge=0)
    limit_memory_gb: int = Field(default=96, ge=0)
    # n whole GPUs, {mig profile: n} slices, or None for CPU only
    gpu: int | dict[Literal["mig_1g_10gb", "mig_2g_20gb", "mig_3g_40gb"], int] | None = 1

    @pydantic.field_validator("gpu")
    @classmethod
    def _one_mig_profile(cls, gpu: Any) -> Any:
        if isinstance(gpu, dict) and len(gpu) != 1:
            raise ValueError(f"gpu takes one MIG profile ({', '.join(MIG_PROFILES)}), got {sorted(gpu)}")
        if isinstance(gpu, int) and gpu < 0:
            raise ValueError("gpu must be >= 0")
        return gpu

    @property
    def gpu_count(self) -> int:
        if self.gpu is None:
            return 0
        if isinstance(self.gpu, dict):
            return next(iter(self.gpu.values()))
        return self.gpu

    @property
    def mig_profile(self) -> str | None:
        return next(iter(self.gpu)) if isinstance(self.gpu, dict) else None


class ModelConfig(_Strict):
    revision: str | None = None
    deployment_framework: DeploymentFramework = DeploymentFramework.TGIS_NATIVE
    dtype_str: Literal["float16", "float32", "bfloat16"] = "float16"
    num_shard: int = Field(default=1, ge=1)
    port: int = Field(default=5001, ge=1, le=65535)
    grpc_port: int = Field(default=8001, ge=1, le=65535)
    master_addr: str = "localhost"
    master_port: int = Field(default=29500, ge=1, le=65535)
    cuda_process_memory_fraction: float = Field(default=1.0, gt=0)
    max_batch_size: int = Field(default=8, ge=1)
    max_concurrent_requests: int = Field(default=96, ge=1)
    max_sequence_length: int = Field(default=2048, ge=2)
    max_new_tokens: int = Field(default=1024, ge=1)
    max_waiting_tokens: int = Field(default=10, ge=1)
    max_batch_weight: int | None = None
    max_prefill_weight: int | None = None
    output_special_tokens: bool = False
    flash_attention: bool = False
    pt2_compile: bool = False
    quantize: Literal["gptq"] | None = None
    resources: ResourceSpec = ResourceSpec()
    # vLLM and ONNX runtime options tgis-tester also accepts
    gpu_memory_utilization: float = Field(default=0.85, gt=0, le=1)
    enable_lora: bool = False
    # the simulated vLLM scheduler (tgis/kvcache.py); None: vLLM's default (block_size 16, prefix caching off as in
    # TGIS, max_loras 1, no adapter)
    block_size: int | None = Field(default=None, ge=1)  # tokens per KV-cache block
    num_gpu_blocks_override: int | None = Field(default=None, ge=1)  # vLLM's --num-gpu-blocks-override
    enable_prefix_caching: bool | None = None  # automatic prefix caching (block-hash reuse)
    lora_adapters: str | None = None  # served LoRA adapter names, comma-separated (each a model id of the front)
    max_loras: int | None = Field(default=None, ge=1)  # adapters resident at once (GPU slots)
    lora_load_ms: float | None = Field(default=None, ge=0)  # the cost of loading an adapter into a slot
    load_format: str | None = None
    model_loader_extra_config: str | None = None
    merge_onnx_graphs: bool | None = None
    estimate_memory: bool | None = None

    @property
    def name(self) -> str:
        """The short name tgis-tester shows in plans, e.g. `hf_transformers|f32` or `tgis_native|f16|sharded(2)`."""
        parts = [self.deployment_framework.value, DTYPE_SHORT_NAMES[self.dtype_str]]
        if self.merge_onnx_graphs is not None:
            parts.append("merge")
        if self.is_sharded:
            parts.append(f"sharded({self.num_shard})")
        if self.is_cpu_only:
            parts.append("cpu")
        if self.pt2_compile:
            parts.append("pt2c")
        if self.flash_attention:
            parts.append("flash")
        if self.quantize:
            parts.append(self.quantize)
        return "|".join(parts)

    @property
    def is_sharded(self) -> bool:
        return self.num_shard > 1

    @property
    def is_cpu_only(self) -> bool:
        return self.resources.gpu_count == 0

    @pydantic.model_validator(mode="after")
    def _rules(self) -> ModelConfig:
        problem = self.rule_violation()
        if problem:
            raise ValueError(f"model config {self.name}: {problem}")
        return self

    def rule_violation(self) -> str | None:
        """The first tgis-tester rule this config breaks, or None."""
        resources = self.resources
        if self.flash_attention:
            if resources.gpu_count < 1:
                return "flash_attention requires gpu >= 1"
            if self.dtype_str not in ("float16", "bfloat16"):
                return "flash_attention requires dtype_str float16 or bfloat16"
            if self.deployment_framework != DeploymentFramework.TGIS_NATIVE:
                return "flash_attention requires deployment_framework tgis_native"
        if self.pt2_compile and self.deployment_framework != DeploymentFramework.HF_TRANSFORMERS:
            return "pt2_compile requires deployment_framework hf_transformers"
        if self.quantize and self.deployment_framework != DeploymentFramework.TGIS_NATIVE:
            return "quantize requires deployment_framework tgis_native"
        if self.is_cpu_only and self.dtype_str != "float32":
            return "CPU only (gpu: null) requires dtype_str float32"
        if self.is_sharded and (resources.mig_profile or resources.gpu_count != self.num_shard):
            return f"num_shard {self.num_shard} requires a non-MIG gpu count equal to num_shard"
        if len({self.port, self.grpc_port, self.master_port}) != 3:
            return f"port ({self.port}), grpc_port ({self.grpc_port}) and master_port ({self.master_port}) must differ"
        if self.cuda_process_memory_fraction > 1.0:
            return "cuda_process_memory_fraction must be <= 1.0"
        return None

    def pod_resources(self) -> dict[str, dict[str, str]]:
        """Kubernetes `resources` of the worker container."""
        spec = self.resources
        requests = {"cpu": str(spec.request_cpu), "memory": f"{spec.request_memory_gb}Gi"}
        limits = {"cpu": str(spec.limit_cpu), "memory": f"{spec.limit_memory_gb}Gi"}
        if spec.mig_profile:
            gpu_resource = f"nvidia.com/mig-{spec.mig_profile.removeprefix('mig_').replace('_', '.')}"
        else:
            gpu_resource = "nvidia.com/gpu"
        if spec.gpu_count:
            requests[gpu_resource] = limits[gpu_resource] = str(spec.gpu_count)
        return {"requests": requests, "limits": limits}

    def worker_env(self, model_name: str) -> dict[str, str]:
        """The environment tgis-tester gives the worker container (CUDA_VISIBLE_DEVICES=-1 when CPU only)."""
        env = {"MODEL_NAME": model_name}
        for field, variable in ENV_OF_FIELD.items():
            value = getattr(self, field)
            if value is not None:
                env[variable] = str(value).lower() if isinstance(value, bool) else str(value)
        if self.is_cpu_only:
            env["CUDA_VISIBLE_DEVICES"] = "-1"
        return env


def load_model_config(data: Mapping[str, Any] | None, where: str) -> ModelConfig:
    """Validate one config read from `where` (a file and key); TopsailError naming it and every problem."""
    return validate(ModelConfig, dict(data or {}), where, "invalid TGIS model config")
