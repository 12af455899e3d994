"""`nvidia-smi` in a pod of a simulated GPU node: the GPUs the pod was given (its nvidia.com/gpu limit) of the
node's GPU profile, printed as the real tool prints them: the summary table, `-L`, and
`--query-gpu=FIELDS --format=csv[,noheader][,nounits]`."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from pytest_topsail.hardware import profile_of_label

DRIVER_VERSION = "550.127.05"
CUDA_VERSION = "12.4"
GPU_RESOURCE = "nvidia.com/gpu"
NO_DEVICES = "No devices were found\n"


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mib: int
    uuid: str

    @property
    def bus_id(self) -> str:
        return f"00000000:{0x07 + self.index * 0x08:02X}:00.0"


def gpus_of(store: Any, pod: dict[str, Any]) -> list[Gpu] | None:
    """The GPUs `pod` sees; None when its node has no GPUs (the tool is not there)."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    node = store.find(store.resource_type("nodes"), None, node_name) if node_name else None
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    product = labels.get("nvidia.com/gpu.product")
    if not product:
        return None
    profile = profile_of_label(product)
    name = profile.product if profile is not None else product.replace("-", " ")
    memory = int(labels.get("nvidia.com/gpu.memory") or 0)
    count = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        try:
            count += int(limits.get(GPU_RESOURCE) or 0)
        except (TypeError, ValueError):
            pass
    return [Gpu(index, name, memory, f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node_name}/{index}')}")
            for index in range(count)]


def run(args: list[str], gpus: list[Gpu], clock: float | None = None) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) of `nvidia-smi ARGS`."""
    query = next((a.partition("=")[2] for a in args if a.startswith("--query-gpu=")), None)
    output_format = next((a.partition("=")[2] for a in args if a.startswith("--format=")), "")
    if query is not None:
        if "csv" not in output_format.split(","):
            return "", "Format must be specified for the query options\n", 2
        return _query(query.split(","), output_format.split(","), gpus)
    if not gpus:
        return NO_DEVICES, "", 6
    if args in (["-L"], ["--list-gpus"]):
        return "".join(f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n" for g in gpus), "", 0
    if args:
        return "", (f"Invalid combination of input arguments: {' '.join(args)}. "
                    "Please run 'nvidia-smi -h' for help.\n"), 2
    return _table(gpus, time.time() if clock is None else clock), "", 0


_FIELDS = {  # field -> (header, unit, value)
    "index": ("index", "", lambda g: str(g.index)),
    "name": ("name", "", lambda g: g.name),
    "gpu_name": ("name", "", lambda g: g.name),
    "uuid": ("uuid", "", lambda g: g.uuid),
    "gpu_uuid": ("uuid", "", lambda g: g.uuid),
    "memory.total": ("memory.total", "MiB", lambda g: str(g.memory_mib)),
    "memory.used": ("memory.used", "MiB", lambda g: "0"),
    "memory.free": ("memory.free", "MiB", lambda g: str(g.memory_mib)),
    "utilization.gpu": ("utilization.gpu", "%", lambda g: "0"),
    "utilization.memory": ("utilization.memory", "%", lambda g: "0"),
    "temperature.gpu": ("temperature.gpu", "", lambda g: "32"),
    "driver_version": ("driver_version", "", lambda g: DRIVER_VERSION),
    "pci.bus_id": ("pci.bus_id", "", lambda g: g.bus_id),
    "count": ("count", "", lambda g: "0"),
    "persistence_mode": ("persistence_mode", "", lambda g: "Enabled"),
    "compute_mode": ("compute_mode", "", lambda g: "Default"),
    "power.draw": ("power.draw", "W", lambda g: "54.00"),
}


def _query(fields: list[str], options: list[str], gpus: list[Gpu]) -> tuple[str, str, int]:
    unknown = [f for f in fields if f.strip() not in _FIELDS]
    if unknown:
        return "", f'Field "{unknown[0].strip()}" is not a valid field to query.\n', 2
    if not gpus:
        return NO_DEVICES, "", 6
    columns = [_FIELDS[f.strip()] for f in fields]
    units = "nounits" not in options
    lines = []
    if "noheader" not in options:  # the header keeps the units also with nounits, as the real tool's
        lines.append(", ".join(f"{header} [{unit}]" if unit else header for header, unit, _ in columns))
    for gpu in gpus:
        values = [str(len(gpus)) if header == "count" else value(gpu) for header, _, value in columns]
        lines.append(", ".join(f"{text} {unit}" if unit and units else text
                               for text, (_, unit, _) in zip(values, columns, strict=True)))
    return "".join(line + "\n" for line in lines), "", 0


def _table(gpus: list[Gpu], clock: float) -> str:
    bar = "+" + "-" * 89 + "+"
    rows = [time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(clock)) + "       ", bar,
            f"| NVIDIA-SMI {DRIVER_VERSION:<22} Driver Version: {DRIVER_VERSION:<14} CUDA Version: {CUDA_VERSION:<9}|",
            "|-----------------------------------------+------------------------+----------------------+",
            "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
            "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
            "|                                         |                        |               MIG M. |",
            "|=========================================+========================+======================|"]
    for gpu in gpus:
        memory = f"0MiB / {gpu.memory_mib:>6}MiB"
        rows += [f"| {gpu.index:>3}  {gpu.name:<28} On  | {gpu.bus_id:>18} Off |{'0':>21} |",
                 f"| N/A   32C    P0             54W /  400W | {memory:>22} |      0%      Default |",
                 "|                                         |                        |             Disabled |",
                 "+-----------------------------------------+------------------------+----------------------+"]
    rows += [" " * 91, bar,
             "| Processes:" + " " * 78 + "|",
             "|  GPU   GI   CI        PID   Type   Process name" + " " * 30 + "GPU Memory |",
             "|        ID   ID" + " " * 63 + "Usage      |",
             "|" + "=" * 89 + "|",
             "|  No running processes found" + " " * 61 + "|", bar]
    return "".join(row + "\n" for row in rows)
