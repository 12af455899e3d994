"""``--topsail-show-config`` on the repository's suites: every suite's case ids (the TGIS suite's, which it
parametrizes itself, included), its presets with their descriptions (long ones say how long), nothing run; and
``--help`` says where presets live and what a verdict needs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pytest_output(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_show_config_lists_every_suites_case_ids_and_presets(tmp_path: Path) -> None:
    shown = pytest_output("suites", "--topsail-show-config", "--preset", "smoke", "-p", "no:cacheprovider",
                          f"--artifacts={tmp_path / 'artifacts'}")
    assert shown.returncode == 0, shown.stdout[-2000:] + shown.stderr[-2000:]
    text = shown.stdout
    cases, suite = {}, ""
    for line in text.splitlines():
        if line.startswith("# suite "):
            suite = line.split()[2]
        elif re.match(r"# \d+ cases?: ", line):
            cases[suite] = line.split(": ", 1)[1]
    assert set(cases) == {"fine_tuning", "llm_load", "scale", "tgis"}, text[-3000:]
    assert "flan-t5-small/tgis_native|f16/greedy-basic" in cases["tgis"].split(", ")
    assert "smoke-method=full" in cases["fine_tuning"].split(", ")
    assert "#   sweep: TGIS gRPC streaming, concurrency 1..128, 6 s per point (about 2 minutes)" in text
    assert "#   sweep-long: TOPSAIL's serving matrix, concurrency 1..128, 60 s per point (about 10 minutes)" in text
    assert "#   dgx: 48 PyTorchJobs on a simulated DGX (about 15 s)" in text
    assert "passed" not in text and "collected" not in text and not (tmp_path / "artifacts").exists()


def test_help_says_where_presets_live_and_what_a_verdict_needs() -> None:
    text = " ".join(pytest_output("--help").stdout.split())
    assert "presets live under ci_presets: in each suite's config.yaml (suites/<suite>/config.yaml)" in text
    assert "regression.min_history (default 5) comparable earlier runs" in text


def test_show_config_under_xdist_collects_in_place(tmp_path: Path) -> None:
    shown = pytest_output("suites", "-m", "scale", "-n", "2", "--topsail-show-config", "--preset", "smoke",
                          "-p", "no:cacheprovider", f"--artifacts={tmp_path / 'artifacts'}")
    assert shown.returncode == 0, shown.stdout[-2000:] + shown.stderr[-2000:]
    assert "# 4 cases: training-pacing=qps, training-pacing=waves, distributed, interactive" in shown.stdout
    assert "created:" not in shown.stdout + shown.stderr, "no xdist worker started"

