"""Metric KPIs of the bundled suites as a user runs them: the simulator, a real Prometheus (Debian's package), no
mocks. `pytest -m fine_tuning --preset smoke` records GPU utilization and memory per point, equal to what the
training model says the trainer does; Prometheus scraped the simulator's targets and is gone after the run; a
replot without cluster and Prometheus gives the same metric KPIs. An llm_load concurrency sweep shows the serving
GPU busier with more concurrent requests, and the idle node's GPUs at 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.skipif(shutil.which("prometheus") is None,
                       reason="needs Debian's prometheus package (apt-get install prometheus)"),
    pytest.mark.xdist_group("suite_metrics"),  # -n N: the module-scoped fine-tuning smoke run once
]


def run_pytest(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None,
               timeout: float = 240) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    environment = {**os.environ, "COLUMNS": "160", **(env or {})}
    environment.pop("ARTIFACT_DIR", None)
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=environment)


def items(root: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in root.rglob("item.json"):
        record = json.loads(path.read_text())
        found[record["test_id"]] = record
    return found


def kpi(record: dict[str, Any], name: str) -> float | None:
    return next((k["value"] for k in record["kpis"] if k["name"] == name), None)


def prometheus_processes(root: Path) -> list[int]:
    """Processes (the server or its watchdog) started with a configuration under ``root``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "prometheus" in command and str(root) in command:
            pids.append(int(proc.name))
    return pids


# ------------------------------------------------------------------ fine-tuning
@pytest.fixture(scope="module")
def fine_tuning_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("ft") / "artifacts"
    started = time.monotonic()
    result = run_pytest("suites", "-m", "fine_tuning", "--preset", "smoke", f"--artifacts={root}",
                        f"--topsail-history={root.parent / 'history.sqlite'}")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    print(f"fine_tuning smoke with metrics: {time.monotonic() - started:.1f} s")
    return root, result


def expected_use(directory: Path) -> tuple[float, float, float]:
    """(GPU utilization %, GPU memory GiB, host memory GiB) the training model gives the point's master pod, from
    the captured pod, its trainer configuration and the smoke preset's model settings."""
    from pytest_topsail.fine_tuning.simulation import (
        FineTuningModel,
        Gpu,
        job_of_pod,
        plan_training,
        trainer_container,
    )
    from pytest_topsail.hardware import GPU_PROFILES

    captured = [yaml.safe_load(path.read_text()) for path in (directory / "captured").glob("*.yaml")]
    pod = next(o for o in captured if o and o.get("kind") == "Pod" and o["metadata"]["name"].endswith("master-0"))
    config_map = next(o for o in captured if o and o.get("kind") == "ConfigMap" and o["metadata"]["name"].endswith(
        "-config"))
    config = json.loads(next(iter(config_map["data"].values())))
    container = trainer_container(pod)
    assert container is not None
    model = FineTuningModel(time_scale=0.2, startup_s=1, save_s=0.5)
    profile = GPU_PROFILES["a100-80gb"]
    gpu = Gpu(profile.product, profile.gpu_memory_mib / 1024, model.gpus["a100-80gb"])
    plan = plan_training(job_of_pod(pod, container, config), gpu, model, seed=1)
    training = max(plan.usage, key=lambda step: step[1].gpu_utilization)[1]
    return (training.gpu_utilization, max(u.gpu_memory_mib for _, u in plan.usage) / 1024,
            max(u.memory_bytes for _, u in plan.usage) / 2**30)


