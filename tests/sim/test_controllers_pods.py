"""Pod lifecycle stages and simulated containers, driven through the in-process store."""

from __future__ import annotations

import asyncio

from controller_harness import condition_status, phase, profile, run, running_sim, wait_for


def _terminated(pod: dict) -> dict:
    return pod["status"]["containerStatuses"][0]["state"]["terminated"]


def test_a_long_running_pod_becomes_running_and_ready():
    async def scenario():
        async with running_sim(profile()) as sim:
            sim.create_pod("server", command=["sleep", "infinity"])
            pod = await wait_for(lambda: condition_status(sim.pod("server"), "Ready") == "True" and sim.pod("server"),
                                 "pod Ready")
            return pod, sim.event_reasons("server")

    pod, reasons = run(scenario)
    status = pod["status"]
    assert status["phase"] == "Running"
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        assert condition_status(pod, kind) == "True", kind
    container = status["containerStatuses"][0]
    assert container["name"] == "main"
    assert container["ready"] is True
    assert container["restartCount"] == 0
    assert container["state"]["running"]["startedAt"].endswith("Z")
    assert status["podIP"].startswith("10.")
    assert status["hostIP"].startswith("10.")
    assert status["startTime"].endswith("Z")
    assert reasons == ["Scheduled", "Started"]


def test_sleep_then_echo_succeeds_with_its_output_as_log():
    async def scenario():
        async with running_sim(profile()) as sim:
            sim.create_pod("task", command=["sh", "-c", "sleep 0.3; echo step one && echo done"],
                           restart_policy="Never")
            pod = await wait_for(lambda: phase(sim.pod("task")) == "Succeeded" and sim.pod("task"), "Succeeded")
            running = sim.timeline.first("Pod", "task", lambda s: s.startswith("Running"))
            succeeded = sim.timeline.first("Pod", "task", lambda s: s.startswith("Succeeded"))
            return pod, succeeded - running, sim.store.read_log("default", "task", "main")

    pod, ran_for, log = run(scenario, virtual_time=True)
    assert ran_for == 0.3
    assert _terminated(pod)["exitCode"] == 0
    assert _terminated(pod)["reason"] == "Completed"
    assert condition_status(pod, "Ready") == "False"
    assert log == "step one\ndone\n"


def test_exit_code_from_the_command_fails_the_pod():
    async def scenario():
        async with running_sim(profile()) as sim:
            sim.create_pod("broken", command=["/bin/bash", "-c", "echo oops; exit 3"], restart_policy="Never")
            sim.create_pod("falsy", command=["false"], restart_policy="Never")
            return [await wait_for(lambda n=n: phase(sim.pod(n)) == "Failed" and sim.pod(n), f"{n} Failed")
                    for n in ("broken", "falsy")]

    broken, falsy = run(scenario)
    assert (_terminated(broken)["exitCode"], _terminated(broken)["reason"]) == (3, "Error")
    assert _terminated(falsy)["exitCode"] == 1


def test_annotations_set_duration_exit_code_and_log():
    annotations = {"sim.topsail.io/duration-seconds": "0.2", "sim.topsail.io/exit-code": "42",
                   "sim.topsail.io/log": "epoch 1 loss 0.5"}

    async def scenario():
        async with running_sim(profile()) as sim:
            sim.create_pod("annotated", command=["sleep", "infinity"], annotations=annotations,
                           restart_policy="Never")
            sim.create_pod("forever", command=["sleep", "1"],
                           annotations={"sim.topsail.io/duration-seconds": "infinity"}, restart_policy="Never")
            pod = await wait_for(lambda: phase(sim.pod("annotated")) == "Failed" and sim.pod("annotated"), "Failed")
            ran_for = sim.timeline.first("Pod", "annotated", lambda s: s.startswith("Failed")) - \
                sim.timeline.first("Pod", "annotated", lambda s: s.startswith("Running"))
            await asyncio.sleep(5)  # virtual: well past the command's "sleep 1"
            return pod, ran_for, sim.store.read_log("default", "annotated", "main"), sim.pod("forever")

    pod, ran_for, log, forever = run(scenario, virtual_time=True)
    assert ran_for == 0.2
    assert _terminated(pod)["exitCode"] == 42
    assert log == "epoch 1 loss 0.5\n"
    assert phase(forever) == "Running"


def test_a_container_without_a_duration_runs_until_deleted():
    async def scenario():
        async with running_sim(profile()) as sim:
            sim.create_pod("daemon", command=["/usr/bin/server", "--port", "8080"], restart_policy="Never")
            await wait_for(lambda: phase(sim.pod("daemon")) == "Running", "Running")
            await asyncio.sleep(20)  # virtual seconds
            return sim.pod("daemon")

    assert phase(run(scenario, virtual_time=True)) == "Running"


def test_a_while_true_loop_with_sleep_runs_until_deleted_without_restarts():
    async def scenario():
        async with running_sim(profile()) as sim:
            sim.create_pod("poller", command=["sh", "-c", "while true; do echo tick; sleep 5; done"])
            await wait_for(lambda: phase(sim.pod("poller")) == "Running", "Running")
            await asyncio.sleep(20)  # virtual seconds: four turns of the loop
            return sim.pod("poller")

    pod = run(scenario, virtual_time=True)
    assert phase(pod) == "Running"
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0


