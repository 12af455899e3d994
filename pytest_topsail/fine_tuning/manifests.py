"""The objects of one fine-tuning point: the trainer configuration (fms-hf-tuning's config JSON), its ConfigMap,
the entrypoint ConfigMap and the kubeflow.org/v1 PyTorchJob (Master + Workers), as plain dicts."""

from __future__ import annotations

import json
import math
from typing import Any

from pytest_topsail.fine_tuning.catalog import FormatSpec, builtin_catalog
from pytest_topsail.fine_tuning.point import PointSettings

LOSS_CURVE_POINTS = 20

CONFIG_KEY = "config.json"
CONFIG_DIR = "/mnt/config"
ENTRYPOINT_DIR = "/mnt/entrypoint"
STORAGE_DIR = "/mnt/storage"
OUTPUT_DIR = "/mnt/output"

ENTRYPOINT = """#!/bin/bash
# Builds the replicated dataset on the storage PVC (once), prints its statistics, then starts the trainer.
# Expects the model at /mnt/storage/model/<name> and the dataset at /mnt/storage/dataset/<DATASET_SOURCE>.json.
set -euo pipefail
python /mnt/entrypoint/prepare_dataset.py
nvidia-smi -L || true
export SFT_TRAINER_CONFIG_JSON_PATH="$CONFIG_JSON_PATH"
exec python /app/accelerate_launch.py
"""

PREPARE_DATASET = """import json, os, random, re

config = json.load(open(os.environ["CONFIG_JSON_PATH"]))
source = f"/mnt/storage/dataset/{os.environ['DATASET_SOURCE'].removesuffix('.json')}.json"
target, factor = config["training_data_path"], float(os.environ.get("DATASET_REPLICATION", "1"))
samples = json.load(open(source))
model = config["model_name_or_path"]


def load_tokenizer():  # (encode, eos id, model_max_length); the tokenizers library alone when it can (fast start)
    if os.path.exists(f"{model}/tokenizer.json"):
        from tokenizers import Tokenizer
        fast = Tokenizer.from_file(f"{model}/tokenizer.json")
        settings = json.load(open(f"{model}/tokenizer_config.json")) if os.path.exists(
            f"{model}/tokenizer_config.json") else {}
        eos = settings.get("eos_token")
        eos = eos.get("content") if isinstance(eos, dict) else eos
        return (lambda text: fast.encode(text).ids), (fast.token_to_id(eos) if eos else None), int(
            settings.get("model_max_length") or 10**9)
    from transformers import AutoTokenizer
    slow = AutoTokenizer.from_pretrained(model)
    return (lambda text: slow(text)["input_ids"]), slow.eos_token_id, slow.model_max_length


encode, eos, model_max_length = load_tokenizer()
limit = min(int(config["max_seq_length"]), model_max_length)
template = config.get("data_formatter_template")


def text(sample):  # the trainer's text: the template filled in, else input and output (fms-hf-tuning's default)
    if template:
        return re.sub(r"\\{\\{\\s*([^{}]+?)\\s*\\}\\}", lambda m: str(sample.get(m.group(1)) or ""), template)
    return f"{sample.get('input') or ''} {sample.get('output') or ''}".strip()


def raw_tokens(sample):  # as the trainer tokenizes it: with the end-of-sequence token
    ids = encode(text(sample))
    return len(ids) + (eos is not None and (not ids or ids[-1] != eos))


def tokens(sample):  # ... truncated to the limit
    return min(raw_tokens(sample), limit)


chosen = samples * int(factor) + random.Random(42).sample(samples, round((factor % 1) * len(samples)))
if factor != 1:  # as TOPSAIL: samples longer than max_seq_length are dropped from a replicated dataset
    chosen = [s for s in chosen if raw_tokens(s) <= limit]
if not os.path.exists(target):
    json.dump(chosen, open(target, "w"))
counts = [tokens(s) for s in chosen]
print("dataset stats:", {"total_tokens": sum(counts), "total_samples": len(counts),
                         "avg_tokens_per_sample": sum(counts) / max(1, len(counts)), "max_seq_token": max(counts)})
"""


def safe_model_name(model: str) -> str:
    return model.split("@", 1)[0].replace("/", "--")


