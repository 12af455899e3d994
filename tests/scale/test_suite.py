"""The scale suite run as a user runs it: `pytest suites/scale --preset ...` in a subprocess, on the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("scale_suite")  # -n N: the module-scoped smoke run once

REPO = Path(__file__).resolve().parents[2]
SMOKE_ITEMS = 4  # cases/scale/smoke.yaml: training x 2 pacings, distributed, interactive
RESULT_FILES = ("submitted.json", "sampled.json", "times.csv", "latency.txt", "latency.json", "general.html",
                "detailed.html", "kpis.json", "cleanup.json")


def run_pytest(tmp: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--artifacts", str(tmp / "artifacts"),
               "--topsail-history", str(tmp / "history.sqlite"), *args]
    env = {**os.environ}
    env.pop("ARTIFACT_DIR", None)
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def item_dirs(artifacts: Path) -> list[Path]:
    return sorted(p for p in (artifacts / "scale").iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("smoke")
    return run_pytest(tmp, "suites/scale", "--preset", "smoke", "-q"), tmp / "artifacts"


def test_smoke_preset_passes_and_writes_the_results_of_every_item(smoke_run):
    result, artifacts = smoke_run
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert f"{SMOKE_ITEMS} passed" in result.stdout
    dirs = item_dirs(artifacts)
    assert [d.name.split("__", 1)[1] for d in dirs] == [
        "test_scale_training-pacing=qps", "test_scale_training-pacing=waves", "test_scale_distributed",
        "test_scale_interactive"]
    for directory in dirs:
        for name in RESULT_FILES:
            assert (directory / name).stat().st_size > 0, directory / name
    distributed = json.loads((dirs[2] / "sampled.json").read_text())
    assert distributed["workload_kind"] == ["kubeflow.org/v1", "PyTorchJob"]
    assert len(distributed["pods"]) == 10  # 5 jobs x (master + 1 worker)
    kpis = {k["name"]: k for k in json.loads((dirs[0] / "kpis.json").read_text())}
    assert kpis["job_ready_p99_ms"]["unit"] == "ms" and kpis["job_ready_p99_ms"]["higher_better"] is False
    assert kpis["job_completed_p50_ms"]["value"] >= 200  # the training jobs sleep 0.2 s
    assert kpis["submission_jobs_per_s"]["value"] > 0 and kpis["failed_jobs"]["value"] == 0
    labels = kpis["job_ready_p99_ms"]["labels"]
    assert labels["workload"] == "training" and labels["pacing"] == "qps"  # from the case
    assert labels["cluster"] == "sim" and labels["node_count"] == 10  # cluster facts: the smoke preset's 10 nodes
    assert (artifacts / "report.html").is_file()
    cleanup = json.loads((dirs[0] / "cleanup.json").read_text())
    assert cleanup["remaining"] == [] and len(cleanup["deleted"]) == 1


def test_replot_rebuilds_kpis_and_figures_from_sampled_json(smoke_run, tmp_path):
    result, artifacts = smoke_run
    assert result.returncode == 0
    first = item_dirs(artifacts)[0]
    saved = {k["name"]: k["value"] for k in json.loads((first / "kpis.json").read_text())}
    (first / "general.html").unlink()
    (first / "times.csv").unlink()
    replot = run_pytest(tmp_path, "--topsail-replot", str(artifacts), "suites/scale")
    assert replot.returncode == 0, replot.stdout[-3000:] + replot.stderr[-2000:]
    assert (first / "general.html").stat().st_size > 0 and (first / "times.csv").stat().st_size > 0
    metrics = (artifacts / "kpis.prom").read_text()
    assert "job_ready_p99_ms" in metrics
    assert saved["job_ready_p99_ms"] > 0


def test_smoke_preset_passes_with_two_xdist_workers(tmp_path):
    result = run_pytest(tmp_path, "suites/scale", "--preset", "smoke", "-n", "2", "-q")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert f"{SMOKE_ITEMS} passed" in result.stdout
    dirs = item_dirs(tmp_path / "artifacts")
    assert len(dirs) == SMOKE_ITEMS
    namespaces = {json.loads((d / "cleanup.json").read_text())["deleted"][0] for d in dirs}
    assert len(namespaces) == SMOKE_ITEMS  # every item ran in its own namespace
    assert len(list((tmp_path / "artifacts").glob("*__cluster"))) == 1  # one simulator served both workers
    assert (tmp_path / "artifacts" / "kpis.prom").read_text().count("job_ready_p99_ms{") == SMOKE_ITEMS


def test_a_slowed_stage_fails_the_item_naming_step_metric_value_and_threshold(tmp_path):
    result = run_pytest(tmp_path, "suites/scale", "--preset", "smoke", "--preset", "slow-ready",
                        "-k", "interactive", "-q")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 failed" in result.stdout
    message = next(line for line in result.stdout.splitlines() if "exceeds threshold" in line)
    assert message.startswith("job step Ready (watch) P99 = ")
    value = float(message.split(" = ")[1].split(" ms")[0])
    assert value >= 1500  # the Ready stage was slowed by 1.5 s
    assert message.endswith("exceeds threshold 1000 ms")


def test_pods_no_node_can_hold_fail_the_item_in_seconds_naming_the_reason(tmp_path):
    """16 GPUs per pod on the smoke preset's 8-GPU nodes: the item fails at once with the scheduler's reason, not
    after the case's 120 s timeout with 'never Completed'."""
    cases = tmp_path / "unschedulable.yaml"
    cases.write_text("- name: too-big\n  workload: training\n  jobs: 3\n  gpus: 16\n  timeout_s: 120\n")
    result = run_pytest(tmp_path, "suites/scale", "--preset", "smoke", "--var", f"cases=[{cases}]", "-q")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 failed" in result.stdout
    assert "can never be scheduled" in result.stdout and "Insufficient nvidia.com/gpu" in result.stdout
    assert "nvidia.com/gpu=16" in result.stdout
    record = json.loads((item_dirs(tmp_path / "artifacts")[0] / "item.json").read_text())
    assert record["end"] - record["start"] < 90, "failed by the unschedulable check (seconds), not the 120 s timeout"