def test_restart_policy_always_restarts_a_crashing_container_with_back_off():
    async def scenario():
        async with running_sim(profile()) as sim:
            sim.create_pod("crasher", command=["sh", "-c", "sleep 0.05; exit 2"])

            def restarted_twice():
                statuses = sim.pod("crasher")["status"].get("containerStatuses") or [{}]
                return statuses[0].get("restartCount", 0) >= 2 and statuses[0]

            return await wait_for(restarted_twice, "two restarts"), phase(sim.pod("crasher"))

    container, pod_phase = run(scenario)
    assert pod_phase == "Running"
    assert container["lastState"]["terminated"]["exitCode"] == 2


def test_profile_stage_delays_hold_the_pod_in_each_state():
    stages = {"schedule": {"delay_ms": 100}, "initialize": {"delay_ms": 200}, "start": {"delay_ms": 300},
              "ready": {"delay_ms": 400}}

    async def scenario():
        async with running_sim(profile(stages=stages)) as sim:
            sim.create_pod("slow", command=["sleep", "infinity"])
            await wait_for(lambda: condition_status(sim.pod("slow"), "Ready") == "True", "pod Ready")
            return [(when, state) for when, kind, name, state in sim.timeline.entries if name == "slow"]

    timeline = run(scenario, virtual_time=True)
    assert [when for when, _ in timeline] == [0.0, 0.1, 0.3, 0.6, 1.0]
    assert [state.split("/node=")[0] for _, state in timeline] == [
        "Pending/ready=None",  # created
        "Pending/ready=None",  # bound (schedule)
        "Pending/ready=False",  # initialized, containers being created (initialize)
        "Running/ready=False",  # containers started (start)
        "Running/ready=True",  # ready (ready)
    ]


def test_per_pod_annotations_override_stage_delays():
    stages = {"start": {"delay_ms": 0}, "initialize": {"delay_ms": 100, "jitter_ms": 50}}
    slow = {"sim.topsail.io/start-delay-ms": "400", "sim.topsail.io/initialize-jitter-ms": "0"}

    async def scenario():
        async with running_sim(profile(stages=stages)) as sim:
            sim.create_pod("slow", command=["sleep", "infinity"], annotations=slow)
            sim.create_pod("fast", command=["sleep", "infinity"])
            await wait_for(lambda: phase(sim.pod("slow")) == "Running", "slow Running")
            return [sim.timeline.first("Pod", n, lambda s: s.startswith("Running")) for n in ("slow", "fast")]

    slow_running, fast_running = run(scenario, virtual_time=True)
    assert slow_running == 0.5  # initialize 100 ms without jitter, then start 400 ms
    assert 0.1 <= fast_running < 0.15  # initialize 100 ms + the profile's jitter, start 0


def test_deleting_a_pod_stops_its_lifecycle():
    async def scenario():
        async with running_sim(profile(stages={"start": {"delay_ms": 200}})) as sim:
            sim.create_pod("gone", command=["sleep", "infinity"])
            await wait_for(lambda: sim.pod("gone")["spec"].get("nodeName"), "bound")
            sim.store.delete(sim.pods, "default", "gone")
            await asyncio.sleep(0.3)
            return sim.event_reasons("gone")

    assert run(scenario, virtual_time=True) == ["Scheduled"]  # no Started event: the lifecycle stopped with the pod


def test_a_pod_ends_when_its_longest_container_ends_with_the_first_failing_exit_code():
    containers = [
        {"name": "short", "image": "x", "command": ["sh", "-c", "sleep 0.1; exit 4"]},
        {"name": "long", "image": "x", "command": ["sleep", "0.5"]},
    ]

    async def scenario():
        async with running_sim(profile()) as sim:
            sim.store.create(sim.pods, {"apiVersion": "v1", "kind": "Pod",
                                        "metadata": {"name": "multi", "namespace": "default"},
                                        "spec": {"containers": containers, "restartPolicy": "Never"}})
            pod = await wait_for(lambda: phase(sim.pod("multi")) == "Failed" and sim.pod("multi"), "Failed")
            running = sim.timeline.first("Pod", "multi", lambda s: s.startswith("Running"))
            return pod, sim.timeline.first("Pod", "multi", lambda s: s.startswith("Failed")) - running

    pod, ran_for = run(scenario, virtual_time=True)
    assert ran_for == 0.5
    codes = {s["name"]: s["state"]["terminated"]["exitCode"] for s in pod["status"]["containerStatuses"]}
    assert codes == {"short": 4, "long": 0}


def test_a_pod_bound_to_a_missing_node_stays_pending_until_the_node_exists():
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "late"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    async def scenario():
        async with running_sim(profile()) as sim:
            sim.create_pod("pinned", command=["sleep", "infinity"], nodeName="late")
            await asyncio.sleep(5)  # virtual seconds
            before = sim.pod("pinned")
            sim.store.create(sim.nodes, node)
            await wait_for(lambda: phase(sim.pod("pinned")) == "Running", "Running once the node exists")
            return before

    before = run(scenario, virtual_time=True)
    assert phase(before) == "Pending"
    assert "containerStatuses" not in before["status"]
