"""A volume_attach fault (`cluster.sim.faults.events`, kind volume_attach) as the fine-tuning suite meets it: a point
whose pods cannot attach the storage PVC fails when its 'started' phase times out, named volume_attach with the pod,
its node and the PVC; a point whose attach is slow passes (later); the next point passes; nothing is left."""

from __future__ import annotations

import hashlib
import json
import re

from test_fine_tuning_suite import FAST, audit_leftovers, item_dirs, output, run_pytest

LIGHT = {"model": "bigscience/bloom-560m", "dataset": {"name": "twitter_complaints_small"}}


def job_name(case: str) -> str:
    """The suite's PyTorchJob name of a case (suites/fine_tuning/test_fine_tuning.py job_name)."""
    return "ft-" + hashlib.sha256(case.encode()).hexdigest()[:12]


def test_a_pvc_that_never_attaches_fails_its_point_naming_volume_attach_and_a_slow_one_passes(tmp_path):
    cases = [{"name": name, **LIGHT} for name in ("stuck", "next", "slow")]
    events = [{"kind": "volume_attach", "claim": "fine-tuning-storage", "pod": {"name_prefix": job_name("stuck")}},
              {"kind": "volume_attach", "attach_delay_s": 2.0, "pod": {"name_prefix": job_name("slow")}}]
    result, artifacts = run_pytest(tmp_path, *FAST, "--var=tests.fine_tuning.timeouts.started=4",
                                   f"--var=cluster.sim.faults.events={json.dumps(events)}", cases=cases,
                                   timeout=240)
    assert result.returncode == 1, output(result)
    assert "1 failed, 2 passed" in result.stdout, output(result)
    assert "Traceback" not in result.stdout + result.stderr
    dirs = item_dirs(artifacts)
    failure = (dirs["test_fine_tuning_stuck"] / "FAILURE").read_text()
    job = job_name("stuck")
    assert re.search(rf"volume_attach: pod {job}-master-0 on node [a-z0-9-]+ \(PVC fine-tuning-storage\): "
                     r"(FailedMount: Unable to attach or mount volumes: unmounted volumes=\[storage\]|"
                     r"FailedAttachVolume: AttachVolume.Attach failed for volume \"pvc-)", failure), failure
    assert "(phase 'started' for 4s, timeouts.started)" in failure, failure
    captured = dirs["test_fine_tuning_stuck"] / "captured"
    assert any("pytorchjob" in p.name for p in captured.iterdir())  # the point's objects, kept
    for name in ("next", "slow"):
        assert (dirs[f"test_fine_tuning_{name}"] / "kpis.json").exists(), name
    slow_events = "\n".join(p.read_text() for p in (dirs["test_fine_tuning_slow"] / "captured").rglob("*event*"))
    assert "FailedAttachVolume" in slow_events and "SuccessfulAttachVolume" in slow_events
    assert audit_leftovers(artifacts) == {}
