"""Pure logic of the controllers: what a pod needs, where it fits, what its containers do, what a node looks like."""

from __future__ import annotations

import math

from pytest_topsail.sim.controllers.base import set_condition, stable_fraction
from pytest_topsail.sim.controllers.containers import plan_containers, plan_from_command, stage_override
from pytest_topsail.sim.controllers.nodeobjects import node_object
from pytest_topsail.sim.controllers.profile import NodePool, Taint
from pytest_topsail.sim.controllers.scheduling import ClusterState, labels_match, node_info, pod_needs


def _pod(resources=None, node_selector=None, affinity_terms=None, tolerations=None, containers=None):
    spec = {"containers": containers or [{"name": "c", "image": "x", "resources": resources or {}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity_terms:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": affinity_terms}}}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def _cluster(*pools: NodePool, ready: bool = True) -> ClusterState:
    state = ClusterState()
    for pool_index, pool in enumerate(pools):
        for index in range(pool.count):
            node = node_object(pool, pool_index, index)
            if ready:
                node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
            state.set_node(node_info(node))
    return state


def test_node_objects_look_like_fake_gpu_operator_nodes():
    pool = NodePool(name="train", count=1, gpu_profile="h100", gpus_per_node=4, labels={"zone": "b"},
                    taints=[Taint(key="gpu", value="yes")])
    node = node_object(pool, 0, 0)
    labels = node["metadata"]["labels"]
    assert node["metadata"]["name"] == "train-0000"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "4"
    assert labels["nvidia.com/gpu.memory"] == "81559"
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["zone"] == "b"
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert node["status"]["allocatable"]["pods"] == "110"
    assert node["spec"]["taints"] == [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]
    cpu_only = node_object(NodePool(name="cpu", gpu_profile="none"), 1, 0)
    assert "nvidia.com/gpu" not in cpu_only["status"]["capacity"]
    assert "nvidia.com/gpu.present" not in cpu_only["metadata"]["labels"]


def test_pod_needs_sum_containers_and_default_requests_to_limits():
    pod = _pod(containers=[
        {"name": "a", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        {"name": "b", "image": "x", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "2"}}},
    ])
    needs = pod_needs(pod).request_map
    assert needs == {"cpu": 1500, "memory": 2**30, "nvidia.com/gpu": 2, "pods": 1}


def test_round_robin_spreads_and_allocations_are_tracked():
    state = _cluster(NodePool(name="g", count=3, gpus_per_node=2))
    needs = pod_needs(_pod({"limits": {"nvidia.com/gpu": "1"}}))
    placed = []
    for number in range(6):
        placement = state.place(needs)
        state.allocate(number, placement.node, needs.requests)
        placed.append(placement.node)
    assert sorted(placed) == ["g-0000", "g-0000", "g-0001", "g-0001", "g-0002", "g-0002"]
    assert placed[:3] == ["g-0000", "g-0001", "g-0002"]
    full = state.place(needs)
    assert full.node is None
    assert full.message == "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    assert state.release(4)
    assert state.place(needs).node == placed[4]


def test_selector_affinity_and_taints_pick_the_right_pool():
    state = _cluster(
        NodePool(name="a100", count=2, gpu_profile="a100", labels={"zone": "a"}),
        NodePool(name="h100", count=2, gpu_profile="h100", labels={"zone": "b"},
                 taints=[Taint(key="dedicated", value="train")]),
    )
    assert state.place(pod_needs(_pod(node_selector={"zone": "a"}))).node.startswith("a100-")
    blocked = state.place(pod_needs(_pod(node_selector={"zone": "b"})))
    assert blocked.node is None
    assert "2 node(s) had untolerated taint {dedicated: train}" in blocked.message
    assert "2 node(s) didn't match Pod's node affinity/selector" in blocked.message
    tolerant = _pod(node_selector={"zone": "b"}, tolerations=[{"key": "dedicated", "operator": "Equal",
                                                              "value": "train", "effect": "NoSchedule"}])
    assert state.place(pod_needs(tolerant)).node.startswith("h100-")
    by_product = _pod(affinity_terms=[{"matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}]}],
        tolerations=[{"operator": "Exists"}])
    assert state.place(pod_needs(by_product)).node.startswith("h100-")
    pinned = _pod(affinity_terms=[{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                    "values": ["a100-0001"]}]}])
    assert state.place(pod_needs(pinned)).node == "a100-0001"
    assert state.place(pod_needs(_pod(node_selector={"kubernetes.io/hostname": "a100-0000"}))).node == "a100-0000"


def test_affinity_operators():
    labels = {"gpus": "8", "zone": "a"}
    def matches(*expressions):
        return labels_match(pod_needs(_pod(affinity_terms=[{"matchExpressions": list(expressions)}])), labels, "n")
    assert matches({"key": "gpus", "operator": "Gt", "values": ["4"]})
    assert not matches({"key": "gpus", "operator": "Lt", "values": ["4"]})
    assert matches({"key": "zone", "operator": "NotIn", "values": ["b"]})
    assert matches({"key": "missing", "operator": "DoesNotExist"})
    assert not matches({"key": "zone", "operator": "Exists"}, {"key": "zone", "operator": "In", "values": ["b"]})


def test_not_ready_nodes_take_nothing():
    state = _cluster(NodePool(name="g", count=2), ready=False)
    placement = state.place(pod_needs(_pod()))
    assert placement.node is None
    assert "2 node(s) were not ready or unschedulable" in placement.message


def test_container_plans_from_commands():
    assert plan_from_command({"name": "c", "command": ["sleep", "30"]}).duration == 30
    assert plan_from_command({"name": "c", "command": ["sleep"], "args": ["infinity"]}).duration == math.inf
    assert plan_from_command({"name": "c", "command": ["sleep", "2m"]}).duration == 120
    plan = plan_from_command({"name": "c", "command": ["/bin/sh", "-c", "echo start; sleep 1.5 && echo done; exit 4"]})
    assert (plan.duration, plan.exit_code, plan.log) == (1.5, 4, "start\ndone\n")
    assert plan_from_command({"name": "c", "command": ["python", "train.py"]}).duration is None
    assert plan_from_command({"name": "c", "args": ["false"], "command": ["bash", "-ec"]}).exit_code == 1
    assert plan_from_command({"name": "c", "command": ["tail", "-f", "/dev/null"]}).duration == math.inf
    loop = plan_from_command({"name": "c", "command": ["sh", "-c", "while true; do echo tick; sleep 5; done"]})
    assert (loop.duration, loop.exit_code, loop.log) == (math.inf, 0, "tick\n")
    assert plan_from_command({"name": "c", "command": ["bash", "-c", "until false\ndo\n sleep 1\ndone"]}
                             ).duration == math.inf


def test_annotations_override_the_command():
    pod = _pod(containers=[{"name": "c", "image": "x", "command": ["sleep", "100"]}])
    pod["metadata"]["annotations"] = {"sim.topsail.io/duration-seconds": "2", "sim.topsail.io/exit-code": "7",
                                      "sim.topsail.io/log": "loss=0.1", "sim.topsail.io/start-delay-ms": "250"}
    [plan] = plan_containers(pod)
    assert (plan.duration, plan.exit_code, plan.log) == (2.0, 7, "loss=0.1\n")
    assert stage_override(pod["metadata"]["annotations"], "start") == (250.0, None)
    assert stage_override({"sim.topsail.io/start-delay-ms": "soon"}, "start") == (None, None)


def test_seeded_fractions_are_stable_and_spread():
    values = [stable_fraction(1, "pod", i) for i in range(1000)]
    assert values == [stable_fraction(1, "pod", i) for i in range(1000)]
    assert values != [stable_fraction(2, "pod", i) for i in range(1000)]
    assert 0.45 < sum(values) / len(values) < 0.55


def test_set_condition_keeps_transition_time_when_status_unchanged():
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": "t1"}]
    same = set_condition(conditions, {"type": "Ready", "status": "True", "lastTransitionTime": "t2"})
    changed = set_condition(conditions, {"type": "Ready", "status": "False", "lastTransitionTime": "t2"})
    assert same[0]["lastTransitionTime"] == "t1"
    assert changed[0]["lastTransitionTime"] == "t2"
    assert conditions[0]["lastTransitionTime"] == "t1"


def _run_pod(name: str, phase: str, restart_policy: str = "Never", restarts: int = 0, deleting: bool = False) -> dict:
    meta: dict = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"restartPolicy": restart_policy},
            "status": {"phase": phase, "containerStatuses": [{"restartCount": restarts}]}}