def test_fine_tuning_points_have_gpu_kpis_from_the_training_model(
        fine_tuning_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    root, _ = fine_tuning_run
    records = items(root)
    assert len(records) == 2, sorted(records)
    for test_id, record in records.items():
        directory = Path(record["artifact_dir"])
        utilization, memory, host = expected_use(directory)
        assert utilization > 50
        measured = {name: kpi(record, name) for name in ("gpu_utilization_max", "gpu_utilization_avg",
                                                         "gpu_memory_used_max", "gpu_power_avg",
                                                         "container_cpu_max", "container_memory_max")}
        assert all(value is not None for value in measured.values()), (test_id, measured)
        assert abs(measured["gpu_utilization_max"] - utilization) <= 5, (test_id, measured, utilization)
        assert abs(measured["gpu_memory_used_max"] - memory) <= 0.05 * memory, (test_id, measured, memory)
        assert measured["gpu_utilization_avg"] <= measured["gpu_utilization_max"]
        assert abs(measured["container_memory_max"] - host) <= 0.05 * host, (test_id, measured, host)
        assert 0.5 < measured["container_cpu_max"] <= 1.05, (test_id, measured)  # one data loader core
        entry = next(k for k in record["kpis"] if k["name"] == "gpu_memory_used_max")
        assert entry["unit"] == "GiB" and entry["labels"]["model_name"] == "bigscience/bloom-560m"
        assert entry.get("verdict") is not None or "run_id" in entry  # judged like the suite's own KPIs
        series = json.loads((directory / "metrics" / "series.json").read_text())
        assert {q["spec"]["kpi"] for q in series["queries"]} >= {"gpu_utilization_max", "gpu_memory_used_max"}
        titles = [figure["title"] for figure in record["figures"]]
        assert any("GPU utilization" in title for title in titles) and any("GPU memory" in t for t in titles)
    suite_figures = sorted(p.name for p in (root / "fine_tuning" / "figures").glob("*.json"))
    assert any("GPU_utilization" in name for name in suite_figures), suite_figures


def test_prometheus_scraped_the_simulator_and_stopped_with_the_run(
        fine_tuning_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    root, _ = fine_tuning_run
    directory = next(root.glob("*__prometheus"))
    targets = json.loads((directory / "targets.json").read_text())
    health = {t["labels"]["job"]: t["health"] for t in targets}
    assert health["dcgm-exporter"] == health["kubelet-cadvisor"] == "up"  # what the points' windows need
    assert health["apiserver"] in ("up", "unknown"), health  # every 5 s: maybe not scraped yet when the item began
    intervals = {t["labels"]["job"]: t["scrapeInterval"] for t in targets}
    assert intervals == {"dcgm-exporter": "250ms", "kubelet-cadvisor": "250ms", "apiserver": "5s"}, intervals
    config = (directory / "prometheus.yml").read_text()
    assert "scrape_interval: 250ms" in config and "credentials_file" in config
    deadline = time.monotonic() + 30  # ends as soon as the server is gone
    while prometheus_processes(root) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert prometheus_processes(root) == []
    storage = next(word.split("=", 1)[1] for word in (directory / "command.txt").read_text().split()
                   if word.startswith("--storage.tsdb.path="))
    assert not Path(storage).exists()  # the server's data is removed with it


def test_replot_recomputes_the_metric_kpis_without_cluster_or_prometheus(
        fine_tuning_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    root, _ = fine_tuning_run
    copy = tmp_path / "saved"
    shutil.copytree(root, copy)
    names = ("gpu_utilization_avg", "gpu_utilization_max", "gpu_memory_used_max", "container_memory_max")
    before = {test_id: {n: kpi(r, n) for n in names} for test_id, r in items(copy).items()}
    for path in copy.rglob("kpis.json"):  # the saved values must come back from the series, not from kpis.json
        values = json.loads(path.read_text())
        path.write_text(json.dumps([{**k, "value": -1.0} if k["name"] in names else k for k in values]))
    for path in copy.rglob("item.json"):
        record = json.loads(path.read_text())
        record["kpis"] = [{**k, "value": -1.0} if k["name"] in names else k for k in record["kpis"]]
        path.write_text(json.dumps(record))
    no_prometheus = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                    if not (Path(p) / "prometheus").exists())
    result = run_pytest(f"--topsail-replot={copy}", f"--topsail-history={tmp_path / 'h.sqlite'}",
                        env={"PATH": no_prometheus})
    assert result.returncode == 0, result.stdout[-3000:]
    after = {test_id: {n: kpi(r, n) for n in names} for test_id, r in items(copy).items()}
    assert after == before


def test_points_running_at_once_each_see_their_own_pods(tmp_path: Path) -> None:
    """-n 2: both points train at the same time in one namespace; each point's GPU memory is its own (full
    fine-tuning needs ~3x LoRA's), one Prometheus for the run."""
    root = tmp_path / "artifacts"
    result = run_pytest("suites", "-m", "fine_tuning", "--preset", "smoke", "-n", "2", f"--artifacts={root}",
                        f"--topsail-history={tmp_path / 'history.sqlite'}")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert len(list(root.glob("*__prometheus"))) == 1
    records = items(root)
    assert len(records) == 2
    for test_id, record in records.items():
        _, memory, _ = expected_use(Path(record["artifact_dir"]))
        measured = kpi(record, "gpu_memory_used_max")
        assert measured is not None and abs(measured - memory) <= 0.05 * memory, (test_id, measured, memory)


# ------------------------------------------------------------------ llm_load
def test_serving_utilization_rises_with_concurrency_and_the_idle_node_reads_zero(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    per_node = ('[{kpi: busiest_node_gpu_utilization, query: "max by (Hostname) (DCGM_FI_DEV_GPU_UTIL)", unit: "%",'
                ' aggregation: max}, {kpi: idle_node_gpu_utilization, query: "max by (Hostname) '
                '(DCGM_FI_DEV_GPU_UTIL)", unit: "%", aggregation: min}]')
    # the smoke's openai case, with points of a second (several scrapes each, on a loaded machine too) and a third
    # point past the batch size (8)
    cases = tmp_path / "points.yaml"
    smoke = yaml.safe_load((REPO / "cases" / "llm_load" / "smoke.yaml").read_text())
    cases.write_text(yaml.safe_dump([{**smoke[0], "api": "completions", "concurrency": [1, 8, 16], "duration_s": 1}]))
    result = run_pytest("suites", "-m", "llm_load", "--preset", "smoke", "--var", f"cases=[{cases}]",
                        f"--artifacts={root}", f"--topsail-history={tmp_path / 'h.sqlite'}",
                        "--var", f"metrics.queries={per_node}")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    by_concurrency = {}
    for record in items(root).values():
        concurrency = record["case"]["settings"]["concurrency"]
        by_concurrency[concurrency] = record
    assert sorted(by_concurrency) == [1, 8, 16]
    utilization = {c: kpi(r, "gpu_utilization_max") for c, r in by_concurrency.items()}
    assert None not in utilization.values(), utilization
    assert utilization[1] < utilization[8] <= utilization[16] + 5, utilization  # max_batch_size 8: full at 8
    memory = {c: kpi(r, "gpu_memory_used_max") for c, r in by_concurrency.items()}
    assert memory[1] < memory[8], memory  # the KV cache of a fuller batch
    for record in by_concurrency.values():
        assert kpi(record, "idle_node_gpu_utilization") == 0
        assert kpi(record, "busiest_node_gpu_utilization") == kpi(record, "gpu_utilization_max")
