"""Does a model config fit its GPUs, and how long does loading take (the simulator's model-load stage)?

Weights take parameters x bytes per parameter (float32 4, float16/bfloat16 2, GPTQ 0.5), split evenly over the
shards, plus 20% for activations and the KV cache. One GPU offers its memory (the GPU profile's, or the MIG slice's)
times cuda_process_memory_fraction; a CPU-only config offers the container's memory limit. The parameter count comes
from the model name ("bloom-560m", "Llama-2-7b-hf", "mixtral-8x7b" = 56B) unless given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_topsail.hardware import get_gpu_profile
from pytest_topsail.tgis.latency import coefficients
from pytest_topsail.tgis.model_config import MIG_MEMORY_GIB, ModelConfig

BYTES_PER_PARAMETER = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0}
GPTQ_BYTES_PER_PARAMETER = 0.5
OVERHEAD = 1.2
DEFAULT_PARAMS_BILLIONS = 1.0
_SIZE = re.compile(r"(?:(\d+)x)?(\d+(?:\.\d+)?)([bm])(?![a-z])", re.IGNORECASE)
_KNOWN_SIZES = {"flan-t5-small": 0.08, "flan-t5-base": 0.25, "flan-t5-large": 0.78, "flan-t5-xl": 3.0,
                "flan-t5-xxl": 11.0, "flan-ul2": 20.0, "mt0-xxl": 13.0, "starcoder": 15.5, "gpt2": 0.124}


def params_billions(model_name: str) -> float:
    """Parameter count (billions) read from a Hugging Face model name; 1B when the name does not tell."""
    base = model_name.rsplit("/", 1)[-1].lower()
    for known, size in _KNOWN_SIZES.items():
        if base == known or base.startswith(known + "-"):
            return size
    match = _SIZE.search(base)
    if not match:
        return DEFAULT_PARAMS_BILLIONS
    experts = int(match.group(1) or 1)
    value = float(match.group(2)) * (1e-3 if match.group(3).lower() == "m" else 1.0)
    return experts * value


ACTIVE_EXPERTS = 2  # top-2 routing (Mixtral): each token runs through two experts


def active_params_billions(model_name: str) -> float:
    """Parameters (billions) that compute each token: all of a dense model's; for a mixture of experts named
    ``<experts>x<size>`` (mixtral-8x7b), the routed experts' only — what decode speed follows, while memory and
    download follow :func:`params_billions`."""
    match = _SIZE.search(model_name.rsplit("/", 1)[-1].lower())
    if match and match.group(1) and int(match.group(1)) > ACTIVE_EXPERTS:
        return params_billions(model_name) * ACTIVE_EXPERTS / int(match.group(1))
    return params_billions(model_name)


@dataclass(frozen=True)
class Fit:
    fits: bool
    required_gib: float  # per GPU (or in total on CPU)
    available_gib: float
    reason: str  # why it does not fit; empty when it fits


def bytes_per_parameter(config: ModelConfig) -> float:
    """Weight bytes per parameter: by dtype, or GPTQ's 4-bit packing when quantized."""
    return GPTQ_BYTES_PER_PARAMETER if config.quantize else BYTES_PER_PARAMETER[config.dtype_str]


def weights_gb(config: ModelConfig, model_name: str, params: float | None = None) -> float:
    """Size of the model's weights (GB) as stored and downloaded: every shard's pod downloads the whole model."""
    billions = params if params is not None else params_billions(model_name)
    return billions * bytes_per_parameter(config)


def check_fit(config: ModelConfig, gpu_profile: str, model_name: str, params: float | None = None) -> Fit:
    billions = params if params is not None else params_billions(model_name)
    required = billions * 1e9 * bytes_per_parameter(config) * OVERHEAD / config.num_shard / 2**30
    if config.is_cpu_only:
        available = float(config.resources.limit_memory_gb)
        where = f"the container memory limit ({available:.0f} GiB)"
    else:
        mig = config.resources.mig_profile
        if mig:
            gpu_gib = float(MIG_MEMORY_GIB[mig])
            what = f"one {mig} slice"
        else:
            profile = get_gpu_profile(gpu_profile)
            gpu_gib = profile.gpu_memory_mib / 1024
            what = f"one {profile.product or gpu_profile} GPU"
        available = gpu_gib * config.cuda_process_memory_fraction
        where = f"{what} ({available:.1f} GiB usable)"
    if required <= available:
        return Fit(True, required, available, "")
    reason = (f"model {model_name} ({billions:g}B parameters, {config.dtype_str}"
              f"{', gptq' if config.quantize else ''}) needs {required:.1f} GiB per "
              f"{'process' if config.is_cpu_only else 'GPU'} with num_shard={config.num_shard}, more than {where}")
    return Fit(False, required, available, reason)


def load_seconds(config: ModelConfig, gpu_profile: str, model_name: str, params: float | None = None) -> float:
    """Seconds to load the weights: their size over the profile's load bandwidth (shards load in parallel)."""
    profiles = coefficients()["gpu_profiles"]
    bandwidth = profiles["none" if config.is_cpu_only else gpu_profile]["load_gbps"]
    return 2.0 + weights_gb(config, model_name, params) / config.num_shard / bandwidth
