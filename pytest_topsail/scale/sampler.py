"""Watch the objects of a run and time every step of their lifecycles (pytest_topsail.scale.lifecycle), from two
sources at once.

- ``watch``: the client's wall clock (epoch ms) when the watch event showing the step first arrived
  (ClusterLoader2 style). Same clock as the submit times, millisecond precision.
- ``object``: the transition time the cluster wrote into the object (kube-burner / Run:ai style), captured from the
  object as it looked when the step was first observed (a pod's Ready condition is rewritten when it completes).
  Real API servers write these in whole seconds (the Scheduled event's ``eventTime`` has microseconds).

One list then a watch per resource (one for the lifecycles sharing a kind and label selector), resumed from the last
resourceVersion; a 410 Gone answer re-lists. A scale run (``Sampler.for_run``) samples its pods and its workload kind
(the ``POD`` and ``SCALE_WORKLOADS`` lifecycles), the pod events, and the lifecycles the suite configures. The
collected state is saved as ``sampled.json``; ``timelines`` turns it (live or re-read from disk) into per-job,
per-pod and per-object timelines.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.client import Kube, KubeConnectionError, KubeError, ObjectRef, WatchStop
from pytest_topsail.scale.lifecycle import POD, RESERVED, SCALE_WORKLOADS, Lifecycle
from pytest_topsail.scale.workloads import JOB_LABEL, RUN_LABEL
from pytest_topsail.waiting import Deadline, Every

SAMPLED_VERSION = 1
MAX_KEPT_ERRORS = 50  # further sampler errors are counted, not kept
UNSCHEDULABLE_GRACE_S = 3.0  # a pod judged never schedulable this long fails the wait (nodes may still be joining)
UNSCHEDULABLE_CHECK_S = 1.0
FATAL_LIST_STATUSES = {401, 403, 404}  # retrying the first list cannot help


def trim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    metadata = pod.get("metadata", {})
    status = pod.get("status", {})
    return {
        "metadata": {
            k: metadata[k] for k in ("name", "namespace", "uid", "labels", "creationTimestamp") if k in metadata
        },
        "spec": {"nodeName": pod.get("spec", {}).get("nodeName")},
        "status": {k: status[k] for k in ("phase", "conditions", "containerStatuses", "startTime") if k in status},
    }


def trim_object(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata", {})
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {
            k: metadata[k] for k in ("name", "namespace", "uid", "labels", "creationTimestamp") if k in metadata
        },
        "status": obj.get("status", {}),
    }


def trim_event(event: dict[str, Any], observed_ms: float) -> dict[str, Any]:
    involved = event.get("involvedObject", {})
    return {
        "reason": event.get("reason"),
        "namespace": involved.get("namespace") or event.get("metadata", {}).get("namespace"),
        "pod": involved.get("name"),
        "eventTime": event.get("eventTime"),
        "firstTimestamp": event.get("firstTimestamp"),
        "count": event.get("count"),
        "message": (event.get("message") or "")[:300],
        "observed_ms": observed_ms,
    }


@dataclass
class Tracked:
    """One object as sampled: its latest (trimmed) version and, per step, when it was first seen reached."""

    obj: dict[str, Any]
    steps: dict[str, dict[str, float | None]] = field(default_factory=dict)
    deleted: bool = False

    def update(self, obj: dict[str, Any], states: dict[str, tuple[bool, float | None]], now_ms: float) -> None:
        for step, (reached, object_ms) in states.items():
            if reached and step not in self.steps:
                self.steps[step] = {"watch": now_ms, "object": object_ms}

    def to_dict(self) -> dict[str, Any]:
        return {"object": self.obj, "steps": self.steps, "deleted": self.deleted}


class Sampler:
    """List + watch the objects of ``lifecycles`` in ``namespaces`` (and their pods' events with ``events``)."""

    def __init__(
        self,
        api: Kube,
        namespaces: list[str],
        lifecycles: list[Lifecycle],
        events: bool = False,
        clock: Callable[[], float] = time.time,
        run_id: str = "",
        group_labels: dict[str, str] | None = None,
    ) -> None:
        self.api = api
        self.namespaces = sorted(set(namespaces))
        self.lifecycles = {lifecycle.name: lifecycle for lifecycle in lifecycles}
        self.sample_events = events
        self.clock = clock
        self.run_id = run_id
        self.group_labels = group_labels or {}  # lifecycle -> label whose value groups its objects (a job's pods)
        self.lock = threading.Lock()
        self.stop_event = WatchStop()  # setting it also closes the watch connections: stop() does not wait reads
        self.changed = threading.Event()  # set by every object event: wait_for_jobs re-checks then
        self.touched: set[str] = set()  # "<namespace>/<job>" keys changed since wait_for_jobs last looked
        self.threads: list[threading.Thread] = []
        self.tracked: dict[str, dict[str, Tracked]] = {name: {} for name in self.lifecycles}
        self.pods_by_job: dict[str, dict[str, Tracked]] = {}
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.error_count = 0
        self.fatal: str | None = None
        self.watch_restarts = 0
        self.unschedulable: str | None = None  # why the wait stopped early: pods no node can ever hold
        self.lost: str | None = None  # why the wait stopped early: the cluster stopped answering
        self.connection_errors = 0
        self.never_since: dict[str, Deadline] = {}  # pod key -> its grace, from when first judged never schedulable
        self.started_ms = 0.0
        self.finished_ms = 0.0

    @classmethod
    def for_run(cls, api: Kube, namespaces: list[str], run_id: str, workload_kind: tuple[str, str],
                extra: list[Lifecycle] | tuple[Lifecycle, ...] = (), clock: Callable[[], float] = time.time) -> Sampler:
        """A scale run's sampler: its pods and workloads (label ``topsail.scale/run=<run_id>``), the pod events,
        and the ``extra`` lifecycles the suite configures."""
        api_version, kind = workload_kind
        workload = SCALE_WORKLOADS.get(kind)
        if workload is None or workload.api_version != api_version:
            raise TopsailError(f"scale sampler: no lifecycle of the scale run for {api_version} {kind}")
        selector = f"{RUN_LABEL}={run_id}"
        own = [POD.model_copy(update={"label_selector": selector}),
               workload.model_copy(update={"label_selector": selector})]
        return cls(api, namespaces, own + list(extra), events=True, clock=clock, run_id=run_id,
                   group_labels={POD.name: JOB_LABEL})

    @property
    def pods(self) -> dict[str, Tracked]:
        return self.tracked.get(POD.name, {})

    @property
    def workloads(self) -> dict[str, Tracked]:
        return self.tracked.get("workloads", {})

    def now_ms(self) -> float:
        return round(self.clock() * 1000.0, 3)

    def scope(self) -> str | None:
        return self.namespaces[0] if len(self.namespaces) == 1 else None

    def start(self, timeout_s: float = 15.0) -> None:
        """Start the watches; return once each has listed (so nothing created afterwards can be missed)."""
        self.started_ms = self.now_ms()
        ns = self.scope()
        shared: dict[tuple[str, str, str | None], list[Lifecycle]] = {}
        for lifecycle in self.lifecycles.values():
            shared.setdefault((lifecycle.api_version, lifecycle.kind, lifecycle.label_selector), []).append(lifecycle)
        watches: list[tuple[str, tuple[str, str], str | None, str | None, Callable]] = [
            (kind, (api_version, kind), labels, None, self.object_handler(group))
            for (api_version, kind, labels), group in shared.items()
        ]
        if self.sample_events:
            watches.append(("events", ("v1", "Event"), None, "involvedObject.kind=Pod", self.on_event))
        ready = [threading.Event() for _ in watches]
        for (name, what, labels, fields, handler), listed in zip(watches, ready, strict=True):
            thread = threading.Thread(
                target=self.run_watch, args=(what, ns, labels, fields, handler, listed), name=f"sample-{name}",
                daemon=True,
            )
            thread.start()
            self.threads.append(thread)
        deadline = Deadline(timeout_s)
        kinds = "/".join(name for name, *_ in watches)
        for listed in ready:
            if not listed.wait(deadline.left()):
                self.stop()
                last = self.errors[-1] if self.errors else "no answer"
                raise TopsailError(
                    f"scale sampler: the first list of {kinds} did not succeed within {timeout_s:g}s "
                    f"(last error: {last})"
                )
        if self.fatal:
            self.stop()
            kind = self.fatal.split(":", 1)[0]
            raise TopsailError(f"scale sampler: cannot list {self.fatal} (is the {kind} kind installed, "
                               "and may these credentials list it?)")

    def stop(self) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=5.0)
        self.finished_ms = self.now_ms()

    def run_watch(self, what: tuple[str, str], namespace: str | None, labels: str | None, fields: str | None,
                  handler: Callable, listed: threading.Event) -> None:
        """List then watch `what` (apiVersion, kind) until stopped; errors are counted and the watch resumed."""
        api_version, kind = what

        def on_error(exc: KubeError) -> None:
            self.record_error(kind, exc)
            self.watch_restarts += 1
            if isinstance(exc, KubeConnectionError):
                self.connection_errors += 1

        while not self.stop_event.is_set():
            try:
                for event_type, obj in self.api.watch(api_version, kind, namespace=namespace, label_selector=labels,
                                                      field_selector=fields, stop=self.stop_event,
                                                      on_listed=listed.set, on_error=on_error):
                    handler(event_type, obj, self.now_ms())
                return
            except KubeError as exc:  # the first list failed
                self.record_error(kind, exc)
                if exc.status in FATAL_LIST_STATUSES:
                    self.fatal = f"{kind}: {exc.status} {exc.reason}"  # e.g. the PyTorchJob CRD is not installed
                    listed.set()
                    return
                self.stop_event.wait(0.2)

    def record_error(self, kind: str, exc: KubeError) -> None:
        with self.lock:
            self.error_count += 1
            if len(self.errors) < MAX_KEPT_ERRORS:
                self.errors.append(f"{kind}: {exc}")

    def object_handler(self, lifecycles: list[Lifecycle]) -> Callable[[str, dict[str, Any], float], None]:
        def handle(event_type: str, obj: dict[str, Any], now_ms: float) -> None:
            if obj.get("metadata", {}).get("namespace") not in self.namespaces:
                return
            for lifecycle in lifecycles:
                self.on_object(lifecycle, event_type, obj, now_ms)
            self.changed.set()

        return handle

    def on_object(self, lifecycle: Lifecycle, event_type: str, obj: dict[str, Any], now_ms: float) -> None:
        metadata = obj.get("metadata", {})
        namespace = metadata.get("namespace")
        key = f"{namespace}/{metadata.get('name')}"
        group_label = self.group_labels.get(lifecycle.name)
        group = f"{namespace}/{(metadata.get('labels') or {}).get(group_label)}" if group_label else key
        objects = self.tracked[lifecycle.name]
        with self.lock:
            tracked = objects.get(key)
            if tracked is None or tracked.obj["metadata"].get("uid") != metadata.get("uid"):
                tracked = objects[key] = Tracked(obj={"metadata": {"uid": metadata.get("uid")}})
                if group_label:
                    self.pods_by_job.setdefault(group, {})[key] = tracked
            self.touched.add(group)
            tracked.obj = trim_pod(obj) if lifecycle.kind == "Pod" else trim_object(obj)
            tracked.update(obj, lifecycle.states(obj, tracked.steps), now_ms)
            tracked.deleted = event_type == "DELETED"

    def on_event(self, kind: str, event: dict[str, Any], now_ms: float) -> None:
        if kind != "ADDED" or event.get("reason") not in ("Scheduled", "FailedScheduling"):
            return
        namespace = event.get("involvedObject", {}).get("namespace") or event.get("metadata", {}).get("namespace")
        if namespace not in self.namespaces:
            return
        with self.lock:
            self.events.append(trim_event(event, now_ms))

    def wait_for_jobs(
        self,
        jobs: list[dict[str, Any]],
        target: str,
        timeout_s: float,
        progress_stream: TextIO | None = None,
        progress_interval_s: float = 2.0,
    ) -> bool:
        """Wait until every submitted job reached ``target`` ("ready" or "completed") or failed.

        ``jobs``: records of ``submitted.json`` (jobName, jobNamespace, expected_pods, error). Returns False on timeout.
        Woken by the watches (a pod or workload event), not by polling; the checks for a lost cluster or
        unschedulable pods and the progress line still run on their own period.
        """
        deadline = Deadline(timeout_s)
        print_due, check_due = Every(progress_interval_s), Every(UNSCHEDULABLE_CHECK_S)
        seen_errors = self.connection_errors
        pending = {f"{j['jobNamespace']}/{j['jobName']}": j for j in jobs if not j.get("error")}
        with self.lock:
            self.touched = set(pending)  # every job is checked once; then only the jobs an event touched
        while True:
            self.changed.clear()  # before the check: an event arriving during it wakes the wait below
            with self.lock:
                touched, self.touched = self.touched, set()
                for key in touched & pending.keys():
                    if self.job_settled(pending[key], target):
                        del pending[key]
            if not pending:
                return True
            if deadline.expired():
                return False
            if check_due.due():
                self.lost = self.cluster_lost(seen_errors)
                seen_errors = self.connection_errors
                self.unschedulable = None if self.lost else self.never_scheduled_pods()
                if self.unschedulable or self.lost:
                    return False
            if progress_stream is not None and print_due.due():
                progress_stream.write(f"[sampler] {len(jobs) - len(pending)}/{len(jobs)} jobs {target} or failed\n")
                progress_stream.flush()
            deadline.sleep(min(check_due.left(), print_due.left() if progress_stream is not None else check_due.left()),
                           self.changed.wait)

    def wait_for_lifecycles(self, names: list[str], timeout_s: float, quiet_s: float = 1.0) -> bool:
        """Wait until every object of the lifecycles `names` reached its last step or a failure step (a Workload
        finishes after its job: the run's own wait may end first). False when `timeout_s` passed first, or `quiet_s`
        without any event (objects that never end, such as the PyTorchJobs of jobs that run until deleted)."""
        deadline = Deadline(timeout_s)
        while True:
            self.changed.clear()
            with self.lock:
                open_objects = [t for name in names for t in self.tracked[name].values()
                                if not self.lifecycle_ended(self.lifecycles[name], t)]
            if not open_objects:
                return True
            if deadline.expired():
                return False
            if not self.changed.wait(min(deadline.left(), quiet_s)):
                return False  # no event for quiet_s

    @staticmethod
    def lifecycle_ended(lifecycle: Lifecycle, tracked: Tracked) -> bool:
        last = lifecycle.chain[-1].name if lifecycle.chain else None
        return tracked.deleted or last in tracked.steps or any(
            s.failure and s.name in tracked.steps for s in lifecycle.steps)

    def cluster_lost(self, seen_errors: int) -> str | None:
        """After the watches lost their connection: whether the API server still answers (the layer has retried)."""
        if self.connection_errors == seen_errors:
            return None
        try:
            self.api.version(timeout=5.0)
        except KubeConnectionError as exc:
            return f"the cluster stopped answering while the jobs ran: {exc}"
        return None

    def never_scheduled_pods(self) -> str | None:
        """The first pod of the run that the scheduler refused and no node can ever hold (see kube.scheduling),
        once it has been so for UNSCHEDULABLE_GRACE_S; ``None`` while every refused pod may still find room."""
        from pytest_topsail.kube.scheduling import format_requests, never_schedulable, pod_requests

        with self.lock:
            refused = {f"{e['namespace']}/{e['pod']}": e["message"] for e in self.events
                       if e["reason"] == "FailedScheduling"}
            waiting = {key: message for key, message in refused.items()
                       if key in self.pods and "scheduled" not in self.pods[key].steps and not self.pods[key].deleted}
        if not waiting:
            self.never_since.clear()
            return None
        try:
            nodes = self.api.list("v1", "Node")
            key, message = next(iter(waiting.items()))
            namespace, name = key.split("/", 1)
            pod = self.api.get(ObjectRef("v1", "Pod", name, namespace))
        except KubeError as exc:  # judged again at the next check
            with self.lock:
                self.error_count += 1
                if len(self.errors) < MAX_KEPT_ERRORS:
                    self.errors.append(f"unschedulable check: {exc}")
            return None
        if pod is None:
            return None
        why = never_schedulable(pod, nodes, message)
        if why is None:
            self.never_since.pop(key, None)
            return None
        if not self.never_since.setdefault(key, Deadline(UNSCHEDULABLE_GRACE_S)).expired():
            return None
        return (f"pod {key} can never be scheduled ({len(waiting)} pod(s) of the run refused): it requests "
                f"{format_requests(pod_requests(pod))}; the scheduler: {message.strip().rstrip('.')}; {why}")

    def job_settled(self, job: dict[str, Any], target: str) -> bool:
        """Called with the lock held: the job reached ``target``, or it or one of its pods failed."""
        key = f"{job['jobNamespace']}/{job['jobName']}"
        workload = self.workloads.get(key)
        if workload is not None and "failed" in workload.steps:
            return True
        pods = list(self.pods_by_job.get(key, {}).values())
        if any("failed" in t.steps for t in pods):
            return True
        if target == "completed":
            return workload is not None and "completed" in workload.steps
        return len(pods) >= job.get("expected_pods", 1) and all(target in t.steps for t in pods)

    def snapshot(self) -> dict[str, Any]:
        """The ``sampled.json`` document."""
        with self.lock:
            return {
                "version": SAMPLED_VERSION,
                "run_id": self.run_id,
                "namespaces": self.namespaces,
                "workload_kind": next(([w.api_version, w.kind] for name, w in self.lifecycles.items()
                                       if name == "workloads"), None),
                "started_ms": self.started_ms,
                "finished_ms": self.finished_ms,
                "watch_restarts": self.watch_restarts,
                "errors": list(self.errors),
                "error_count": self.error_count,
                "unschedulable": self.unschedulable,
                "lost": self.lost,
                "workloads": [t.to_dict() for t in self.workloads.values()],
                "pods": [t.to_dict() for t in self.pods.values()],
                "events": list(self.events),
                "lifecycles": {name: {"spec": lifecycle.model_dump(mode="json", exclude_none=True),
                                      "objects": [t.to_dict() for t in self.tracked[name].values()]}
                               for name, lifecycle in self.lifecycles.items() if name not in RESERVED},
            }


def write_sampled(document: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(document, separators=(",", ":")))


def read_sampled(path: Path) -> dict[str, Any]:
    document = json.loads(Path(path).read_text())
    if document.get("version") != SAMPLED_VERSION:
        raise ValueError(f"{path}: unsupported sampled.json version {document.get('version')!r}")
    return document