LIFECYCLES = ("[pytorchjob, {name: podstart, api_version: v1, kind: Pod, time: observed, steps: "
              "[{name: Scheduled, condition: PodScheduled}, {name: Ready, condition: Ready}]}]")


def test_configured_lifecycles_are_sampled_reported_and_replotted(tmp_path):
    """tests.scale.lifecycle: the built-in pytorchjob and a lifecycle of the suite's own, beside the distributed
    smoke case's jobs: their CSV, figure and transition KPIs; a replot recomputes the built-in's KPIs."""
    result = run_pytest(tmp_path, "suites/scale", "--preset", "smoke", "-k", "distributed", "-q",
                        f"--var=tests.scale.lifecycle={LIFECYCLES}",
                        "--var=tests.scale.thresholds=[{level: podstart, step: Scheduled->Ready, metric: P90, "
                        "max_ms: 60000}]")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    (directory,) = item_dirs(tmp_path / "artifacts")
    for name in ("lifecycle_pytorchjob.csv", "lifecycle_pytorchjob.html", "lifecycle_podstart.csv"):
        assert (directory / name).stat().st_size > 0, name
    summary = json.loads((directory / "summary.json").read_text())["lifecycles"]
    assert summary["pytorchjob"]["objects"] == 5 and summary["podstart"]["objects"] == 10  # 5 x (master + worker)
    assert summary["podstart"]["transitions"]["Scheduled->Ready"]["errors"] == 0
    kpis = {k["name"]: k for k in json.loads((directory / "kpis.json").read_text())}
    declared = kpis["lifecycle_pytorchjob_created_running_p50_ms"]
    assert declared["unit"] == "ms" and declared["higher_better"] is False and declared["value"] % 1000 == 0
    assert "lifecycle_pytorchjob_running_succeeded_p50_ms" not in kpis  # the jobs run until deleted: no quantiles
    own = kpis["lifecycle_podstart_scheduled_ready_p90_ms"]  # observed times: milliseconds
    assert own["samples"] == 10 and 0 <= own["value"] < 10_000
    assert any(f["title"].endswith("lifecycle pytorchjob") for f in json.loads((directory / "item.json")
                                                                               .read_text())["figures"])
    replot = run_pytest(tmp_path, "--topsail-replot", str(tmp_path / "artifacts"), "suites/scale")
    assert replot.returncode == 0, replot.stdout[-3000:] + replot.stderr[-2000:]
    verdicts = {v["kpi"] for v in json.loads((tmp_path / "artifacts" / "verdicts.json").read_text())}
    assert "lifecycle_pytorchjob_created_running_p50_ms" in verdicts
