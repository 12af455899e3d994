"""One scale run end to end, without pytest: namespaces, sampler, submission, wait, artifacts, analysis, cleanup.

Artifacts written in the given directory: submitted.json, sampled.json, times.csv, latency.txt, latency.json,
summary.json, general.html, detailed.html (the figures are returned too, for the report), cleanup.json.
``run_case`` is the whole sequence; ``analyse_directory`` re-runs the analysis on saved documents.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import pydantic

from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.client import Kube
from pytest_topsail.kube.namespaces import KEPT, create_namespace, delete_namespaces
from pytest_topsail.leftovers import report_leftover
from pytest_topsail.scale.faults import pod_faults
from pytest_topsail.scale.latency import (
    StepStats,
    Threshold,
    all_stats,
    check_thresholds,
    lifecycle_stats,
    write_tables,
)
from pytest_topsail.scale.lifecycle import Lifecycle
from pytest_topsail.scale.queueing import QueueSettings
from pytest_topsail.scale.sampler import Sampler, read_sampled, write_sampled
from pytest_topsail.scale.submitter import JobToSubmit, Pacing, SubmitResult, Submitter
from pytest_topsail.scale.timelines import (
    failed_jobs,
    job_timelines,
    lifecycle_table,
    lifecycle_timelines,
    pod_timelines,
    scheduling_throughput,
    write_padded_csv,
    write_times_csv,
)
from pytest_topsail.scale.workloads import RUN_LABEL, WorkloadSpec, job_name, job_objects
from pytest_topsail.settings import validate

LIFECYCLE_SETTLE_S = 10.0  # after the jobs: how long the configured lifecycles may take to reach their last step
LIFECYCLE_QUIET_S = 0.5  # ... as long as events keep coming (objects of jobs that run until deleted never end)
MAX_SHOWN_ERRORS = 3  # submit errors copied into summary.json (all of them are in submitted.json)
# Keys a case may carry beside the scale settings (names, descriptions): ignored here.
META_KEYS = {"name", "description"}


class ScaleCase(pydantic.BaseModel):
    """The settings of one scale case (validated; unknown keys are an error)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    workload: Literal["training", "distributed", "interactive"] = "training"
    jobs: int = pydantic.Field(10, ge=1, le=100_000)
    gpus: int = pydantic.Field(1, ge=0)
    workers: int = pydantic.Field(1, ge=0)
    pvc: bool = False
    duration_s: float | None = pydantic.Field(None, gt=0)
    namespaces: int = pydantic.Field(1, ge=1, le=1000)
    pacing: Literal["qps", "waves"] = "qps"
    qps: float = pydantic.Field(0.0, ge=0)
    burst: int = pydantic.Field(10, ge=1)
    parallelism: int = pydantic.Field(16, ge=1, le=256)
    wave_size: int = pydantic.Field(10, ge=1)
    delay_s: float = pydantic.Field(0.0, ge=0)
    wait_for: Literal["ready", "completed"] | None = None
    timeout_s: float = pydantic.Field(120.0, gt=0)
    cpu: str = "50m"
    memory: str = "1Mi"
    queue: QueueSettings | None = None  # Kueue: queues, teams (one namespace each); docs/scale.md

    @pydantic.model_validator(mode="after")
    def queue_needs_jobs(self) -> ScaleCase:
        if self.queue is not None and self.workload == "interactive":
            raise ValueError("queue: Kueue admits training Jobs and distributed PyTorchJobs, not interactive "
                             "Deployments")
        return self

    @classmethod
    def from_settings(cls, settings: dict[str, Any], where: str) -> ScaleCase:
        values = {k: v for k, v in settings.items() if k not in META_KEYS}
        return validate(cls, values, where, "invalid scale case settings")

    def workload_spec(self) -> WorkloadSpec:
        return WorkloadSpec(
            workload=self.workload,
            gpus=self.gpus,
            workers=self.workers,
            pvc=self.pvc,
            duration_s=self.duration_s,
            cpu=self.cpu,
            memory=self.memory,
        )

    def pacing_spec(self) -> Pacing:
        return Pacing(
            mode=self.pacing,
            qps=self.qps,
            burst=self.burst,
            parallelism=self.parallelism,
            wave_size=self.wave_size,
            delay_s=self.delay_s,
        )

    def target(self) -> str:
        """The step every job must reach before sampling stops."""
        if self.wait_for:
            return self.wait_for
        return "completed" if self.workload_spec().completes else "ready"


