"""Run one fine-tuning point on a cluster: create its ConfigMaps and PyTorchJob, watch the job and its pods phase by
phase (each with its own timeout), classify a failure (the taxonomy below), save logs, objects and events, delete
what it created and check that nothing is left.

Failure taxonomy, in the failure message:
- gpu_xid, gpu_lost, node_lost, evicted, preempted: the cluster ended a pod (pytest_topsail.kube.faults: its
  DisruptionTarget condition, status reason, GPU Events); names the pod, the node and the GPU.
- volume_attach: a phase timed out while a pod waited for its storage PVC (FailedAttachVolume / FailedMount).
- Unschedulable: a pod cannot be placed; names the request and the node with the most free GPUs.
- image pull: ErrImagePull / ImagePullBackOff / InvalidImageName, with the image.
- OOMKilled: the container hit its memory limit (host memory).
- CUDA out of memory: the trainer's log says so; names the memory estimate and the GPU memory.
- no progress: the master's log did not grow for `timeouts.no_progress` seconds while training (NCCL hang).
- timeout: a phase (scheduled, started, training) took longer than its timeout; names the phase and the state.
- exit code: a pod failed otherwise; its exit code, reason and last log lines.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.fine_tuning.catalog import FormatSpec
from pytest_topsail.fine_tuning.estimate import MemoryEstimate
from pytest_topsail.fine_tuning.manifests import config_maps, pytorchjob
from pytest_topsail.fine_tuning.point import PointSettings
from pytest_topsail.fine_tuning.settings import SuiteSettings
from pytest_topsail.fine_tuning.trainer_log import last_exception, tail
from pytest_topsail.kube.capture import capture, write_manifests
from pytest_topsail.kube.client import Kube, KubeError, ObjectRef
from pytest_topsail.kube.events import events_in, pod_logs
from pytest_topsail.kube.faults import pod_fault
from pytest_topsail.kube.quantity import parse_cpu_millis, parse_memory_bytes
from pytest_topsail.kube.wait import DeleteTimeout, condition_status, delete_and_wait
from pytest_topsail.leftovers import report_leftover
from pytest_topsail.waiting import Deadline, Every

JOB_LABEL = "training.kubeflow.org/job-name"
MASTER_LOG = "pod.log"
JOB_LIFECYCLE = "job_lifecycle.json"  # condition type -> epoch ms (client clock) its watch first showed it True
TICK_SECONDS = 0.5  # without watch events: how often timeouts and the master's log are checked
LOG_CHECK_SECONDS = 0.5
IMAGE_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")
PHASES = ("scheduled", "started", "training")


class PointFailure(TopsailError):
    """The point failed; `kind` is its class in the taxonomy, the message says what happened."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


