"""``--topsail-resume``: a 12-point fine-tuning sweep SIGKILLed after 5 points, resumed (under xdist) in its own
artifacts directory: only the 7 others run, the report and the history hold the 12 points of one run, the 5 reused
points' KPIs as the killed run saved them; a resume with another preset stops at start-up naming the difference; a
resume of the finished run runs and stores nothing again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from pytest_topsail.history import open_history

REPO = Path(__file__).resolve().parents[2]
SWEEP = [{"name": "sweep", "model": "bigscience/bloom-560m",
          "dataset": {"name": "twitter_complaints_small", "replication": 1}, "method": ["full", "lora"],
          "gpus_per_pod": 1, "per_device_batch_size": [2, 4, 8], "max_seq_length": [256, 512], "epochs": 1}]
# points of ~0.5 s (a second of simulated startup, a few of training): the kill comes between two of them
SLOW_ENOUGH = ("--var=cluster.sim.plugins.fine_tuning.time_scale=0.002", "--var=metrics.enabled=false")
KILL_AFTER = 5


def command(tmp: Path, *args: str) -> list[str]:
    case_file = tmp / "sweep.yaml"
    case_file.write_text(yaml.safe_dump(SWEEP))
    return [sys.executable, "-m", "pytest", "suites/fine_tuning", "-p", "no:cacheprovider", "--preset", "smoke",
            f"--var=cases=[{case_file}]", *SLOW_ENOUGH, "--topsail-history", str(tmp / "history.sqlite"), *args]


def environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != "ARTIFACT_DIR"}


def finished_items(artifacts: Path) -> dict[str, dict[str, Any]]:
    """item.json of each finished point, by its directory name."""
    return {path.parent.name: json.loads(path.read_text())
            for path in sorted(artifacts.glob("fine_tuning/*/item.json"))}


def kill_after_points(tmp: Path, artifacts: Path, points: int) -> None:
    """Run the sweep in its own process group, SIGKILL the whole group once `points` items have their record."""
    process = subprocess.Popen(command(tmp, "--artifacts", str(artifacts)), cwd=REPO, env=environment(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(artifacts.glob("fine_tuning/*/item.json"))) < points:
            assert process.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline, "the sweep did not reach its points in 120 s"
            time.sleep(0.02)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # pytest and the simulator it started
        process.wait(timeout=30)


def run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(tmp, *args), cwd=REPO, env=environment(), capture_output=True, text=True,
                          timeout=180)


def test_a_killed_sweep_resumed_runs_the_rest_and_reports_the_whole_run(tmp_path: Path):
    artifacts = tmp_path / "artifacts"
    kill_after_points(tmp_path, artifacts, KILL_AFTER)
    killed = finished_items(artifacts)
    assert len(killed) == KILL_AFTER, sorted(killed)
    assert not (artifacts / "report.html").exists()  # a SIGKILL leaves no session output
    saved_files = {name: (artifacts / "fine_tuning" / name / "item.json").read_bytes() for name in killed}
    run_id = {kpi["run_id"] for record in killed.values() for kpi in record["kpis"]}
    assert len(run_id) == 1

    other = run(tmp_path, "--topsail-resume", str(artifacts), "--preset", "h100")
    text = other.stdout + other.stderr
    assert other.returncode == 4, text
    assert "suite fine_tuning: the configuration differs" in text, text
    assert "presets: the run applied smoke, this one smoke, h100" in text, text
    assert "cluster.sim.shape: None then, 'h100' now" in text, text
    assert "Traceback" not in text, text
    assert finished_items(artifacts).keys() == killed.keys()  # nothing ran

    resumed = run(tmp_path, "--topsail-resume", str(artifacts), "-n", "2")
    text = resumed.stdout[-5000:] + resumed.stderr[-2000:]
    assert resumed.returncode == 0, text
    assert "7 passed" in resumed.stdout, text
    assert "topsail resume: 5 item(s) of the stopped run reused" in resumed.stdout, text

    items = finished_items(artifacts)
    assert len(items) == 12
    new = [name for name in items if name not in killed]
    assert len(new) == 7 and min(new) > max(killed), sorted(items)  # fresh numbers after the killed run's
    assert {name: (artifacts / "fine_tuning" / name / "item.json").read_bytes() for name in killed} == saved_files
    assert len({record["nodeid"] for record in items.values()}) == 12

    store = open_history(tmp_path / "history.sqlite")
    try:
        history = store.records("fine_tuning")
    finally:
        store.close()
    assert {record["run_id"] for record in history} == run_id  # one run in the history
    assert len({record["test_uuid"] for record in history}) == 12
    stored = {(record["test_uuid"], record["name"]): record["value"] for record in history}
    reused = {(kpi["test_uuid"], kpi["name"]): kpi["value"] for record in killed.values() for kpi in record["kpis"]}
    assert reused and {key: stored.get(key) for key in reused} == reused
    assert len(stored) == len(history)  # each KPI stored once

    summary = yaml.safe_load((artifacts / "regression_summary.yaml").read_text())
    verdicts = json.loads((artifacts / "verdicts.json").read_text())
    assert len({verdict["test_uuid"] for verdict in verdicts}) == 12, summary
    report = (artifacts / "report.html").read_bytes().decode("cp1252", errors="replace")  # the page's encoding
    assert all(record["nodeid"] in report for record in items.values())

    # the finished run resumed again: nothing runs, nothing is stored twice (its history was written at its end)
    again = run(tmp_path, "--topsail-resume", str(artifacts))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    assert "12 deselected" in again.stdout, again.stdout[-3000:]
    store = open_history(tmp_path / "history.sqlite")
    try:
        assert len(store.records("fine_tuning")) == len(history)
    finally:
        store.close()
