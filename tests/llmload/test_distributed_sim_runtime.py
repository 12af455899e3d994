"""Distributed load from `tests.llm_load.generators: N` alone: on the simulator the suite's own `cluster.sim.runtime`
entry runs the generator image (no preset needed); an image no entry runs stops the run at start-up naming what to
set; a failure names each generator pod once, with its own cause."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_topsail.cluster.sim_profile import _merge
from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.distributed import Generator, merge
from pytest_topsail.llmload.generator import LoadPoint

REPO = Path(__file__).resolve().parents[2]
GENERATORS = 3


def run_smoke(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The user's command, `--preset smoke --var tests.llm_load.generators=3`, on two of its six items (both
    backends at concurrency 1)."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--artifacts",
               str(tmp / "artifacts"), "--topsail-history", str(tmp / "history.sqlite"), "-m", "llm_load",
               "--preset", "smoke", "--var", f"tests.llm_load.generators={GENERATORS}", "-q",
               "-k", "(tgis or completions) and not 8", *args]
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("ARTIFACT_DIR", None)
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def test_smoke_runs_on_generator_pods_from_the_generators_setting_alone(tmp_path: Path) -> None:
    result = run_smoke(tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "2 passed" in output, output[-2000:]
    items = sorted(p for p in (tmp_path / "artifacts" / "llm_load").iterdir() if "__test_llm_load" in p.name)
    assert len(items) == 2
    for item in items:
        generators = json.loads((item / "load" / "generators.json").read_text())
        assert len(generators) == GENERATORS and {g["state"] for g in generators} == {"Succeeded"}
        assert all(g["requests"] > 0 for g in generators)


def test_an_image_no_runtime_entry_runs_stops_the_run_at_start_up_saying_what_to_set(tmp_path: Path) -> None:
    result = run_smoke(tmp_path, "--var", "tests.llm_load.generator_pool.image=quay.io/me/generator:1",
                       "--var", "metrics.enabled=false")
    output = result.stdout + result.stderr
    assert result.returncode == 4, output[-3000:]  # a usage error: no item ran, no simulator started
    cause = "no cluster.sim.runtime entry runs the generator image 'quay.io/me/generator:1'"
    assert output.count(cause) == 1 and "passed" not in output and "failed" not in output, output[-3000:]
    assert "set tests.llm_load.generator_pool.image to match 'topsail.local/llm-load-generator:*'" in output
    assert "add to cluster.sim.runtime an entry {image: 'quay.io/me/generator:1'" in output
    assert "Traceback" not in output and not (tmp_path / "artifacts" / "llm_load").is_dir()


def test_an_image_given_its_runtime_entry_passes_the_start_up_check(tmp_path: Path) -> None:
    runtime = ('[{image: "topsail.local/llm-load-generator:*", env: {PYTHONPATH: "{source}"}, max_seconds: 900}, '
               '{image: "quay.io/me/generator:*", env: {PYTHONPATH: "{source}"}, max_seconds: 900}]')
    result = run_smoke(tmp_path, "--var", "tests.llm_load.generator_pool.image=quay.io/me/generator:1",
                       "--var", f"cluster.sim.runtime={runtime}", "--collect-only")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


def test_no_generator_started_names_each_pod_once_with_its_cause(tmp_path: Path) -> None:
    (tmp_path / "generators").mkdir()
    generators = [Generator("gen-a", "Failed", "exit code 3 (Error), last log line: ModuleNotFoundError: x"),
                  Generator("gen-b", "NotCollected", "exit code 0 (Completed), its records were not all collected "
                                                     "through pods/portforward to port 8471, last log line: done")]
    with pytest.raises(TopsailError) as raised:
        merge(tmp_path, tmp_path / "generators", generators, LoadPoint(concurrency=1), {})
    message = str(raised.value)
    assert message == ("no load generator started: gen-a: Failed (exit code 3 (Error), last log line: "
                       "ModuleNotFoundError: x); gen-b: NotCollected (exit code 0 (Completed), its records were not "
                       "all collected through pods/portforward to port 8471, last log line: done)")


def test_the_runtime_tables_of_suites_sharing_the_simulator_are_joined() -> None:
    generator = {"image": "topsail.local/llm-load-generator:*", "max_seconds": 900}
    trainer = {"image": "topsail.local/sft-trainer:*"}
    merged: dict[str, object] = {}
    sources: dict[tuple[str, ...], str] = {}
    for source, runtime in (("fine_tuning", []), ("llm_load", [generator]), ("other", [trainer, generator])):
        _merge(merged, {"runtime": runtime, "seed": 1}, (), source, sources)
    assert merged == {"runtime": [generator, trainer], "seed": 1}
    with pytest.raises(TopsailError, match="cluster.sim.seed: .* disagree"):
        _merge(merged, {"seed": 2}, (), "late", sources)
