"""The objects of one fine-tuning point: the trainer configuration (fms-hf-tuning's config JSON), its ConfigMap,
the entrypoint ConfigMap and the kubeflow.org/v1 PyTorchJob (Master + Workers), as plain dicts."""

from __future__ import annotations

import json
from typing import Any

from pytest_topsail.fine_tuning.settings import PointSettings

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

PREPARE_DATASET = """import json, os, random
from transformers import AutoTokenizer

config = json.load(open(os.environ["CONFIG_JSON_PATH"]))
source = f"/mnt/storage/dataset/{os.environ['DATASET_SOURCE'].removesuffix('.json')}.json"
target, factor = config["training_data_path"], float(os.environ.get("DATASET_REPLICATION", "1"))
samples = json.load(open(source))
tokenizer = AutoTokenizer.from_pretrained(config["model_name_or_path"])
limit = min(int(config["max_seq_length"]), tokenizer.model_max_length)
chosen = samples * int(factor) + random.Random(42).sample(samples, round((factor % 1) * len(samples)))
if factor != 1:  # as TOPSAIL: samples longer than max_seq_length are dropped from a replicated dataset
    chosen = [s for s in chosen if len(tokenizer(json.dumps(s))["input_ids"]) <= limit]
if not os.path.exists(target):
    json.dump(chosen, open(target, "w"))
tokens = [min(len(tokenizer(json.dumps(s))["input_ids"]), limit) for s in chosen]
print("dataset stats:", {"total_tokens": sum(tokens), "total_samples": len(tokens),
                         "avg_tokens_per_sample": sum(tokens) / max(1, len(tokens)), "max_seq_token": max(tokens)})
"""


def safe_model_name(model: str) -> str:
    return model.split("@", 1)[0].replace("/", "--")


def trainer_config(point: PointSettings) -> dict[str, Any]:
    """fms-hf-tuning's configuration: HF TrainingArguments plus the PEFT settings."""
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
        "peft_method": "none" if point.method == "full" else "lora",
    }
    if point.method != "full":
        config.update(r=point.lora.r, lora_alpha=point.lora.alpha, lora_dropout=point.lora.dropout,
                      target_modules=list(point.lora.target_modules))
    if point.method == "qlora":
        config.update(auto_gptq=["triton_v2"], fp16=True, torch_dtype="float16")
    return config


def _metadata(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": dict(labels)}


def config_maps(job: str, namespace: str, point: PointSettings, labels: dict[str, str]) -> list[dict[str, Any]]:
    config = json.dumps(trainer_config(point), indent=2, sort_keys=True)
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
