"""Faults real GPU clusters have (`cluster.sim.faults.events`, docs/reliability.md "Fault catalogue") as the llm_load
suite meets them: a point whose predictor pod a fault ended fails naming the fault, the pod, its node (and GPU),
keeps its load records and KPIs (excluded from the history, with the reason); the model is served again by the pod
its Deployment makes instead and the next point passes; the other models' points pass; no traceback."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import yaml
from test_llm_load_suite import REPO, item_dirs, run_pytest

MODEL = "bigscience/bloom-560m"
NODE = r"gpu-\d{4}"


def server(number: int) -> dict[str, int]:
    """Server settings of their own: an InferenceService of its own."""
    return {"max_batch_size": 8, "max_concurrent_requests": number}


def isvc(number: int) -> str:
    """The suite's InferenceService name for the model served with `server(number)` (suites/llm_load/conftest.py
    isvc_name of its key)."""
    key = json.dumps([MODEL, server(number), "inferenceservice", "a100", 1.0], sort_keys=True)
    return f"bloom-560m-{hashlib.sha1(key.encode()).hexdigest()[:6]}"


def case(name: str, number: int, duration_s: float) -> dict:
    return {"name": name, "model": MODEL, "backend": "tgis", "streaming": True, "concurrency": [1],
            "duration_s": duration_s, "max_output_tokens": 16, "server": server(number)}


def test_a_fault_of_the_predictor_pod_fails_its_point_naming_it_and_the_next_points_pass(tmp_path: Path) -> None:
    # each fault comes 4 s after its predictor pod runs: within its point's 8 s of load (served ~1 s after running)
    cases = [case("evicted", 91, 8.0), case("evicted-next", 91, 0.5), case("lost", 92, 8.0),
             case("healthy", 93, 0.5)]
    events = [{"kind": kind, "after_s": 4.0, "when_running": {"match_labels": {
        "serving.kserve.io/inferenceservice": isvc(number)}}} for kind, number in (("evicted", 91), ("gpu_lost", 92))]
    case_file = tmp_path / "cases.yaml"
    case_file.write_text(yaml.safe_dump(cases))
    config = yaml.safe_load((REPO / "suites/llm_load/config.yaml").read_text())
    # the suite's config names no faults: the whole section; a cluster with KServe and its GPU operator installed
    sim = {**config["cluster"]["sim"], "faults": {"events": events}, "preinstalled": "all"}
    result = run_pytest(tmp_path, "artifacts", "-m", "llm_load", "-q", "-p", "no:randomly",
                        f"--var=cases=[{case_file}]", f"--var=cluster.sim={json.dumps(sim)}",
                        "--var=metrics.enabled=false")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-4000:]
    assert "2 failed, 2 passed" in result.stdout, output[-4000:]
    assert "Traceback" not in output and "LEFT ON THE CLUSTER" not in output
    dirs = {d.name.split("__test_llm_load_", 1)[1].split("-concurrency")[0]: d
            for d in item_dirs(tmp_path / "artifacts") if "__test_llm_load_" in d.name}
    expected = {
        "evicted": rf"evicted: pod ({isvc(91)}-predictor-[-\w]+) on node ({NODE}): The node was low on resource: "
                   r"memory\. Evicted from node \2\.; the point: ",
        "lost": rf"gpu_lost: Xid 79 \(GPU has fallen off the bus\) on GPU \d of node {NODE} used by pod "
                rf"{isvc(92)}-predictor-[-\w]+; the GPU is withdrawn by the device plugin",
    }
    for name, pattern in expected.items():
        failure = (dirs[name] / "FAILURE").read_text()
        assert re.search(pattern, failure), (name, failure)
        assert (dirs[name] / "load" / "records.jsonl").stat().st_size > 0  # the point's partial records
        kpis = json.loads((dirs[name] / "kpis.json").read_text())
        assert kpis and all(k["excluded"] == failure.splitlines()[1].split("; the point: ")[0] for k in kpis), name
    for name in ("evicted-next", "healthy"):
        assert not (dirs[name] / "FAILURE").exists(), name
        assert not any("excluded" in k for k in json.loads((dirs[name] / "kpis.json").read_text()))
