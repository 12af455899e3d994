"""The scheduler, driven through the in-process store: requests, selectors, affinity, taints, conditions, events."""

from __future__ import annotations

from controller_harness import condition_status, profile, run, running_sim, wait_for

POOLS = [
    {"name": "big", "count": 2, "gpu_profile": "a100", "gpus_per_node": 8, "labels": {"tier": "train"}},
    {"name": "small", "count": 2, "gpu_profile": "t4", "gpus_per_node": 1, "cpu": "4", "memory": "16Gi",
     "labels": {"tier": "infer"}},
    {"name": "tainted", "count": 1, "gpu_profile": "h100", "labels": {"tier": "reserved"},
     "taints": [{"key": "reserved", "value": "team-a", "effect": "NoSchedule"}]},
]


def _node_of(sim, name: str) -> str | None:
    return sim.pod(name)["spec"].get("nodeName")


async def _bound(sim, name: str) -> str:
    return await wait_for(lambda: _node_of(sim, name), f"pod {name} bound")


async def _unschedulable(sim, name: str) -> dict:
    def check():
        for cond in sim.pod(name)["status"].get("conditions") or ():
            if cond["type"] == "PodScheduled" and cond.get("reason") == "Unschedulable":
                return cond
        return None
    return await wait_for(check, f"pod {name} Unschedulable")


def test_gpu_requests_fill_nodes_and_the_surplus_is_unschedulable_with_an_event():
    prof = profile(node_pools=[{"name": "gpu", "count": 2, "gpu_profile": "a100", "gpus_per_node": 2}])

    async def scenario():
        async with running_sim(prof) as sim:
            await wait_for(lambda: len(sim.store.list(sim.nodes)) == 2, "nodes")
            for index in range(5):
                sim.create_pod(f"p{index}", command=["sleep", "infinity"], requests={"nvidia.com/gpu": "1"})
            bound = [await _bound(sim, f"p{index}") for index in range(4)]
            cond = await _unschedulable(sim, "p4")
            events = await wait_for(lambda: sim.events_about("p4", "FailedScheduling"), "FailedScheduling event")
            return bound, cond, events, sim.events_about("p0", "Scheduled"), sim.pod("p0")

    bound, cond, events, scheduled, first = run(scenario)
    assert sorted(bound) == ["gpu-0000", "gpu-0000", "gpu-0001", "gpu-0001"]
    assert cond["status"] == "False"
    assert cond["message"] == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    assert events[0]["type"] == "Warning"
    assert events[0]["message"] == cond["message"]
    assert len(scheduled) == 1
    assert scheduled[0]["message"] == f"Successfully assigned default/p0 to {first['spec']['nodeName']}"
    assert condition_status(first, "PodScheduled") == "True"


def test_pending_pod_is_scheduled_when_capacity_is_freed():
    prof = profile(node_pools=[{"name": "gpu", "count": 1, "gpu_profile": "a100", "gpus_per_node": 1}])

    async def scenario():
        async with running_sim(prof) as sim:
            sim.create_pod("first", command=["sleep", "infinity"], requests={"nvidia.com/gpu": "1"})
            await _bound(sim, "first")
            sim.create_pod("second", command=["sleep", "infinity"], requests={"nvidia.com/gpu": "1"})
            await _unschedulable(sim, "second")
            sim.store.delete(sim.pods, "default", "first")
            return await _bound(sim, "second")

    assert run(scenario) == "gpu-0000"


def test_cpu_and_memory_requests_count():
    async def scenario():
        async with running_sim(profile(node_pools=POOLS)) as sim:
            sim.create_pod("fits", command=["sleep", "infinity"], requests={"cpu": "90", "memory": "1000Gi"},
                           nodeSelector={"tier": "train"})
            sim.create_pod("too-much-cpu", command=["sleep", "infinity"], requests={"cpu": "200"})
            sim.create_pod("too-much-memory", command=["sleep", "infinity"], requests={"memory": "3Ti"})
            node = await _bound(sim, "fits")
            return node, (await _unschedulable(sim, "too-much-cpu"))["message"], \
                (await _unschedulable(sim, "too-much-memory"))["message"]

    node, cpu_message, memory_message = run(scenario)
    assert node.startswith("big-")
    taint = "1 node(s) had untolerated taint {reserved: team-a}"
    assert cpu_message == f"0/5 nodes are available: 4 Insufficient cpu, {taint}."
    assert memory_message == f"0/5 nodes are available: 4 Insufficient memory, {taint}."


