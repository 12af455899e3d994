"""The simulator's fine-tuning performance model: what a fine-tuning pod of a PyTorchJob does, from its trainer
configuration, the GPU of its node and the coefficients under `plugins.fine_tuning` of the simulator profile.

A simulator controller plugin (`TrainerRuntime`, entry point `fine_tuning` of the group
`pytest_topsail.sim_controllers` in pyproject.toml) adds `TrainerRuntime.plan` as a workload runtime of the pod
lifecycle (pytest_topsail.sim.controllers.runtime): for the `pytorch` container of a PyTorchJob pod with a trainer
configuration (CONFIG_JSON_PATH into a ConfigMap volume) it reads the configuration and the node, then the pure
`plan_training(...)` returns a `WorkloadPlan`: the run time on the wall clock (simulated seconds x `time_scale`, so
an hour of training takes about a second), the exit code and termination reason, and the log lines with the wall
offset at which each is written (trainer formats: dataset statistics, the entrypoint's `nvidia-smi -L`, progress
dicts, the summary dict; or a CUDA out-of-memory traceback). The pod lifecycle applies the plan.

Model (docs/fine-tuning.md "The simulator's model"; coefficients and their sources in docs/simulator-profile.md):
- dataset: sample lengths drawn once per dataset from its log-normal distribution (catalog), replication x F (the
  fraction a seeded subset; samples longer than max_seq_length dropped when F != 1), each sample truncated to
  min(max_seq_length, model max length); batches padded to their longest sample.
- time of one micro-step per GPU = max(compute, weight reads): compute = FLOPs/token x padded tokens /
  (peak x dtype speed x MFU), MFU = mfu_max x t/(t + mfu_tokens_half) x N/(N + mfu_params_half) with t the tokens
  of the micro-batch; QLoRA x qlora_slowdown; several GPUs x 1/scaling efficiency (8-GPU efficiency interpolated
  on log(N) between the small and large model values, x inter_node per doubling of pods, x efficiency_scale);
  seeded Gaussian noise on the throughput.
- memory per GPU: pytest_topsail.fine_tuning.estimate with the longest padded batch; above the GPU's memory: CUDA
  out of memory in the log and exit 1. A container memory limit below the host memory the ranks need to load the
  model: OOMKilled (exit 137).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pytest_topsail.fine_tuning.catalog import DatasetSpec, ModelSpec, builtin_catalog
from pytest_topsail.fine_tuning.estimate import (
    MemoryCoefficients,
    MemoryEstimate,
    Point,
    flops_per_token,
    memory_per_gpu,
    module_count,
)
from pytest_topsail.hardware import GPU_PROFILES, profile_of_label
from pytest_topsail.kube.quantity import parse_memory_bytes
from pytest_topsail.sim.controllers.base import Controller, stable_fraction
from pytest_topsail.sim.controllers.runtime import WorkloadPlan, add_runtime, remove_runtime
from pytest_topsail.sim.node.gpuactivity import Usage

GIB = 2**30


class GpuPerformance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    peak_tflops: float = Field(gt=0)  # dense bf16/fp16 tensor-core peak
    hbm_tbps: float = Field(gt=0)  # memory bandwidth, TB/s


def _default_gpus() -> dict[str, GpuPerformance]:
    return {name: GpuPerformance(peak_tflops=gpu.peak_tflops, hbm_tbps=gpu.hbm_tbps)
            for name, gpu in GPU_PROFILES.items() if gpu.has_gpus}


class FineTuningModel(BaseModel):
    """`plugins.fine_tuning` of the simulator profile: the coefficients of the performance model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time_scale: float = Field(1 / 3600, gt=0)  # wall seconds per simulated second
    mfu_max: float = Field(0.45, gt=0, le=1)
    mfu_tokens_half: float = Field(2048, gt=0)  # tokens per micro-batch at which MFU reaches half of mfu_max
    mfu_params_half_b: float = Field(1.5, gt=0)  # model size (billions) at which MFU reaches half of mfu_max
    full_flops_per_param: float = Field(6.0, gt=0)
    lora_flops_per_param: float = Field(5.0, gt=0)  # 4N in theory; measured LoRA gains are 1.1-1.4x
    qlora_slowdown: float = Field(1.3, ge=1)  # dequantization
    float32_speed: float = Field(0.5, gt=0, le=1)  # TF32 vs bf16 tensor cores
    weight_reads_per_step: float = Field(3.0, ge=0)  # forward + backward reads of the 16-bit weights
    scaling_small: float = Field(0.6, gt=0, le=1)  # FSDP efficiency at 8 GPUs (NVLink) of a 0.5B model
    scaling_large: float = Field(0.9, gt=0, le=1)  # ... of a 7B or larger model
    inter_node: float = Field(0.8, gt=0, le=1)  # per doubling of pods (RDMA ~0.85-0.95, TCP ~0.5-0.8)
    efficiency_scale: float = Field(1.0, gt=0, le=2)  # x the scaling efficiency of multi-GPU jobs (regressions)
    noise: float = Field(0.01, ge=0, le=0.5)  # relative standard deviation of the throughput
    startup_s: float = Field(30.0, ge=0)  # simulated seconds before training: imports, NCCL, data loading
    load_s_per_b: float = Field(2.0, ge=0)  # simulated seconds to load a billion parameters
    save_s: float = Field(5.0, ge=0)
    reserve_gib: float = Field(1.5, ge=0)  # CUDA context and allocator reserve
    full_bytes_per_param: float = Field(16.0, gt=0)
    frozen_bytes_per_param: float = Field(2.0, gt=0)
    quantized_bytes_per_param: float = Field(0.55, gt=0)
    progress_lines: int = Field(20, ge=1, le=1000)  # progress dicts per run (HF logging_steps)
    gpu_busy: float = Field(0.97, gt=0, le=1)  # share of a step with a kernel running (DCGM GPU utilization), 1 GPU
    gpus: dict[str, GpuPerformance] = Field(default_factory=_default_gpus)  # by GPU profile name
    catalog: dict[str, Any] = Field(default_factory=dict)  # extra {models: {...}, datasets: {...}}

    def memory_coefficients(self) -> MemoryCoefficients:
        return MemoryCoefficients(full_bytes_per_param=self.full_bytes_per_param,
                                  frozen_bytes_per_param=self.frozen_bytes_per_param,
                                  quantized_bytes_per_param=self.quantized_bytes_per_param)


