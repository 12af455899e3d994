"""A load point run as N generator pods of a Kubernetes Job (docs/llm-load.md "Distributed load").

Each pod runs ``python -m pytest_topsail.llmload.worker`` from the generator image, its settings and prompts from a
mounted ConfigMap. The start barrier is a wall-clock instant in that ConfigMap (``start_at``: now + ``start_delay_s``):
every pod sleeps until it, and a pod not Running by then fails the run, named. Each pod writes its records, one line
per request as it ends, and serves them on its records port; the runner pulls them through ``pods/portforward``
(collect.py) and merges them into one ``records.jsonl`` on the first pod's clock, so the metrics of an N-pod run
are computed exactly as for one process. A pod that dies (deleted, killed, failed) is named; its records up to the
last pull before its death are kept.
"""

from __future__ import annotations

import base64
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.client import Kube, KubeError, ObjectRef
from pytest_topsail.kube.events import pod_logs
from pytest_topsail.kube.wait import poll
from pytest_topsail.llmload.collect import PORT, PORT_ENV, Collector
from pytest_topsail.llmload.dataset import Prompt, prompt_entry
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.records import TIMES
from pytest_topsail.llmload.run import POINTS, RECORDS, analyse_directory
from pytest_topsail.llmload.worker import API_KEY_ENV, PROMPTS_FILE, SETTINGS_FILE

GENERATORS = "generators.json"
API_KEY_KEY = "api_key"  # the key of the generators' Secret
CA_FILE = "grpc-ca.pem"  # the gRPC server's CA bundle, when the case gives one (public: a ConfigMap holds it)
JOB_LABEL = "topsail.io/load-generator"
POLL_S = 0.1


@dataclass(frozen=True)
class GeneratorPool:
    """Where and how the generator pods run."""

    count: int
    image: str
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    start_delay_s: float = 10.0  # the barrier: pods must be Running within this time from the Job's creation
    late_s: float = 1.0  # a pod starting later than this after the barrier sends nothing


@dataclass
class Generator:
    name: str
    state: str = "Pending"  # Running | Succeeded | Failed | Deleted | NotCollected
    message: str = ""
    started_epoch: float | None = None
    requests: int = 0


def run_distributed(kube: Kube, namespace: str, name: str, settings: dict[str, Any], prompts: Sequence[Prompt],
                    endpoint: dict[str, Any], point: LoadPoint, pool: GeneratorPool, directory: Path,
                    progress: Callable[[str], None], slo: dict[str, float] | None = None,
                    files: dict[str, str] | None = None, api_key: str | None = None
                    ) -> tuple[dict[str, Any], list[Generator]]:
    """Run the point on ``pool.count`` pods; returns the merged point's summary and the generators (those that died
    carry their state and message). ``files``: more files of the settings directory (name -> text); ``api_key``:
    the OpenAI backend's key, given to the pods through a Secret (never in the ConfigMap, the Job or a file)."""
    records_dir = directory / "generators"
    shutil.rmtree(records_dir, ignore_errors=True)
    records_dir.mkdir(parents=True)
    start_at = time.time() + pool.start_delay_s
    config = {"settings": settings, "start_at": start_at, "late_s": pool.late_s, **endpoint}
    lines = [json.dumps(prompt_entry(p)) for p in prompts]
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                 "data": {SETTINGS_FILE: json.dumps(config), PROMPTS_FILE: "\n".join(lines) + "\n", **(files or {})}}
    secret = api_key_secret(f"{name}-api-key", namespace, api_key) if api_key else None
    job = job_manifest(name, namespace, pool, secret_name=f"{name}-api-key" if api_key else None)
    kube.apply(configmap)
    if secret is not None:
        kube.apply(secret)
    kube.apply(job)
    collectors: list[Collector] = []
    try:
        generators = wait_running(kube, namespace, name, pool.count, start_at)
        progress(f"{pool.count} generator pods Running, starting together at the barrier")
        collectors = [Collector(kube, namespace, g.name, records_dir, not_before=start_at + 0.2) for g in generators]
        for collector in collectors:
            collector.thread.start()
        last = point.warmup_s + (point.duration_s or 0) + point.cooldown_s + point.drain_timeout_s + point.timeout_s
        wait_ended(kube, namespace, generators, start_at + last + 30.0)
        stop_collectors(collectors)
        for generator, collector in zip(generators, collectors, strict=True):
            if generator.state == "Succeeded" and not collector.done:  # ended without giving every record: named
                generator.state = "NotCollected"
                generator.message = ", ".join(part for part in (generator.message, (
                    f"its records were not all collected through pods/portforward to port {PORT}"
                    + (f": {collector.error}" if collector.error else ""))) if part)
        add_last_log_lines(kube, namespace, [g for g in generators if g.state not in ("Succeeded", "Deleted")])
    finally:
        stop_collectors(collectors)
        kube.delete(ObjectRef.of(job), propagation="Background")
        kube.delete(ObjectRef.of(configmap))
        if secret is not None:
            kube.delete(ObjectRef.of(secret))
    summary = merge(directory, records_dir, generators, point, slo or {})
    return summary, generators


