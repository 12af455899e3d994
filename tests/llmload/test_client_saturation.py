"""The client-saturation check is never silent: the suite run as a user runs it shows the warning in the terminal
summary and in the HTML report (the loop-lag limit lowered below any real lag, so the check trips on every
machine; tests/llmload/test_generator.py saturates a client for real)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_saturation_warning_reaches_the_terminal_and_the_report(tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(yaml.safe_dump([{"name": "busy", "model": "bigscience/bloom-560m", "backend": "tgis",
                                      "concurrency": 2, "duration_s": 0.5}]))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "suites/llm_load",
               "-q", "--artifacts", str(tmp_path / "artifacts"), "--topsail-history", str(tmp_path / "h.sqlite"),
               "--var", f"cases=[{cases}]", "--var", "tests.llm_load.serving=in-process",
               "--var", "metrics.enabled=false", "--var", "tests.llm_load.client_max_loop_lag_ms=0.000001"]
    env = {**os.environ}
    env.pop("ARTIFACT_DIR", None)
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]  # a warning, not a failure
    problem = next(line for line in result.stdout.splitlines() if line.startswith("problem: "))
    assert "test_llm_load[busy]: concurrency=2: load client saturated: its event loop woke up" in problem
    assert "client_max_loop_lag_ms 1e-06" in problem
    report = (tmp_path / "artifacts" / "report.html").read_text(encoding="windows-1252", errors="replace")
    assert "load client saturated: its event loop woke up" in report