@dataclass(frozen=True)
class Gpu:
    """The GPU of the node a pod runs on."""

    product: str
    memory_gib: float
    performance: GpuPerformance


@dataclass(frozen=True)
class Job:
    """What the trainer of one pod is asked to do: its configuration and environment."""

    config: dict[str, Any]
    model_name: str
    dataset_name: str
    replication: float
    gpus_per_pod: int
    pods: int
    rank: int
    memory_limit_bytes: float | None = None

    @property
    def world_size(self) -> int:
        return self.gpus_per_pod * self.pods


def _int(config: dict[str, Any], key: str, default: int) -> int:
    try:
        return max(1, int(config.get(key, default)))
    except (TypeError, ValueError):
        return default


def _float(config: dict[str, Any], key: str, default: float) -> float:
    try:
        value = float(config.get(key, default))
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) and value > 0 else default


@functools.lru_cache(maxsize=32)
def sample_lengths(name: str, spec: DatasetSpec) -> np.ndarray:
    """Token lengths of the dataset's samples: fixed per dataset (a dataset does not change between runs)."""
    rng = np.random.default_rng(int.from_bytes(name.encode()[:8].ljust(8, b"\0"), "big"))
    lengths = rng.lognormal(math.log(spec.median_tokens), spec.sigma, spec.samples)
    return np.maximum(8, lengths.astype(np.int64))


