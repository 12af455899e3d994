"""The policy of a pod's action subresources, as the apiserver's pod registry applies it: ``bind`` (pods/binding: what
a scheduler sends, sets spec.nodeName once) and ``evict`` (pods/eviction: a delete refused with 429 while a
PodDisruptionBudget selecting the pod allows no disruption). The API server parses the request and calls these."""

from __future__ import annotations

from typing import Any

from pytest_topsail.sim.machinery import apierror
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.machinery.resources import ResourceType
from pytest_topsail.sim.machinery.selectors import label_selector_from_match, labels_match
from pytest_topsail.sim.registry.store import Store


def bind(store: Store, rtype: ResourceType, pod: dict[str, Any], body: Any) -> None:
    """Assign the pod to the node a Binding body targets; 422 without a target, 409 if it is already assigned."""
    name = pod["metadata"]["name"]
    node = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
    if not node:
        raise apierror.invalid("Binding", "", name, [("target.name", "Required value")])
    if (pod.get("spec") or {}).get("nodeName"):
        raise apierror.conflict("pods/binding", "", name, f"pod {name} is already assigned to node "
                                                           f'"{pod["spec"]["nodeName"]}"')
    store.update(rtype, {**pod, "spec": {**pod["spec"], "nodeName": node}})


def evict(store: Store, rtype: ResourceType, pod: dict[str, Any]) -> None:
    """Delete the pod unless a PodDisruptionBudget forbids it now (429)."""
    check_disruption_budgets(store, pod)
    store.delete(rtype, pod["metadata"]["namespace"], pod["metadata"]["name"])


def check_disruption_budgets(store: Store, pod: dict[str, Any]) -> None:
    """429 when a PodDisruptionBudget selecting the pod allows no disruption now (computed here, as the
    disruption controller would: healthy = Ready pods it selects, desired from minAvailable/maxUnavailable)."""
    budgets = store.resource_type("poddisruptionbudgets", "policy")
    namespace, labels = pod["metadata"]["namespace"], pod["metadata"].get("labels") or {}
    for budget in store.list(budgets, namespace):
        spec = budget.get("spec") or {}
        selector = label_selector_from_match(spec.get("selector"))
        if not selector or not labels_match(selector, labels):
            continue
        selected = store.list(store.resource_type("pods"), namespace, selector)
        healthy = sum(1 for p in selected if _is_ready(p))
        desired = _desired_healthy(spec, len(selected))
        if healthy - desired < 1:
            raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption "
                                                   "budget.",
                           {"causes": [{"reason": "DisruptionBudget", "message": f"The disruption budget "
                                        f"{budget['metadata']['name']} needs {desired} healthy pods and has "
                                        f"{healthy} currently"}]})


def _is_ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _desired_healthy(spec: dict[str, Any], expected: int) -> int:
    """How many selected pods a PodDisruptionBudget wants healthy (percentages round up, as the apiserver)."""
    def count(value: Any) -> int:
        if isinstance(value, str) and value.endswith("%"):
            return -(-int(value[:-1] or 0) * expected // 100)
        return int(value or 0)

    if spec.get("minAvailable") is not None:
        return count(spec["minAvailable"])
    if spec.get("maxUnavailable") is not None:
        return max(0, expected - count(spec["maxUnavailable"]))
    return expected
