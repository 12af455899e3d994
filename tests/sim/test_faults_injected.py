"""Fault events of the profile (`faults.events`, sim/controllers/faults.py): each kind shows as on a real cluster
(container terminations, pod conditions and reasons, Events, node conditions/taints/allocatable, DCGM series), hits
the object it names, leaves the others alone, and is the same in every run with the same seed."""

from __future__ import annotations

from typing import Any

import pytest
from controller_harness import CORE, condition_status, now, phase, profile, run, running_sim, wait_for

from pytest_topsail.errors import TopsailError
from pytest_topsail.sim.controllers.faults import kubelet_hooks, target_gpu, target_pod, toleration_seconds
from pytest_topsail.sim.controllers.profile import FaultEvent, Profile
from pytest_topsail.sim.node.devices import devices
from pytest_topsail.sim.node.exporters import DCGM_PATH, Exporters

SPECS = [*CORE, "pytest_topsail.sim.controllers.faults:FaultInjector"]
GPU_POD = {"command": ["sleep", "infinity"], "requests": {"nvidia.com/gpu": "2"}, "restart_policy": "Never"}


def terminated(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["status"]["containerStatuses"][0]["state"]["terminated"]


def allocatable_gpus(sim: Any, node: str) -> str:
    return sim.store.get(sim.nodes, None, node)["status"]["allocatable"]["nvidia.com/gpu"]


def dcgm(sim: Any, series: str, node: str, gpu: int) -> float:
    text = Exporters(sim.store).render(DCGM_PATH).decode()
    for line in text.splitlines():
        if line.startswith(series + "{") and f'gpu="{gpu}"' in line and f'Hostname="{node}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {series} for GPU {gpu} of {node}")


async def two_gpu_pods(sim: Any, *, labels: dict[str, str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    sim.create_pod("victim", labels={"app": "victim", **(labels or {})}, **GPU_POD)
    sim.create_pod("bystander", labels={"app": "other"}, **GPU_POD)
    await wait_for(lambda: phase(sim.pod("victim")) == "Running" and phase(sim.pod("bystander")) == "Running",
                   "both Running")
    return sim.pod("victim"), sim.pod("bystander")


def fault_run(events: list[dict[str, Any]], scenario: Any) -> Any:
    async def body():
        async with running_sim(profile(faults={"events": events}), SPECS) as sim:
            return await scenario(sim)
    return run(body, virtual_time=True)


def test_gpu_xid_fails_the_pod_on_that_gpu_names_the_xid_and_withdraws_the_gpu():
    events = [{"kind": "gpu_xid", "xid": 79, "after_s": 5, "pod": {"match_labels": {"app": "victim"}}}]

    async def scenario(sim):
        victim, _ = await two_gpu_pods(sim)
        node = victim["spec"]["nodeName"]
        before = allocatable_gpus(sim, node)
        failed = await wait_for(lambda: phase(sim.pod("victim")) == "Failed" and sim.pod("victim"), "victim Failed")
        return (node, before, allocatable_gpus(sim, node), failed, now(), sim.events_about("victim", "XidError"),
                sim.pod("bystander"), dcgm(sim, "DCGM_FI_DEV_XID_ERRORS", node, 0),
                sim.store.read_log("default", "victim", "main"))

    node, before, after, failed, when, events_, bystander, xid_series, log = fault_run(events, scenario)
    assert terminated(failed)["exitCode"] == 1 and terminated(failed)["reason"] == "Error"
    assert 5 <= when < 6
    assert (before, after) == ("8", "7")
    assert events_[0]["type"] == "Warning"
    assert f"Xid 79 (GPU has fallen off the bus) on GPU 0 of node {node} used by pod victim" in events_[0]["message"]
    assert "withdrawn by the device plugin" in events_[0]["message"]
    assert xid_series == 79
    assert "CUDA error: Xid 79" in log
    assert phase(bystander) == "Running"


def test_an_application_xid_fails_the_pod_but_keeps_the_gpu_allocatable():
    events = [{"kind": "gpu_xid", "xid": 13, "after_s": 1, "pod": {"match_labels": {"app": "victim"}}}]

    async def scenario(sim):
        victim, _ = await two_gpu_pods(sim)
        await wait_for(lambda: phase(sim.pod("victim")) == "Failed", "victim Failed")
        return allocatable_gpus(sim, victim["spec"]["nodeName"]), sim.events_about("victim", "XidError")

    allocatable, events_ = fault_run(events, scenario)
    assert allocatable == "8"
    assert "Xid 13 (graphics engine exception)" in events_[0]["message"] and "still allocatable" in \
        events_[0]["message"]


def test_gpu_lost_after_the_nth_pod_starts_hits_that_pod_and_its_gpu():
    events = [{"kind": "gpu_lost", "when_running": {"name_prefix": "w-"}, "nth": 2, "gpu": 1}]

    async def scenario(sim):
        for index in range(3):
            sim.create_pod(f"w-{index}", **GPU_POD)
            await wait_for(lambda i=index: phase(sim.pod(f"w-{i}")) in ("Running", "Failed"), f"w-{index} started")
        await wait_for(lambda: phase(sim.pod("w-1")) == "Failed", "w-1 Failed")
        node = sim.pod("w-1")["spec"]["nodeName"]
        return ([phase(sim.pod(f"w-{i}")) for i in range(3)], sim.events_about("w-1", "GPULost"), node,
                allocatable_gpus(sim, node))

    phases, events_, node, allocatable = fault_run(events, scenario)
    assert phases == ["Running", "Failed", "Running"]
    assert f"Xid 79 (GPU has fallen off the bus) on GPU 1 of node {node} used by pod w-1" in events_[0]["message"]
    assert allocatable == "7"


def test_a_withdrawn_gpu_is_given_to_no_new_pod():
    events = [{"kind": "gpu_lost", "node": "gpu-0000", "gpu": 0}]

    async def scenario(sim):
        await wait_for(lambda: allocatable_gpus(sim, "gpu-0000") == "7", "GPU withdrawn")
        sim.create_pod("whole", nodeSelector={"kubernetes.io/hostname": "gpu-0000"},
                       **{**GPU_POD, "requests": {"nvidia.com/gpu": "8"}})
        sim.create_pod("seven", nodeSelector={"kubernetes.io/hostname": "gpu-0000"},
                       **{**GPU_POD, "requests": {"nvidia.com/gpu": "7"}})
        await wait_for(lambda: phase(sim.pod("seven")) == "Running", "seven Running")
        return (condition_status(sim.pod("whole"), "PodScheduled"),
                dcgm(sim, "DCGM_FI_DEV_GPU_UTIL", "gpu-0000", 0), Exporters(sim.store).render(DCGM_PATH).decode())

    scheduled, _, text = fault_run(events, scenario)
    assert scheduled == "False"
    holding = [line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{") and 'pod="seven"' in line]
    assert len(holding) == 7 and not any('gpu="0"' in line for line in holding)


def test_ecc_errors_move_the_counters_and_an_uncorrectable_one_is_xid_48():
    events = [{"kind": "ecc", "uncorrectable": False, "errors": 3, "node": "gpu-0001", "gpu": 2},
              {"kind": "ecc", "after_s": 2, "pod": {"match_labels": {"app": "victim"}}}]

    async def scenario(sim):
        victim, _ = await two_gpu_pods(sim)
        await wait_for(lambda: phase(sim.pod("victim")) == "Failed", "victim Failed")
        node = victim["spec"]["nodeName"]
        return (dcgm(sim, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "gpu-0001", 2), dcgm(sim, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                                                                               node, 0),
                dcgm(sim, "DCGM_FI_DEV_XID_ERRORS", node, 0), sim.events_about("victim", "XidError"))

    single, double, xid, events_ = fault_run(events, scenario)
    assert (single, double, xid) == (3, 1, 48)
    assert "Xid 48 (double bit ECC error)" in events_[0]["message"]


def test_node_lost_taints_the_node_and_fails_its_pods_after_the_toleration_time():
    events = [{"kind": "node_lost", "after_s": 1, "toleration_s": 30, "pod": {"match_labels": {"app": "victim"}}}]

    async def scenario(sim):
        victim, bystander = await two_gpu_pods(sim)
        node = victim["spec"]["nodeName"]
        await wait_for(lambda: condition_status(sim.store.get(sim.nodes, None, node), "Ready") == "Unknown",
                       "node Unknown")
        lost_at = now()
        await wait_for(lambda: phase(sim.pod("victim")) == "Failed", "victim Failed")
        return node, lost_at, now(), sim.pod("victim"), sim.store.get(sim.nodes, None, node), bystander

    node, lost_at, failed_at, victim, node_object, bystander = fault_run(events, scenario)
    assert 29 <= failed_at - lost_at <= 31
    assert victim["status"]["reason"] == "NodeLost"
    assert victim["status"]["message"] == f"Node {node} which was running pod victim is unresponsive"
    disruption = next(c for c in victim["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert disruption["reason"] == "DeletionByTaintManager"
    assert {(t["key"], t["effect"]) for t in node_object["spec"]["taints"]} >= {
        ("node.kubernetes.io/unreachable", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute")}
    ready = next(c for c in node_object["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "NodeStatusUnknown"
    assert bystander["spec"]["nodeName"] != node or phase(bystander) == "Failed"


def test_evicted_preempted_and_oom_show_their_reasons():
    events = [{"kind": "evicted", "pod": {"name_prefix": "evict"}},
              {"kind": "preempted", "pod": {"name_prefix": "preempt"}},
              {"kind": "oom", "pod": {"name_prefix": "oom"}}]
    events = [{**event, "after_s": 1} for event in events]

    async def scenario(sim):
        for name in ("evict", "preempt", "oom", "fine"):
            sim.create_pod(name, **GPU_POD)
        await wait_for(lambda: all(phase(sim.pod(n)) == "Failed" for n in ("evict", "preempt", "oom")), "failed")
        return {name: sim.pod(name) for name in ("evict", "preempt", "oom", "fine")}, sim

    pods, sim = fault_run(events, scenario)
    evicted = pods["evict"]["status"]
    assert evicted["reason"] == "Evicted" and evicted["message"].startswith("The node was low on resource: memory.")
    assert [c["reason"] for c in evicted["conditions"] if c["type"] == "DisruptionTarget"] == ["TerminationByKubelet"]
    preempted = pods["preempt"]["status"]
    assert [c["reason"] for c in preempted["conditions"] if c["type"] == "DisruptionTarget"] == \
        ["PreemptionByScheduler"]
    assert terminated(pods["preempt"])["exitCode"] == 137
    assert terminated(pods["oom"])["reason"] == "OOMKilled" and terminated(pods["oom"])["exitCode"] == 137
    assert phase(pods["fine"]) == "Running"


def test_image_pull_fault_keeps_later_pods_waiting_in_err_image_pull():
    events = [{"kind": "image_pull", "after_s": 1, "pod": {"name_prefix": "late"}}]

    async def scenario(sim):
        sim.create_pod("late-early", **GPU_POD)  # starts before the registry fails
        await wait_for(lambda: phase(sim.pod("late-early")) == "Running", "started")
        await wait_for(lambda: now() > 1.5, "the fault")
        sim.create_pod("late-1", **GPU_POD)
        sim.create_pod("other", **GPU_POD)
        await wait_for(lambda: phase(sim.pod("other")) == "Running", "other Running")
        await wait_for(lambda: sim.pod("late-1")["status"]["containerStatuses"][0]["state"].get("waiting", {}).get(
            "reason") == "ErrImagePull", "ErrImagePull")
        late, events_, early = sim.pod("late-1"), sim.events_about("late-1", "Failed"), sim.pod("late-early")

        await wait_for(lambda: sim.pod("late-1")["status"]["containerStatuses"][0]["state"].get("waiting", {}).get(
            "reason") == "ImagePullBackOff", "ImagePullBackOff")
        return late, events_, early, sim.events_about("late-1", "BackOff")

    late, events_, early, backoff = fault_run(events, scenario)
    assert phase(late) == "Pending"
    assert backoff[0]["message"] == "Back-off pulling image 'registry.example/app:1'"
    assert "failed to pull image 'registry.example/app:1'" in \
        late["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    assert events_[0]["message"].startswith("Failed to pull image 'registry.example/app:1'")
    assert phase(early) == "Running"


def test_targets_are_the_same_for_the_same_seed_and_differ_across_seeds():
    pods = [{"metadata": {"uid": f"u{i}", "name": f"p{i}", "namespace": "ns", "labels": {}},
             "spec": {"nodeName": f"n{i % 3}", "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
            for i in range(12)]
    event = FaultEvent(kind="evicted")
    picks = {seed: target_pod(event, seed, 0, None, pods)["metadata"]["name"] for seed in range(8)}
    assert picks == {seed: target_pod(event, seed, 0, None, pods)["metadata"]["name"] for seed in range(8)}
    assert len(set(picks.values())) > 1
    gpus, pools = {"n0": 8, "n1": 8, "n2": 0}, {"n0": "a", "n1": "b", "n2": "a"}
    assert target_gpu(FaultEvent(kind="gpu_lost", pool="b"), 3, 0, None, gpus, {}, pools)[0] == "n1"
    assert target_gpu(FaultEvent(kind="gpu_lost", node="n0", gpu=5), 3, 0, None, gpus, {}, pools) == ("n0", 5)
    assert target_gpu(FaultEvent(kind="gpu_lost", node="n2"), 3, 0, None, gpus, {}, pools) is None


def test_the_same_seed_fails_the_same_pod_at_the_same_time():
    events = [{"kind": "oom", "after_s": 3, "pod": {"name_prefix": "w-"}}]

    def outcome() -> tuple[str, float]:
        async def scenario(sim):
            for index in range(6):
                sim.create_pod(f"w-{index}", **GPU_POD)
            failed = await wait_for(lambda: [n for n in (f"w-{i}" for i in range(6))
                                             if phase(sim.pod(n)) == "Failed"], "one failed")
            return failed[0], now()
        return fault_run(events, scenario)

    assert outcome() == outcome()


def test_fault_events_are_checked_with_the_profile():
    with pytest.raises(TopsailError) as error:
        Profile.from_dict({"faults": {"events": [{"kind": "gpu_melted"}, {"kind": "gpu_xid", "pool": "nope"}]}})
    assert "faults.events[0].kind" in str(error.value)
    with pytest.raises(TopsailError, match="faults.events names pool 'nope'"):
        Profile.from_dict({"faults": {"events": [{"kind": "gpu_xid", "pool": "nope"}]}})
    with pytest.raises(TopsailError, match="faults.events names node 'gpu-0002', not a node of the pools"):
        Profile.from_dict({"faults": {"events": [{"kind": "node_lost", "node": "gpu-0002"}]}})  # 2 nodes: 0000, 0001
    assert Profile.from_dict({"faults": {"events": [{"kind": "node_lost", "node": "gpu-0001"}]}}).faults.events


def test_without_fault_events_nothing_is_hooked_or_watched():
    async def scenario():
        async with running_sim(profile(), SPECS) as sim:
            sim.create_pod("p", **GPU_POD)
            await wait_for(lambda: phase(sim.pod("p")) == "Running", "Running")
            return kubelet_hooks(sim.store), devices(sim.store).health_of

    hooks, health = run(scenario, virtual_time=True)
    assert hooks.terminate is None and not hooks.pull_failures and not hooks.lost_nodes
    assert health == {}


def test_pods_leave_a_lost_node_after_their_own_toleration_unless_the_fault_says_otherwise():
    own = {"spec": {"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                     "effect": "NoExecute", "tolerationSeconds": 300}]}}
    forever = {"spec": {"tolerations": [{"operator": "Exists"}]}}
    assert toleration_seconds(own, None) == 300 and toleration_seconds(own, 5) == 5
    assert toleration_seconds(forever, None) == float("inf") and toleration_seconds({"spec": {}}, None) == 0


def test_a_restarted_container_on_a_lost_gpu_fails_again_one_after_an_application_xid_runs_again():
    events = [{"kind": "gpu_lost", "after_s": 1, "pod": {"name_prefix": "lost"}},
              {"kind": "gpu_xid", "xid": 13, "after_s": 1, "pod": {"name_prefix": "app"}}]
    always = {**GPU_POD, "restart_policy": "Always"}

    async def scenario(sim):
        sim.create_pod("lost", **always)
        sim.create_pod("app", **always)

        def restarts(name: str) -> int:
            statuses = sim.pod(name)["status"].get("containerStatuses") or [{}]
            return statuses[0].get("restartCount", 0)

        await wait_for(lambda: restarts("lost") >= 3 and restarts("app") >= 1, "restarts")
        await wait_for(lambda: now() > 20, "a while")
        return sim.pod("lost"), sim.pod("app")

    lost, app = fault_run(events, scenario)
    status = lost["status"]["containerStatuses"][0]
    assert status["restartCount"] >= 3 and status["lastState"]["terminated"]["exitCode"] == 1
    app_status = app["status"]["containerStatuses"][0]
    assert app_status["restartCount"] == 1 and "running" in app_status["state"] and phase(app) == "Running"
