"""Does a model config fit its GPUs, and how long does loading take (the simulator's model-load stage)?

A model's size comes from the model catalog (pytest_topsail/tgis/catalog.py), never from its name. Weights take
parameters x bytes per parameter (float32 4, float16/bfloat16 2 as the config serves them; GPTQ 0.5 when the config
quantizes or the checkpoint is GPTQ), split evenly over the shards, plus 20% for activations and the KV cache; the
download is the checkpoint as stored (its own dtype). One GPU offers its memory (the GPU profile's, or the MIG
slice's) times cuda_process_memory_fraction; a CPU-only config offers the container's memory limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_topsail.hardware import get_gpu_profile
from pytest_topsail.tgis.catalog import Catalog, ServedModel, builtin_catalog
from pytest_topsail.tgis.latency import coefficients
from pytest_topsail.tgis.model_config import MIG_MEMORY_GIB, ModelConfig

BYTES_PER_PARAMETER = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0}
GPTQ_BYTES_PER_PARAMETER = 0.5
OVERHEAD = 1.2
# a model the catalog does not list, where nothing must be sized (the reference server outside the simulator)
UNSIZED = ServedModel(params_billions=1.0)


def served_model(model_name: str, catalog: Catalog | None = None) -> ServedModel | None:
    """The model's catalog entry (the built-in catalog unless a suite's extended one is given), else None."""
    return (catalog or builtin_catalog()).find(model_name)


def params_billions(model_name: str, catalog: Catalog | None = None) -> float:
    """Parameter count (billions) of a catalog model; 1B for one the catalog does not list."""
    return (served_model(model_name, catalog) or UNSIZED).params_billions


def active_params_billions(model_name: str, catalog: Catalog | None = None) -> float:
    """Parameters (billions) that compute each token: all of a dense model's; a mixture of experts' routed experts
    only (catalog: active_params_billions) — what decode speed follows, while memory and download follow
    :func:`params_billions`."""
    return (served_model(model_name, catalog) or UNSIZED).active_billions


@dataclass(frozen=True)
class Fit:
    fits: bool
    required_gib: float  # per GPU (or in total on CPU)
    available_gib: float
    reason: str  # why it does not fit; empty when it fits


def bytes_per_parameter(config: ModelConfig, model: ServedModel = UNSIZED) -> float:
    """Weight bytes per parameter in memory: by the served dtype, or GPTQ's 4-bit packing."""
    quantized = config.quantize or model.quantization
    return GPTQ_BYTES_PER_PARAMETER if quantized else BYTES_PER_PARAMETER[config.dtype_str]


def _model(model_name: str, model: ServedModel | None) -> ServedModel:
    return model or served_model(model_name) or UNSIZED


def weights_gb(config: ModelConfig, model_name: str, model: ServedModel | None = None) -> float:
    """Size of the model's weights (GB) in memory, as the config serves them."""
    spec = _model(model_name, model)
    return spec.params_billions * bytes_per_parameter(config, spec)


def download_gb(model_name: str, model: ServedModel | None = None) -> float:
    """Size of the checkpoint (GB) as stored and downloaded (its own dtype, or 4 bits when GPTQ): every shard's pod
    downloads the whole model."""
    spec = _model(model_name, model)
    stored = GPTQ_BYTES_PER_PARAMETER if spec.quantization else BYTES_PER_PARAMETER[spec.dtype]
    return spec.params_billions * stored


def device_memory_gib(config: ModelConfig, gpu_profile: str) -> tuple[float, str]:
    """Memory (GiB) of the one device a shard runs on, and what it is: the MIG slice's, the GPU profile's, or the
    container's memory limit when CPU only."""
    if config.is_cpu_only:
        return float(config.resources.limit_memory_gb), "the container memory limit"
    mig = config.resources.mig_profile
    if mig:
        return float(MIG_MEMORY_GIB[mig]), f"one {mig} slice"
    profile = get_gpu_profile(gpu_profile)
    return profile.gpu_memory_mib / 1024, f"one {profile.product or gpu_profile} GPU"


def check_fit(config: ModelConfig, gpu_profile: str, model_name: str, model: ServedModel | None = None) -> Fit:
    spec = _model(model_name, model)
    billions = spec.params_billions
    required = billions * 1e9 * bytes_per_parameter(config, spec) * OVERHEAD / config.num_shard / 2**30
    if config.is_cpu_only:
        available = float(config.resources.limit_memory_gb)
        where = f"the container memory limit ({available:.0f} GiB)"
    else:
        gpu_gib, what = device_memory_gib(config, gpu_profile)
        available = gpu_gib * config.cuda_process_memory_fraction
        where = f"{what} ({available:.1f} GiB usable)"
    if required <= available:
        return Fit(True, required, available, "")
    reason = (f"model {model_name} ({billions:g}B parameters, {config.dtype_str}"
              f"{', gptq' if config.quantize or spec.quantization else ''}) needs {required:.1f} GiB per "
              f"{'process' if config.is_cpu_only else 'GPU'} with num_shard={config.num_shard}, more than {where}")
    return Fit(False, required, available, reason)


def load_seconds(config: ModelConfig, gpu_profile: str, model_name: str, model: ServedModel | None = None) -> float:
    """Seconds to load the weights: their size over the profile's load bandwidth (shards load in parallel)."""
    profiles = coefficients()["gpu_profiles"]
    bandwidth = profiles["none" if config.is_cpu_only else gpu_profile]["load_gbps"]
    return 2.0 + weights_gb(config, model_name, model) / config.num_shard / bandwidth
