"""The simulator's PyTorchJob controller, driven in-process through the store (no HTTP)."""

from __future__ import annotations

import asyncio

from pytest_topsail.scale.workloads import WorkloadSpec, job_objects
from pytest_topsail.sim.controllers import start_controllers
from pytest_topsail.sim.controllers.profile import Profile
from pytest_topsail.sim.registry.store import Store

CONTROLLERS = [
    "pytest_topsail.sim.controllers.nodes:NodeController",
    "pytest_topsail.sim.controllers.scheduler:Scheduler",
    "pytest_topsail.sim.controllers.pods:PodLifecycle",
    "pytest_topsail.sim.controllers.rhoai:RhoaiController",  # registers the preinstalled CRDs
    "pytest_topsail.sim.controllers.pytorchjob:PyTorchJobController",
]


def condition_status(obj, kind):
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond["type"] == kind:
            return cond["status"]
    return None


async def run_job(spec: WorkloadSpec, until: str, extra: dict | None = None, timeout: float = 10.0):
    profile = Profile.from_dict({"nodes": 4, "gpu_profile": "a100", "preinstalled": ["all"], **(extra or {})})
    store = Store(seed=1)
    controllers = await start_controllers(store, profile, CONTROLLERS)
    try:
        store.create(store.resource_type("namespaces"), {"metadata": {"name": "scale"}})
        (manifest,) = job_objects(spec, "pt-00000", "scale", "run1", 0)
        jobs = store.resource_type("pytorchjobs", "kubeflow.org")
        store.create(jobs, manifest)
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            job = store.get(jobs, "scale", "pt-00000")
            if condition_status(job, until) == "True":
                break
            await asyncio.sleep(0.02)
        pods = store.list(store.resource_type("pods"), "scale")
        return job, pods, store
    finally:
        await controllers.stop()


def test_crd_is_registered_and_master_plus_workers_run():
    job, pods, store = asyncio.run(run_job(WorkloadSpec(workload="distributed", workers=2, gpus=1), "Running"))
    assert store.find(store.resource_type("customresourcedefinitions", "apiextensions.k8s.io"), None,
                      "pytorchjobs.kubeflow.org")
    assert condition_status(job, "Created") == "True" and condition_status(job, "Running") == "True"
    assert sorted(p["metadata"]["name"] for p in pods) == ["pt-00000-master-0", "pt-00000-worker-0",
                                                          "pt-00000-worker-1"]
    master = next(p for p in pods if p["metadata"]["name"].endswith("master-0"))
    labels = master["metadata"]["labels"]
    assert labels["training.kubeflow.org/job-role"] == "master" and labels["topsail.scale/job"] == "pt-00000"
    env = {e["name"]: e["value"] for e in master["spec"]["containers"][0]["env"]}
    assert env["WORLD_SIZE"] == "3" and env["RANK"] == "0"
    assert all(p["status"]["phase"] == "Running" and p["spec"].get("nodeName") for p in pods)
    assert job["status"]["replicaStatuses"] == {"Master": {"active": 1}, "Worker": {"active": 2}}


def test_job_succeeds_when_the_master_completes():
    job, pods, _ = asyncio.run(run_job(WorkloadSpec(workload="distributed", workers=1, duration_s=0.2), "Succeeded"))
    assert condition_status(job, "Succeeded") == "True" and condition_status(job, "Running") == "False"
    assert job["status"].get("completionTime")
    assert job["status"]["replicaStatuses"]["Master"] == {"succeeded": 1}


def test_job_fails_when_a_pod_fails():
    fault = {"faults": {"pods": [{"action": "fail", "selector": {"match_labels": {
        "training.kubeflow.org/replica-type": "worker"}}}]}}
    spec = WorkloadSpec(workload="distributed", workers=1, duration_s=5)
    job, _, _ = asyncio.run(run_job(spec, "Failed", extra=fault))
    assert condition_status(job, "Failed") == "True"
