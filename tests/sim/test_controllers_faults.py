"""Faults from the profile (pods failing, never scheduling, nodes NotReady; the API-fault contract with the server)
and determinism: the same seed gives the same timeline."""

from __future__ import annotations

import time

from aiohttp.test_utils import RawTestServer, TestClient
from controller_harness import condition_status, phase, profile, run, running_sim, wait_for

from pytest_topsail.sim.api.server import ApiServer
from pytest_topsail.sim.controllers.profile import ApiFault
from pytest_topsail.sim.registry.store import Store


def _unschedulable_message(pod: dict) -> str | None:
    for cond in pod["status"].get("conditions") or ():
        if cond["type"] == "PodScheduled" and cond.get("reason") == "Unschedulable":
            return cond["message"]
    return None


def test_fail_fault_ends_matching_pods_with_its_exit_code_and_message():
    faults = {"pods": [{"action": "fail", "selector": {"match_labels": {"app": "doomed"}}, "exit_code": 7,
                        "after_ms": 100, "message": "GPU fell off the bus"}]}

    async def scenario():
        async with running_sim(profile(faults=faults)) as sim:
            sim.create_pod("doomed", command=["sleep", "infinity"], labels={"app": "doomed"}, restart_policy="Never")
            sim.create_pod("healthy", command=["sleep", "infinity"], labels={"app": "fine"}, restart_policy="Never")
            await wait_for(lambda: phase(sim.pod("doomed")) == "Running", "doomed Running")
            doomed = await wait_for(lambda: phase(sim.pod("doomed")) == "Failed" and sim.pod("doomed"), "Failed")
            return doomed, sim.store.read_log("default", "doomed", "main"), sim.pod("healthy")

    doomed, log, healthy = run(scenario)
    assert doomed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 7
    assert "GPU fell off the bus" in log
    assert phase(healthy) == "Running"


def test_fail_fault_fraction_picks_the_same_pods_for_the_same_seed():
    def faults(fraction: float) -> dict:
        return {"pods": [{"action": "fail", "fraction": fraction, "selector": {"namespace": "default",
                                                                              "name_prefix": "w-"}}]}

    def failed_pods(seed: int) -> set[str]:
        async def scenario():
            async with running_sim(profile(seed=seed, faults=faults(0.5))) as sim:
                names = [f"w-{index}" for index in range(20)]
                for name in names:
                    sim.create_pod(name, command=["sleep", "infinity"], restart_policy="Never")
                await wait_for(lambda: all(phase(sim.pod(n)) in ("Running", "Failed") for n in names), "all started")
                return {n for n in names if phase(sim.pod(n)) == "Failed"}
        return run(scenario)

    first, again, other_seed = failed_pods(3), failed_pods(3), failed_pods(4)
    assert first == again
    assert 3 <= len(first) <= 17  # about half of 20
    assert other_seed != first


def test_never_schedule_fault_keeps_pods_pending():
    faults = {"pods": [{"action": "never_schedule", "selector": {"name_prefix": "stuck-"}}]}

    async def scenario():
        async with running_sim(profile(faults=faults)) as sim:
            sim.create_pod("stuck-1", command=["sleep", "infinity"])
            sim.create_pod("free-1", command=["sleep", "infinity"])
            await wait_for(lambda: phase(sim.pod("free-1")) == "Running", "free pod Running")
            message = await wait_for(lambda: _unschedulable_message(sim.pod("stuck-1")), "Unschedulable")
            return sim.pod("stuck-1"), message, sim.event_reasons("stuck-1")

    stuck, message, reasons = run(scenario)
    assert phase(stuck) == "Pending"
    assert "nodeName" not in stuck["spec"]
    assert message.startswith("0/2 nodes are available:")
    assert "never schedules" in message
    assert reasons == ["FailedScheduling"]


def test_node_fault_turns_nodes_not_ready_and_the_scheduler_avoids_them():
    prof = profile(node_pools=[{"name": "a", "count": 2}, {"name": "b", "count": 2}],
                   faults={"nodes": [{"pool": "b", "count": 1, "after_ms": 150}]})

    async def scenario():
        async with running_sim(prof) as sim:
            def not_ready():
                return [n["metadata"]["name"] for n in sim.store.list(sim.nodes)
                        if condition_status(n, "Ready") == "False"]

            broken = await wait_for(not_ready, "a node NotReady")
            when = sim.timeline.first("Node", broken[0], lambda s: "ready=False" in s and "ready=True" not in s)
            for index in range(9):
                sim.create_pod(f"p{index}", command=["sleep", "infinity"])
            nodes = {await wait_for(lambda i=index: sim.pod(f"p{i}")["spec"].get("nodeName"), "bound")
                     for index in range(9)}
            return broken, when, nodes, sim.store.get(sim.nodes, None, broken[0])

    broken, when, nodes, broken_node = run(scenario, virtual_time=True)
    assert len(broken) == 1 and broken[0].startswith("b-")
    assert when == 0.15
    assert broken[0] not in nodes
    assert len(nodes) == 3
    assert "node.kubernetes.io/not-ready" in [t["key"] for t in broken_node["spec"]["taints"]]


