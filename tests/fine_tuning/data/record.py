"""Records the real trainer logs of tests/fine_tuning/data (run by hand, not by the tests):

    python tests/fine_tuning/data/record.py STORAGE_DIR [NAME...]          # plain TRL / transformers 5.x
    /path/to/venv/bin/python tests/fine_tuning/data/record.py STORAGE_DIR --fms [NAME...]   # fms-hf-tuning 4.x

Each run is a PyTorchJob's pods as our manifests make them (ConfigMaps, entrypoint.sh, prepare_dataset.py, env and
the training operator's variables) run by the simulator's real-workload runtime; STORAGE_DIR holds the tiny models
and dataset (python -m pytest_topsail.fine_tuning.tiny STORAGE_DIR). Writes <name>.log (the master's log) and
<name>.termination (its termination message) beside this file.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from pytest_topsail.fine_tuning.catalog import builtin_catalog
from pytest_topsail.fine_tuning.manifests import config_maps, pytorchjob
from pytest_topsail.fine_tuning.point import validate_point
from pytest_topsail.sim.node.realworkload import Exit, Runtime, RuntimeEntry

HERE = Path(__file__).parent
BASE = {"dataset": {"name": "alpaca_tiny"}, "per_device_batch_size": 8, "max_seq_length": 128, "epochs": 1,
        "learning_rate": 1e-3, "dtype": "float32"}
RUNS: dict[str, dict[str, Any]] = {
    "full-llama-1rank": {"model": "topsail/tiny-llama", "method": "full"},
    "lora-bloom-1rank": {"model": "topsail/tiny-bloom", "method": "lora"},
    "full-bloom-2ranks": {"model": "topsail/tiny-bloom", "method": "full", "gpus_per_pod": 2},
    "lora-llama-2pods": {"model": "topsail/tiny-llama", "method": "lora", "pods": 2},
    "lora-bloom-wrong-modules": {"model": "topsail/tiny-bloom", "method": "lora",
                                 "lora": {"target_modules": "q_proj,k_proj"}},
}


def operator_env(job: str, replica: str, index: int, point: Any, port: int) -> dict[str, str]:
    rank = 0 if replica == "Master" else index + 1
    master = "localhost" if replica == "Master" else f"{job}-master-0"
    return {"MASTER_ADDR": master, "MASTER_PORT": str(port), "WORLD_SIZE": str(point.pods),
            "RANK": str(rank), "PET_MASTER_ADDR": master, "PET_MASTER_PORT": str(port),
            "PET_NNODES": str(point.pods), "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": str(point.gpus_per_pod),
            "PYTHONUNBUFFERED": "1"}


async def record(name: str, settings: dict[str, Any], storage: Path, trainer: str, port: int) -> None:
    catalog = builtin_catalog()
    point = validate_point({**BASE, **settings}, name)
    if point.method != "full" and point.lora.target_modules is None:
        point = point.model_copy(update={"lora": point.lora.model_copy(
            update={"target_modules": catalog.lora_target_modules(point.model)})})
    job = f"rec-{name}"
    objects = {(m["kind"], m["metadata"]["name"]): m for m in config_maps(
        job, "ns", point, {}, catalog.dataset(point.dataset.name).samples, catalog.dataset_format(point.dataset.name))}
    manifest = pytorchjob(job, "ns", point, "storage", {})
    root = Path(tempfile.mkdtemp(prefix="record-"))
    (root / "pvc" / "ns").mkdir(parents=True)
    shutil.copytree(storage, root / "pvc" / "ns" / "storage")
    env = {"TOPSAIL_SFT_TRAINER": trainer, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    entry = RuntimeEntry(image="*", files={"/app/accelerate_launch.py": "{package}/fine_tuning/launcher.py"}, env=env,
                         max_seconds=600)
    runtime = Runtime([entry], root)
    logs: dict[str, list[str]] = {}
    exits: dict[str, Exit] = {}
    done = asyncio.Event()
    replicas = [(r, i) for r, spec in manifest["spec"]["pytorchReplicaSpecs"].items() for i in range(spec["replicas"])]
    for replica, index in replicas:
        template = manifest["spec"]["pytorchReplicaSpecs"][replica]["template"]
        pod_name = f"{job}-{replica.lower()}-{index}"
        spec = {**template["spec"], "containers": [{**c, "env": [*c["env"], *[
            {"name": k, "value": v} for k, v in operator_env(job, replica, index, point, port).items()]]}
            for c in template["spec"]["containers"]]}
        pod = {"metadata": {"name": pod_name, "namespace": "ns", "ownerReferences": [{"uid": job}]}, "spec": spec}
        logs[pod_name] = []

        def on_exit(result: Exit, pod_name: str = pod_name) -> None:
            exits[pod_name] = result
            if len(exits) == len(replicas):
                done.set()

        await runtime.start(pod, spec["containers"][0], entry,
                            lambda kind, ns, n: objects.get((kind, n)), [f"{job}-master-0"],
                            logs[pod_name].append, on_exit)
    await asyncio.wait_for(done.wait(), 900)
    master = f"{job}-master-0"
    suffix = "-fms" if trainer == "fms" else ""
    (HERE / f"{name}{suffix}.log").write_text("".join(logs[master]), encoding="utf-8")
    (HERE / f"{name}{suffix}.termination").write_text(exits[master].message, encoding="utf-8")
    print(name, trainer, {p: (e.code, e.reason, e.finished - e.started) for p, e in exits.items()})
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    args = sys.argv[1:]
    storage = Path(args.pop(0))
    trainer = "fms" if "--fms" in args else "trl"
    names = [a for a in args if a != "--fms"] or list(RUNS)
    for offset, name in enumerate(names):
        asyncio.run(record(name, RUNS[name], storage, trainer, 29600 + offset))


if __name__ == "__main__":
    main()
