"""The node controller, driven through the in-process store: pools become nodes that turn Ready."""

from __future__ import annotations

from controller_harness import condition_status, profile, run, running_sim, wait_for


def test_pools_become_ready_nodes_with_gpu_labels_capacity_and_taints():
    prof = profile(node_pools=[
        {"name": "train", "count": 3, "gpu_profile": "h100", "gpus_per_node": 4, "labels": {"zone": "a"},
         "taints": [{"key": "dedicated", "value": "training"}]},
        {"name": "infer", "count": 2, "gpu_profile": "t4"},
        {"name": "cpu", "count": 1, "gpu_profile": "none", "cpu": "32", "memory": "128Gi"},
    ])

    async def scenario():
        async with running_sim(prof) as sim:
            nodes = await wait_for(lambda: [n for n in sim.store.list(sim.nodes)
                                            if condition_status(n, "Ready") == "True"] if len(
                sim.store.list(sim.nodes)) == 6 else None, "6 nodes")
            return {n["metadata"]["name"]: n for n in nodes}

    nodes = run(scenario)
    assert sorted(nodes) == ["cpu-0000", "infer-0000", "infer-0001", "train-0000", "train-0001", "train-0002"]
    train = nodes["train-0001"]
    labels = train["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "4"
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["nvidia.com/gpu.memory"] == "81559"
    assert labels["zone"] == "a"
    assert labels["kubernetes.io/hostname"] == "train-0001"
    assert train["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert train["status"]["allocatable"]["cpu"] == "192"
    assert train["status"]["allocatable"]["pods"] == "110"
    assert train["spec"]["taints"] == [{"key": "dedicated", "value": "training", "effect": "NoSchedule"}]
    t4 = nodes["infer-0000"]["metadata"]["labels"]
    assert (t4["nvidia.com/gpu.product"], t4["nvidia.com/gpu.count"]) == ("Tesla-T4", "4")
    cpu = nodes["cpu-0000"]
    assert "nvidia.com/gpu" not in cpu["status"]["capacity"]
    assert "nvidia.com/gpu.present" not in cpu["metadata"]["labels"]
    assert (cpu["status"]["capacity"]["cpu"], cpu["status"]["capacity"]["memory"]) == ("32", "128Gi")


def test_nodes_turn_ready_after_the_profile_delay():
    prof = profile(nodes={"ready": {"delay_ms": 300}}, node_pools=[{"name": "gpu", "count": 2}])

    async def scenario():
        async with running_sim(prof) as sim:
            created = [condition_status(n, "Ready") for n in sim.store.list(sim.nodes)]
            await wait_for(lambda: all(condition_status(n, "Ready") == "True" for n in sim.store.list(sim.nodes)),
                           "nodes Ready")
            ready_at = [sim.timeline.first("Node", f"gpu-000{i}", lambda s: "ready=True" in s) for i in range(2)]
            return created, ready_at

    created, ready_at = run(scenario, virtual_time=True)
    assert created == ["False", "False"]
    assert ready_at == [0.3, 0.3]


def test_not_ready_nodes_of_a_pool_stay_not_ready_with_the_not_ready_taint():
    prof = profile(node_pools=[{"name": "gpu", "count": 3, "not_ready": 1}])

    async def scenario():
        async with running_sim(prof) as sim:
            await wait_for(lambda: sum(condition_status(n, "Ready") == "True" for n in sim.store.list(sim.nodes)) == 2,
                           "two Ready nodes")
            await wait_for(lambda: sim.store.get(sim.nodes, None, "gpu-0002")["spec"].get("taints"), "taint")
            return {n["metadata"]["name"]: n for n in sim.store.list(sim.nodes)}

    nodes = run(scenario)
    broken = nodes["gpu-0002"]
    assert condition_status(broken, "Ready") == "False"
    assert [t["key"] for t in broken["spec"]["taints"]] == ["node.kubernetes.io/not-ready"]
    assert condition_status(nodes["gpu-0000"], "Ready") == "True"
