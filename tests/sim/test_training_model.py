"""The simulator's fine-tuning performance model: PyTorchJobs carrying a trainer configuration, on the virtual
clock (stage delays and training time take no real time)."""

from __future__ import annotations

import asyncio
from typing import Any

from controller_harness import CORE, condition_status, phase, profile, run, running_sim, wait_for

from pytest_topsail.fine_tuning.manifests import config_maps, pytorchjob
from pytest_topsail.fine_tuning.point import validate_point
from pytest_topsail.fine_tuning.trainer_log import parse_text

SPECS = [*CORE, "pytest_topsail.sim.controllers.pytorchjob:PyTorchJobController",
         "pytest_topsail.fine_tuning.simulation:TrainerRuntime"]
POOLS = [{"name": "dgx", "count": 2, "gpu_profile": "a100-80gb"}]


def sim_profile(**fine_tuning: Any):
    sections: dict[str, Any] = {"node_pools": POOLS, "plugins": {"fine_tuning": fine_tuning}}
    faults = fine_tuning.pop("faults", None)
    if faults:
        sections["faults"] = {"pods": faults}
    return profile(**sections)


async def train(sim, name: str, **settings: Any) -> tuple[dict, dict[str, str], dict]:
    """Create the point's objects, wait for the job to finish; (job, logs by pod, master pod)."""
    point = validate_point({"model": "bigcode/gpt_bigcode-santacoder", "max_seq_length": 512,
                            "per_device_batch_size": 8, "dataset": {"name": "alpaca", "replication": 0.1},
                            **settings}, "test")
    labels = {"app": name}
    for config_map in config_maps(name, "default", point, labels):
        sim.store.create(sim.store.resource_type("configmaps"), config_map)
    jobs = sim.store.resource_type("pytorchjobs", "kubeflow.org")
    sim.store.create(jobs, pytorchjob(name, "default", point, "storage", labels))

    def finished():
        job = sim.store.get(jobs, "default", name)
        return job if "True" in (condition_status(job, "Succeeded"), condition_status(job, "Failed")) else None

    job = await wait_for(finished, f"PyTorchJob {name} finished", timeout=3600)
    pods = sim.store.list(sim.pods, "default", label_selector={"training.kubeflow.org/job-name": name})
    logs = {p["metadata"]["name"]: sim.store.read_log("default", p["metadata"]["name"], "pytorch") for p in pods}
    return job, logs, sim.pod(f"{name}-master-0")


def _storage(sim) -> None:
    sim.store.create(sim.claims, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                  "metadata": {"name": "storage", "namespace": "default"},
                                  "spec": {"accessModes": ["ReadWriteOnce"],
                                           "resources": {"requests": {"storage": "80Gi"}}}})


def _throughput(log: str) -> float:
    return parse_text(log, "log").value("train_tokens_per_second")


def test_a_trainer_job_writes_the_trainer_formats_and_succeeds():
    async def scenario():
        async with running_sim(sim_profile(), SPECS) as sim:
            _storage(sim)
            job, logs, master = await train(sim, "ft-a", epochs=2)
            return job, logs, master

    job, logs, master = run(scenario, virtual_time=True)
    assert condition_status(job, "Succeeded") == "True"
    assert phase(master) == "Succeeded"
    results = parse_text(logs["ft-a-master-0"], "master log")
    assert 15 <= len(results.progress) <= 25  # one line every logging_steps (chosen for about 20 lines)
    assert 1.8 <= results.progress[-1].epoch <= 2.0
    assert results.progress[0].loss > results.progress[-1].loss  # the loss goes down
    assert results.value("train_runtime") > 60  # simulated seconds, far more than the run took
    # a 10% subset of alpaca, samples longer than max_seq_length dropped (replication != 1)
    assert 0.9 * 5200 < results.value("total_samples") < 5200
    assert results.value("max_seq_token") <= 512


