"""Distributed load (`tests.llm_load.generators`): the suite run as a user runs it, its generator pods real
processes on the simulator; one run left alone, one with a generator pod deleted mid-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.client import ObjectRef, connect
from pytest_topsail.llmload.distributed import JOB_LABEL
from pytest_topsail.llmload.metrics import summarize_point
from pytest_topsail.llmload.records import read_records

REPO = Path(__file__).resolve().parents[2]
GENERATORS = 3


def start_run(tmp: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--artifacts",
               str(tmp / "artifacts"), "--topsail-history", str(tmp / "history.sqlite"), "-m", "llm_load",
               "--preset", "distributed", "--var", f"tests.llm_load.generators={GENERATORS}", "-q",
               "--var", "metrics.enabled=false"]  # the generators' records are checked, not the GPU metrics
    env = {**os.environ, "TMPDIR": str(tmp)}  # TMPDIR: where the kubeconfig is
    env.pop("ARTIFACT_DIR", None)
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def finish(process: subprocess.Popen[str]) -> str:
    try:
        output, _ = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        pytest.fail("the distributed run did not end within 300 s:\n" + output[-3000:])
    return output


def load_dir(tmp: Path) -> Path:
    [item] = [p for p in (tmp / "artifacts" / "llm_load").iterdir() if p.is_dir() and "__test_llm_load" in p.name]
    return item / "load"


def test_three_generator_pods_start_together_and_merge_exactly(tmp_path: Path) -> None:
    process = start_run(tmp_path)
    output = finish(process)
    assert process.returncode == 0, output[-3000:]
    directory = load_dir(tmp_path)
    generators = json.loads((directory / "generators.json").read_text())
    assert len(generators) == GENERATORS and {g["state"] for g in generators} == {"Succeeded"}
    # together: every pod slept until the one barrier of the run and started within late_s (1 s) of it (no wall-clock
    # spread asserted: on a loaded machine a process wakes from its sleep hundreds of ms late)
    documents = [json.loads((directory / "generators" / f"{g['name']}.json").read_text()) for g in generators]
    [barrier] = {d["barrier_epoch"] for d in documents}
    assert all(barrier <= d["started_epoch"] < barrier + 1.0 for d in documents), (barrier, documents)
    assert [d["started_epoch"] for d in documents] == [g["started_epoch"] for g in generators]
    spread = max(d["started_epoch"] for d in documents) - min(d["started_epoch"] for d in documents)
    if spread >= 0.100 and os.getloadavg()[0] > 4 * (os.cpu_count() or 1):
        pytest.skip(f"start spread {spread * 1000:.0f} ms at load {os.getloadavg()[0]:.0f}: processes wake late")
    assert spread < 0.100, documents  # the bound: three pods start within 100 ms of each other
    own = {g["name"]: list(read_records(directory / "generators" / f"{g['name']}.jsonl")) for g in generators}
    assert all(own.values()) and [g["requests"] for g in generators] == [len(own[g["name"]]) for g in generators]
    merged = list(read_records(directory / "records.jsonl"))
    assert len(merged) == sum(map(len, own.values()))
    for name, records in own.items():  # every record of a pod is in the merged file, on the first pod's clock
        assert sorted(r["end"] - r["start"] for r in records) == pytest.approx(
            sorted(r["end"] - r["start"] for r in merged if r["generator"] == name))
    [point] = json.loads((directory / "points.json").read_text())
    [summary] = json.loads((directory / "summary.json").read_text())
    assert summarize_point(point, merged) == summary
    assert summary["requests"] == sum(1 for r in merged if not r["warmup"]) and summary["succeeded"] > 0


def delete_one_generator(tmp: Path, deleted: list[str], stop: threading.Event, seen: list[str]) -> None:
    """Deletes a generator pod mid-run, on an event rather than at a time: once the runner holds 3 records of it
    (its copy, pulled through the pod's port-forward every 0.3 s from the barrier on). The pod is alive then: it
    serves its records until the runner has them all, which takes at least one more pull, and its point lasts
    4.5 s. A pod whose point has not ended in the runner's copy is chosen first. The kubeconfig is read as soon as
    the run wrote it (seconds before the barrier); an API error of a loaded machine is retried until the run ends,
    and ``seen`` tells what the thread saw last, for the assertion's message."""
    kube = None
    while not stop.wait(0.05):
        try:
            if kube is None:
                found = sorted(tmp.glob("pytest-topsail-*/**/kubeconfig*"))
                if not found:
                    continue
                kube = connect(found[0])
            ready = [p for p in sorted(tmp.glob("artifacts/llm_load/*/load/generators/*.jsonl"))
                     if len(p.read_text().splitlines()) >= 3]
            if not ready:
                continue
            running = [p for p in ready if "ended" not in point_document(p.with_suffix(".json"))]
            name = (running or ready)[0].stem
            pods = {p["metadata"]["name"]: p for p in kube.list("v1", "Pod", label_selector=JOB_LABEL)}
            seen.append(f"{name}: {'Running' if running else 'point ended'}, pod phase "
                        f"{(pods[name].get('status') or {}).get('phase') if name in pods else 'gone'}")
            if name in pods and kube.delete(ObjectRef("v1", "Pod", name, pods[name]["metadata"]["namespace"])):
                deleted.append(name)
                return
        except (TopsailError, OSError) as error:
            seen.append(f"{type(error).__name__}: {error}")


def point_document(path: Path) -> dict[str, object]:
    """The runner's copy of a pod's point document ({} before the first pull)."""
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def test_a_deleted_generator_pod_is_named_and_every_pods_records_kept(tmp_path: Path) -> None:
    process = start_run(tmp_path)
    deleted: list[str] = []
    seen: list[str] = []
    stop = threading.Event()
    killer = threading.Thread(target=delete_one_generator, args=(tmp_path, deleted, stop, seen), daemon=True)
    killer.start()
    try:
        output = finish(process)
    finally:
        stop.set()
        killer.join(timeout=10)
    assert deleted, f"no generator pod was deleted (last seen: {seen[-3:]}):\n" + output[-3000:]
    assert process.returncode == 1, output[-3000:]
    assert (f"load generator pod(s) died during the run: {deleted[0]}: Deleted (the pod was deleted while "
            "generating load), ") in output
    # named once, not chained; pytest's short summary line repeats it (whole under CI=true, cut elsewhere)
    sections = "\n".join(line for line in output.splitlines() if not line.startswith("FAILED "))
    assert sections.count(f"{deleted[0]}: Deleted") == 1, output[-3000:]
    directory = load_dir(tmp_path)
    generators = {g["name"]: g for g in json.loads((directory / "generators.json").read_text())}
    assert generators[deleted[0]]["state"] == "Deleted" and generators[deleted[0]]["requests"] >= 3
    others = [g for name, g in generators.items() if name != deleted[0]]
    assert len(others) == GENERATORS - 1 and all(g["state"] == "Succeeded" and g["requests"] > 0 for g in others)
    merged = list(read_records(directory / "records.jsonl"))
    assert {r["generator"] for r in merged} == set(generators)
    assert len(merged) == sum(g["requests"] for g in generators.values())


def test_worker_with_bad_settings_exits_2_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "load.json").write_text(json.dumps({"settings": {"model": "m", "concurrency": 0}, "start_at": 0}))
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "a", "input_tokens": 1, "output_tokens": 1}\n')
    command = [sys.executable, "-m", "pytest_topsail.llmload.worker", str(tmp_path), str(tmp_path / "out")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 2, result.stderr
    assert f"bad settings in {tmp_path}" in result.stderr and "concurrency" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()
