"""Scheduling logic of the simulated cluster (pure, no store): what a pod asks for, which nodes it may use, where it
fits, and why it fits nowhere.

Nodes with the same labels (apart from their hostname), taints, readiness and allocatable resources form a class.
A pod's label and taint constraints are checked once per class, then nodes of a matching class are tried in
round-robin order, so the cost of placing a pod does not grow with the number of nodes (as long as most fit).
Allocations are tracked incrementally: binding adds the pod's requests to its node, completion or deletion frees them.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pytest_topsail.kube.quantity import parse_cpu_millis, parse_memory_bytes

HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"


@lru_cache(maxsize=4096)
def _amount(resource: str, value: str) -> int:
    try:
        return parse_cpu_millis(value) if resource == "cpu" else parse_memory_bytes(value)
    except ValueError:
        return 0


def amounts(resources: dict[str, Any] | None) -> dict[str, int]:
    """A resource list ({"cpu": "500m", "memory": "1Gi"}) in integer units (cpu in millicores)."""
    return {name: _amount(name, str(value)) for name, value in (resources or {}).items()}


@dataclass(frozen=True)
class PodNeeds:
    """What the scheduler needs to know about a pod."""

    requests: tuple[tuple[str, int], ...]  # sorted (resource, amount), "pods" included
    node_selector: tuple[tuple[str, str], ...]
    terms: tuple[Any, ...]  # required node affinity: nodeSelectorTerms as frozen tuples (OR of terms)
    tolerations: tuple[tuple[str, str, str, str], ...]  # (key, operator, value, effect)
    per_node: bool  # constraints that depend on the node's name or hostname label
    raw_terms: list[dict[str, Any]] = field(default_factory=list, compare=False, hash=False)

    @property
    def request_map(self) -> dict[str, int]:
        return dict(self.requests)


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def pod_needs(pod: dict[str, Any]) -> PodNeeds:
    spec = pod.get("spec") or {}
    total: Counter[str] = Counter()
    for container in spec.get("containers") or ():
        resources = container.get("resources") or {}
        # Kubernetes defaults requests to limits when only limits are given.
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        total.update(amounts(merged))
    for container in spec.get("initContainers") or ():  # init containers run one at a time: the max counts
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, amount in amounts(merged).items():
            total[name] = max(total[name], amount)
    total["pods"] = 1
    requests = tuple(sorted((k, v) for k, v in total.items() if v > 0))
    selector = tuple(sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items()))
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = tuple(_freeze(t) for t in required.get("nodeSelectorTerms") or ())
    tolerations = tuple(
        (t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "", t.get("effect") or "")
        for t in spec.get("tolerations") or ()
    )
    per_node = any(k == HOSTNAME_LABEL for k, _ in selector) or _terms_per_node(required.get("nodeSelectorTerms"))
    return PodNeeds(requests, selector, terms, tolerations, per_node, list(required.get("nodeSelectorTerms") or ()))


def _terms_per_node(terms: list[dict[str, Any]] | None) -> bool:
    for term in terms or ():
        if term.get("matchFields"):
            return True
        if any(e.get("key") == HOSTNAME_LABEL for e in term.get("matchExpressions") or ()):
            return True
    return False


def _expression_matches(expr: dict[str, Any], value: str | None) -> bool:
    operator = expr.get("operator")
    values = expr.get("values") or ()
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def labels_match(needs: PodNeeds, labels: dict[str, str], name: str) -> bool:
    """nodeSelector and required node affinity against one node's labels and name."""
    if any(labels.get(k) != v for k, v in needs.node_selector):
        return False
    if not needs.terms:
        return True
    for term in needs.raw_terms:
        expressions = term.get("matchExpressions") or ()
        fields = term.get("matchFields") or ()
        if not expressions and not fields:
            continue  # an empty term matches nothing
        if all(_expression_matches(e, labels.get(e.get("key"))) for e in expressions) and all(
            _expression_matches(f, name if f.get("key") == "metadata.name" else None) for f in fields
        ):
            return True
    return False