def logging_steps(point: PointSettings, samples: int, curve_points: int = LOSS_CURVE_POINTS) -> int:
    """Optimizer steps between two loss lines: the point's `logging_steps`, else about `curve_points` lines over the
    run (HF's own default, 500 steps, leaves short runs without any)."""
    if point.logging_steps is not None:
        return point.logging_steps
    per_step = point.effective_batch_size
    steps = math.ceil(samples * point.dataset.replication / per_step) * point.epochs
    return max(1, int(steps // curve_points))


def trainer_config(point: PointSettings, samples: int | None = None,
                   data_format: FormatSpec | None = None) -> dict[str, Any]:
    """fms-hf-tuning's configuration: HF TrainingArguments plus the PEFT and data formatter settings. `samples`: the
    dataset's sample count (for the logging interval; None: the built-in catalog's); `data_format`: its template
    (None: the trainer's default, which trains on `input` and `output` only)."""
    if samples is None:
        known = builtin_catalog().datasets.get(point.dataset.name.removesuffix(".json"))
        samples = known.samples if known else 0
    config: dict[str, Any] = {
        "model_name_or_path": f"{STORAGE_DIR}/model/{safe_model_name(point.model)}",
        "training_data_path": f"{STORAGE_DIR}/dataset/{point.dataset.name}-x{point.dataset.replication:g}.json",
        "output_dir": OUTPUT_DIR,
        "num_train_epochs": point.epochs,
        "per_device_train_batch_size": point.per_device_batch_size,
        "gradient_accumulation_steps": point.gradient_accumulation_steps,
        "learning_rate": point.learning_rate,
        "lr_scheduler_type": "cosine",
        "max_seq_length": point.max_seq_length,
        "include_tokens_per_second": True,
        "use_flash_attn": point.flash_attention,
        "gradient_checkpointing": point.gradient_checkpointing,
        "torch_dtype": point.dtype,
        "save_strategy": "no",
        "logging_strategy": "steps",
        "logging_steps": logging_steps(point, samples),
        "include_num_input_tokens_seen": True,  # the trainer's own token count (transformers 5 has no tokens/s)
        "peft_method": "none" if point.method == "full" else "lora",
    }
    if point.method != "full":
        config.update(r=point.lora.r, lora_alpha=point.lora.alpha, lora_dropout=point.lora.dropout,
                      target_modules=list(point.lora.target_modules or ()))
    if data_format is not None:
        config.update(data_formatter_template=data_format.template, response_template=data_format.response_template)
    if point.method == "qlora":
        config.update(auto_gptq=["triton_v2"], fp16=True, torch_dtype="float16")
    return config


def _metadata(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": dict(labels)}


def config_maps(job: str, namespace: str, point: PointSettings, labels: dict[str, str], samples: int | None = None,
                data_format: FormatSpec | None = None) -> list[dict[str, Any]]:
    config = json.dumps(trainer_config(point, samples, data_format), indent=2, sort_keys=True)
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _metadata(f"{job}-config", namespace, labels),
         "data": {CONFIG_KEY: config}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _metadata(f"{job}-entrypoint", namespace, labels),
         "data": {"entrypoint.sh": ENTRYPOINT, "prepare_dataset.py": PREPARE_DATASET}},
    ]


def pytorchjob(job: str, namespace: str, point: PointSettings, storage_pvc: str,
               labels: dict[str, str]) -> dict[str, Any]:
    gpus = str(point.gpus_per_pod)
    env = {
        "CONFIG_JSON_PATH": f"{CONFIG_DIR}/{CONFIG_KEY}",
        "MODEL_NAME": point.model,
        "DATASET_SOURCE": point.dataset.name,
        "DATASET_REPLICATION": f"{point.dataset.replication:g}",
        "NUM_GPUS": gpus,
        "NCCL_SOCKET_IFNAME": "eth0",
    }
    mounts = [{"name": "storage", "mountPath": STORAGE_DIR}, {"name": "config", "mountPath": CONFIG_DIR},
              {"name": "entrypoint", "mountPath": ENTRYPOINT_DIR}, {"name": "output", "mountPath": OUTPUT_DIR}]
    volumes: list[dict[str, Any]] = [
        {"name": "storage", "persistentVolumeClaim": {"claimName": storage_pvc}},
        {"name": "config", "configMap": {"name": f"{job}-config"}},
        {"name": "entrypoint", "configMap": {"name": f"{job}-entrypoint"}},
        {"name": "output", "emptyDir": {}},
    ]
    if point.shared_memory_gb:
        mounts.append({"name": "shm", "mountPath": "/dev/shm"})
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{point.shared_memory_gb:g}Gi"}})
    container = {
        "name": "pytorch",
        "image": point.container_image,
        "command": ["bash", f"{ENTRYPOINT_DIR}/entrypoint.sh"],
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "resources": {"requests": {"nvidia.com/gpu": gpus, "memory": "10Gi", "cpu": "1"},
                      "limits": {"nvidia.com/gpu": gpus}},
        "volumeMounts": mounts,
    }
    template = {"metadata": {"labels": dict(labels)},
                "spec": {"containers": [container], "volumes": volumes, "restartPolicy": "Never"}}
    replicas: dict[str, Any] = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": template}}
    if point.pods > 1:
        replicas["Worker"] = {"replicas": point.pods - 1, "restartPolicy": "Never", "template": template}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": _metadata(job, namespace, labels),
            "spec": {"pytorchReplicaSpecs": replicas, "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0}}}


TINY_MODELS_LABEL = "topsail.fine-tuning/tiny-models"


def storage_setup_pod(namespace: str, storage_pvc: str, image: str) -> dict[str, Any]:
    """A pod that writes the catalog's tiny models and generated datasets onto the storage PVC
    (`python -m pytest_topsail.fine_tuning.tiny /mnt/storage`): what TOPSAIL's download step does for real models."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "fine-tuning-storage-setup", "namespace": namespace,
                         "labels": {"app.kubernetes.io/part-of": "topsail-fine-tuning"}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "setup", "image": image, "command": ["python", "-m", "pytest_topsail.fine_tuning.tiny",
                                                             STORAGE_DIR],
                "volumeMounts": [{"name": "storage", "mountPath": STORAGE_DIR}]}],
                "volumes": [{"name": "storage", "persistentVolumeClaim": {"claimName": storage_pvc}}]}}
