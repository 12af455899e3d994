"""The generic lifecycle sampler configured for PyTorchJob (the built-in pytorchjob, observed times) against the
fine-tuning suite's own timings of the same jobs on the simulator (issue 41): the points run by the suite's runner
(pytest_topsail.fine_tuning PointRun) write, in job_lifecycle.json, when their own watch first showed each condition;
the sampler, watching the namespace on its own, reports Created -> Running -> Succeeded per job within 50 ms of them.
The transition times (lastTransitionTime) are those of the PyTorchJob the point captured."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pytest_topsail.fine_tuning.catalog import builtin_catalog
from pytest_topsail.fine_tuning.point import validate_point
from pytest_topsail.fine_tuning.run import JOB_LIFECYCLE, PointRun
from pytest_topsail.fine_tuning.settings import validate_suite
from pytest_topsail.kube.client import Kube, connect
from pytest_topsail.kube.namespaces import create_namespace
from pytest_topsail.scale.latency import lifecycle_stats
from pytest_topsail.scale.lifecycle import builtin, parse_ts
from pytest_topsail.scale.sampler import Sampler
from pytest_topsail.scale.timelines import lifecycle_timelines
from pytest_topsail.sim.run.launcher import SimCluster

NAMESPACE = "ft-lifecycle"
TOLERANCE_MS = 50.0
STEPS = ("Created", "Running", "Succeeded")
POINTS = {"ft-lc-one": {}, "ft-lc-two-pods": {"pods": 2}, "ft-lc-four-gpus": {"gpus_per_pod": 4}}


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    profile = {"preinstalled": ["all"],
               "plugins": {"fine_tuning": {"time_scale": 0.0005, "startup_s": 30, "save_s": 5}}}
    with SimCluster(profile, nodes=2, gpu_profile="a100-80gb", gpus_per_node=8, seed=4) as sim:
        api = connect(sim.kubeconfig_path, pool_size=8)
        yield api
        api.close()


def run_points(kube: Kube, root: Path) -> dict[str, Path]:
    settings = validate_suite({}, "test")
    create_namespace(kube, NAMESPACE, {})
    kube.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": PointRun.storage_pvc, "namespace": NAMESPACE},
                 "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "80Gi"}}}})
    directories = {}
    for job, shape in POINTS.items():
        point = validate_point({"dataset": {"name": "twitter_complaints_small"}, **shape}, "test").resolved(
            builtin_catalog(), "test")
        directory = directories[job] = root / job
        directory.mkdir()
        PointRun(kube, NAMESPACE, job, point, settings, directory, lambda message: None).run()
    return directories


def test_the_pytorchjob_lifecycle_matches_the_fine_tuning_runs_own_timings(kube: Kube, tmp_path: Path) -> None:
    lifecycle = builtin("pytorchjob", time="observed")
    sampler = Sampler(kube, [NAMESPACE], [lifecycle])
    sampler.start()
    try:
        directories = run_points(kube, tmp_path)
    finally:
        sampler.stop()
    sampled = sampler.snapshot()["lifecycles"]["pytorchjob"]
    by_job = {o["object"]["metadata"]["name"]: o for o in sampled["objects"]}
    assert sorted(by_job) == sorted(POINTS)
    differences = []
    for job, directory in directories.items():
        own = json.loads((directory / JOB_LIFECYCLE).read_text())
        steps = by_job[job]["steps"]
        assert "Failed" not in steps
        for step in STEPS:
            assert step in own, (job, own)
            differences.append((abs(steps[step]["watch"] - own[step]), job, step))
        assert steps["Created"]["watch"] <= steps["Running"]["watch"] <= steps["Succeeded"]["watch"]
        captured = next((directory / "captured").glob("pytorchjob*.yaml"))
        conditions = {c["type"]: c for c in yaml.safe_load(captured.read_text())["status"]["conditions"]}
        # the object source: the condition's lastTransitionTime as the point captured it, at the job's end; Running
        # then is False since Succeeded (the training operator's way), its time the end's: the True one came before
        for step in ("Created", "Succeeded"):
            assert steps[step]["object"] == parse_ts(conditions[step]["lastTransitionTime"]), (job, step)
        assert steps["Created"]["object"] <= steps["Running"]["object"] <= steps["Succeeded"]["object"], job
    # two watch streams of one process: on a quiet machine every step within 50 ms (0.9-7.1 ms measured); on a
    # loaded one (CI's xdist run) a starved thread can hold one event back, so the median must hold, the worst
    # stay within a few hundred ms
    differences.sort()
    median, worst = differences[len(differences) // 2], differences[-1]
    assert median[0] <= TOLERANCE_MS, differences
    assert worst[0] <= 10 * TOLERANCE_MS, differences
    timelines = lifecycle_timelines(lifecycle, sampled["objects"])
    stats = {s.step: s for s in lifecycle_stats(lifecycle, timelines)}
    assert list(stats) == ["Created->Running", "Running->Succeeded"]
    for transition in stats.values():
        assert transition.count == 3 and transition.errors == 0 and transition.P50 is not None
        assert transition.max is not None and transition.max >= transition.P50 > 0
    print(f"differences from the runs' own timings: median {median[0]:.1f} ms, largest {worst[0]:.1f} ms")
