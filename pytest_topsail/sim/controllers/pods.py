"""Pod lifecycle of bound pods, kwok-style: stages with delay + seeded jitter from the profile, each overridable per
pod by annotation (`sim.topsail.io/<stage>-delay-ms`, `-jitter-ms`).

initialize (bound -> Initialized, containers ContainerCreating, podIP) -> start (containers running with startedAt,
phase Running, log output written, Started event) -> ready (Ready/ContainersReady) ; and, when the containers'
run time is finite, complete (terminated with exit code; Succeeded/Failed, or a restart after a back-off when the
restartPolicy says so). Stages with no delay are folded into one status write.

A workload runtime added by a plugin (runtime.py; e.g. the fine-tuning trainer model of
pytest_topsail.fine_tuning.simulation) may plan one container of a pod: run time, exit code or a reason such as
OOMKilled, and log lines written at their offsets while the container runs (the rest at once when it ends).

A container whose image matches an entry of the profile's `runtime` table runs as a real local process instead
(sim/node/realworkload.py): its output is the container's log, its exit code, reason and termination message end the
pod; deleting the pod sends SIGTERM, then SIGKILL after `terminationGracePeriodSeconds` (30 by default).

The fault injector (faults.py) ends a running container through `kubelet_hooks(store).terminate` (an Xid, an OOM
kill: the restart policy applies as for any exit) and keeps pods whose image pull it made fail in ErrImagePull, and
those whose PVC it keeps unattached in ContainerCreating (volume_faults.py).
"""

from __future__ import annotations

import asyncio
import math
import shutil
import tempfile
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pytest_topsail.sim.controllers.base import Controller, now_seconds, set_condition
from pytest_topsail.sim.controllers.containers import ENDPOINT_ANNOTATION, ContainerPlan, plan_containers
from pytest_topsail.sim.controllers.faults import kubelet_hooks
from pytest_topsail.sim.controllers.runtime import WorkloadPlan, workload_plan
from pytest_topsail.sim.controllers.scheduler import TERMINAL, pod_fault, stage_for
from pytest_topsail.sim.controllers.volume_faults import attach_wait
from pytest_topsail.sim.machinery.times import format_time
from pytest_topsail.sim.node.gpuactivity import Phases, Usage, gpu_activity
from pytest_topsail.sim.node.realworkload import Exit, Runtime, RuntimeError_
from pytest_topsail.sim.registry.patch import MERGE_PATCH

if TYPE_CHECKING:
    from pytest_topsail.sim.controllers.profile import PodFault

MAX_BACKOFF = 30.0  # seconds, like the kubelet's cap is 5 minutes; kept short for tests


@dataclass
class PodRun:
    """What the lifecycle knows about one pod it drives."""

    next_stage: str = "initialize"
    plans: list[ContainerPlan] = field(default_factory=list)
    run_seconds: float = math.inf
    exit_code: int = 0
    restarts: int = 0
    started_at: float = 0.0
    fault_message: str = ""
    reason: str = ""  # termination reason instead of Completed/Error (OOMKilled)
    workload: str = ""  # the container a workload runtime planned
    timed_logs: list[tuple[float, str, str]] = field(default_factory=list)  # (offset s, container, line)
    logged: int = 0  # timed log lines written so far
    started_loop: float = 0.0  # the event loop's clock at the start (timers run on it; virtual in tests)
    usage: list[tuple[float, Usage]] = field(default_factory=list)  # a workload's GPU/CPU use by offset
    real: set[str] = field(default_factory=set)  # containers run as real processes (the profile's runtime table)
    real_exits: dict[str, Exit] = field(default_factory=dict)
    killed: bool = False  # ended by an injected fault: every container gets `exit_code`
    lasting: bool = False  # the fault stays (a withdrawn GPU): every restart ends at once the same way
    pulls: int = 0  # failed image pulls (an injected image_pull fault)


def _owned_by_job(pod: dict[str, Any]) -> bool:
    return any(ref.get("kind") == "Job" for ref in (pod.get("metadata") or {}).get("ownerReferences") or ())