def dataset_lengths(job: Job, spec: DatasetSpec, max_len: int) -> np.ndarray:
    """The tokens of every training sample after replication, dropping and truncation, in training order (the subset
    and the order are seeded by the dataset and its replication: the same data in every run)."""
    base = sample_lengths(job.dataset_name, spec)
    rng = np.random.default_rng(int(stable_fraction(0, job.dataset_name, job.replication) * 2**32))
    whole = int(job.replication)
    extra = int(round((job.replication - whole) * len(base)))
    parts = [base] * whole + ([rng.permutation(base)[:extra]] if extra else [])
    lengths = np.concatenate(parts) if parts else base[:1]
    if job.replication != 1:
        kept = lengths[lengths <= max_len]
        lengths = kept if len(kept) else lengths[:1]
    return rng.permutation(np.minimum(lengths, max_len))


def _normal(seed: int, *parts: object) -> float:
    u1 = max(1e-12, stable_fraction(seed, "n1", *parts))
    u2 = stable_fraction(seed, "n2", *parts)
    return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)


def scaling_efficiency(model: FineTuningModel, params_b: float, gpus_per_pod: int, pods: int) -> float:
    if gpus_per_pod * pods <= 1:
        return 1.0
    position = min(1.0, max(0.0, (math.log10(params_b) - math.log10(0.5)) / (math.log10(7) - math.log10(0.5))))
    at_eight = model.scaling_small + (model.scaling_large - model.scaling_small) * position
    efficiency = at_eight ** (math.log2(gpus_per_pod) / 3) * model.inter_node ** math.log2(pods)
    return min(1.0, efficiency * model.efficiency_scale)


def plan_training(job: Job, gpu: Gpu, model: FineTuningModel, seed: int) -> WorkloadPlan:
    catalog = builtin_catalog().extended(model.catalog, "simulator profile plugins.fine_tuning.catalog")
    scale = model.time_scale
    header = [f"sim trainer: {job.model_name} on {job.gpus_per_pod} x {gpu.product}, rank {job.rank} of {job.pods}"]
    spec = catalog.models.get(job.model_name.split("@", 1)[0])
    data = catalog.datasets.get(job.dataset_name.removesuffix(".json").removesuffix(".jsonl"))
    if spec is None or data is None:
        missing = f"model {job.model_name!r}" if spec is None else f"dataset {job.dataset_name!r}"
        return _plan_of(run_seconds=model.startup_s * scale, exit_code=1, logs=[
            (0.0, header[0]), (model.startup_s * scale, f"OSError: {missing} not found on /mnt/storage")])
    family = catalog.families.get(spec.family or "")
    return _plan(job, gpu, model, seed, spec, data, header, family.missing if family else None)