def stop_collectors(collectors: list[Collector]) -> None:
    for collector in collectors:
        collector.stop.set()
    for collector in collectors:
        collector.thread.join(timeout=15)


def add_last_log_lines(kube: Kube, namespace: str, generators: list[Generator]) -> None:
    """Each failing generator's message ends with its log's last line: the pod's own cause (read before the Job,
    and its pods, are deleted)."""
    for generator in generators:
        try:
            lines = pod_logs(kube, namespace, generator.name, tail_lines=5).strip().splitlines()
        except KubeError as error:
            lines = [f"(its log could not be read: {error})"]
        last = lines[-1].strip() if lines else "(its log is empty)"
        generator.message = ", ".join(part for part in (generator.message, f"last log line: {last}") if part)


def failure_message(generators: list[Generator]) -> str:
    """One line per generator pod, each named once with its state and cause."""
    return "; ".join(f"{g.name}: {g.state}" + (f" ({g.message})" if g.message else "") for g in generators)


def api_key_secret(name: str, namespace: str, api_key: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace},
            "data": {API_KEY_KEY: base64.b64encode(api_key.encode()).decode()}}


def job_manifest(name: str, namespace: str, pool: GeneratorPool, secret_name: str | None = None) -> dict[str, Any]:
    """The generator Job; with ``secret_name``, the pods' API_KEY_ENV comes from that Secret (secretKeyRef)."""
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "generator", "image": pool.image,
                        "command": ["python", "-m", "pytest_topsail.llmload.worker", "/etc/topsail-load", "/records"],
                        "ports": [{"name": "records", "containerPort": PORT, "protocol": "TCP"}],
                        "env": [{"name": PORT_ENV, "value": str(PORT)}],
                        "volumeMounts": [{"name": "settings", "mountPath": "/etc/topsail-load"},
                                         {"name": "records", "mountPath": "/records"}]}],
        "volumes": [{"name": "settings", "configMap": {"name": name}}, {"name": "records", "emptyDir": {}}]}
    if secret_name:
        pod_spec["containers"][0]["env"].append(
            {"name": API_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": API_KEY_KEY}}})
    if pool.node_selector:
        pod_spec["nodeSelector"] = dict(pool.node_selector)
    if pool.tolerations:
        pod_spec["tolerations"] = list(pool.tolerations)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": {"parallelism": pool.count, "completions": pool.count,
                     "backoffLimit": pool.count,  # a lost pod must not fail the Job (which would stop the others)
                     "template": {"metadata": {"labels": {JOB_LABEL: name}}, "spec": pod_spec}}}


def pod_state(pod: dict[str, Any]) -> tuple[str, str]:
    status = pod.get("status") or {}
    message = ""
    for container in status.get("containerStatuses") or ():
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):  # e.g. ImagePullBackOff: the image is not on the cluster
            message = waiting["reason"] + (f": {waiting['message'].strip()}" if waiting.get("message") else "")
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            message = (f"exit code {terminated.get('exitCode')} ({terminated.get('reason', '')})"
                       + (f": {terminated['message'].strip()}" if (terminated.get("message") or "").strip() else ""))
    return status.get("phase") or "Pending", message


def wait_running(kube: Kube, namespace: str, name: str, count: int, start_at: float) -> list[Generator]:
    """The Job's first ``count`` pods, once all are Running; a WaitTimeout naming the others at the barrier."""

    def first_pods() -> list[dict[str, Any]]:
        return sorted(kube.list("v1", "Pod", namespace=namespace, label_selector=f"{JOB_LABEL}={name}"),
                      key=lambda p: p["metadata"].get("creationTimestamp") or "")[:count]

    def late(pods: list[dict[str, Any]] | None) -> str:
        states = {p["metadata"]["name"]: pod_state(p) for p in pods or []}
        names = [f"{pod_name} ({state}{': ' + message if message else ''})"
                 for pod_name, (state, message) in states.items() if state != "Running"]
        missing = count - len(states)
        return "not Running: " + ", ".join(names + ([f"{missing} pod(s) not even created"] if missing else []))

    pods = poll(first_pods, lambda pods: len(pods) == count and all(pod_state(p)[0] == "Running" for p in pods),
                what=f"the load generators of Job {namespace}/{name} to be Running at the start barrier "
                     "(start_delay_s after the Job was created)",
                timeout=round(max(0.0, start_at - time.time()), 1), interval=POLL_S, describe=late)
    return [Generator(p["metadata"]["name"], "Running") for p in pods]


