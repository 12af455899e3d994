"""The fine-tuning suite run as a user runs it (`pytest suites/fine_tuning ...` in a subprocess, on the simulator):
the smoke preset, the failure taxonomy with nothing left behind, xdist, and regression verdicts over a history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
# Results do not depend on the time scale. Points this short give Prometheus nothing to sample, and its first scrapes
# are waited for (~6 s per run): the metrics are off here (the smoke test keeps them and checks their figures).
FAST = ("--var=cluster.sim.plugins.fine_tuning.time_scale=0.00005", "--var=metrics.enabled=false")


def run_pytest(tmp: Path, *args: str, cases: list[dict[str, Any]] | None = None, history: Path | None = None,
               name: str = "artifacts", timeout: float = 180, env: dict[str, str] | None = None
               ) -> tuple[subprocess.CompletedProcess[str], Path]:
    artifacts = tmp / name
    command = [sys.executable, "-m", "pytest", "suites/fine_tuning", "-p", "no:cacheprovider", "-rs",
               "--artifacts", str(artifacts), "--topsail-history", str(history or tmp / "history.sqlite"), *args]
    if cases is not None:
        case_file = tmp / f"{name}-cases.yaml"
        case_file.write_text(yaml.safe_dump(cases))
        command.append(f"--var=cases=[{case_file}]")
    environment = {**os.environ, **(env or {})}
    environment.pop("ARTIFACT_DIR", None)
    return (subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=environment),
            artifacts)


def item_dirs(artifacts: Path) -> dict[str, Path]:
    return {p.name.split("__", 1)[1]: p for p in sorted((artifacts / "fine_tuning").iterdir()) if "__" in p.name}


def kpis_of(directory: Path) -> dict[str, dict[str, Any]]:
    return {k["name"]: k for k in json.loads((directory / "kpis.json").read_text())}


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout[-4000:] + result.stderr[-2000:]


def audit_leftovers(artifacts: Path) -> dict[str, int]:
    """Per resource of the points (PyTorchJobs, ConfigMaps): objects created through the API minus objects deleted,
    from the simulator's audit log (the simulator is gone after the run). The storage preparation's objects (its
    download ConfigMap, listed in its created.yaml) stay until the end of the run, which discards a simulator
    without cleanup: they are not the points'."""
    balance = {"pytorchjobs": 0, "configmaps": 0}
    for line in (next(artifacts.glob("*__cluster")) / "audit.jsonl").read_text().splitlines():
        entry = json.loads(line)
        resource = entry.get("resource")
        if resource in balance and entry.get("namespace") == "fine-tuning-testing" and int(entry["code"]) < 300:
            balance[resource] += {"create": 1, "delete": -1}.get(entry.get("verb"), 0)
    for created in artifacts.glob("*__storage/created.yaml"):
        balance["configmaps"] -= sum(1 for name in yaml.safe_load(created.read_text()) or ()
                                     if name.startswith("ConfigMap fine-tuning-testing/"))
    return {k: v for k, v in balance.items() if v}


def test_smoke_preset_runs_two_points_and_saves_logs_objects_kpis_and_the_loss_curve(tmp_path):
    result, artifacts = run_pytest(tmp_path, "--preset", "smoke")
    assert result.returncode == 0, output(result)
    assert "2 passed" in result.stdout
    dirs = item_dirs(artifacts)
    assert sorted(dirs) == ["test_fine_tuning_smoke-method=full", "test_fine_tuning_smoke-method=lora"]
    for directory in dirs.values():
        log = (directory / "pod.log").read_text()
        assert "dataset stats:" in log and "'train_runtime'" in log
        assert list(directory.glob("pod_ft-*-master-0.log"))
        assert any("pytorchjob" in p.name for p in (directory / "captured").iterdir())
        assert any("pytorchjob" in p.name for p in (directory / "manifests").iterdir())
        assert "fits" in (directory / "preflight.txt").read_text()
        assert list((directory / "figures").glob("*loss*.json"))
    kpis = kpis_of(dirs["test_fine_tuning_smoke-method=lora"])
    assert kpis["train_tokens_per_second"]["higher_better"] is True
    assert kpis["gpu_hours_per_million_tokens"]["higher_better"] is False
    assert kpis["avg_tokens_per_sample"]["ignored_for_regression"] is True
    labels = kpis["train_tokens_per_second"]["labels"]
    assert labels["tuning_method"] == "lora" and labels["container_image"].startswith("quay.io/modh/fms-hf-tuning")
    assert labels["lora_rank"] == 4 and labels["accelerator_count"] == 1
    assert audit_leftovers(artifacts) == {}

    # replot: KPIs again from the saved logs (an edited summary changes them; a log without summary is named)
    lora, full = dirs["test_fine_tuning_smoke-method=lora"], dirs["test_fine_tuning_smoke-method=full"]
    log = (lora / "pod.log").read_text()
    per_device = kpis["train_tokens_per_gpu_per_second"]["value"]
    (lora / "pod.log").write_text(log.replace(f"'train_tokens_per_second': {per_device}",
                                              "'train_tokens_per_second': 1234.5"))
    (full / "pod.log").write_text("".join(line + "\n" for line in (full / "pod.log").read_text().splitlines()
                                          if "train_runtime" not in line))
    replot = subprocess.run([sys.executable, "-m", "pytest", f"--topsail-replot={artifacts}", "suites/fine_tuning",
                             "-p", "no:cacheprovider", "--topsail-history", str(tmp_path / "replot.sqlite")],
                            cwd=REPO, capture_output=True, text=True, timeout=180)
    values = {(v["nodeid"].split("::")[-1], v["kpi"]): v["value"]
              for v in json.loads((artifacts / "verdicts.json").read_text())}
    assert values[("test_fine_tuning[smoke-method=lora]", "train_tokens_per_gpu_per_second")] == 1234.5
    assert f"{full / 'pod.log'}: the log has no trainer summary line" in replot.stdout + replot.stderr
    suite_figures = sorted(p.name for p in (artifacts / "fine_tuning" / "figures").glob("*.json"))
    own = [name for name in suite_figures if "_metrics_" not in name]  # docs/metrics.md adds GPU over time
    assert own == ["00_tokens_s_GPU_by_tuning_method.json"]  # 1 GPU only: no scaling figure