@dataclass
class ScaleResult:
    stats: list[StepStats]
    figures: dict[str, Any]
    summary: dict[str, Any]
    violations: list[str] = field(default_factory=list)


def build_jobs(case: ScaleCase, namespaces: list[str], run_id: str, prefix: str) -> list[JobToSubmit]:
    spec = case.workload_spec()
    jobs = []
    for index in range(case.jobs):
        namespace = namespaces[index % len(namespaces)]
        name = job_name(prefix, index)
        jobs.append(
            JobToSubmit(
                index=index,
                name=name,
                namespace=namespace,
                objects=job_objects(spec, name, namespace, run_id, index),
                expected_pods=spec.pods_per_job,
                completes=spec.completes,
            )
        )
    return jobs


def submit_and_sample(
    api: Kube,
    case: ScaleCase,
    namespaces: list[str],
    run_id: str,
    directory: Path,
    progress: TextIO | None = None,
    prefix: str = "j",
    lifecycles: tuple[Lifecycle, ...] = (),
) -> tuple[SubmitResult, dict[str, Any], bool]:
    """Watch, submit, wait for every job to reach its target; write submitted.json and sampled.json. `lifecycles`:
    the suite's, sampled beside the run's own jobs and pods."""
    sampler = Sampler.for_run(api, namespaces, run_id, case.workload_spec().kind, lifecycles)
    sampler.start()
    jobs = build_jobs(case, namespaces, run_id, prefix)
    workload_watch = None
    if case.queue is not None:
        from pytest_topsail.scale.queueing import WorkloadWatch, queue_job

        for job in jobs:
            queue_job(job.objects, case.queue.teams[namespaces.index(job.namespace)], run_id)
        workload_watch = WorkloadWatch(api, namespaces)
        workload_watch.start()
    try:
        submitter = Submitter(api, case.pacing_spec(), progress_stream=progress, label=run_id)
        result = submitter.submit(jobs)
        result.extra["run_id"] = run_id
        result.extra["target"] = case.target()
        result.write(directory / "submitted.json")
        submitted = result.to_dict()
        if progress is not None:
            offered = "unlimited" if result.offered_jobs_per_s is None else f"{result.offered_jobs_per_s:g}"
            progress.write(f"[{run_id}] offered {offered} jobs/s, achieved {result.achieved_jobs_per_s:.1f} jobs/s, "
                           f"{result.failed} failed; waiting for {case.target()}\n")
        reached = sampler.wait_for_jobs(submitted["jobs"], case.target(), case.timeout_s, progress_stream=progress)
        if reached and lifecycles:  # their watches may lag the run's, their objects end after the jobs (a Workload)
            sampler.wait_for_lifecycles([lifecycle.name for lifecycle in lifecycles], LIFECYCLE_SETTLE_S,
                                        LIFECYCLE_QUIET_S)
    finally:
        sampler.stop()
        if workload_watch is not None:
            workload_watch.stop()
    sampled = sampler.snapshot()
    if workload_watch is not None and case.queue is not None:
        from pytest_topsail.scale.queueing import sampled_queue

        sampled["queue"] = sampled_queue(case.queue, run_id, namespaces, workload_watch)
    sampled["timed_out"] = not reached and not sampled.get("unschedulable") and not sampled.get("lost")
    write_sampled(sampled, directory / "sampled.json")
    return result, sampled, reached