def _plan(job: Job, gpu: Gpu, model: FineTuningModel, seed: int, spec: ModelSpec, data: DatasetSpec,
          header: list[str], missing_modules: Callable[[list[str]], list[str]] | None = None) -> WorkloadPlan:
    config, scale = job.config, model.time_scale
    batch = _int(config, "per_device_train_batch_size", 4)
    accumulation = _int(config, "gradient_accumulation_steps", 1)
    epochs = _float(config, "num_train_epochs", 1.0)
    max_len = min(_int(config, "max_seq_length", 1024), spec.max_length)
    method = "full" if str(config.get("peft_method", "none")) in ("none", "", "None") else (
        "qlora" if config.get("auto_gptq") or spec.quantized else "lora")
    lengths = dataset_lengths(job, data, max_len)
    world = job.world_size
    micro_per_epoch = math.ceil(len(lengths) / (batch * world))
    padded = np.resize(lengths, micro_per_epoch * world * batch).reshape(-1, batch)
    padded_per_sample = float(padded.max(axis=1).mean())
    longest = int(padded.max())
    dataset_line = ("dataset stats: " + repr({
        "total_tokens": int(lengths.sum()), "total_samples": int(len(lengths)),
        "avg_tokens_per_sample": round(float(lengths.mean()), 2), "max_seq_token": int(lengths.max())}))
    target = config.get("target_modules") or ["q_proj", "k_proj"]
    point = Point(spec, method, world, batch, longest, str(config.get("torch_dtype", "bfloat16")),
                  bool(config.get("use_flash_attn")), bool(config.get("gradient_checkpointing")),
                  _int(config, "r", 4), module_count(target if isinstance(target, list) else [str(target)]))
    load_s = model.startup_s + spec.params_b * model.load_s_per_b
    # the entrypoint's `nvidia-smi -L` (manifests.py) after the dataset: the GPUs the pod was given
    gpu_lines = [(0.0, f"GPU {index}: {gpu.product} (UUID: GPU-{job.rank:04d}{index:04d})")
                 for index in range(job.gpus_per_pod)]
    logs = [(0.0, header[0]), (0.0, dataset_line), *gpu_lines, *_startup_lines(job, config, model.startup_s * scale),
            (load_s * scale, f"Loaded {job.model_name} ({spec.params_b}B)")]
    targets = [str(t) for t in (target if isinstance(target, list) else [target])]
    missing = missing_modules(targets) if missing_modules is not None and method != "full" else []
    if missing:  # peft refuses it, as with the real trainer; the launcher's traceback comes last
        when = load_s * scale
        error = (f"ValueError: Target modules {set(missing)} not found in the base model. Please check the target "
                 "modules and try again.")
        return _plan_of(run_seconds=when, exit_code=1, preamble=len(logs), logs=[
            *logs, (when, "Traceback (most recent call last):"),
            (when, '  File "/app/tuning/sft_trainer.py", line 402, in train'), (when, error),
            (when, "Traceback (most recent call last):"),
            (when, "subprocess.CalledProcessError: Command '['python', '-m', 'tuning.sft_trainer']' returned "
                   "non-zero exit status 1.")])
    if job.memory_limit_bytes is not None and job.memory_limit_bytes < _host_bytes(spec, job):
        return _plan_of(run_seconds=load_s * scale, exit_code=137, reason="OOMKilled", logs=logs[:2], preamble=2)
    needed = memory_per_gpu(point, model.reserve_gib, model.memory_coefficients())
    if needed.total_gib > gpu.memory_gib:
        oom = (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
               f"{max(0.02, needed.activations_gib / spec.layers):.2f} GiB. GPU 0 has a total capacity of "
               f"{gpu.memory_gib:.2f} GiB of which {max(0.0, gpu.memory_gib - needed.model_states_gib) * 0.05:.2f} "
               f"GiB is free. (estimated need {needed.total_gib:.1f} GiB)")
        return _plan_of(run_seconds=(load_s + 5) * scale, exit_code=1, preamble=len(logs),
                            logs=[*logs, ((load_s + 5) * scale, "[rank0]: Traceback (most recent call last):"),
                                  ((load_s + 5) * scale, "[rank0]: " + oom)])
    step_s = _micro_step_seconds(point, padded_per_sample * batch, gpu, model)
    step_s /= scaling_efficiency(model, spec.params_b, job.gpus_per_pod, job.pods)
    noise_key = json.dumps(config, sort_keys=True, default=str), job.model_name, gpu.product, world
    step_s /= max(0.5, 1 + model.noise * _normal(seed, "throughput", *noise_key))
    micro_steps = max(1, math.ceil(micro_per_epoch * epochs))
    runtime = micro_steps * step_s
    optimizer_steps = max(1, math.ceil(micro_steps / accumulation))
    preamble = len(logs)  # what a hung trainer writes: everything before the first step
    seen = padded_per_sample * batch * micro_steps * world  # every rank's tokens, padding included
    trained = float(lengths.sum()) * epochs
    logs += _progress(model, optimizer_steps, epochs, _float(config, "learning_rate", 1e-5), load_s, runtime, seed,
                      noise_key, (seen, trained), _int(config, "logging_steps", 0))
    summary = {"train_runtime": round(runtime, 4),
               "train_samples_per_second": round(len(lengths) * epochs / runtime, 3),
               "train_steps_per_second": round(optimizer_steps / runtime, 3),
               "train_tokens_per_second": round(padded_per_sample * batch * micro_steps / runtime, 3),
               "train_loss": round(_loss(1.0, seed, noise_key), 4), "epoch": round(epochs, 2)}
    if config.get("include_num_input_tokens_seen"):
        summary["num_input_tokens_seen"] = int(seen)
    end = (load_s + runtime) * scale
    bar = _bar(optimizer_steps, optimizer_steps, runtime)
    logs += [(end, f"{bar}{' ' * 47}{summary!r}"), (end, bar + bar),
             ((load_s + runtime + model.save_s) * scale, "Training completed, model saved")]
    if job.rank != 0:  # the metric dicts come from the main process only; start-up lines from every pod
        logs = logs[:preamble]
    usage = _usage(job, spec, model, needed, load_s, runtime)
    return _plan_of(run_seconds=(load_s + runtime + model.save_s) * scale, logs=logs, preamble=preamble, usage=usage)


