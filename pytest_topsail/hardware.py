"""Hardware facts: the GPU node profiles every layer uses (the simulator's node pools, TGIS sizing, the fine-tuning
model), in the style of fake-gpu-operator. This module imports nothing of pytest_topsail.

A profile says what one simulated node looks like: the GPU product (as `nvidia-smi` names it), the memory of one GPU,
the default number of GPUs per node, and the node's CPU and memory. The node controller turns a profile into node
labels (`nvidia.com/gpu.product`, `.memory`, `.count`, `.present`) and capacity (`nvidia.com/gpu`, cpu, memory, pods).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuProfile:
    name: str
    product: str  # as nvidia-smi prints it; the label value is sanitised
    gpu_memory_mib: int  # memory of one GPU
    gpus_per_node: int  # default count, overridable per pool
    cpu: str  # node CPU capacity (Kubernetes quantity)
    memory: str  # node memory capacity (Kubernetes quantity)
    peak_tflops: float = 0.0  # dense bf16/fp16 tensor-core peak of one GPU
    hbm_tbps: float = 0.0  # memory bandwidth of one GPU, TB/s
    tf32_tflops: float = 0.0  # dense float32 peak of one GPU: TF32 tensor cores (plain FP32 on the T4)

    def dense_peak_tflops(self, dtype: str) -> float:
        """The dense peak of one GPU for a training dtype (bfloat16 | float16 | float32), 0 when unknown."""
        if dtype == "float32":
            return self.tf32_tflops
        return self.peak_tflops if dtype in ("bfloat16", "float16") else 0.0

    @property
    def has_gpus(self) -> bool:
        return self.gpus_per_node > 0 and bool(self.product)


GPU_PROFILES: dict[str, GpuProfile] = {
    p.name: p
    for p in (
        GpuProfile("a100", "NVIDIA A100-SXM4-40GB", 40960, 8, "96", "1152Gi", 312, 1.56, 156),
        GpuProfile("a100-80gb", "NVIDIA A100-SXM4-80GB", 81920, 8, "96", "1152Gi", 312, 2.04, 156),
        GpuProfile("h100", "NVIDIA H100 80GB HBM3", 81559, 8, "192", "2048Gi", 989, 3.35, 494.7),
        GpuProfile("b200", "NVIDIA B200", 183359, 8, "224", "2048Gi", 2250, 8.0, 1100),
        GpuProfile("l40s", "NVIDIA L40S", 46068, 4, "48", "384Gi", 362, 0.864, 183),
        GpuProfile("t4", "Tesla T4", 15360, 4, "48", "192Gi", 65, 0.32, 8.1),
        GpuProfile("none", "", 0, 0, "16", "64Gi"),  # CPU-only worker
    )
}


def known_gpu_profiles() -> list[str]:
    return sorted(GPU_PROFILES)


def get_gpu_profile(name: str) -> GpuProfile:
    """The profile called `name`; ValueError listing the known ones otherwise."""
    try:
        return GPU_PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown GPU profile {name!r}; known: {', '.join(known_gpu_profiles())}") from None


_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def sanitize_label_value(value: str) -> str:
    """A valid label value the way fake-gpu-operator and GPU feature discovery write the product:
    spaces and other unsafe characters become '-', at most 63 characters, alphanumeric at both ends."""
    cleaned = _LABEL_UNSAFE.sub("-", value.strip())[:63]
    return cleaned.strip("-_.")


def profile_of_label(product_label: str | None) -> GpuProfile | None:
    """The GPU profile whose product a node's `nvidia.com/gpu.product` label names (sanitised), None when unknown."""
    for profile in GPU_PROFILES.values():
        if product_label and profile.product and sanitize_label_value(profile.product) == product_label:
            return profile
    return None


# Named cluster shapes for `cluster.sim.shape` (and the presets documented in docs/fixtures.md): the first node pool.
SHAPES: dict[str, dict[str, str | int]] = {
    "dgx": {"nodes": 1, "gpu_profile": "a100-80gb", "gpus_per_node": 8},
    "a100": {"nodes": 4, "gpu_profile": "a100", "gpus_per_node": 8},
    "h100": {"nodes": 4, "gpu_profile": "h100", "gpus_per_node": 8},
    "scale-1k": {"nodes": 1000, "gpu_profile": "a100", "gpus_per_node": 8},
    "scale-10k": {"nodes": 5000, "gpu_profile": "a100", "gpus_per_node": 8},
}
