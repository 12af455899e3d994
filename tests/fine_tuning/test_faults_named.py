"""Faults real GPU clusters have, injected by the simulator profile (`cluster.sim.faults.events`, docs/reliability.md
"Fault catalogue"), as the fine-tuning suite meets them: the failed point's message names the fault and the object
(pod, node, GPU), the point keeps its logs and captured objects, the next points run and pass, nothing is left."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from test_fine_tuning_suite import audit_leftovers, item_dirs, output, run_pytest

from pytest_topsail.kube.faults import pod_fault

LIGHT = {"model": "bigscience/bloom-560m", "dataset": {"name": "twitter_complaints_small"}}
# one point per fault, each followed by a healthy one; the points run one after the other, one pod each: the nth
# pod of the run that starts running is the nth point's master
FAULTS: list[tuple[str, dict[str, Any]]] = [
    ("xid", {"kind": "gpu_xid", "xid": 94}),
    ("lost", {"kind": "gpu_lost"}),
    ("ecc", {"kind": "ecc"}),
    ("node", {"kind": "node_lost", "toleration_s": 0.2}),
    ("evicted", {"kind": "evicted"}),
    ("preempted", {"kind": "preempted"}),
    ("oom", {"kind": "oom"}),
]


def fault_cases() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    cases, events = [], []
    for name, event in FAULTS:
        cases += [{"name": name, **LIGHT}, {"name": f"{name}-next", **LIGHT}]
        events.append({**event, "when_running": {"name_prefix": "ft-"}, "nth": len(cases) - 1})
    cases += [{"name": "pull", **LIGHT}]  # after the last healthy point started, the registry fails
    events.append({"kind": "image_pull", "when_running": {"name_prefix": "ft-"}, "nth": len(cases) - 1})
    return cases, events


def failures(artifacts: Path) -> dict[str, str]:
    """Case name -> the failure message its item saved (FAILURE), for the failed items."""
    return {name.removeprefix("test_fine_tuning_"): (directory / "FAILURE").read_text()
            for name, directory in item_dirs(artifacts).items() if (directory / "FAILURE").exists()}


def test_each_fault_kind_fails_its_point_naming_it_and_the_next_points_pass(tmp_path):
    cases, events = fault_cases()
    result, artifacts = run_pytest(tmp_path, "--var=metrics.enabled=false", "-rf",
                                   f"--var=cluster.sim.faults.events={json.dumps(events)}", cases=cases,
                                   timeout=300)
    assert result.returncode == 1, output(result)
    assert f"{len(FAULTS) + 1} failed, {len(FAULTS)} passed" in result.stdout, output(result)
    assert "Traceback" not in result.stdout + result.stderr
    failed = failures(artifacts)
    assert sorted(failed) == sorted([name for name, _ in FAULTS] + ["pull"]), output(result)
    node_name = r"gpu-\d+|[a-z0-9-]+-\d{4}"
    expected = {
        "xid": (rf"gpu_xid: Xid 94 \(contained ECC error\) on GPU \d of node ({node_name}) used by pod "
                r"ft-\w+-master-0; the GPU is withdrawn by the device plugin"),
        "lost": rf"gpu_lost: Xid 79 \(GPU has fallen off the bus\) on GPU \d of node ({node_name}) used by pod ft-",
        "ecc": rf"gpu_xid: Xid 48 \(double bit ECC error\) on GPU \d of node ({node_name}) used by pod ft-",
        "node": rf"node_lost: pod ft-\w+-master-0 on node ({node_name}): Node \1 which was running pod ft-\w+-master-0 "
                "is unresponsive",
        "evicted": rf"evicted: pod ft-\w+-master-0 on node ({node_name}): The node was low on resource: memory",
        "preempted": rf"preempted: pod ft-\w+-master-0 on node ({node_name}): Preempted by a higher-priority pod",
        "oom": r"OOMKilled: container pytorch of pod ft-\w+-master-0 was killed by the node's OOM killer",
        "pull": (r"image pull: pod ft-\w+-master-0 cannot pull image '[^']+': "
                 r"(ErrImagePull failed to pull image|ImagePullBackOff Back-off pulling image)"),
    }
    for name, pattern in expected.items():
        assert re.search(pattern, failed[name]), (name, failed[name])
    dirs = item_dirs(artifacts)
    for name, _ in FAULTS:  # the failed point's partial artifacts: the master's log and the captured objects
        directory = dirs[f"test_fine_tuning_{name}"]
        assert list(directory.glob("pod_ft-*-master-0.log")), name
        assert any("pytorchjob" in p.name for p in (directory / "captured").iterdir()), name
        assert (dirs[f"test_fine_tuning_{name}-next"] / "kpis.json").exists()
    assert audit_leftovers(artifacts) == {}


def event(name: str, reason: str, message: str) -> dict[str, Any]:
    return {"involvedObject": {"kind": "Pod", "name": name}, "reason": reason, "message": message}


def test_a_pod_without_fault_signs_is_left_to_the_suite_taxonomy():
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Failed"}}
    assert pod_fault(pod, [event("other", "XidError", "Xid 79 on GPU 0 of node n2")]) is None
    fault = pod_fault(pod, [event("p", "XidError", "Xid 79 on GPU 3 of node n1")])
    assert fault is not None and (fault.kind, fault.message) == ("gpu_xid", "pod p: Xid 79 on GPU 3 of node n1")


def test_an_eviction_through_the_api_is_named_evicted():
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
         "message": "Eviction API: evicting"}]}}
    fault = pod_fault(pod, [])
    assert fault is not None and fault.kind == "evicted" and "pod p on node n1: Eviction API: evicting" == \
        fault.message