@dataclass
class PointRun:
    kube: Kube
    namespace: str
    job: str
    point: PointSettings
    settings: SuiteSettings
    directory: Path
    progress: Callable[[str], None]
    estimate: MemoryEstimate | None = None
    gpu_memory_gib: float | None = None
    samples: int | None = None  # the dataset's sample count (the logging interval); None: the built-in catalog's
    data_format: FormatSpec | None = None  # the dataset's template; None: the trainer's default text
    storage_pvc: str = "fine-tuning-storage"  # the claim holding models and datasets (the suite's storage.pvc)

    @property
    def job_ref(self) -> ObjectRef:
        return ObjectRef("kubeflow.org/v1", "PyTorchJob", self.job, self.namespace)

    def manifests(self) -> list[dict[str, Any]]:
        labels = {"app.kubernetes.io/part-of": "topsail-fine-tuning", "topsail.fine-tuning/job": self.job}
        return [*config_maps(self.job, self.namespace, self.point, labels, self.samples, self.data_format),
                pytorchjob(self.job, self.namespace, self.point, self.storage_pvc, labels)]

    def run(self) -> Path:
        """Run the point; the path of the master's log. Raises PointFailure (or TopsailError on API problems)."""
        manifests = self.manifests()
        write_manifests(self.directory, manifests)
        self._remove_leftovers(manifests)
        failed = True
        try:
            for manifest in manifests:  # inside the try: what was created is deleted if a later creation fails
                self.kube.create(manifest)
            self.progress(f"{self.job}: created ({self.point.pods} pod(s) x {self.point.gpus_per_pod} GPU(s))")
            self._follow()
            failed = False
        finally:
            self._collect(manifests, self._pods())
            if not self.settings.keep:
                try:
                    self._cleanup(manifests)
                except TopsailError as error:
                    if not failed:
                        raise
                    self.progress(f"{self.job}: {error}")  # the point's own failure stays its message
        return self.directory / MASTER_LOG

    # following the job -----------------------------------------------------------------------------------------
    def _pods(self) -> list[dict[str, Any]]:
        return self.kube.list("v1", "Pod", namespace=self.namespace, label_selector=f"{JOB_LABEL}={self.job}")

    def _fresh_pods(self, watched: list[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            return self._pods() or watched
        except KubeError:
            return watched

    def _follow(self) -> None:
        with Watched(self.kube, self.namespace, self.job) as watched:
            try:
                self._follow_watched(watched)
            finally:  # the job's own timings: when its watch first showed each condition True
                with watched.lock:
                    seen = dict(watched.first_seen)
                (self.directory / JOB_LIFECYCLE).write_text(json.dumps(seen, indent=1), encoding="utf-8")

    def _follow_watched(self, watched: Watched) -> None:
        wanted = self.point.pods
        timeouts = self.settings.timeouts
        phase, phase_time = "scheduled", Deadline(timeouts.scheduled, "phase 'scheduled'")
        log_size, log_still, log_check = -1, Deadline(timeouts.no_progress), Every(LOG_CHECK_SECONDS, now=True)
        while True:
            job, pods = watched.next_state(TICK_SECONDS)
            self._check_pods(pods)
            if condition_status(job, "Succeeded") == "True":
                self.progress(f"{self.job}: succeeded")
                return
            if condition_status(job, "Failed") == "True":
                # the job's Failed condition can arrive before the pod event that carries the exit code: read the
                # pods afresh so the message names the container's own exit, not only the job's condition
                raise self._failure(job, self._fresh_pods(pods))
            if phase == "scheduled" and len(pods) >= wanted and all(_node(p) for p in pods):
                phase, phase_time = self._next_phase(phase, phase_time)
            if phase == "started" and len(pods) >= wanted and all(_containers_started(p) for p in pods):
                phase, phase_time = self._next_phase(phase, phase_time)
                log_still = Deadline(timeouts.no_progress)
            if phase == "training" and log_check.due():
                size = len(self._master_log(tail_lines=5))
                if size != log_size:
                    log_size, log_still = size, Deadline(timeouts.no_progress)
                elif log_still.expired():
                    raise PointFailure("no progress", f"the master's log did not change for {timeouts.no_progress:g}s "
                                       "while training (a hung collective such as NCCL?); last lines:\n"
                                       + tail(self._master_log(tail_lines=8)))
            if phase_time.expired():
                limit = phase_time.timeout
                stuck = [(p, _unschedulable(p)) for p in pods if _unschedulable(p) is not None]
                if phase == "scheduled" and stuck:
                    pod, message = stuck[0]
                    raise self._unschedulable_failure(pod, f"{message} (for {limit:g}s, timeouts.scheduled)")
                events = self._events()  # a cluster fault held the phase up: a volume never attached, ...
                fault = next((f for p in pods if (f := pod_fault(p, events)) is not None), None)
                if fault is not None:
                    raise PointFailure(fault.kind, f"{fault.message} (phase {phase!r} for {limit:g}s, "
                                       f"timeouts.{phase})")
                raise PointFailure("timeout", f"phase {phase!r} took longer than {limit:g}s "
                                   f"(timeouts.{phase}); {self._state(job, pods)}")

    def _next_phase(self, phase: str, phase_time: Deadline) -> tuple[str, Deadline]:
        following = PHASES[PHASES.index(phase) + 1]
        self.progress(f"{self.job}: {phase} after {phase_time.elapsed():.1f}s")
        return following, Deadline(getattr(self.settings.timeouts, following), f"phase {following!r}")

    def _master_log(self, tail_lines: int | None = None) -> str:
        return pod_logs(self.kube, self.namespace, f"{self.job}-master-0", container="pytorch", tail_lines=tail_lines)

    def _check_pods(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            name = pod["metadata"]["name"]
            for status in (pod.get("status") or {}).get("containerStatuses") or ():
                waiting = (status.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") in IMAGE_PULL_REASONS:
                    raise PointFailure("image pull", f"pod {name} cannot pull image {status.get('image')!r}: "
                                       f"{waiting.get('reason')} {waiting.get('message') or ''}".rstrip())
            message = _unschedulable(pod)
            if message is not None and self._largest_node(allocatable=True)[1] < _gpus(pod):
                raise self._unschedulable_failure(pod, message)  # no node of the cluster can ever hold it

    def _unschedulable_failure(self, pod: dict[str, Any], message: str) -> PointFailure:
        return PointFailure("Unschedulable", f"pod {pod['metadata']['name']} requests {_request(pod)}; "
                            f"{_describe_free(self._largest_node())}; scheduler: {message}")

    def _largest_node(self, allocatable: bool = False) -> tuple[str, int]:
        """(node, GPUs) of the node with the most free (or allocatable) GPUs; ("", 0) without nodes."""
        used: dict[str, int] = {}
        for pod in [] if allocatable else self.kube.list("v1", "Pod"):
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or not _node(pod):
                continue
            used[_node(pod)] = used.get(_node(pod), 0) + _gpus(pod)
        best = ("", 0)
        for node in self.kube.list("v1", "Node"):
            name = node["metadata"]["name"]
            gpus = int(float((node.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu", 0) or 0))
            free = gpus if allocatable else gpus - used.get(name, 0)
            if not best[0] or free > best[1]:
                best = (name, free)
        return best

    def _failure(self, job: dict[str, Any] | None, pods: list[dict[str, Any]]) -> PointFailure:
        ordered = sorted(pods, key=lambda p: not p["metadata"]["name"].endswith("-master-0"))
        events = self._events()
        for pod in ordered:
            fault = pod_fault(pod, events)
            if fault is not None:
                return PointFailure(fault.kind, fault.message)
        for pod in ordered:
            terminated = _terminated(pod)
            if terminated and terminated.get("reason") == "OOMKilled":
                where = "at its memory limit" if _limit(pod) != "no memory limit" else "by the node's OOM killer"
                return PointFailure("OOMKilled", f"container pytorch of pod {pod['metadata']['name']} was killed "
                                    f"{where} ({_limit(pod)}){self._estimate_text()}")
        for pod in ordered:
            log = self._log_of(pod["metadata"]["name"])
            if "CUDA out of memory" in log:
                line = next(x for x in log.splitlines() if "CUDA out of memory" in x)
                return PointFailure("CUDA out of memory", f"pod {pod['metadata']['name']}{self._estimate_text()}; "
                                    f"log: {line.strip()[:400]}")
        for pod in ordered:
            terminated = _terminated(pod)
            if terminated and terminated.get("exitCode"):
                return PointFailure("exit code", exit_message(pod["metadata"]["name"], terminated,
                                                              self._log_of(pod["metadata"]["name"])))
        message = next((c.get("message") for c in (job or {}).get("status", {}).get("conditions") or ()
                        if c.get("type") == "Failed"), "")
        return PointFailure("job failed", f"{message}; {self._state(job, pods)}")

    def _events(self) -> list[dict[str, Any]]:
        try:
            return events_in(self.kube, self.namespace)
        except KubeError:
            return []

    def _estimate_text(self) -> str:
        parts = []
        if self.estimate is not None:
            parts.append(f"memory estimate {self.estimate.describe()}")
        if self.gpu_memory_gib is not None:
            parts.append(f"GPU memory {self.gpu_memory_gib:.1f} GiB")
        return "; " + ", ".join(parts) if parts else ""

    def _log_of(self, pod: str) -> str:
        try:
            return pod_logs(self.kube, self.namespace, pod, container="pytorch")
        except KubeError:
            return ""

    def _state(self, job: dict[str, Any] | None, pods: list[dict[str, Any]]) -> str:
        conditions = [f"{c.get('type')}={c.get('status')}" for c in ((job or {}).get("status") or {}).get(
            "conditions") or ()]
        pod_states = [f"{p['metadata']['name']} {_pod_state(p)}" for p in pods] or ["no pod"]
        return f"job conditions: {', '.join(conditions) or 'none'}; pods: {'; '.join(pod_states)}"

    # artifacts and cleanup ------------------------------------------------------------------------------------
    def _collect(self, manifests: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            name = pod["metadata"]["name"]
            log = self._log_of(name)
            (self.directory / f"pod_{name}.log").write_text(log, encoding="utf-8")
            if name.endswith("-master-0"):
                (self.directory / MASTER_LOG).write_text(log, encoding="utf-8")
        refs = [ObjectRef.of(m) for m in manifests] + [ObjectRef.of({**p, "apiVersion": "v1", "kind": "Pod"})
                                                       for p in pods]
        capture(self.kube, refs, self.directory)

    def _remove_leftovers(self, manifests: list[dict[str, Any]]) -> None:
        if self.kube.get(self.job_ref) is not None:
            self.progress(f"{self.job}: deleting the job of an earlier run")
            self._cleanup(manifests)

    def _cleanup(self, manifests: list[dict[str, Any]]) -> None:
        """Delete the point's objects (the job first, its pods with it) and wait until they and the pods are gone;
        what is left after `timeouts.cleanup` is reported (with the command that removes it) and fails the point."""
        pods = [ObjectRef("v1", "Pod", p["metadata"]["name"], self.namespace) for p in self._pods()]
        refs = [ObjectRef.of(m) for m in reversed(manifests)] + pods
        try:
            delete_and_wait(self.kube, refs, timeout=self.settings.timeouts.cleanup, propagation="Foreground")
        except DeleteTimeout as timed_out:
            for ref in timed_out.left:
                report_leftover(f"{ref.kind} {self.namespace}/{ref.name}",
                                self.kube.command("delete", ref.kind.lower(), ref.name, "-n", self.namespace))
            names = ", ".join(f"{ref.kind} {ref.name}" for ref in timed_out.left)
            raise PointFailure("cleanup", f"still on the cluster after {self.settings.timeouts.cleanup:g}s "
                               f"(timeouts.cleanup): {names}") from None


class Watched:
    """The job and its pods as two watches (threads) keep them: `next_state(timeout)` returns the latest state after
    the next change, or after `timeout` seconds without one. A failed first list is raised there."""

    def __init__(self, kube: Kube, namespace: str, job: str) -> None:
        self.stop = threading.Event()
        self.changed = threading.Event()
        self.lock = threading.Lock()
        self.job: dict[str, Any] | None = None
        self.pods: dict[str, dict[str, Any]] = {}
        self.first_seen: dict[str, float] = {}  # the job's condition types, when first seen True (epoch ms)
        self.error: KubeError | None = None
        selector = f"{JOB_LABEL}={job}"
        self.threads = [
            threading.Thread(target=self._run, args=(kube.watch("kubeflow.org/v1", "PyTorchJob", namespace=namespace,
                                                                field_selector=f"metadata.name={job}",
                                                                stop=self.stop), self._on_job), daemon=True),
            threading.Thread(target=self._run, args=(kube.watch("v1", "Pod", namespace=namespace,
                                                                label_selector=selector, stop=self.stop),
                                                     self._on_pod), daemon=True),
        ]

    def __enter__(self) -> Watched:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()  # each watch ends within WATCH_POLL_S; waiting for it would cost every point that long

    def _run(self, events: Any, apply: Callable[[str, dict[str, Any]], None]) -> None:
        try:
            for kind, obj in events:
                with self.lock:
                    apply(kind, obj)
                self.changed.set()
        except KubeError as error:
            self.error = error
            self.changed.set()

    def _on_job(self, kind: str, obj: dict[str, Any]) -> None:
        self.job = None if kind == "DELETED" else obj
        now_ms = round(time.time() * 1000.0, 3)
        for condition in (obj.get("status") or {}).get("conditions") or ():
            if condition.get("status") == "True":
                self.first_seen.setdefault(str(condition.get("type")), now_ms)

    def _on_pod(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.pods.pop(name, None)
        else:
            self.pods[name] = {**obj, "apiVersion": "v1", "kind": "Pod"}

    def next_state(self, timeout: float) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        self.changed.wait(timeout)
        self.changed.clear()
        if self.error is not None:
            raise self.error
        with self.lock:
            return self.job, sorted(self.pods.values(), key=lambda p: p["metadata"]["name"])


def exit_message(pod: str, terminated: dict[str, Any], log: str) -> str:
    """What a failed container tells: its exit code and reason, its termination message (where fms-hf-tuning writes
    the cause), the last Python exception of its log (the launcher's own traceback comes after it), the log's end."""
    parts = [f"pod {pod} ended with exit code {terminated['exitCode']} ({terminated.get('reason', '')})"]
    message = (terminated.get("message") or "").strip()
    if message:
        parts.append(f"termination message: {message[-1000:]}")
    exception = last_exception(log)
    if exception and exception not in message:
        parts.append(f"last exception in the log: {exception[:1000]}")
    return "; ".join(parts) + "; last lines:\n" + tail(log)


def _node(pod: dict[str, Any]) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""


def _containers_started(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    return bool(statuses) and all("running" in (s.get("state") or {}) or "terminated" in (s.get("state") or {})
                                  for s in statuses)


def _terminated(pod: dict[str, Any]) -> dict[str, Any] | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        if status.get("name") == "pytorch":
            return (status.get("state") or {}).get("terminated")
    return None


def _gpus(pod: dict[str, Any]) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or ():
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get("nvidia.com/gpu") or (resources.get("requests") or {}).get(
            "nvidia.com/gpu") or 0
        total += int(float(value))
    return total


def _request(pod: dict[str, Any]) -> str:
    cpu = memory = 0.0
    for container in (pod.get("spec") or {}).get("containers") or ():
        requests = (container.get("resources") or {}).get("requests") or {}
        cpu += parse_cpu_millis(str(requests.get("cpu", "0"))) / 1000
        memory += parse_memory_bytes(str(requests.get("memory", "0"))) / 2**30
    return f"nvidia.com/gpu={_gpus(pod)}, cpu={cpu:g}, memory={memory:g}Gi"


def _limit(pod: dict[str, Any]) -> str:
    for container in (pod.get("spec") or {}).get("containers") or ():
        limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if limit:
            return f"memory limit {limit}"
    return "no memory limit"


def _describe_free(free: tuple[str, int]) -> str:
    if not free[0]:
        return "the cluster has no node"
    return f"the largest free node is {free[0]} with {free[1]} free GPU(s)"


def _unschedulable(pod: dict[str, Any]) -> str | None:
    """The scheduler's message when the pod is marked Unschedulable."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return str(condition.get("message") or "Unschedulable")
    return None


def _pod_state(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    states = []
    for container in status.get("containerStatuses") or ():
        state = container.get("state") or {}
        kind = next(iter(state), "unknown")
        reason = (state.get(kind) or {}).get("reason")
        states.append(f"{container.get('name')}={kind}{f'({reason})' if reason else ''}")
    return f"{status.get('phase', 'Pending')}" + (f" [{', '.join(states)}]" if states else "")
