"""Pods that can never be scheduled: told apart from pods waiting for room, so a test fails in seconds, not at its
timeout, naming the request and the scheduler's reason.

The scheduler says the same (``0/10 nodes are available: 10 Insufficient nvidia.com/gpu.``) for a full cluster and for
a pod no node could ever hold. :func:`never_schedulable` compares the pod with the nodes themselves: their allocatable
resources (not what is free), their labels against the pod's ``nodeSelector``, their ``NoSchedule``/``NoExecute``
taints against its tolerations. A pod whose FailedScheduling reason is not about nodes at all (no per-node count) is
also never schedulable. Nodes that are cordoned or not ready may come back: they count as possible homes.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from pytest_topsail.kube.quantity import parse_quantity

_PER_NODE_REASONS = re.compile(r"^\s*0/(?P<nodes>\d+) nodes are available:\s*(?P<reasons>.*)$", re.DOTALL)
_SCHEDULING_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


def pod_requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    """Resources the pod asks for: the sum over its containers (requests, else limits, as the API server defaults)."""
    total: dict[str, Decimal] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, quantity in asked.items():
            total[name] = total.get(name, Decimal(0)) + parse_quantity(quantity)
    return {name: amount for name, amount in total.items() if amount > 0}


def format_requests(requests: dict[str, Decimal]) -> str:
    return ", ".join(f"{name}={_format_amount(amount)}" for name, amount in sorted(requests.items())) or "nothing"


def _format_amount(amount: Decimal) -> str:
    return f"{amount.normalize():f}"


def never_schedulable(pod: dict[str, Any], nodes: list[dict[str, Any]], scheduler_message: str) -> str | None:
    """Why no node can ever hold ``pod`` (``None`` when one could, once there is room)."""
    match = _PER_NODE_REASONS.match(scheduler_message or "")
    if match and nodes and match["reasons"].strip() and not match["reasons"].strip()[0].isdigit():
        return f"the scheduler gives a reason that is not about nodes: {match['reasons'].strip().rstrip('.')}"
    if not nodes:
        return "the cluster has no node"
    spec = pod.get("spec") or {}
    candidates = [node for node in nodes if _labels_match(spec.get("nodeSelector") or {}, node)]
    if not candidates:
        return f"no node has the labels of its nodeSelector {spec.get('nodeSelector')}"
    candidates = [node for node in candidates if _untolerated_taint(spec.get("tolerations") or [], node) is None]
    if not candidates:
        return "every node it selects has a taint it does not tolerate"
    requests = pod_requests(pod)
    for name, amount in sorted(requests.items()):
        largest = max((_allocatable(node, name) for node in candidates), default=Decimal(0))
        if largest < amount:
            return (f"it asks for {name}={_format_amount(amount)} and the largest node it may use has "
                    f"{_format_amount(largest)} allocatable")
    fitting = [node for node in candidates if all(_allocatable(node, n) >= a for n, a in requests.items())]
    if not fitting:
        return f"no single node it may use has all of {format_requests(requests)} allocatable"
    return None


def _allocatable(node: dict[str, Any], resource: str) -> Decimal:
    status = node.get("status") or {}
    value = (status.get("allocatable") or status.get("capacity") or {}).get(resource)
    return parse_quantity(value) if value is not None else Decimal(0)


def _labels_match(selector: dict[str, str], node: dict[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())


def _untolerated_taint(tolerations: list[dict[str, Any]], node: dict[str, Any]) -> dict[str, Any] | None:
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in _SCHEDULING_TAINT_EFFECTS:
            continue
        if not any(_tolerates(toleration, taint) for toleration in tolerations):
            return taint
    return None


def _tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")
