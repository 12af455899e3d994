"""Server-side printing for ``kubectl get`` (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``).

Pods, nodes, namespaces, jobs, deployments, replicasets, services, persistent volume claims and events get their
usual columns; every other resource gets Name and Age.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from pytest_topsail.sim.machinery.resources import ResourceType

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
    gates = spec.get("readinessGates") or []
    return [f"{ready}/{len(spec.get('containers') or [])}", reason, restarts, status.get("podIP") or "<none>",
            spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>",
            f"{len(gates)}/{len(gates)}" if gates else "<none>"]


def _node_cells(node: Obj) -> list[Any]:
    conditions = {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}
    state = {"True": "Ready", "False": "NotReady"}.get(conditions.get("Ready", ""), "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = node["metadata"].get("labels") or {}
    prefix = "node-role.kubernetes.io/"
    roles = ",".join(sorted(k[len(prefix):] for k in labels if k.startswith(prefix))) or "<none>"
    info = (node.get("status") or {}).get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in (node.get("status") or {}).get("addresses") or []}
    return [state, roles, info.get("kubeletVersion", ""), addresses.get("InternalIP") or "<none>",
            addresses.get("ExternalIP") or "<none>", info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


def _workload_wide(obj: Obj) -> list[Any]:
    """CONTAINERS, IMAGES, SELECTOR of a workload's -o wide."""
    spec = obj.get("spec") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    selector = spec.get("selector") or {}
    match = selector.get("matchLabels") or {}
    terms = [f"{k}={v}" for k, v in sorted(match.items())]
    for expression in selector.get("matchExpressions") or []:
        values = ",".join(expression.get("values") or [])
        terms.append(f"{expression.get('key')} {expression.get('operator', '').lower()} ({values})")
    return [",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
            ",".join(terms) or "<none>"]


def _job_cells(job: Obj) -> list[Any]:
    status = job.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    state = next((t for t in ("Complete", "Failed", "Suspended") if conditions.get(t) == "True"), "Running")
    completions = (job.get("spec") or {}).get("completions")
    done = status.get("succeeded", 0)
    return [state, f"{done}/{completions if completions is not None else 1}", *_workload_wide(job)]


def _deployment_cells(deployment: Obj) -> list[Any]:
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    return [f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}", status.get("updatedReplicas", 0),
            status.get("availableReplicas", 0), *_workload_wide(deployment)]


def _replicaset_cells(replicaset: Obj) -> list[Any]:
    spec, status = replicaset.get("spec") or {}, replicaset.get("status") or {}
    return [spec.get("replicas", 1), status.get("replicas", 0), status.get("readyReplicas", 0),
            *_workload_wide(replicaset)]


def _service_cells(service: Obj) -> list[Any]:
    spec = service.get("spec") or {}
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []) or "<none>"
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    external = ",".join(i.get("ip") or i.get("hostname") or "" for i in ingress) or (
        "<pending>" if spec.get("type") == "LoadBalancer" else "<none>")
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or "<none>"
    return [spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>", external, ports, selector]


def _claim_cells(claim: Obj) -> list[Any]:
    spec, status = claim.get("spec") or {}, claim.get("status") or {}
    capacity = (status.get("capacity") or {}).get("storage", "")
    modes = ",".join({"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                      "ReadWriteOncePod": "RWOP"}.get(m, m) for m in status.get("accessModes") or [])
    return [status.get("phase", "Pending"), spec.get("volumeName", ""), capacity, modes,
            spec.get("storageClassName") or "<unset>"]


# Extra columns (name, type, priority): priority 1 columns show with `kubectl get -o wide` only.
_WORKLOAD_WIDE = [("Containers", "string", 1), ("Images", "string", 1), ("Selector", "string", 1)]
_COLUMNS: dict[tuple[str, str], tuple[list[tuple[str, str, int]], Any]] = {
    ("", "pods"): ([("Ready", "string", 0), ("Status", "string", 0), ("Restarts", "integer", 0), ("IP", "string", 1),
                    ("Node", "string", 1), ("Nominated Node", "string", 1), ("Readiness Gates", "string", 1)],
                   _pod_cells),
    ("", "nodes"): ([("Status", "string", 0), ("Roles", "string", 0), ("Age", "string", 0), ("Version", "string", 0),
                     ("Internal-IP", "string", 1), ("External-IP", "string", 1), ("OS-Image", "string", 1),
                     ("Kernel-Version", "string", 1), ("Container-Runtime", "string", 1)], _node_cells),
    ("", "namespaces"): ([("Status", "string", 0)], lambda ns: [(ns.get("status") or {}).get("phase", "")]),
    ("batch", "jobs"): ([("Status", "string", 0), ("Completions", "string", 0), *_WORKLOAD_WIDE], _job_cells),
    ("apps", "deployments"): ([("Ready", "string", 0), ("Up-to-date", "integer", 0), ("Available", "integer", 0),
                               *_WORKLOAD_WIDE], _deployment_cells),
    ("apps", "replicasets"): ([("Desired", "integer", 0), ("Current", "integer", 0), ("Ready", "integer", 0),
                               *_WORKLOAD_WIDE], _replicaset_cells),
    ("", "services"): ([("Type", "string", 0), ("Cluster-IP", "string", 0), ("External-IP", "string", 0),
                        ("Port(s)", "string", 0), ("Selector", "string", 1)], _service_cells),
    ("", "persistentvolumeclaims"): ([("Status", "string", 0), ("Volume", "string", 0), ("Capacity", "string", 0),
                                      ("Access Modes", "string", 0), ("StorageClass", "string", 0)], _claim_cells),
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
        # Age where the kind's printer puts it (listed), else after the columns -o wide does not add
        names = [column[0] for column in extra]
        age_at = names.index("Age") if "Age" in names else sum(1 for column in extra if column[2] == 0)
        extra = [column for column in extra if column[0] != "Age"]
        columns = [("Name", "string", 0), *extra[:age_at], ("Age", "string", 0), *extra[age_at:]]
        cells = []
        for obj in items:
            values = cells_of(obj)
            cells.append([obj["metadata"]["name"], *values[:age_at],
                          _age(obj["metadata"].get("creationTimestamp"), now), *values[age_at:]])
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
