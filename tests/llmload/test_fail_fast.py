"""llm_load on a cluster where no node can ever hold the predictor: the run fails within seconds naming why (its
preparation's GPU operator step, before any item: docs/fresh-cluster.md)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_zero_nodes_fail_fast_naming_the_cause(tmp_path: Path) -> None:
    began = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/llm_load", "--preset", "smoke", "-p", "no:cacheprovider",
         "-p", "no:randomly", "-q", "-k", "tgis and 1", "--var", "cluster.sim.nodes=0",
         "--var", "metrics.enabled=false", f"--artifacts={tmp_path}"],
        cwd=REPO, capture_output=True, text=True, timeout=280)
    elapsed = time.monotonic() - began
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "gpu_operator: the cluster has no node: no GPU node can advertise nvidia.com/gpu" in output, output
    assert "Traceback" not in output and "During handling" not in output, output
    # not the serving timeout (300 s from the predictor's creation); about 13 s with start-up here when quiet
    assert elapsed < 250, f"{elapsed:.0f} s"