def gpu_utilization(model: FineTuningModel, params_b: float, gpus_per_pod: int, pods: int) -> float:
    """DCGM GPU utilization (%) while training: the busy share of a step, less the time spent waiting for the
    other GPUs (1 - scaling efficiency)."""
    return 100.0 * model.gpu_busy * scaling_efficiency(model, params_b, gpus_per_pod, pods)


def _usage(job: Job, spec: ModelSpec, model: FineTuningModel, needed: MemoryEstimate, load_s: float,
           runtime: float) -> list[tuple[float, Usage]]:
    """What the trainer does on each GPU and CPU (sim/node/gpuactivity.py): imports and data loading, then the model
    states on the GPU while loading, then training at the memory estimate and the model's utilization, then saving."""
    scale, mib = model.time_scale, 1024.0
    host = _host_bytes(spec, job)
    states = (needed.model_states_gib + needed.reserve_gib) * mib
    training = Usage(gpu_utilization(model, spec.params_b, job.gpus_per_pod, job.pods), needed.total_gib * mib,
                     cpu_cores=1.0 * job.gpus_per_pod, memory_bytes=host)
    return [(0.0, Usage(cpu_cores=1.0, memory_bytes=2 * GIB)),
            (model.startup_s * scale, Usage(0.0, states, cpu_cores=1.0, memory_bytes=host)),
            (load_s * scale, training),
            ((load_s + runtime) * scale, Usage(0.0, states, cpu_cores=1.0, memory_bytes=host))]


def _host_bytes(spec: ModelSpec, job: Job) -> float:
    """Host memory of one pod while its ranks load the model in 16 bits, plus 2 GiB of runtime."""
    return spec.params * 2.0 * job.gpus_per_pod + 2 * GIB


def _micro_step_seconds(point: Point, tokens: float, gpu: Gpu, model: FineTuningModel) -> float:
    flops = flops_per_token(point, model.lora_flops_per_param, model.full_flops_per_param) * tokens
    mfu = (model.mfu_max * tokens / (tokens + model.mfu_tokens_half)
           * point.model.params_b / (point.model.params_b + model.mfu_params_half_b))
    speed = gpu.performance.peak_tflops * 1e12 * mfu * (model.float32_speed if point.dtype == "float32" else 1.0)
    compute = flops / speed
    reads = model.weight_reads_per_step * point.params * 2.0 / (gpu.performance.hbm_tbps * 1e12)
    seconds = max(compute, reads)
    return seconds * model.qlora_slowdown if point.method == "qlora" else seconds


def _loss(progress: float, seed: int, key: tuple[Any, ...]) -> float:
    return 0.9 + 1.2 * math.exp(-4 * progress) + 0.02 * _normal(seed, "loss", progress, *key)


def _startup_lines(job: Job, config: dict[str, Any], when: float) -> list[tuple[float, str]]:
    """What the real launcher and trainer print before training (recorded logs, tests/fine_tuning/data): the launch
    command, fms-hf-tuning's argument dump, a deprecation warning, the rank-prefixed NCCL/DDP noise."""
    world = job.world_size
    lines = [f"launching: python -m torch.distributed.run --nnodes={job.pods} --node_rank={job.rank} "
             f"--nproc_per_node={job.gpus_per_pod} -m tuning.sft_trainer",
             "Rank-0 [INFO]:sft_trainer.py:main: fms-hf-tuning execution start",
             "========================= Flat Arguments =========================",
             *[f"{key}: {value}" for key, value in sorted(config.items()) if not isinstance(value, (dict, list))],
             f"Num processes: {world}", "========================= Arguments Done =========================",
             "/usr/lib/python3.11/site-packages/transformers/training_args.py:1541: FutureWarning: "
             "`gradient_checkpointing` is deprecated and will be removed in v6.",
             "  warnings.warn(f\"`{old}` is deprecated and will be removed in v6.\", FutureWarning)"]
    if world > 1:
        lines.append("[rank1]:[W reducer.cpp:1529] Warning: find_unused_parameters=True was specified in DDP "
                     "constructor, but did not find any unused parameters in the forward pass.")
    return [(when, line) for line in lines]


