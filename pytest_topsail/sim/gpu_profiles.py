"""GPU node profiles of the simulated cluster, in the style of fake-gpu-operator.

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

    @property
    def has_gpus(self) -> bool:
        return self.gpus_per_node > 0 and bool(self.product)


GPU_PROFILES: dict[str, GpuProfile] = {
    p.name: p
    for p in (
        GpuProfile("a100", "NVIDIA A100-SXM4-40GB", 40960, 8, "96", "1152Gi"),
        GpuProfile("a100-80gb", "NVIDIA A100-SXM4-80GB", 81920, 8, "96", "1152Gi"),
        GpuProfile("h100", "NVIDIA H100 80GB HBM3", 81559, 8, "192", "2048Gi"),
        GpuProfile("b200", "NVIDIA B200", 183359, 8, "224", "2048Gi"),
        GpuProfile("l40s", "NVIDIA L40S", 46068, 4, "48", "384Gi"),
        GpuProfile("t4", "Tesla T4", 15360, 4, "48", "192Gi"),
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


# Kubernetes resource quantities, as the scheduler counts them: CPU in millicores, everything else in whole units.
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_SUFFIX = {
    None: 1, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}


def parse_quantity(value: str | int | float) -> float:
    """The number a Kubernetes quantity ("500m", "64Gi", "1.5", 2) stands for; ValueError when malformed."""
    if isinstance(value, bool):
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    try:
        return float(match.group(1)) * _SUFFIX[match.group(2)]
    except ValueError:
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from None


def parse_cpu_millis(value: str | int | float) -> int:
    millis = parse_quantity(value) * 1000
    return int(millis) if millis == int(millis) else int(millis) + 1


def parse_memory_bytes(value: str | int | float) -> int:
    amount = parse_quantity(value)
    return int(amount) if amount == int(amount) else int(amount) + 1