def analyse(
    submitted: dict[str, Any],
    sampled: dict[str, Any],
    directory: Path,
    thresholds: list[Threshold] | None = None,
    plots: bool = True,
    include_plotlyjs: str | bool = "shared",
    plotly_js: Path | None = None,
) -> ScaleResult:
    """Timelines -> times.csv, latency tables, figures, summary.json; threshold violations. Needs no cluster."""
    target = {"ready": "Ready", "completed": "Completed"}[submitted.get("target", "ready")]
    jobs = job_timelines(submitted, sampled)
    pods = pod_timelines(sampled)
    stats = all_stats(jobs, pods)
    write_times_csv(jobs, directory / "times.csv")
    write_tables(stats, directory)
    failed = failed_jobs(jobs, target)
    summary = {
        "jobs": len(jobs),
        "pods": len(pods),
        "target": target,
        "timed_out": bool(sampled.get("timed_out")),
        "unschedulable": sampled.get("unschedulable"),
        "cluster_lost": sampled.get("lost"),
        "failed_jobs": failed,
        "offered_jobs_per_s": submitted.get("offered_jobs_per_s"),
        "submission_jobs_per_s": submitted.get("achieved_jobs_per_s", 0.0),
        "scheduling_pods_per_s": scheduling_throughput(sampled),
        "submit_duration_s": submitted.get("duration_s"),
        "sampler_errors": sampled.get("errors", []),
        "submit_errors": [job["error"] for job in submitted.get("jobs", []) if job.get("error")][:MAX_SHOWN_ERRORS],
    }
    figures: dict[str, Any] = {}
    if plots:
        from pytest_topsail.scale.plots import detailed_figure, general_figure, save_html

        figures = {"general": general_figure(jobs), "detailed": detailed_figure(jobs)}
        for name, figure in figures.items():
            save_html(figure, directory / f"{name}.html", include_plotlyjs, plotly_js)
    if sampled.get("queue"):
        from pytest_topsail.scale.queueing import analyse_queues, job_times, queue_figure

        summary["queue"] = analyse_queues(sampled["queue"], job_times(jobs))
        (directory / "queue.json").write_text(json.dumps(summary["queue"], indent=1))
        if plots:
            from pytest_topsail.scale.plots import save_html

            figures["queue"] = queue_figure(summary["queue"])
            save_html(figures["queue"], directory / "queue.html", include_plotlyjs, plotly_js)
    for name, lifecycle_sampled in (sampled.get("lifecycles") or {}).items():
        summary.setdefault("lifecycles", {})[name] = analyse_lifecycle(
            lifecycle_sampled, directory, stats, figures if plots else None, include_plotlyjs, plotly_js)
    violations = check_thresholds(stats, thresholds or [])
    summary["threshold_violations"] = violations
    (directory / "summary.json").write_text(json.dumps(summary, indent=1))
    return ScaleResult(stats=stats, figures=figures, summary=summary, violations=violations)


def analyse_lifecycle(sampled: dict[str, Any], directory: Path, stats: list[StepStats],
                      figures: dict[str, Any] | None, include_plotlyjs: str | bool = "shared",
                      plotly_js: Path | None = None) -> dict[str, Any]:
    """A configured lifecycle's analysis: lifecycle_<name>.csv, its transitions' stats appended to `stats`, its
    figure (lifecycle_<name>.html, and in `figures` unless None); the summary of it."""
    lifecycle = Lifecycle.model_validate(sampled["spec"])
    timelines = lifecycle_timelines(lifecycle, sampled.get("objects") or [])
    write_padded_csv(*lifecycle_table(lifecycle, timelines), directory / f"lifecycle_{lifecycle.name}.csv")
    transitions = lifecycle_stats(lifecycle, timelines)
    stats.extend(s for s in transitions if s.expected)  # none: its thresholds are not checked (no such objects)
    if figures is not None:
        from pytest_topsail.scale.plots import lifecycle_figure, save_html

        figure = figures[f"lifecycle {lifecycle.name}"] = lifecycle_figure(lifecycle, timelines)
        save_html(figure, directory / f"lifecycle_{lifecycle.name}.html", include_plotlyjs, plotly_js)
    return {"kind": f"{lifecycle.api_version} {lifecycle.kind}", "objects": len(timelines),
            "failed": sum(1 for t in timelines if t.failed),
            "transitions": {s.step: {k: v for k, v in s.to_dict().items() if k not in ("level", "source", "step")}
                            for s in transitions}}


