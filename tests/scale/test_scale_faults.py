"""Faults real GPU clusters have (`cluster.sim.faults.events`, docs/reliability.md "Fault catalogue") as the scale
suite meets them: an item whose pod a fault ended fails naming the fault first, with the pod, its node (and GPU),
keeps its artifacts and KPIs (excluded from the history, with the reason), and the next items pass; nothing is left
on the cluster; no traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from test_suite import REPO, item_dirs, run_pytest

FAULTS = {  # item name -> the fault hitting its second pod to run
    "xid": {"kind": "gpu_xid", "xid": 94},
    "lost": {"kind": "gpu_lost"},
    "node": {"kind": "node_lost", "toleration_s": 0.2},
    "evicted": {"kind": "evicted"},
    "preempted": {"kind": "preempted"},
    "oom": {"kind": "oom"},
    "pull": {"kind": "image_pull"},  # its first pod: the later ones wait for their image (last: it stays)
}
ORDER = ["xid", "ok-1", "lost", "node", "evicted", "preempted", "oom", "ok-2", "pull"]
NODE = r"gpu-\d{4}"
EXPECTED = {
    "xid": rf"gpu_xid: Xid 94 \(contained ECC error\) on GPU \d of node {NODE} used by pod j[-\w]+; the GPU is "
           "withdrawn",
    "lost": rf"gpu_lost: Xid 79 \(GPU has fallen off the bus\) on GPU \d of node {NODE} used by pod j[-\w]+",
    "node": rf"node_lost: pod (j[-\w]+) on node ({NODE}): Node \2 which was running pod \1 is unresponsive",
    "evicted": rf"evicted: pod j[-\w]+ on node {NODE}: The node was low on resource: memory",
    "preempted": rf"preempted: pod j[-\w]+ on node {NODE}: Preempted by a higher-priority pod on node {NODE}",
    "oom": rf"oom: container \w+ of pod j[-\w]+ on node {NODE} was OOMKilled \(exit code 137\)",
    "pull": r"image_pull: pod j[-\w]+ cannot pull image '[^']+': (ErrImagePull|ImagePullBackOff)",
}


def cases_and_events() -> tuple[list[dict], list[dict]]:
    cases, events, running = [], [], 0
    for name in ORDER:  # one job a second: the pods of an item run one after the other, in order
        cases.append({"name": name, "workload": "training", "jobs": 3, "gpus": 1, "duration_s": 3.0, "qps": 2.0,
                      "burst": 1, "timeout_s": 8.0})
        if name in FAULTS:
            nth = running + (1 if name == "pull" else 2)
            events.append({**FAULTS[name], "when_running": {"name_prefix": "j"}, "nth": nth})
        running += 3
    return cases, events


def test_each_fault_kind_fails_its_item_naming_it_first_and_the_next_items_pass(tmp_path: Path) -> None:
    cases, events = cases_and_events()
    case_file = tmp_path / "cases.yaml"
    case_file.write_text(yaml.safe_dump(cases))
    config = yaml.safe_load((REPO / "suites/scale/config.yaml").read_text())
    # the suite's config names no faults: the whole section; a cluster with its GPU operator already installed
    sim = {**config["cluster"]["sim"], "faults": {"events": events}, "preinstalled": "all"}
    result = run_pytest(tmp_path, "suites/scale", "-q", "-p", "no:randomly", f"--var=cases=[{case_file}]",
                        f"--var=cluster.sim={json.dumps(sim)}", "--var=tests.scale.plots=false", timeout=400)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-4000:]
    assert f"{len(FAULTS)} failed, {len(ORDER) - len(FAULTS)} passed" in result.stdout, output[-4000:]
    assert "Traceback" not in output and "LEFT ON THE CLUSTER" not in output
    dirs = {d.name.split("__", 1)[1].removeprefix("test_scale_"): d for d in item_dirs(tmp_path / "artifacts")
            if "__test_scale" in d.name}
    for name, pattern in EXPECTED.items():
        failure = (dirs[name] / "FAILURE").read_text()
        first = failure.splitlines()[1]  # under 'call failed:', the item's message: the cause first
        assert first.startswith("cluster faults ended "), (name, failure)
        assert re.search(pattern, first), (name, first)
        kpis = json.loads((dirs[name] / "kpis.json").read_text())  # the item's KPIs, kept and marked
        assert kpis and all(k["excluded"].startswith("cluster faults ended") for k in kpis), name
        saved = json.loads((dirs[name] / "faults.json").read_text())
        assert saved and saved[0]["kind"] == FAULTS[name]["kind"].replace("ecc", "gpu_xid"), (name, saved)
    for name in ("ok-1", "ok-2"):
        assert not (dirs[name] / "FAILURE").exists(), name
        assert json.loads((dirs[name] / "faults.json").read_text()) == []
        assert not any("excluded" in k for k in json.loads((dirs[name] / "kpis.json").read_text()))
    for directory in dirs.values():
        assert json.loads((directory / "cleanup.json").read_text())["remaining"] == []
