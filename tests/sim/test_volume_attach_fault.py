"""The volume_attach fault event (sim/controllers/volume_faults.py): a pod mounting the PVC stays ContainerCreating
with FailedAttachVolume / FailedMount Warnings, until attached after `attach_delay_s` or never; pods without the PVC
start as usual; the same profile delays the same pods by the same time; `pytest_topsail.kube.faults` names it."""

from __future__ import annotations

import asyncio
from typing import Any

from controller_harness import CORE, phase, profile, run, running_sim, wait_for

from pytest_topsail.kube.faults import pod_fault
from pytest_topsail.sim.controllers.profile import Profile

SPECS = [*CORE, "pytest_topsail.sim.controllers.faults:FaultInjector"]
POD = {"command": ["sleep", "infinity"], "restart_policy": "Never"}


def with_claim(claim: str) -> dict[str, Any]:
    return {**POD, "volumes": [{"name": "storage", "persistentVolumeClaim": {"claimName": claim}}]}


def claim(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}


def waiting_reason(pod: dict[str, Any]) -> str | None:
    return ((pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get("waiting", {}).get("reason")


def attach_run(event: dict[str, Any], scenario: Any) -> Any:
    async def body():
        async with running_sim(profile(faults={"events": [event]}), SPECS) as sim:
            sim.store.create(sim.store.resource_type("persistentvolumeclaims"), claim("data"))
            sim.store.create(sim.store.resource_type("persistentvolumeclaims"), claim("scratch"))
            return await scenario(sim)
    return run(body, virtual_time=True)


def test_a_failing_attach_keeps_the_pod_container_creating_with_warnings_and_is_named_volume_attach():
    event = {"kind": "volume_attach", "claim": "data", "pod": {"name_prefix": "train"}}

    async def scenario(sim):
        await asyncio.sleep(0.1)  # the fault fired (at 0 s)
        sim.create_pod("train-0", **with_claim("data"))
        sim.create_pod("train-other", **with_claim("scratch"))  # another claim: attached at once
        sim.create_pod("serve-0", **with_claim("data"))  # not matched by the fault's pod selector
        await wait_for(lambda: phase(sim.pod("train-other")) == "Running" and phase(sim.pod("serve-0")) == "Running",
                       "the others Running")
        await wait_for(lambda: len(sim.events_about("train-0", "FailedMount")) >= 2, "FailedMount twice", timeout=60)
        events = [e for e in sim.store.list(sim.store.resource_type("events"), "default")]
        return sim.pod("train-0"), events

    pod, events = attach_run(event, scenario)
    assert phase(pod) == "Pending" and waiting_reason(pod) == "ContainerCreating"
    attach = [e for e in events if e["involvedObject"]["name"] == "train-0" and e["reason"] == "FailedAttachVolume"]
    assert attach and attach[0]["type"] == "Warning"
    assert attach[0]["message"].startswith('AttachVolume.Attach failed for volume "pvc-')
    fault = pod_fault(pod, events)
    assert fault is not None and fault.kind == "volume_attach"
    assert fault.message.startswith(f"pod train-0 on node {pod['spec']['nodeName']} (PVC data): FailedMount: Unable "
                                    "to attach or mount volumes: unmounted volumes=[storage]")


def test_a_slow_attach_starts_the_containers_after_the_delay_the_same_in_every_run():
    event = {"kind": "volume_attach", "attach_delay_s": 3.0, "after_s": 1.0}

    async def scenario(sim):
        sim.create_pod("early", **with_claim("data"))  # started before the fault fired
        await wait_for(lambda: phase(sim.pod("early")) == "Running", "early Running")
        await asyncio.sleep(1.5)  # the fault fires at 1 s
        created = asyncio.get_running_loop().time()
        sim.create_pod("late", **with_claim("data"))
        sim.create_pod("plain", **POD)
        await wait_for(lambda: phase(sim.pod("plain")) == "Running", "plain Running")
        await wait_for(lambda: phase(sim.pod("late")) == "Running", "late Running", timeout=30)
        started = asyncio.get_running_loop().time()
        reasons = sim.event_reasons("late")
        return started - created, reasons, sim.event_reasons("early"), pod_fault(sim.pod("late"), [])

    runs = [attach_run(event, scenario) for _ in range(2)]
    waited, reasons, early, fault = runs[0]
    assert 3.0 <= waited < 3.5, waited
    assert reasons.count("FailedAttachVolume") >= 2 and "SuccessfulAttachVolume" in reasons
    assert "FailedAttachVolume" not in early
    assert fault is None  # started: a slow attach is no cause of an end
    assert [r[0] for r in runs] == [waited, waited] and runs[1][1] == reasons


def test_the_profile_checks_the_fault_fields():
    profile_ = Profile.from_dict({"faults": {"events": [{"kind": "volume_attach", "claim": "data",
                                                         "attach_delay_s": 2.5}]}})
    assert profile_.faults.events[0].attach_delay_s == 2.5