def test_failures_are_named_and_leave_nothing_behind(tmp_path):
    cases = [
        {"name": "too-big", "model": "ibm-granite/granite-7b-base", "max_seq_length": 512},
        {"name": "too-wide", "model": "bigscience/bloom-560m", "gpus_per_pod": 16,
         "dataset": {"name": "twitter_complaints_small"}},
        {"name": "multi-pod", "model": "bigscience/bloom-560m", "pods": 2, "gpus_per_pod": 2,
         "dataset": {"name": "twitter_complaints_small"}},
    ]
    result, artifacts = run_pytest(tmp_path, *FAST, cases=cases)
    text = result.stdout
    assert result.returncode == 1, output(result)
    assert "1 failed, 1 passed, 1 skipped" in text, output(result)
    # does not fit: skipped by the pre-flight, naming the estimate and the GPU memory
    assert "pre-flight: memory estimate" in text and "exceeds the GPU memory 80.0 GiB" in text
    # unschedulable: names the request and the largest free node
    assert "Unschedulable: pod ft-" in text and "requests nvidia.com/gpu=16, cpu=1, memory=10Gi" in text
    assert "the largest free node is" in text and "with 8 free GPU(s)" in text
    # a job of 2 pods x 2 GPUs: the job's throughput is the trainer's per-device value x 4
    kpis = kpis_of(item_dirs(artifacts)["test_fine_tuning_multi-pod"])
    assert kpis["train_tokens_per_second"]["value"] == pytest.approx(
        4 * kpis["train_tokens_per_gpu_per_second"]["value"])
    assert kpis["train_tokens_per_second"]["labels"]["effective_batch_size"] == 4 * 4
    assert audit_leftovers(artifacts) == {}

    result, artifacts = run_pytest(tmp_path, *FAST, "--var=tests.fine_tuning.preflight=run", cases=cases[:1],
                                   name="run-anyway")
    assert result.returncode == 1, output(result)
    assert "CUDA out of memory: pod ft-" in result.stdout
    assert "memory estimate" in result.stdout and "GPU memory 80.0 GiB" in result.stdout
    assert audit_leftovers(artifacts) == {}

    result, artifacts = run_pytest(tmp_path, *FAST, "--var=tests.fine_tuning.preflight=fail", cases=cases[:1],
                                   name="refuse")
    assert result.returncode == 1 and "1 failed" in result.stdout, output(result)
    assert "exceeds the GPU memory 80.0 GiB" in result.stdout and "preflight: fail" in result.stdout
    assert audit_leftovers(artifacts) == {}  # nothing was created


@pytest.mark.parametrize("timeouts, message", [
    ({"no_progress": 1}, "no progress: the master's log did not change for 1s while training"),
    ({"training": 1}, "timeout: phase 'training' took longer than 1s (timeouts.training)"),
])
def test_a_hung_job_fails_at_its_timeout_naming_the_phase(tmp_path, timeouts, message):
    cases = [{"name": "hung", "model": "bigscience/bloom-560m", "dataset": {"name": "twitter_complaints_small"}}]
    variables = [f"--var=tests.fine_tuning.timeouts.{key}={value}" for key, value in timeouts.items()]
    result, artifacts = run_pytest(tmp_path, *FAST, "--var=cluster.sim.faults.pods=[{action: hang}]", *variables,
                                   cases=cases)
    assert result.returncode == 1, output(result)
    assert message in result.stdout, output(result)
    assert audit_leftovers(artifacts) == {}