def test_more_gpus_scale_sub_linearly_and_a_lower_efficiency_only_slows_multi_gpu_jobs():
    async def throughputs(**model: Any) -> dict[int, float]:
        async with running_sim(sim_profile(**model), SPECS) as sim:
            _storage(sim)
            values = {}
            for gpus in (1, 4):
                _, logs, _ = await train(sim, f"ft-g{gpus}", gpus_per_pod=gpus)
                values[gpus] = _throughput(logs[f"ft-g{gpus}-master-0"])
            return values

    normal = run(lambda: throughputs(), virtual_time=True)
    again = run(lambda: throughputs(), virtual_time=True)
    slower = run(lambda: throughputs(efficiency_scale=0.85), virtual_time=True)
    assert normal == again  # same seed, same numbers
    assert 0.5 < normal[4] / normal[1] < 1.0  # per-GPU throughput drops with FSDP over 4 GPUs
    assert slower[1] == normal[1]
    assert slower[4] / normal[4] < 0.9


def test_a_model_that_does_not_fit_fails_with_cuda_out_of_memory():
    async def scenario():
        async with running_sim(sim_profile(), SPECS) as sim:
            _storage(sim)
            return await train(sim, "ft-oom", model="ibm-granite/granite-7b-base")

    job, logs, master = run(scenario, virtual_time=True)
    assert condition_status(job, "Failed") == "True"
    terminated = master["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (1, "Error")
    assert "torch.OutOfMemoryError: CUDA out of memory" in logs["ft-oom-master-0"]
    assert "GPU 0 has a total capacity of 80.00 GiB" in logs["ft-oom-master-0"]


def test_a_memory_limit_below_the_model_load_is_oomkilled():
    async def scenario():
        async with running_sim(sim_profile(), SPECS) as sim:
            _storage(sim)
            point = validate_point({"model": "bigcode/gpt_bigcode-santacoder"}, "test")
            job = pytorchjob("ft-mem", "default", point, "storage", {})
            resources = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"]
            resources["limits"]["memory"] = resources["requests"]["memory"] = "2Gi"  # a request above it is refused
            for config_map in config_maps("ft-mem", "default", point, {}):
                sim.store.create(sim.store.resource_type("configmaps"), config_map)
            sim.store.create(sim.store.resource_type("pytorchjobs", "kubeflow.org"), job)
            pods = sim.store.resource_type("pods")

            def failed_master():
                pod = sim.store.find(pods, "default", "ft-mem-master-0")
                return pod if pod is not None and phase(pod) == "Failed" else None

            return await wait_for(failed_master, "master failed", timeout=3600)

    master = run(scenario, virtual_time=True)
    terminated = master["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")


def test_a_hang_fault_keeps_the_job_running_without_progress():
    async def scenario():
        prof = sim_profile(faults=[{"action": "hang", "selector": {"name_prefix": "ft-hang"}}])
        async with running_sim(prof, SPECS) as sim:
            _storage(sim)
            point = validate_point({"model": "bigcode/gpt_bigcode-santacoder"}, "test")
            for config_map in config_maps("ft-hang", "default", point, {}):
                sim.store.create(sim.store.resource_type("configmaps"), config_map)
            sim.store.create(sim.store.resource_type("pytorchjobs", "kubeflow.org"),
                             pytorchjob("ft-hang", "default", point, "storage", {}))
            pods = sim.store.resource_type("pods")
            await wait_for(lambda: phase(sim.store.find(pods, "default", "ft-hang-master-0") or {}) == "Running",
                           "master running", timeout=60)
            await asyncio.sleep(20)  # virtual seconds: ~20 simulated hours, far past the end of a normal run
            return sim.pod("ft-hang-master-0"), sim.store.read_log("default", "ft-hang-master-0", "pytorch")

    master, log = run(scenario, virtual_time=True)
    assert phase(master) == "Running"
    assert "dataset stats:" in log and "'loss'" not in log and "train_runtime" not in log


def test_multi_pod_job_logs_the_summary_from_rank_zero_only():
    async def scenario():
        async with running_sim(sim_profile(), SPECS) as sim:
            _storage(sim)
            return await train(sim, "ft-mp", pods=2, gpus_per_pod=2)

    job, logs, _ = run(scenario, virtual_time=True)
    assert condition_status(job, "Succeeded") == "True"
    assert "train_runtime" in logs["ft-mp-master-0"]
    assert "train_runtime" not in logs["ft-mp-worker-0"]
    assert "rank 1 of 2" in logs["ft-mp-worker-0"]