def test_api_faults_of_the_profile_are_applied_by_the_server():
    prof = profile(faults={"api": [
        {"verb": "create", "resource": "batch/jobs", "error_rate": 0.5, "code": 503},
        {"verb": "list", "resource": "configmaps", "latency_ms": 200},
    ]})

    async def scenario():
        server = ApiServer(Store(seed=prof.seed), token="secret", api_faults=prof.faults.api, seed=prof.seed)
        headers = {"Authorization": "Bearer secret"}
        async with TestClient(RawTestServer(server.handle)) as client:
            codes = []
            for index in range(40):
                job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"j{index}"},
                       "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}],
                                                      "restartPolicy": "Never"}}}}
                response = await client.post("/apis/batch/v1/namespaces/default/jobs", json=job, headers=headers)
                codes.append((response.status, (await response.json()).get("reason")))
            pod_codes = []
            for index in range(10):
                pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{index}"},
                       "spec": {"containers": [{"name": "c", "image": "x"}]}}
                response = await client.post("/api/v1/namespaces/default/pods", json=pod, headers=headers)
                pod_codes.append(response.status)
            started = time.monotonic()
            listed = await client.get("/api/v1/namespaces/default/configmaps", headers=headers)
            slow = time.monotonic() - started
        server.close()
        return codes, pod_codes, listed.status, slow

    codes, pod_codes, list_status, slow = run(scenario)
    failures = [c for c in codes if c[0] != 201]
    assert set(failures) <= {(503, "ServiceUnavailable")}
    assert 5 <= len(failures) <= 35  # about half of 40
    assert pod_codes == [201] * 10  # other resources are untouched
    assert list_status == 200 and slow >= 0.2


def test_api_fault_matching_by_verb_group_and_resource():
    fault = ApiFault(verb="create", resource="batch/jobs")
    assert fault.matches("create", "jobs", "batch")
    assert not fault.matches("create", "jobs", "")  # a different group's "jobs"
    assert not fault.matches("delete", "jobs", "batch")
    by_plural = ApiFault(resource="pods")
    assert by_plural.matches("list", "pods", "") and by_plural.matches("watch", "pods", "")
    assert not by_plural.matches("list", "nodes", "")


def _timeline(seed: int) -> list[tuple[float, str, str, str]]:
    """Every change of the pods' and nodes' phase, readiness and node, with the time it happened (virtual clock):
    pods with seeded jitter on every stage, a Job, a fault failing some pods and one turning a node NotReady."""
    jitter = {"delay_ms": 10, "jitter_ms": 500}
    stages = {"schedule": jitter, "initialize": jitter, "start": jitter, "ready": jitter,
              "complete": {"delay_ms": 300, "jitter_ms": 300}}
    faults = {"pods": [{"action": "fail", "fraction": 0.3, "after_ms": 200}],
              "nodes": [{"count": 1, "after_ms": 400}]}
    prof = profile(seed=seed, stages=stages, faults=faults, nodes={"ready": {"jitter_ms": 100}},
                   node_pools=[{"name": "gpu", "count": 3, "gpus_per_node": 2}])
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"},
           "spec": {"completions": 3, "parallelism": 2, "backoffLimit": 10, "template": {"spec": {
               "containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"}}}}

    async def scenario():
        async with running_sim(prof) as sim:
            await wait_for(lambda: all(condition_status(n, "Ready") == "True" for n in sim.store.list(sim.nodes)),
                           "nodes Ready")
            names = [f"p{index}" for index in range(6)]
            for name in names:
                sim.create_pod(name, command=["sleep", "infinity"], requests={"nvidia.com/gpu": "1"},
                               restart_policy="Never")
            sim.store.create(sim.jobs, job)

            def settled():
                job_done = any(c["type"] in ("Complete", "Failed") for c in
                               sim.store.get(sim.jobs, "default", "train").get("status", {}).get("conditions") or ())
                return job_done and all(phase(sim.pod(n)) in ("Running", "Failed") or unschedulable(sim.pod(n))
                                        for n in names)

            await wait_for(settled, "pods started and the job finished")
            return sim.timeline.entries
    return run(scenario, virtual_time=True)


def unschedulable(pod: dict) -> bool:
    """Pending for good: the node fault took the node it would have gone to (depends on the seed's timings)."""
    return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or ())


def test_the_same_seed_gives_the_same_timeline():
    first, again, other = _timeline(11), _timeline(11), _timeline(12)
    assert len(first) > 40
    assert first == again
    assert other != first
    assert [e[2] for e in other if e[1] == "Pod" and e[2].startswith("train-")] != \
        [e[2] for e in first if e[1] == "Pod" and e[2].startswith("train-")]  # job pod names come from the seed