def analyse_directory(directory: Path, thresholds: list[Threshold] | None = None, plots: bool = True) -> ScaleResult:
    """Re-run the analysis on a saved run (``submitted.json`` + ``sampled.json``), e.g. to replot."""
    directory = Path(directory)
    try:
        submitted = json.loads((directory / "submitted.json").read_text())
        sampled = read_sampled(directory / "sampled.json")
    except (OSError, ValueError) as exc:
        raise TopsailError(f"cannot re-read the scale run in {directory}: {exc}") from exc
    return analyse(submitted, sampled, directory, thresholds, plots)


@dataclass(frozen=True)
class RunOptions:
    """How ``run_case`` runs a case (from the suite configuration, not from the case)."""

    namespace_prefix: str = "scale"
    thresholds: tuple[Threshold, ...] = ()
    keep: bool = False
    plots: bool = True
    include_plotlyjs: str | bool = "shared"  # shared | directory | True: offline in every case, never a CDN
    plotly_js: Path | None = None  # the run's shared plotly.min.js (pytest_topsail.report.figures)
    cleanup_timeout_s: float = 60.0
    lifecycles: tuple[Lifecycle, ...] = ()  # sampled beside the jobs and pods (pytest_topsail.scale.lifecycle)


def new_run_id() -> str:
    """A short random id (6 hex digits, like the Run:ai tool's job names): labels and namespaces of one run."""
    return secrets.token_hex(3)


def run_case(
    api: Kube,
    case: ScaleCase,
    directory: Path,
    options: RunOptions,
    progress: TextIO | None = None,
    run_id: str | None = None,
) -> ScaleResult:
    """Create the run's namespaces, submit and sample, analyse, then delete the namespaces unless ``options.keep``.

    Namespaces are ``<prefix>-<run id>-<n>`` so that concurrent runs (xdist workers) never share one.
    """
    run_id = run_id or new_run_id()
    count = len(case.queue.teams) if case.queue is not None else case.namespaces  # a namespace per team
    namespaces = [f"{options.namespace_prefix}-{run_id}-{n}" for n in range(count)]
    for namespace in namespaces:
        # kept ones are labelled so from the start: a run killed later must not lose them (docs/reliability.md)
        create_namespace(api, namespace, {RUN_LABEL: run_id, **(KEPT if options.keep else {})})
    queue_refs: list[Any] = []
    try:
        if case.queue is not None:
            from pytest_topsail.scale.queueing import create_queue_objects

            create_queue_objects(api, case.queue, run_id, namespaces, queue_refs)
        result, sampled, _ = submit_and_sample(api, case, namespaces, run_id, directory, progress,
                                               lifecycles=options.lifecycles)
        faults = pod_faults(api, namespaces, directory)  # before the namespaces go, with what shows them
        analysis = analyse(
            result.to_dict(), sampled, directory, list(options.thresholds), options.plots, options.include_plotlyjs,
            options.plotly_js,
        )
    finally:
        cleanup = cleanup_namespaces(api, namespaces, options, progress)
        if queue_refs and not options.keep:
            from pytest_topsail.scale.queueing import delete_queue_objects

            delete_queue_objects(api, queue_refs)
        (directory / "cleanup.json").write_text(json.dumps(cleanup, indent=1))
    analysis.summary["cleanup"] = cleanup
    analysis.summary["faults"] = faults
    return analysis


def cleanup_namespaces(
    api: Kube, namespaces: list[str], options: RunOptions, progress: TextIO | None
) -> dict[str, Any]:
    """Delete the run's namespaces (one request each: the cluster deletes their jobs and pods)."""
    if options.keep:
        return {"kept": namespaces, "duration_s": 0.0}
    started = time.monotonic()
    remaining = delete_namespaces(api, namespaces, options.cleanup_timeout_s)
    duration = round(time.monotonic() - started, 3)
    if progress is not None:
        progress.write(f"[cleanup] deleted {len(namespaces) - len(remaining)}/{len(namespaces)} namespaces "
                       f"in {duration:.2f}s\n")
    for name in remaining:
        report_leftover(f"namespace {name} (not seen gone within {options.cleanup_timeout_s:g} s of its deletion)",
                        api.command("delete", "namespace", name))
    return {"deleted": [n for n in namespaces if n not in remaining], "remaining": remaining, "duration_s": duration}
