"""The fine-tuning test: one PyTorchJob per point of the matrix, its trainer's metrics as KPIs, its loss curve."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

import pytest_topsail as topsail
from pytest_topsail import Cluster
from pytest_topsail.fine_tuning import (
    Catalog,
    MemoryEstimate,
    PointMetrics,
    PointRun,
    PointSettings,
    SuiteSettings,
    loss_curve,
    memory_estimate,
    parse_file,
    point_labels,
    point_shape,
    save_point,
    saved_baseline,
    scaling_scope,
    smallest_gpus,
    validate_point,
)


def test_fine_tuning(case: topsail.Case, cluster: Cluster, namespace: str, ft_settings: SuiteSettings,
                     ft_catalog: Catalog, ft_storage: str, progress: topsail.Progress, artifact_dir: Path,
                     kpis: topsail.KpiRecorder, topsail_metric_pods: Callable[[str], None],
                     topsail_suite: topsail.Suite) -> None:
    where = f"{case.source} (case {case.id})"
    topsail_metric_pods(f"{job_name(case.id)}-.+")  # GPU metrics of this point's pods only (docs/metrics.md)
    try:
        point = validate_point(case.settings, where).resolved(ft_catalog, where)
        estimate = memory_estimate(point, ft_catalog, ft_settings.memory_reserve_gb, where)
        dataset, data_format = ft_catalog.dataset(point.dataset.name, where), ft_catalog.dataset_format(
            point.dataset.name, where)
    except topsail.TopsailError as error:
        pytest.fail(str(error), pytrace=False)
    save_point(point, artifact_dir)
    gpu_memory = ft_settings.gpu_memory_gb or cluster_gpu_memory_gib(cluster, point.gpus_per_pod)
    preflight(point, estimate, gpu_memory, ft_settings, artifact_dir)
    run = PointRun(cluster.kube, namespace, job_name(case.id), point, ft_settings, artifact_dir, progress,
                   estimate, gpu_memory, dataset.samples, data_format, storage_pvc=ft_storage)
    try:
        master_log = run.run()
        results = parse_file(master_log)
    except topsail.TopsailError as error:
        pytest.fail(f"{run.job}: {error}\nartifacts: {artifact_dir}", pytrace=False)
    kpis.labels(**point_labels(point))
    smallest = smallest_gpus(point, [c.settings for c in topsail_suite.cases], ft_catalog)
    baseline = saved_baseline(artifact_dir, point, smallest) if smallest < point.world_size else None
    if baseline is not None:  # scaling efficiency: measured once per group and GPU count of the run
        kpis.scope("run", **scaling_scope(point, smallest))
    elif smallest < point.world_size:
        kpis.warn(f"scaling_efficiency not recorded: the {smallest}-GPU point of its group has no result yet (it "
                  "failed, was skipped, or runs later on another xdist worker); the suite's figure has it")
    kpis.record_from(PointMetrics(results, gpus=point.world_size, epochs=point.epochs,
                                  shape=point_shape(point, ft_catalog, where), baseline=baseline))
    kpis.add_figure(f"{case.id}: loss", loss_curve(results.progress, f"{case.id}: loss"))


def job_name(case_id: str) -> str:
    """A DNS label that depends on the point only (the same under xdist), short enough for `-worker-NNN`."""
    return "ft-" + hashlib.sha256(case_id.encode()).hexdigest()[:12]


def cluster_gpu_memory_gib(cluster: Cluster, gpus_per_pod: int) -> float | None:
    """The largest GPU memory among the cluster's GPU pools whose nodes have enough GPUs for one pod."""
    pools = [p for p in cluster.facts.get("gpu_pools") or () if int(p.get("gpus_per_node") or 0) >= gpus_per_pod]
    memories = [float(p["gpu_memory_mib"]) / 1024 for p in pools if p.get("gpu_memory_mib")]
    return max(memories) if memories else None


def preflight(point: PointSettings, estimate: MemoryEstimate, gpu_memory: float | None, settings: SuiteSettings,
              artifact_dir: Path) -> None:
    verdict = "unknown GPU memory" if gpu_memory is None else (
        "fits" if estimate.total_gib <= gpu_memory else "does not fit")
    text = f"{estimate.describe()}; GPU memory {gpu_memory or 0:.1f} GiB: {verdict}"
    (artifact_dir / "preflight.txt").write_text(text + "\n", encoding="utf-8")
    if verdict != "does not fit" or settings.preflight == "run":
        return
    message = (f"pre-flight: memory estimate {estimate.describe()} exceeds the GPU memory {gpu_memory:.1f} GiB "
               f"({point.model}, {point.method}, {point.world_size} GPU(s), batch {point.per_device_batch_size}, "
               f"sequence {point.max_seq_length}; tests.fine_tuning.preflight: {settings.preflight})")
    if settings.preflight == "skip":
        pytest.skip(message)
    pytest.fail(message, pytrace=False)