def wait_ended(kube: Kube, namespace: str, generators: list[Generator], end_at: float) -> None:
    """Until every generator pod has ended or is gone (deleted: state Deleted); ``end_at``: epoch s."""

    def still_running() -> list[Generator]:
        for generator in generators:
            if generator.state in ("Succeeded", "Failed", "Deleted"):
                continue
            pod = kube.get(ObjectRef("v1", "Pod", generator.name, namespace))
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                generator.state, generator.message = "Deleted", "the pod was deleted while generating load"
                continue
            state, message = pod_state(pod)
            if state in ("Succeeded", "Failed"):
                generator.state, generator.message = state, message
        return [g for g in generators if g.state not in ("Succeeded", "Failed", "Deleted")]

    poll(still_running, lambda running: not running, interval=POLL_S,
         what="the load generators to end (the point's duration, drain and request timeouts)",
         timeout=round(max(0.0, end_at - time.time()), 1),
         describe=lambda running: "still running: " + ", ".join(g.name for g in running or []))


def read_generator(records_dir: Path, generator: Generator) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A generator's point document and records (a last line cut by the pod's death is dropped)."""
    try:
        document = json.loads((records_dir / f"{generator.name}.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}, []
    records = []
    path = records_dir / f"{generator.name}.jsonl"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return document, records


def merge(directory: Path, records_dir: Path, generators: list[Generator], point: LoadPoint,
          slo: dict[str, float]) -> dict[str, Any]:
    """One point of all the generators' records, on the earliest generator's clock; analysed as one process's."""
    read = {g.name: read_generator(records_dir, g) for g in generators}
    started = [doc["started_epoch"] for doc, _ in read.values() if "started_epoch" in doc]
    if not started:
        raise TopsailError("no load generator started: " + failure_message(generators))
    base = min(started)
    merged: list[dict[str, Any]] = []
    measure_start, stops, measure_ends, ended = 0.0, [], [], 0.0
    for generator in generators:
        document, records = read[generator.name]
        if "started_epoch" not in document:
            continue
        generator.started_epoch, generator.requests = document["started_epoch"], len(records)
        shift = document["started_epoch"] - base
        measure_start = max(measure_start, shift + document.get("measure_start", point.warmup_s))
        if "stop" in document:
            stops.append(shift + document["stop"])
            measure_ends.append(shift + (document.get("measure_end") or document["stop"]))
        for record in records:
            record = shift_record(record, shift)
            merged.append({**record, "generator": generator.name})
            ended = max(ended, record["end"])
    merged.sort(key=lambda r: (r["start"], r["generator"]))
    for index, record in enumerate(merged):
        record.update(point=0, index=index)
    stop = max(stops) if stops else ended
    measure_end = max(measure_ends) if measure_ends else stop
    clients = [read[g.name][0]["client"] for g in generators if read[g.name][0].get("client")]
    client = max(clients, key=lambda c: (c["cpu_share"], c["loop_lag_p99_ms"])) if clients else {}  # the busiest
    stopped_by = next((f"{g.name}: {read[g.name][0]['stopped_by']}" for g in generators
                       if read[g.name][0].get("stopped_by")), None)
    document = {"index": 0, "label": point.label + f" x{len(generators)} generators", "point": asdict(point),
                "started_epoch": base, "measure_start": measure_start, "measure_end": measure_end, "stop": stop,
                "ended": ended,
                "stopped_by": stopped_by, "slo": slo, "client": client,
                "generators": [asdict(g) for g in generators]}
    (directory / POINTS).write_text(json.dumps([document], indent=1), encoding="utf-8")
    with (directory / RECORDS).open("w", encoding="utf-8") as file:
        for record in merged:
            file.write(json.dumps(record, separators=(",", ":")) + "\n")
    (directory / GENERATORS).write_text(json.dumps([asdict(g) for g in generators], indent=1), encoding="utf-8")
    return analyse_directory(directory)[0]


def shift_record(record: dict[str, Any], shift: float) -> dict[str, Any]:
    record = dict(record)
    for name in TIMES:
        if record.get(name) is not None:
            record[name] += shift
    record["chunks"] = [[when + shift, count] for when, count in record.get("chunks") or ()]
    return record