def test_node_selector_and_required_node_affinity_choose_the_pool():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["Tesla-T4"]}]}]}}}
    no_match = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["nowhere"]}]}]}}}

    async def scenario():
        async with running_sim(profile(node_pools=POOLS)) as sim:
            sim.create_pod("by-selector", command=["sleep", "infinity"], nodeSelector={"tier": "train"})
            sim.create_pod("by-affinity", command=["sleep", "infinity"], affinity=affinity)
            sim.create_pod("by-hostname", command=["sleep", "infinity"],
                           nodeSelector={"kubernetes.io/hostname": "small-0001"})
            sim.create_pod("nowhere", command=["sleep", "infinity"], affinity=no_match)
            return ([await _bound(sim, n) for n in ("by-selector", "by-affinity", "by-hostname")],
                    (await _unschedulable(sim, "nowhere"))["message"])

    (selector, affinity_node, hostname), message = run(scenario)
    assert selector.startswith("big-")
    assert affinity_node.startswith("small-")
    assert hostname == "small-0001"
    assert message == "0/5 nodes are available: 5 node(s) didn't match Pod's node affinity/selector."


def test_taints_keep_pods_away_unless_tolerated():
    async def scenario():
        async with running_sim(profile(node_pools=POOLS)) as sim:
            reserved = {"tier": "reserved"}
            sim.create_pod("intolerant", command=["sleep", "infinity"], nodeSelector=reserved)
            sim.create_pod("tolerant", command=["sleep", "infinity"], nodeSelector=reserved,
                           tolerations=[{"key": "reserved", "operator": "Equal", "value": "team-a",
                                         "effect": "NoSchedule"}])
            sim.create_pod("tolerates-all", command=["sleep", "infinity"], nodeSelector=reserved,
                           tolerations=[{"operator": "Exists"}])
            sim.create_pod("wrong-value", command=["sleep", "infinity"], nodeSelector=reserved,
                           tolerations=[{"key": "reserved", "value": "team-b", "effect": "NoSchedule"}])
            return ((await _unschedulable(sim, "intolerant"))["message"], await _bound(sim, "tolerant"),
                    await _bound(sim, "tolerates-all"), (await _unschedulable(sim, "wrong-value"))["message"])

    intolerant, tolerant, tolerates_all, wrong_value = run(scenario)
    assert "1 node(s) had untolerated taint {reserved: team-a}" in intolerant
    assert "4 node(s) didn't match Pod's node affinity/selector" in intolerant
    assert tolerant == tolerates_all == "tainted-0000"
    assert "untolerated taint" in wrong_value


def test_not_ready_nodes_get_no_pods():
    prof = profile(node_pools=[{"name": "gpu", "count": 2, "not_ready": 1}])

    async def scenario():
        async with running_sim(prof) as sim:
            await wait_for(lambda: condition_status(sim.store.get(sim.nodes, None, "gpu-0000"), "Ready") == "True",
                           "node Ready")
            for index in range(6):
                sim.create_pod(f"p{index}", command=["sleep", "infinity"])
            return {await _bound(sim, f"p{index}") for index in range(6)}

    assert run(scenario) == {"gpu-0000"}


def test_pods_for_another_scheduler_are_left_alone():
    async def scenario():
        async with running_sim(profile()) as sim:
            sim.create_pod("other", command=["sleep", "infinity"], schedulerName="volcano")
            sim.create_pod("ours", command=["sleep", "infinity"])
            await _bound(sim, "ours")
            return sim.pod("other")

    other = run(scenario)
    assert "nodeName" not in other["spec"]
    assert condition_status(other, "PodScheduled") is None


def test_cordoned_nodes_get_no_new_pods():
    prof = profile(node_pools=[{"name": "gpu", "count": 2}])

    async def scenario():
        async with running_sim(prof) as sim:
            await wait_for(lambda: all(condition_status(n, "Ready") == "True" for n in sim.store.list(sim.nodes)),
                           "nodes Ready")
            sim.store.patch(sim.nodes, None, "gpu-0001", {"spec": {"unschedulable": True}},
                            "application/merge-patch+json")
            for index in range(4):
                sim.create_pod(f"p{index}", command=["sleep", "infinity"])
            return {await _bound(sim, f"p{index}") for index in range(4)}

    assert run(scenario) == {"gpu-0000"}
