"""A TGIS worker that loses its GPU (a `gpu_lost` fault of the simulator profile, docs/reliability.md "Fault
catalogue"): its items fail naming the fault, the pod, the node and the GPU; the other worker's items pass."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_tgis_suite import BF16, REFERENCE, run_pytest, specs

from pytest_topsail.tgis import ModelConfig

MODEL = "google/flan-t5-small"


def isvc_name(config: dict[str, str]) -> str:
    from pytest_topsail.prepare.tgis_workers import object_name

    return object_name(MODEL, ModelConfig.model_validate(config))


def test_the_worker_that_loses_its_gpu_fails_its_items_naming_it_and_the_other_worker_passes(tmp_path: Path) -> None:
    fault = [{"kind": "gpu_lost", "when_running": {"match_labels": {"serving.kserve.io/inferenceservice":
                                                                    isvc_name(BF16)}}}]
    result = run_pytest(tmp_path, "--var", specs([REFERENCE, BF16], "cases/tgis/flan-t5-small/basic.yaml"),
                        "--var", f"cluster.sim.faults.events={json.dumps(fault)}")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    assert failed and all("tgis_native|bf16/" in line for line in failed), failed
    assert "15 failed, 15 passed" in result.stdout, output[-3000:]
    assert "Traceback" not in output
    failures = [path.read_text() for path in (tmp_path / "artifacts" / "tgis").glob("*/FAILURE")]
    assert len(failures) == 15
    pattern = (r"gpu_lost: Xid 79 \(GPU has fallen off the bus\) on GPU \d of node gpu-\d{4} used by pod "
               rf"{isvc_name(BF16)}-predictor-\S+")
    assert all(re.search(pattern, text) for text in failures), failures[0]
