"""Server-side printing for ``kubectl get`` (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``).

Pods, nodes, namespaces, jobs, deployments, replicasets, services, persistent volume claims and events get their
usual columns; every other resource gets Name and Age.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from .resources import ResourceType

TABLE_MARKER = "as=Table"

Obj = dict[str, Any]


def _age(timestamp: str | None, now: float) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        seconds = int(now - datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return "<unknown>"
    seconds = max(seconds, 0)
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def _pod_cells(pod: Obj) -> list[Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for entry in statuses:
        state = entry.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated"):  # as kubectl's printer: Completed, Error, OOMKilled, ...
            terminated = state["terminated"]
            reason = terminated.get("reason") or (f"Signal:{terminated['signal']}" if terminated.get("signal")
                                                  else f"ExitCode:{terminated.get('exitCode', 0)}")
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    return [f"{ready}/{len(spec.get('containers') or [])}", reason, restarts]


def _node_cells(node: Obj) -> list[Any]:
    conditions = {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}
    state = {"True": "Ready", "False": "NotReady"}.get(conditions.get("Ready", ""), "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = node["metadata"].get("labels") or {}
    prefix = "node-role.kubernetes.io/"
    roles = ",".join(sorted(k[len(prefix):] for k in labels if k.startswith(prefix))) or "<none>"
    version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
    return [state, roles, version]


def _job_cells(job: Obj) -> list[Any]:
    status = job.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    state = next((t for t in ("Complete", "Failed", "Suspended") if conditions.get(t) == "True"), "Running")
    completions = (job.get("spec") or {}).get("completions")
    done = status.get("succeeded", 0)
    return [state, f"{done}/{completions if completions is not None else 1}"]


def _deployment_cells(deployment: Obj) -> list[Any]:
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    return [f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}", status.get("updatedReplicas", 0),
            status.get("availableReplicas", 0)]


def _replicaset_cells(replicaset: Obj) -> list[Any]:
    spec, status = replicaset.get("spec") or {}, replicaset.get("status") or {}
    return [spec.get("replicas", 1), status.get("replicas", 0), status.get("readyReplicas", 0)]


def _service_cells(service: Obj) -> list[Any]:
    spec = service.get("spec") or {}
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []) or "<none>"
    return [spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>", "<none>", ports]


def _claim_cells(claim: Obj) -> list[Any]:
    spec, status = claim.get("spec") or {}, claim.get("status") or {}
    capacity = (status.get("capacity") or {}).get("storage", "")
    modes = ",".join({"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                      "ReadWriteOncePod": "RWOP"}.get(m, m) for m in status.get("accessModes") or [])
    return [status.get("phase", "Pending"), spec.get("volumeName", ""), capacity, modes,
            spec.get("storageClassName") or "<unset>"]


_COLUMNS: dict[tuple[str, str], tuple[list[tuple[str, str]], Any]] = {
    ("", "pods"): ([("Ready", "string"), ("Status", "string"), ("Restarts", "integer")], _pod_cells),
    ("", "nodes"): ([("Status", "string"), ("Roles", "string"), ("Version", "string")], _node_cells),
    ("", "namespaces"): ([("Status", "string")], lambda ns: [(ns.get("status") or {}).get("phase", "")]),
    ("batch", "jobs"): ([("Status", "string"), ("Completions", "string")], _job_cells),
    ("apps", "deployments"): ([("Ready", "string"), ("Up-to-date", "integer"), ("Available", "integer")],
                              _deployment_cells),
    ("apps", "replicasets"): ([("Desired", "integer"), ("Current", "integer"), ("Ready", "integer")],
                              _replicaset_cells),
    ("", "services"): ([("Type", "string"), ("Cluster-IP", "string"), ("External-IP", "string"),
                        ("Port(s)", "string")], _service_cells),
    ("", "persistentvolumeclaims"): ([("Status", "string"), ("Volume", "string"), ("Capacity", "string"),
                                      ("Access Modes", "string"), ("StorageClass", "string")], _claim_cells),
}


def _event_row(event: Obj, now: float) -> list[Any]:
    involved = event.get("involvedObject") or {}
    last = event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
    return [_age(last, now), event.get("type", ""), event.get("reason", ""),
            f"{(involved.get('kind') or '').lower()}/{involved.get('name', '')}", event.get("message", ""),
            event["metadata"]["name"]]


# Events print without Name first and Age last, like kubectl's own event printer (Name only with -o wide).
_EVENT_COLUMNS = [("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0),
                  ("Object", "string", 0), ("Message", "string", 0), ("Name", "string", 1)]


def table_for(rtype: ResourceType, items: list[Obj], resource_version: str, include_object: str = "Metadata"
              ) -> Obj:
    now = time.time()
    if rtype.key in (("", "events"), ("events.k8s.io", "events")):
        columns = _EVENT_COLUMNS
        cells = [_event_row(obj, now) for obj in items]
    else:
        extra, cells_of = _COLUMNS.get(rtype.key, ([], lambda _obj: []))
        columns = [("Name", "string", 0), *((name, kind, 0) for name, kind in extra), ("Age", "string", 0)]
        cells = [[obj["metadata"]["name"], *cells_of(obj), _age(obj["metadata"].get("creationTimestamp"), now)]
                 for obj in items]
    rows = []
    for obj, row_cells in zip(items, cells, strict=True):
        row: Obj = {"cells": row_cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj["metadata"]}
        rows.append(row)
    return {
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [{"name": name, "type": kind, "format": "name" if name == "Name" else "",
                               "description": "", "priority": priority} for name, kind, priority in columns],
        "rows": rows,
    }