def untolerated_taint(needs: PodNeeds, taints: tuple[tuple[str, str, str], ...]) -> tuple[str, str, str] | None:
    """The first NoSchedule/NoExecute taint the pod does not tolerate, or None."""
    for taint in taints:
        key, value, effect = taint
        if effect == "PreferNoSchedule":
            continue
        if not any(_tolerates(t, key, value, effect) for t in needs.tolerations):
            return taint
    return None


def _tolerates(toleration: tuple[str, str, str, str], key: str, value: str, effect: str) -> bool:
    t_key, operator, t_value, t_effect = toleration
    if t_effect and t_effect != effect:
        return False
    if operator == "Exists":
        return not t_key or t_key == key
    return t_key == key and t_value == value


@dataclass
class NodeInfo:
    name: str
    labels: dict[str, str]
    taints: tuple[tuple[str, str, str], ...]
    schedulable: bool  # Ready and not cordoned
    allocatable: dict[str, int]
    used: Counter[str] = field(default_factory=Counter)
    class_key: Any = None

    def fits(self, requests: tuple[tuple[str, int], ...]) -> bool:
        allocatable, used = self.allocatable, self.used
        return all(used[r] + amount <= allocatable.get(r, 0) for r, amount in requests)

    def short_of(self, requests: tuple[tuple[str, int], ...]) -> list[str]:
        return [r for r, amount in requests if self.used[r] + amount > self.allocatable.get(r, 0)]


def node_info(node: dict[str, Any]) -> NodeInfo:
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
    taints = tuple(
        (t.get("key") or "", t.get("value") or "", t.get("effect") or "") for t in spec.get("taints") or ()
    )
    allocatable = amounts(status.get("allocatable") or status.get("capacity") or {})
    return NodeInfo(
        name=meta.get("name") or "",
        labels=dict(meta.get("labels") or {}),
        taints=taints,
        schedulable=ready and not spec.get("unschedulable", False),
        allocatable=allocatable,
    )


@dataclass
class NodeClass:
    key: Any
    labels: dict[str, str]  # hostname removed
    taints: tuple[tuple[str, str, str], ...]
    schedulable: bool
    allocatable: dict[str, int]
    names: list[str] = field(default_factory=list)
    cursor: int = 0


@dataclass
class Placement:
    node: str | None
    message: str = ""  # why nothing fits, when node is None