def _bar(step: int, steps: int, runtime: float) -> str:
    """A tqdm progress bar as the trainer draws it (no terminal: each update after a carriage return)."""
    done = int(10 * step / steps)
    elapsed = runtime * step / steps
    return (f"\r{100 * step // steps:3d}%|{'█' * done}{' ' * (10 - done)}| {step}/{steps} "
            f"[{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}<00:00, {steps / max(runtime, 1e-9):.2f}it/s]")


def _progress(model: FineTuningModel, steps: int, epochs: float, learning_rate: float, start_s: float,
              runtime: float, seed: int, key: tuple[Any, ...], tokens: tuple[float, float] = (0.0, 0.0),
              logging_steps: int = 0) -> list[tuple[float, str]]:
    """One progress dict every `logging_steps` optimizer steps (else `progress_lines` over the run), after the tqdm
    bar of its step, with the extra keys of TRL and include_num_input_tokens_seen (job-wide counts so far)."""
    lines = []
    every = logging_steps if logging_steps > 0 else max(1, steps // model.progress_lines)
    seen, trained = tokens
    for step in range(every, steps + 1, every):
        progress = step / steps
        values: dict[str, Any] = {
            "loss": round(_loss(progress, seed, key), 4),
            "grad_norm": round(0.5 + 2.5 * math.exp(-2 * progress) * (1 + 0.1 * _normal(seed, "g", step)), 4),
            "learning_rate": learning_rate * 0.5 * (1 + math.cos(math.pi * progress)),
            "num_tokens": float(round(trained * progress)),
            "mean_token_accuracy": round(0.3 + 0.5 * progress, 4),
            "epoch": round(epochs * progress, 4)}
        if seen:
            elapsed = runtime * progress
            values.update(num_input_tokens_seen=int(seen * progress), train_runtime=round(elapsed, 4),
                          train_tokens_per_second=round(seen * progress / max(elapsed, 1e-9), 3))
        bar = _bar(step, steps, runtime * progress)
        lines.append(((start_s + runtime * progress * 0.999) * model.time_scale, f"{bar}{' ' * 47}{values!r}"))
    return lines


# reading a pod -------------------------------------------------------------------------------------------
TRAINER_CONTAINER = "pytorch"
JOB_LABEL = "training.kubeflow.org/job-name"


def trainer_container(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The `pytorch` container of a PyTorchJob pod whose environment names a trainer configuration, else None."""
    if JOB_LABEL not in ((pod.get("metadata") or {}).get("labels") or {}):
        return None
    for container in (pod.get("spec") or {}).get("containers") or ():
        if container.get("name") == TRAINER_CONTAINER and _env(container).get("CONFIG_JSON_PATH"):
            return container
    return None


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {str(e.get("name")): str(e.get("value", "")) for e in container.get("env") or () if isinstance(e, dict)}


def config_source(pod: dict[str, Any], container: dict[str, Any]) -> tuple[str, str] | None:
    """(ConfigMap name, key) that the container's CONFIG_JSON_PATH points into through a configMap volume mount."""
    path = _env(container)["CONFIG_JSON_PATH"]
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or () if isinstance(v, dict)}
    for mount in container.get("volumeMounts") or ():
        prefix = str(mount.get("mountPath", "")).rstrip("/") + "/"
        config_map = (volumes.get(mount.get("name")) or {}).get("configMap") or {}
        if path.startswith(prefix) and config_map.get("name"):
            return str(config_map["name"]), path[len(prefix):]
    return None


def expected_run_seconds(config: dict[str, Any], job: Job, gpu_profile: str, model: FineTuningModel) -> float:
    """Seconds one trainer runs on GPUs of `gpu_profile` by this performance model: simulated seconds, i.e. the
    expected time on a real cluster (the simulator takes them x `time_scale`). 0 for a GPU profile it does not know."""
    profile = GPU_PROFILES.get(gpu_profile)
    if profile is None or gpu_profile not in model.gpus:
        return 0.0
    gpu = Gpu(profile.product, profile.gpu_memory_mib / 1024.0, model.gpus[gpu_profile])
    unscaled = model.model_copy(update={"time_scale": 1.0})
    return plan_training(replace(job, config=config), gpu, unscaled, seed=0).run_seconds


def job_of_pod(pod: dict[str, Any], container: dict[str, Any], config: dict[str, Any]) -> Job:
    env = _env(container)
    requests = ((container.get("resources") or {}).get("requests") or {})
    limits = ((container.get("resources") or {}).get("limits") or {})
    gpus = int(float(limits.get("nvidia.com/gpu") or requests.get("nvidia.com/gpu") or env.get("NUM_GPUS") or 1))
    memory_limit = limits.get("memory")
    return Job(config=config, model_name=env.get("MODEL_NAME", ""), dataset_name=env.get("DATASET_SOURCE", "alpaca"),
               replication=_float(env, "DATASET_REPLICATION", 1.0), gpus_per_pod=max(1, gpus),
               pods=_int(env, "WORLD_SIZE", 1), rank=int(env.get("RANK", "0") or 0),
               memory_limit_bytes=float(parse_memory_bytes(str(memory_limit))) if memory_limit else None)


def gpu_of_node(node: dict[str, Any] | None, model: FineTuningModel) -> Gpu | None:
    """The GPU of a simulated node, from the labels the node controller writes (None without GPUs)."""
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    product = labels.get("nvidia.com/gpu.product")
    profile = profile_of_label(product)
    if profile is None or profile.name not in model.gpus:
        return None
    memory_mib = float(labels.get("nvidia.com/gpu.memory") or profile.gpu_memory_mib)
    return Gpu(profile.product, memory_mib / 1024.0, model.gpus[profile.name])


def _plan_of(**fields: Any) -> WorkloadPlan:
    return WorkloadPlan(container=TRAINER_CONTAINER, **fields)


# the simulator plugin ------------------------------------------------------------------------------------
class TrainerRuntime(Controller):
    """Plans the trainer container of fine-tuning pods (see the module's docstring); settings: `FineTuningModel`."""

    name = "fine_tuning"
    settings_model: ClassVar[type[BaseModel] | None] = FineTuningModel

    async def on_start(self) -> None:
        add_runtime(self.store, self.plan)

    async def stop(self) -> None:
        remove_runtime(self.store, self.plan)
        await super().stop()

    def plan(self, pod: dict[str, Any]) -> WorkloadPlan | None:
        container = trainer_container(pod)
        if container is None:
            return None
        model = cast(FineTuningModel, self.settings)
        source = config_source(pod, container)
        config_map = None
        if source is not None:
            config_map = self.store.find(self.store.resource_type("configmaps"), pod["metadata"].get("namespace"),
                                         source[0])
        text = ((config_map or {}).get("data") or {}).get(source[1]) if source else None
        try:
            config = json.loads(text) if text else None
        except ValueError:
            config = None
        if not isinstance(config, dict):
            where = f"configMap {source[0]} key {source[1]}" if source else "no configMap volume"
            return _plan_of(run_seconds=0.01, exit_code=1, logs=[
                (0.0, f"FileNotFoundError: trainer configuration not readable ({where})")])
        node = self.store.find(self.store.resource_type("nodes"), None, pod["spec"]["nodeName"])
        gpu = gpu_of_node(node, model)
        if gpu is None:
            return _plan_of(run_seconds=0.01, exit_code=1, logs=[
                (0.0, "RuntimeError: Found no NVIDIA driver on your system.")])
        return plan_training(job_of_pod(pod, container, config), gpu, model, self.seed)