class PodLifecycle(Controller):
    name = "pods"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pods = self.store.resource_type("pods")
        self.nodes = self.store.resource_type("nodes")
        self.runs: dict[tuple[str, str], PodRun] = {}
        self.awaiting_node: dict[str, set[tuple[str, str]]] = {}  # node name -> pods bound to it before it existed
        self._ips = 0
        self.real: Runtime | None = None

    async def on_start(self) -> None:
        if self.profile.runtime:
            self.real = Runtime(self.profile.runtime, Path(tempfile.mkdtemp(prefix="topsail-sim-runtime-")))
        if self.profile.faults.events:
            kubelet_hooks(self.store).terminate = self.terminate
        self.watch("pods", "", self._on_pod)
        self.watch("nodes", "", self._on_node)
        for pod in self.store.list(self.pods):
            self._on_pod("ADDED", pod)

    async def stop(self) -> None:
        await super().stop()
        if self.real is not None:
            await self.real.shutdown()
            shutil.rmtree(self.real.root, ignore_errors=True)

    def _on_node(self, event_type: str, node: dict[str, Any]) -> None:
        if event_type != "ADDED":
            return
        for namespace, name in self.awaiting_node.pop(node["metadata"]["name"], ()):
            pod = self.store.find(self.pods, namespace, name)
            if pod is not None:
                self._on_pod("MODIFIED", pod)

    def _on_pod(self, event_type: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        if event_type == "DELETED":
            if self.real is not None:
                grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
                self.real.terminate_pod(*key, 30.0 if grace is None else float(grace))
            self.awaiting_node.get((pod.get("spec") or {}).get("nodeName") or "", set()).discard(key)
            if self.runs.pop(key, None) is not None:
                self.cancel_timer(("stage", *key))
                self.cancel_timer(("complete", *key))
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if key in self.runs or not node:
            return
        status = pod.get("status") or {}
        if status.get("phase") != "Pending" or status.get("containerStatuses"):
            return  # not ours to start: already running or finished
        if self.store.find(self.nodes, None, node) is None:  # no kubelet there: Pending until the node exists
            self.awaiting_node.setdefault(node, set()).add(key)
            return
        self.runs[key] = PodRun()
        stage = stage_for(pod, "initialize", self.profile.stages.initialize)
        self.enqueue_after(self.delay(stage, *key, "initialize"), ("stage", *key))

    async def reconcile(self, key: Hashable) -> None:
        action, namespace, name = cast(tuple[str, str, str], key)
        run = self.runs.get((namespace, name))
        pod = self.store.find(self.pods, namespace, name)
        if run is None or pod is None:
            return
        status = dict(pod.get("status") or {})
        if status.get("phase") in TERMINAL or self._node_lost(pod):
            return
        if action == "log":
            self._write_due_logs(namespace, name, run)
            return
        if action == "complete":
            self._complete(pod, run, status)
        else:
            self._advance(pod, run, status)
        self.store.update(self.pods, {**pod, "status": status}, subresource="status")

    def terminate(self, namespace: str, name: str, exit_code: int, reason: str, message: str, lasting: bool) -> bool:
        """End the running containers of a pod now, with `exit_code` and `reason` ("Error", "OOMKilled"), `message`
        appended to the log; a restart runs the pod's plan again, or, when the cause is `lasting`, ends the same way
        at once (CrashLoopBackOff). False when the pod has no running container."""
        run = self.runs.get((namespace, name))
        if run is None or run.next_stage in ("initialize", "start") or not run.started_at:
            return False
        run.exit_code, run.reason, run.fault_message, run.killed = exit_code, reason, message, True
        run.lasting = run.lasting or lasting
        self.cancel_timer(("complete", namespace, name))
        self.enqueue(("complete", namespace, name))
        return True

    # stages -----------------------------------------------------------------------------------------------------------
    def _advance(self, pod: dict[str, Any], run: PodRun, status: dict[str, Any]) -> None:
        key = (pod["metadata"].get("namespace") or "", pod["metadata"]["name"])
        stage = run.next_stage
        while stage:
            if stage == "start" and (self._pull_failed(pod, run, status) or self._attach_waiting(pod)):
                break
            following = {"initialize": "start", "start": "ready", "ready": ""}[stage]
            getattr(self, f"_{stage}")(pod, run, status)
            if not following:
                run.next_stage = ""
                break
            seconds = self.delay(stage_for(pod, following, getattr(self.profile.stages, following)), *key, following)
            run.next_stage = following
            if seconds > 0:
                self.enqueue_after(seconds, ("stage", *key))
                break
            stage = following

    def _initialize(self, pod: dict[str, Any], run: PodRun, status: dict[str, Any]) -> None:
        now = now_seconds()
        conditions = list(status.get("conditions") or ())
        if not any(c.get("type") == "PodScheduled" for c in conditions):
            conditions = set_condition(conditions, _cond("PodScheduled", "True", now))
        conditions = set_condition(conditions, _cond("Initialized", "True", now))
        for kind in ("Ready", "ContainersReady"):
            conditions = set_condition(conditions, _cond(kind, "False", now, "ContainersNotReady",
                                                         "containers with unready status"))
        status["conditions"] = conditions
        status["hostIP"] = self._host_ip(pod["spec"]["nodeName"])
        status["hostIPs"] = [{"ip": status["hostIP"]}]
        status["podIP"] = self._next_pod_ip()
        status["podIPs"] = [{"ip": status["podIP"]}]
        status["startTime"] = now
        status["containerStatuses"] = [
            _container_status(c, {"waiting": {"reason": "ContainerCreating"}})
            for c in pod["spec"].get("containers") or ()
        ]
        self._plan(pod, run)

    def _plan(self, pod: dict[str, Any], run: PodRun) -> None:
        plans = plan_containers(pod)
        default = math.inf
        if _owned_by_job(pod) and any(p.duration is None for p in plans):
            key = (pod["metadata"].get("namespace") or "", pod["metadata"]["name"])
            default = self.delay(stage_for(pod, "complete", self.profile.stages.complete), *key, "complete")
        faults = self.profile.faults.pods
        plan_run(run, plans, default, workload_plan(self.store, pod), pod_fault(faults, self.seed, pod, "fail"),
                 hang=pod_fault(faults, self.seed, pod, "hang") is not None)
        if self.real is not None:
            run.real = {c["name"] for c in pod["spec"].get("containers") or () if self.real.match(c.get("image", ""))}
            if run.real:  # the processes' exits complete the pod; nothing modelled about it
                run.run_seconds, run.exit_code, run.reason, run.workload = math.inf, 0, "", ""
                run.timed_logs, run.usage, run.fault_message = [], [], ""

    def _node_lost(self, pod: dict[str, Any]) -> bool:
        """On a node a fault made unreachable: its kubelet reports nothing more about the pod."""
        return bool(self.profile.faults.events) and pod["spec"].get("nodeName") in kubelet_hooks(self.store).lost_nodes

    def _pull_failed(self, pod: dict[str, Any], run: PodRun, status: dict[str, Any]) -> bool:
        """An injected image pull fault: the containers wait in ErrImagePull (a Failed Event names the image), then
        in ImagePullBackOff until the next pull, after the restart back-off (doubling, capped)."""
        message = kubelet_hooks(self.store).pull_failure(pod) if self.profile.faults.events else None
        if message is None:
            return False
        key = (pod["metadata"].get("namespace") or "", pod["metadata"]["name"])
        images = {c.get("name"): c.get("image") or "" for c in pod["spec"].get("containers") or ()}
        backing_off = run.pulls % 2 == 1
        reason = "ImagePullBackOff" if backing_off else "ErrImagePull"
        said = {name: f"Back-off pulling image {image!r}" if backing_off else
                f"failed to pull image {image!r}: {message}" for name, image in images.items()}
        status["containerStatuses"] = [{**s, "state": {"waiting": {"reason": reason, "message": said[s["name"]]}}}
                                       for s in status.get("containerStatuses") or ()]
        for image in dict.fromkeys(images.values()):
            if backing_off:
                self.store.record_event(pod, "BackOff", f"Back-off pulling image {image!r}", source="kubelet")
            else:
                self.store.record_event(pod, "Failed", f"Failed to pull image {image!r}: {message}", type="Warning",
                                        source="kubelet")
        run.pulls += 1
        backoff = self.delay(self.profile.stages.restart_backoff, *key, "pull", run.pulls)
        self.enqueue_after(min(MAX_BACKOFF, max(0.01, backoff) * 2 ** (run.pulls // 2)), ("stage", *key))
        return True

    def _attach_waiting(self, pod: dict[str, Any]) -> bool:
        """An injected volume_attach fault: the containers stay ContainerCreating until the PVC is attached."""
        seconds = attach_wait(self.store, pod) if self.profile.faults.events else None
        if seconds is None:
            return False
        self.enqueue_after(seconds, ("stage", pod["metadata"].get("namespace") or "", pod["metadata"]["name"]))
        return True

    def _start(self, pod: dict[str, Any], run: PodRun, status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        namespace, name = meta.get("namespace") or "", meta["name"]
        run.started_at = time.time()
        if run.usage:  # what the workload does on its GPUs, for the metric exporters (sim/node/exporters.py)
            gpu_activity(self.store).report(meta["uid"], Phases(
                tuple((run.started_at + offset, usage) for offset, usage in run.usage), run.workload))
        started = now_seconds()
        previous = {s["name"]: s for s in status.get("containerStatuses") or ()}
        statuses = []
        for container in pod["spec"].get("containers") or ():
            item = _container_status(container, {"running": {"startedAt": started}}, run.restarts, started=True)
            last_state = previous.get(item["name"], {}).get("lastState")
            if last_state:
                item["lastState"] = last_state
            statuses.append(item)
        status["containerStatuses"] = statuses
        status["phase"] = "Running"
        for plan in run.plans:
            self.store.start_log_run(namespace, name, plan.name)
            if plan.log and plan.name not in run.real:
                self.store.append_log(namespace, name, plan.name, plan.log)
        run.logged = 0
        run.started_loop = asyncio.get_running_loop().time()
        self._write_due_logs(namespace, name, run)
        self.store.record_event(pod, "Started", "Started container " + ", ".join(p.name for p in run.plans),
                                source="kubelet")
        if run.real:
            run.real_exits = {}
            for container in pod["spec"].get("containers") or ():
                if container["name"] in run.real:
                    asyncio.get_running_loop().create_task(self._launch(pod, container, run))
        if math.isfinite(run.run_seconds):
            self.enqueue_after(run.run_seconds, ("complete", namespace, name))

    async def _launch(self, pod: dict[str, Any], container: dict[str, Any], run: PodRun) -> None:
        """Start one real container; its exit completes the pod once every real container of it has ended."""
        assert self.real is not None
        namespace, name, cname = pod["metadata"].get("namespace") or "", pod["metadata"]["name"], container["name"]

        def on_line(line: str) -> None:
            self.store.append_log(namespace, name, cname, line)

        def on_exit(result: Exit) -> None:
            run.real_exits[cname] = result
            if set(run.real_exits) >= run.real and self.runs.get((namespace, name)) is run:
                self.enqueue(("complete", namespace, name))

        entry = self.real.match(container.get("image", ""))
        try:
            if entry is None:
                raise RuntimeError_(f"image {container.get('image')!r} left the runtime table")
            workload = await self.real.start(pod, container, entry, self._object, self._hosts(pod), on_line, on_exit)
            if workload.ports and self.store.find(self.pods, namespace, name) is not None:
                annotations = {f"{ENDPOINT_ANNOTATION}{port}": f"127.0.0.1:{local}"
                               for port, local in workload.ports.items()}  # what pods/portforward connects to
                self.store.patch(self.pods, namespace, name, {"metadata": {"annotations": annotations}}, MERGE_PATCH)
        except Exception as error:  # noqa: BLE001 - whatever stops the start is the container's StartError
            on_line(f"failed to start the container: {error}\n")
            now = time.time()
            on_exit(Exit(128, "StartError", str(error), now, now))

    def _object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.find(self.store.resource_type({"ConfigMap": "configmaps", "Secret": "secrets"}[kind]),
                               namespace, name)

    def _hosts(self, pod: dict[str, Any]) -> list[str]:
        """The names a pod resolves to this host: its own and those of the pods of the same owner (a job's master)."""
        owners = {r.get("uid") for r in pod["metadata"].get("ownerReferences") or ()}
        names = [pod["metadata"]["name"]]
        if owners:
            names += [p["metadata"]["name"] for p in self.store.list(self.pods, pod["metadata"].get("namespace"))
                      if owners & {r.get("uid") for r in p["metadata"].get("ownerReferences") or ()}]
        return names

    def _ready(self, pod: dict[str, Any], run: PodRun, status: dict[str, Any]) -> None:
        now = now_seconds()
        status["containerStatuses"] = [{**s, "ready": "running" in s.get("state", {})}
                                       for s in status.get("containerStatuses") or ()]
        all_ready = all(s["ready"] for s in status["containerStatuses"])
        conditions = list(status.get("conditions") or ())
        for kind in ("ContainersReady", "Ready"):
            if all_ready:
                conditions = set_condition(conditions, _cond(kind, "True", now))
        status["conditions"] = conditions

    def _complete(self, pod: dict[str, Any], run: PodRun, status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        self.cancel_timer(("stage", *key))
        now = now_seconds()
        finished = time.time()
        exit_codes = {p.name: (run.exit_code if run.fault_message or run.killed or p.name == run.workload
                               else p.exit_code)
                      for p in run.plans}
        exit_codes.update({cname: result.code for cname, result in run.real_exits.items()})
        if run.real:
            run.exit_code = next((r.code for r in run.real_exits.values() if r.code), 0)
        self.cancel_timer(("log", *key))
        self._write_due_logs(key[0], key[1], run, everything=True)
        if run.fault_message and run.plans:
            container = run.workload if run.killed and run.workload else run.plans[0].name
            self.store.append_log(key[0], key[1], container, run.fault_message + "\n")
        statuses = []
        for previous in status.get("containerStatuses") or ():
            code = exit_codes.get(previous["name"], 0)
            started_at = (previous.get("state", {}).get("running") or {}).get("startedAt") or format_time(finished)
            reason = run.reason or ("Completed" if code == 0 else "Error")
            terminated = {"exitCode": code, "reason": reason,
                          "startedAt": started_at, "finishedAt": format_time(finished), "containerID": ""}
            real = run.real_exits.get(previous["name"])
            if real is not None:
                terminated["reason"] = real.reason
                if real.message:
                    terminated["message"] = real.message
            statuses.append({**previous, "state": {"terminated": terminated}, "ready": False, "started": False})
        status["containerStatuses"] = statuses
        failed = run.exit_code != 0
        policy = pod["spec"].get("restartPolicy", "Always")
        if policy == "Never" or (policy == "OnFailure" and not failed):
            status["phase"] = "Failed" if failed else "Succeeded"
            reason = "PodFailed" if failed else "PodCompleted"
            conditions = list(status.get("conditions") or ())
            for kind in ("Ready", "ContainersReady"):
                conditions = set_condition(conditions, _cond(kind, "False", now, reason))
            status["conditions"] = conditions
            self.runs.pop(key, None)
            return
        self._restart(pod, run, status, now)

    def _restart(self, pod: dict[str, Any], run: PodRun, status: dict[str, Any], now: str) -> None:
        """The kubelet restarts the containers after a back-off (base from the profile, doubling, capped)."""
        key = (pod["metadata"].get("namespace") or "", pod["metadata"]["name"])
        run.restarts += 1
        status["containerStatuses"] = [
            {**s, "lastState": s["state"], "restartCount": run.restarts,
             "state": {"waiting": {"reason": "CrashLoopBackOff" if run.exit_code else "Completed"}}}
            for s in status["containerStatuses"]
        ]
        conditions = list(status.get("conditions") or ())
        for kind in ("Ready", "ContainersReady"):
            conditions = set_condition(conditions, _cond(kind, "False", now, "ContainersNotReady",
                                                         "containers with unready status"))
        status["conditions"] = conditions
        backoff = self.delay(self.profile.stages.restart_backoff, *key, "restart", run.restarts)
        backoff = min(MAX_BACKOFF, max(0.01, backoff) * 2 ** (run.restarts - 1))
        if run.killed and run.lasting:
            run.run_seconds = 0.0
        elif run.killed:  # the fault is over: the containers do again what they were planned to
            self._plan(pod, run)
            run.killed = False
        run.next_stage = "start"
        self.enqueue_after(backoff, ("stage", *key))

    def _write_due_logs(self, namespace: str, name: str, run: PodRun, everything: bool = False) -> None:
        """Append the timed log lines whose offset has passed; a timer for the next one."""
        elapsed = asyncio.get_running_loop().time() - run.started_loop
        while run.logged < len(run.timed_logs):
            offset, container, line = run.timed_logs[run.logged]
            if offset > elapsed + 1e-6 and not everything:  # (float rounding of the clock)
                self.enqueue_after(offset - elapsed, ("log", namespace, name))
                return
            self.store.append_log(namespace, name, container, line + "\n")
            run.logged += 1

    # helpers --------------------------------------------------------------------------------------------------------
    def _host_ip(self, node_name: str) -> str:
        node = self.store.find(self.nodes, None, node_name)
        for address in ((node or {}).get("status") or {}).get("addresses") or ():
            if address.get("type") == "InternalIP":
                return address["address"]
        return "10.0.0.1"

    def _next_pod_ip(self) -> str:
        self._ips += 1
        n = self._ips
        return f"10.{128 + (n >> 16) % 64}.{(n >> 8) & 255}.{n & 255}"


def plan_run(run: PodRun, plans: list[ContainerPlan], default_seconds: float, workload: WorkloadPlan | None,
             fail: PodFault | None, hang: bool) -> None:
    """What the pod's containers will do (pure): the longest container run time (`default_seconds` for a container
    whose command says nothing about it), the first non-zero exit code; a workload runtime's plan replaces both and
    brings timed logs; a `fail` fault cuts the run short with its exit code, a `hang` makes it endless after the
    workload's preamble lines."""
    run.plans = plans
    run.run_seconds = max((default_seconds if p.duration is None else p.duration for p in plans), default=math.inf)
    run.exit_code = next((p.exit_code for p in plans if p.exit_code), 0)
    if workload is not None:
        run.run_seconds, run.exit_code, run.reason = workload.run_seconds, workload.exit_code, workload.reason
        run.workload = workload.container
        run.timed_logs = [(offset, workload.container, line) for offset, line in workload.logs]
        run.usage = list(workload.usage)
    if fail is not None:
        run.run_seconds = min(run.run_seconds, fail.after_ms / 1000.0)
        run.exit_code = fail.exit_code
        run.fault_message = fail.message
    if hang:
        run.run_seconds = math.inf
        run.timed_logs = run.timed_logs[:workload.preamble] if workload is not None else []


def _cond(kind: str, value: str, now: str, reason: str | None = None, message: str | None = None) -> dict[str, Any]:
    cond: dict[str, Any] = {"type": kind, "status": value, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _container_status(container: dict[str, Any], state: dict[str, Any], restarts: int = 0,
                      started: bool = False) -> dict[str, Any]:
    image = container.get("image") or ""
    return {
        "name": container.get("name") or "",
        "image": image,
        "imageID": f"sim://{image}",
        "containerID": f"sim://{container.get('name') or ''}" if started else "",
        "ready": False,
        "started": started,
        "restartCount": restarts,
        "state": state,
        "lastState": {},
    }