class ClusterState:
    """Nodes, their classes and what is allocated on them."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.classes: dict[Any, NodeClass] = {}
        self.class_order: list[Any] = []
        self.allocations: dict[Any, tuple[str, tuple[tuple[str, int], ...]]] = {}
        self._class_cursor = 0

    # nodes ----------------------------------------------------------------------------------------------------------
    def set_node(self, info: NodeInfo) -> bool:
        """Add or refresh a node; True when it can take pods it could not take before."""
        old = self.nodes.get(info.name)
        if old is not None:
            info.used = old.used
            if (old.labels, old.taints, old.schedulable, old.allocatable) == (
                info.labels, info.taints, info.schedulable, info.allocatable,
            ):
                return False
            self._leave_class(old)
        self.nodes[info.name] = info
        self._join_class(info)
        return info.schedulable

    def remove_node(self, name: str) -> None:
        info = self.nodes.pop(name, None)
        if info is not None:
            self._leave_class(info)

    def _join_class(self, info: NodeInfo) -> None:
        labels = {k: v for k, v in info.labels.items() if k != HOSTNAME_LABEL}
        key = (tuple(sorted(labels.items())), info.taints, info.schedulable, tuple(sorted(info.allocatable.items())))
        node_class = self.classes.get(key)
        if node_class is None:
            node_class = NodeClass(key, labels, info.taints, info.schedulable, dict(info.allocatable))
            self.classes[key] = node_class
            # sorted, not in creation order: nodes gain labels and GPUs as operators install (a fresh cluster), in
            # an order that varies run to run; placements must not
            bisect.insort(self.class_order, key, key=repr)  # keys hold None (a taint without value)
        bisect.insort(node_class.names, info.name)
        info.class_key = key

    def _leave_class(self, info: NodeInfo) -> None:
        node_class = self.classes.get(info.class_key)
        if node_class is None:
            return
        node_class.names.remove(info.name)
        if not node_class.names:
            del self.classes[info.class_key]
            self.class_order.remove(info.class_key)

    # allocations ----------------------------------------------------------------------------------------------------
    def allocate(self, pod_key: Any, node: str, requests: tuple[tuple[str, int], ...]) -> None:
        if pod_key in self.allocations:
            return
        self.allocations[pod_key] = (node, requests)
        info = self.nodes.get(node)
        if info is not None:
            for resource, amount in requests:
                info.used[resource] += amount

    def release(self, pod_key: Any) -> bool:
        """Free what the pod held; True when something was freed."""
        held = self.allocations.pop(pod_key, None)
        if held is None:
            return False
        node, requests = held
        info = self.nodes.get(node)
        if info is not None:
            for resource, amount in requests:
                info.used[resource] -= amount
        return True

    # placement ------------------------------------------------------------------------------------------------------
    def place(self, needs: PodNeeds) -> Placement:
        """A node where the pod fits (round-robin among matching nodes), or why there is none."""
        if needs.per_node:
            return self._place_per_node(needs)
        count = len(self.class_order)
        start = self._class_cursor
        for offset in range(count):
            node_class = self.classes[self.class_order[(start + offset) % count]]
            if not self._class_admits(node_class, needs):
                continue
            name = self._next_fitting(node_class, needs)
            if name is not None:
                self._class_cursor = (start + offset + 1) % count
                return Placement(name)
        return Placement(None, self.explain(needs))

    def _class_admits(self, node_class: NodeClass, needs: PodNeeds) -> bool:
        if not node_class.schedulable:
            return False
        if any(node_class.allocatable.get(r, 0) < amount for r, amount in needs.requests):
            return False
        if untolerated_taint(needs, node_class.taints) is not None:
            return False
        return labels_match(needs, node_class.labels, "")

    def _next_fitting(self, node_class: NodeClass, needs: PodNeeds) -> str | None:
        names = node_class.names
        size = len(names)
        for offset in range(size):
            index = (node_class.cursor + offset) % size
            if self.nodes[names[index]].fits(needs.requests):
                node_class.cursor = (index + 1) % size
                return names[index]
        return None

    def _place_per_node(self, needs: PodNeeds) -> Placement:
        wanted = [v for k, v in needs.node_selector if k == HOSTNAME_LABEL]
        candidates = [n for n in wanted if n in self.nodes] if wanted else list(self.nodes)
        for name in candidates:
            info = self.nodes[name]
            if (info.schedulable and labels_match(needs, info.labels, name)
                    and untolerated_taint(needs, info.taints) is None and info.fits(needs.requests)):
                return Placement(name)
        return Placement(None, self.explain(needs))

    def explain(self, needs: PodNeeds) -> str:
        """The scheduler's message when nothing fits: `0/N nodes are available: <count> <reason>, ...`."""
        reasons: Counter[str] = Counter()
        for info in self.nodes.values():
            if not info.schedulable:
                reasons["node(s) were not ready or unschedulable"] += 1
                continue
            if not labels_match(needs, info.labels, info.name):
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
                continue
            taint = untolerated_taint(needs, info.taints)
            if taint is not None:
                reasons[f"node(s) had untolerated taint {{{taint[0]}: {taint[1]}}}"] += 1
                continue
            short = info.short_of(needs.requests)
            if short:
                reasons[", ".join(("Too many pods" if r == "pods" else f"Insufficient {r}") for r in short)] += 1
        details = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
        return f"0/{len(self.nodes)} nodes are available: {details or 'no nodes registered'}."