def test_job_decisions_are_pure_functions_of_its_spec_and_pods():
    from pytest_topsail.sim.controllers.completion import job_counts, job_outcome, job_pods_wanted

    counts = job_counts([_run_pod("a", "Succeeded"), _run_pod("b", "Running", restarts=2),
                         _run_pod("c", "Running", deleting=True), _run_pod("d", "Failed")])
    assert ([p["metadata"]["name"] for p in counts.active], counts.succeeded, counts.failed) == (["b"], 1, 3)
    assert job_outcome({"backoffLimit": 2}, counts).reason == "BackoffLimitExceeded"
    assert job_outcome({"completions": 2}, counts) is None
    assert job_pods_wanted({"completions": 4, "parallelism": 5}, counts) == 2  # 3 left, 1 running
    assert job_pods_wanted({"parallelism": 3}, counts) == 0  # a work queue adds none once one pod succeeded
    assert job_outcome({}, job_counts([_run_pod("a", "Succeeded")])).kind == "Complete"


def test_pytorchjob_outcome():
    from pytest_topsail.sim.controllers.completion import pytorchjob_outcome

    wanted = [("Master", 0, {}), ("Worker", 0, {})]
    running = {"j-master-0": _run_pod("j-master-0", "Running"),
               "j-worker-0": _run_pod("j-worker-0", "Running", "OnFailure", 1)}
    assert pytorchjob_outcome("j", wanted, running, None).kind == "Running"
    assert pytorchjob_outcome("j", wanted, running, 0).message.endswith("reached the specified backoff limit.")
    assert pytorchjob_outcome("j", wanted, {"j-master-0": running["j-master-0"]}, None) is None  # a pod is missing
    done = {**running, "j-master-0": _run_pod("j-master-0", "Succeeded")}
    assert pytorchjob_outcome("j", wanted, done, None).kind == "Succeeded"
    failed = {**running, "j-master-0": _run_pod("j-master-0", "Failed")}
    assert pytorchjob_outcome("j", wanted, failed, None).message == (
        "PyTorchJob j has failed because pod j-master-0 failed.")


def test_a_pods_run_is_planned_from_its_containers_a_workload_and_faults():
    import math

    from pytest_topsail.sim.controllers.containers import ContainerPlan
    from pytest_topsail.sim.controllers.pods import PodRun, plan_run
    from pytest_topsail.sim.controllers.profile import PodFault
    from pytest_topsail.sim.controllers.runtime import WorkloadPlan

    plans = [ContainerPlan("main", None, 0, ""), ContainerPlan("side", 2.0, 3, "")]
    run = PodRun()
    plan_run(run, plans, 5.0, None, None, hang=False)
    assert (run.run_seconds, run.exit_code) == (5.0, 3)
    plan_run(run, plans, math.inf, None, PodFault(action="fail", after_ms=1500, exit_code=7), hang=False)
    assert (run.run_seconds, run.exit_code, run.fault_message) == (1.5, 7, "failure injected by the simulator profile")
    workload = WorkloadPlan("main", 60.0, logs=[(0.0, "loading"), (1.0, "step 1")], preamble=1)
    run = PodRun()
    plan_run(run, plans, 5.0, workload, None, hang=True)
    assert (run.run_seconds, run.workload, run.timed_logs) == (math.inf, "main", [(0.0, "main", "loading")])