SCALING_CASES = [{"name": "scaling", "model": "bigscience/bloom-560m", "gpus_per_pod": [1, 2, 4],
                  "per_device_batch_size": 4, "max_seq_length": 512,
                  "dataset": {"name": "alpaca", "replication": 0.02}}]


def values_by_item(artifacts: Path) -> dict[str, dict[str, float]]:
    return {name: {k: v["value"] for k, v in kpis_of(d).items()} for name, d in item_dirs(artifacts).items()}


def test_two_xdist_workers_give_the_same_kpis(tmp_path):
    serial, serial_artifacts = run_pytest(tmp_path, *FAST, cases=SCALING_CASES, name="serial")
    parallel, parallel_artifacts = run_pytest(tmp_path, *FAST, "-n", "2", cases=SCALING_CASES, name="xdist")
    assert serial.returncode == 0 and parallel.returncode == 0, output(serial) + output(parallel)
    serial_values, parallel_values = values_by_item(serial_artifacts), values_by_item(parallel_artifacts)
    assert len(serial_values) == 3 and serial_values.keys() == parallel_values.keys()
    assert all("scaling_efficiency" in serial_values[f"test_fine_tuning_scaling-gpus_per_pod={gpus}"]
               for gpus in (2, 4))
    for name, values in serial_values.items():
        # an item's scaling efficiency needs its group's 1-GPU result: under xdist that point may still be running on
        # the other worker (which of the two starts first is a race: one of them prepares the cluster); the item then
        # says so, and the suite's figure has it
        late = set(values) - set(parallel_values[name])
        assert late <= {"scaling_efficiency"}, (name, late)
        if late:
            warnings = json.loads((item_dirs(parallel_artifacts)[name] / "item.json").read_text())["warnings"]
            assert any(w.startswith("scaling_efficiency not recorded") for w in warnings), warnings
        assert parallel_values[name] == {k: v for k, v in values.items() if k not in late}
    figures = [json.loads((artifacts / "fine_tuning" / "figures" / "00_train_tokens_per_second_vs_GPU_count.json")
                          .read_text()) for artifacts in (serial_artifacts, parallel_artifacts)]
    assert [[(t["x"], t["y"], t.get("text")) for t in f["data"]] for f in figures] == [
        [(t["x"], t["y"], t.get("text")) for t in figures[0]["data"]]] * 2
    measured, perfect = figures[0]["data"][0], figures[0]["data"][1]
    assert measured["x"] == [1, 2, 4] and perfect["name"].endswith("(perfect scaling)")
    assert perfect["y"] == [measured["y"][0] * g for g in (1, 2, 4)]
    assert measured["text"][0] == "efficiency 100%" and measured["text"][2] < "efficiency 99%"


def verdicts(artifacts: Path) -> dict[tuple[str, str], str]:
    data = json.loads((artifacts / "verdicts.json").read_text())
    entries = data["verdicts"] if isinstance(data, dict) else data
    return {(v["test_id"] if "test_id" in v else v["nodeid"].split("::")[-1], v["kpi"]): v["status"]
            for v in entries}


def test_a_lower_scaling_efficiency_is_a_regression_of_the_throughput_of_multi_gpu_points(tmp_path):
    history = tmp_path / "history.sqlite"
    for seed in range(1, 7):  # five runs of history, then a sixth normal run: seeded noise, no regression
        result, artifacts = run_pytest(tmp_path, *FAST, f"--var=cluster.sim.seed={seed}", cases=SCALING_CASES,
                                       history=history, name=f"run{seed}")
        assert result.returncode == 0, output(result)
        assert "regression" not in set(verdicts(artifacts).values()), verdicts(artifacts)
    assert "accepted" in set(verdicts(artifacts).values())
    result, artifacts = run_pytest(tmp_path, *FAST, "--var=cluster.sim.seed=7",
                                   "--var=cluster.sim.plugins.fine_tuning.efficiency_scale=0.85", cases=SCALING_CASES,
                                   history=history, name="slower")
    assert result.returncode == 0, output(result)  # regressions are reported, not failing (fail_on_regression)
    found = verdicts(artifacts)
    regressions = {key for key, status in found.items() if status == "regression"}
    throughput = {"train_tokens_per_second", "train_tokens_per_gpu_per_second", "dataset_tokens_per_second",
                  "dataset_tokens_per_second_per_gpu"}
    for item in ("test_fine_tuning[scaling-gpus_per_pod=2]", "test_fine_tuning[scaling-gpus_per_pod=4]"):
        assert {(item, kpi) for kpi in throughput} <= regressions, found
    assert not any(key[0].endswith("gpus_per_pod=1]") for key in regressions), regressions  # 1 GPU: not affected
    assert not any(key[1] == "avg_tokens_per_sample" for key in regressions)
