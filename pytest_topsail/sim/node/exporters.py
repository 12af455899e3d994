"""The simulated cluster's GPU and container metrics, in the text exposition format Prometheus scrapes.

- ``/metrics/dcgm``: what NVIDIA's dcgm-exporter serves on each GPU node, for every GPU of every node:
  ``DCGM_FI_DEV_GPU_UTIL`` (%), ``DCGM_FI_DEV_FB_USED`` / ``DCGM_FI_DEV_FB_FREE`` (MiB), ``DCGM_FI_DEV_POWER_USAGE``
  (W), ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio), ``DCGM_FI_DEV_XID_ERRORS`` (the last Xid, 0 for none),
  ``DCGM_FI_DEV_ECC_SBE_VOL_TOTAL`` / ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`` (ECC error counters), labelled ``gpu``,
  ``UUID``, ``device``, ``modelName``,
  ``Hostname``, and ``namespace``, ``pod``, ``container`` while a running pod holds the GPU.
- ``/metrics/cadvisor``: what the kubelets' cAdvisor serves for the containers of running pods:
  ``container_cpu_usage_seconds_total`` (counter) and ``container_memory_working_set_bytes``, labelled
  ``namespace``, ``pod``, ``container``, ``image``, ``name``, ``node``.

The values come from sim/node/gpuactivity.py (what the domain simulations report a pod does); a GPU no running pod holds
reads 0 (utilization, memory used, engine activity) and idle power. GPUs are given to pods by sim/node/devices.py
(per node, lowest free healthy index first, kept while the pod runs), which also holds the Xid and ECC errors an
injected fault recorded. On a real cluster the same series come from the dcgm-exporter DaemonSet of
the GPU operator and from each kubelet; docs/metrics.md.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from pytest_topsail.hardware import profile_of_label
from pytest_topsail.kube.quantity import parse_cpu_millis, parse_memory_bytes
from pytest_topsail.sim.node.devices import devices, gpu_count
from pytest_topsail.sim.node.gpuactivity import IDLE, Usage, gpu_activity

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DCGM_PATH = "/metrics/dcgm"
CADVISOR_PATH = "/metrics/cadvisor"
PATHS = (DCGM_PATH, CADVISOR_PATH)
DRIVER_VERSION = "550.90.07"
IDLE_CONTAINER_CORES = 0.002
IDLE_CONTAINER_BYTES = 8 * 2**20
# (idle W, maximum W) by GPU product, the boards' typical idle draw and TDP
POWER = {"a100": (55.0, 400.0), "a100-80gb": (60.0, 400.0), "h100": (70.0, 700.0), "b200": (120.0, 1000.0),
         "l40s": (35.0, 350.0), "t4": (10.0, 70.0)}
DEFAULT_POWER = (50.0, 300.0)

_DCGM = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors."),
)


@dataclass(frozen=True)
class _Gpu:
    node: str
    index: int
    product: str
    memory_mib: float
    power: tuple[float, float]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{key}="{_escape(str(value))}"' for key, value in pairs.items()) + "}"


def _number(value: float) -> str:
    return repr(round(float(value), 6))


def _running(pod: dict[str, Any]) -> bool:
    return ((pod.get("status") or {}).get("phase") == "Running" and bool((pod.get("spec") or {}).get("nodeName"))
            and not pod["metadata"].get("deletionTimestamp"))


class Exporters:
    """Both endpoints of one simulated cluster; keeps the GPU assignment and the CPU counters between scrapes."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._cpu: dict[tuple[str, str], tuple[float, float]] = {}  # (pod uid, container) -> (seconds, at)

    def render(self, path: str) -> bytes:
        now = time.time()
        every = self.store.list(self.store.resource_type("pods"))
        gpu_activity(self.store).retain({pod["metadata"]["uid"] for pod in every})
        pods = [pod for pod in every if _running(pod)]
        text = self.dcgm(pods, now) if path == DCGM_PATH else self.cadvisor(pods, now)
        return text.encode()

    # ------------------------------------------------------------- dcgm-exporter
    def _gpus(self) -> dict[str, list[_Gpu]]:
        gpus: dict[str, list[_Gpu]] = {}
        for node in self.store.list(self.store.resource_type("nodes")):
            labels = node["metadata"].get("labels") or {}
            count = gpu_count(node)
            if count <= 0:
                continue
            product, power = self._product(labels.get("nvidia.com/gpu.product", ""))
            memory = float(labels.get("nvidia.com/gpu.memory") or 0)
            name = node["metadata"]["name"]
            gpus[name] = [_Gpu(name, index, product, memory, power) for index in range(count)]
        return gpus

    @staticmethod
    def _product(label: str) -> tuple[str, tuple[float, float]]:
        profile = profile_of_label(label)
        if profile is not None and profile.product:
            return profile.product, POWER.get(profile.name, DEFAULT_POWER)
        return label.replace("-", " "), DEFAULT_POWER

    def dcgm(self, pods: list[dict[str, Any]], now: float) -> str:
        gpus = self._gpus()
        held = devices(self.store)
        holders = held.holders(pods, {node: len(node_gpus) for node, node_gpus in gpus.items()})
        registry = gpu_activity(self.store)
        lines: dict[str, list[str]] = {name: [f"# HELP {name} {text}", f"# TYPE {name} gauge"] for name, text in _DCGM}
        for node in sorted(gpus):
            for gpu in gpus[node]:
                pod = holders.get((node, gpu.index))
                labels = {"gpu": str(gpu.index), "UUID": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/{gpu.index}')}",
                          "device": f"nvidia{gpu.index}", "modelName": gpu.product, "Hostname": node,
                          "DCGM_FI_DRIVER_VERSION": DRIVER_VERSION}
                usage = IDLE
                if pod is not None:
                    meta = pod["metadata"]
                    use = registry.get(meta["uid"])
                    usage = use.sample(now) if use is not None else IDLE
                    container = (use.container if use is not None and use.container else
                                 pod["spec"]["containers"][0]["name"])
                    labels.update(namespace=meta.get("namespace") or "", pod=meta["name"], container=container)
                utilization = min(100.0, max(0.0, usage.gpu_utilization))
                used = min(gpu.memory_mib, max(0.0, usage.gpu_memory_mib))
                idle_w, max_w = gpu.power
                health = held.health(node, gpu.index)
                values = (round(utilization), round(used), round(gpu.memory_mib - used),
                          idle_w + (max_w - idle_w) * utilization / 100.0, utilization / 100.0,
                          health.xid, health.ecc_sbe, health.ecc_dbe)
                text = _labels(labels)
                for (name, _), value in zip(_DCGM, values, strict=True):
                    lines[name].append(f"{name}{text} {_number(value)}")
        return "\n".join(line for group in lines.values() for line in group) + "\n"

    # ------------------------------------------------------------- cAdvisor
    def cadvisor(self, pods: list[dict[str, Any]], now: float) -> str:
        registry = gpu_activity(self.store)
        cpu = ["# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed in seconds.",
               "# TYPE container_cpu_usage_seconds_total counter"]
        memory = ["# HELP container_memory_working_set_bytes Current working set in bytes.",
                  "# TYPE container_memory_working_set_bytes gauge"]
        seen: set[tuple[str, str]] = set()
        for pod in pods:
            meta = pod["metadata"]
            namespace, name, uid = meta.get("namespace") or "", meta["name"], meta["uid"]
            use = registry.get(uid)
            usage = use.sample(now) if use is not None else None
            containers = pod["spec"].get("containers") or ()
            main = (use.container if use is not None and use.container else
                    containers[0]["name"] if containers else "")
            for container in containers:
                cores, working_set = self._container_usage(container, usage if container["name"] == main else None)
                key = (uid, container["name"])
                seen.add(key)
                total, at = self._cpu.get(key, (0.0, now))
                total += cores * max(0.0, now - at)
                self._cpu[key] = (total, now)
                labels = _labels({"namespace": namespace, "pod": name, "container": container["name"],
                                  "image": str(container.get("image") or ""), "name": f"k8s_{container['name']}_"
                                  f"{name}_{namespace}_{uid}_0", "node": pod["spec"]["nodeName"]})
                cpu.append(f"container_cpu_usage_seconds_total{labels} {_number(total)}")
                memory.append(f"container_memory_working_set_bytes{labels} {_number(working_set)}")
        self._cpu = {key: value for key, value in self._cpu.items() if key in seen}
        return "\n".join(cpu + memory) + "\n"

    @staticmethod
    def _container_usage(container: dict[str, Any], usage: Usage | None) -> tuple[float, float]:
        """CPU cores and working set: what the simulation reported, bounded by the container's limits."""
        cores, working_set = ((usage.cpu_cores, usage.memory_bytes) if usage is not None and
                              (usage.cpu_cores or usage.memory_bytes) else (IDLE_CONTAINER_CORES, IDLE_CONTAINER_BYTES))
        limits = (container.get("resources") or {}).get("limits") or {}
        try:
            if limits.get("cpu"):
                cores = min(cores, parse_cpu_millis(limits["cpu"]) / 1000)
            if limits.get("memory"):
                working_set = min(working_set, float(parse_memory_bytes(limits["memory"])))
        except ValueError:
            pass
        return cores, working_set
