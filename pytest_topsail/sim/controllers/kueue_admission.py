"""Kueue's admission decisions (pure, no store): which pending Workloads get quota in a scheduling cycle and which
admitted ones are preempted for them, kept apart from the controller's writes (kueue.py) as scheduling.py is from
scheduler.py.

- `podset_requests(workload)` sums what a Workload's pod sets request.
- `cluster_queue(obj)` reads a ClusterQueue's spec into a `Queue` (quota per (flavor, resource), cohort, queueing
  strategy, preemption policies); `quantity(value)` parses a resource quantity.
- `schedule(queues, pending, admitted)` is one cycle: pending workloads in Kueue's order (priority, then creation),
  each admitted on the first flavor of its ClusterQueue where every requested resource fits within nominal quota plus
  what it may borrow from idle quota of its cohort (borrowingLimit; no limit when unset); a StrictFIFO queue whose
  head does not fit admits nothing behind it this cycle, a BestEffortFIFO queue goes on with the next. A workload
  that does not fit may preempt (`withinClusterQueue: LowerPriority` | `LowerOrNewerEqualPriority`: admitted
  workloads of its own queue with a lower priority, lowest first then most recently admitted; `reclaimWithinCohort:
  LowerPriority` | `Any`: workloads of cohort peers that borrow, when the preemptor fits in its own nominal quota);
  the victims are the fewest that make it fit, and it is admitted in a later cycle, once they released their quota.
Not modelled: lendingLimit, flavorFungibility (flavors are tried in order, a flavor that needs borrowing is taken when
it fits), borrowWithinCohort, fair sharing, admission checks, partial admission, several resource groups covering
the same resource (each resource is looked up in the first group that covers it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_topsail.kube.quantity import parse_quantity

FlavorResource = tuple[str, str]  # (flavor name, resource name)
STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"


def quantity(value: Any) -> float:
    return float(parse_quantity(str(value)))


def podset_requests(workload: dict[str, Any]) -> dict[str, float]:
    """What a Workload asks for, over its pod sets: count x the pod's requests (a container's limit stands for an
    absent request, as the apiserver defaults it; init containers are not counted)."""
    total: dict[str, float] = {}
    for podset in (workload.get("spec") or {}).get("podSets") or ():
        count = int(podset.get("count", 1))
        for container in ((podset.get("template") or {}).get("spec") or {}).get("containers") or ():
            resources = container.get("resources") or {}
            asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
            for name, value in asked.items():
                total[name] = total.get(name, 0.0) + count * quantity(value)
    return total


@dataclass(frozen=True)
class Queue:
    """A ClusterQueue as the scheduler sees it. `flavors` is ordered: per covered resource, the flavors to try."""

    name: str
    cohort: str | None
    strategy: str
    flavors: tuple[tuple[str, tuple[str, ...]], ...]  # (flavor, covered resources) in order of the resource groups
    nominal: dict[FlavorResource, float]
    borrowing_limit: dict[FlavorResource, float | None]
    within_queue: str = "Never"
    reclaim_within_cohort: str = "Never"


def cluster_queue(obj: dict[str, Any]) -> Queue:
    spec = obj.get("spec") or {}
    flavors: list[tuple[str, tuple[str, ...]]] = []
    nominal: dict[FlavorResource, float] = {}
    borrowing: dict[FlavorResource, float | None] = {}
    for group in spec.get("resourceGroups") or ():
        covered = tuple(group.get("coveredResources") or ())
        for flavor in group.get("flavors") or ():
            flavors.append((flavor["name"], covered))
            for resource in flavor.get("resources") or ():
                key = (flavor["name"], resource["name"])
                nominal[key] = quantity(resource.get("nominalQuota", 0))
                limit = resource.get("borrowingLimit")
                borrowing[key] = None if limit is None else quantity(limit)
    preemption = spec.get("preemption") or {}
    return Queue(name=obj["metadata"]["name"], cohort=spec.get("cohort") or None,
                 strategy=spec.get("queueingStrategy") or BEST_EFFORT_FIFO, flavors=tuple(flavors),
                 nominal=nominal, borrowing_limit=borrowing,
                 within_queue=preemption.get("withinClusterQueue") or "Never",
                 reclaim_within_cohort=preemption.get("reclaimWithinCohort") or "Never")


@dataclass(frozen=True)
class Pending:
    key: tuple[str, str]  # (namespace, name) of the Workload
    queue: str  # its ClusterQueue
    priority: int
    order: tuple[str, int]  # creation timestamp, then a tie-breaker (the order it was seen in)
    requests: dict[str, float]  # resource -> total over its pod sets


@dataclass(frozen=True)
class Admitted:
    key: tuple[str, str]
    queue: str
    priority: int
    order: tuple[str, int]  # when it was admitted (RFC 3339, then a sequence number): newest preempted first
    usage: dict[FlavorResource, float]


@dataclass
class Decision:
    admit: list[tuple[Pending, dict[str, str]]] = field(default_factory=list)  # with its flavor per resource
    preempt: list[tuple[Admitted, str, Pending]] = field(default_factory=list)  # victim, reason, preemptor


class _Usage:
    """Quota in use per queue and (flavor, resource), with the cohorts' totals."""

    def __init__(self, queues: dict[str, Queue], admitted: Iterable[Admitted]) -> None:
        self.queues = queues
        self.used: dict[str, dict[FlavorResource, float]] = {name: {} for name in queues}
        for workload in admitted:
            if workload.queue in self.used:
                self.add(workload.queue, workload.usage, 1)

    def add(self, queue: str, usage: dict[FlavorResource, float], sign: int) -> None:
        used = self.used[queue]
        for key, amount in usage.items():
            used[key] = used.get(key, 0.0) + sign * amount

    def peers(self, queue: Queue) -> list[Queue]:
        if queue.cohort is None:
            return [queue]
        return [q for q in self.queues.values() if q.cohort == queue.cohort]

    def fits(self, queue: Queue, key: FlavorResource, amount: float) -> bool:
        """Within its nominal quota plus what it may borrow, and within what its cohort has left: quota a peer
        borrowed is not free again until the peer releases it (or is preempted to reclaim it)."""
        used = self.used[queue.name].get(key, 0.0) + amount
        nominal = queue.nominal.get(key, 0.0)
        if queue.cohort is None:
            return used <= nominal
        limit = queue.borrowing_limit.get(key)
        if limit is not None and used > nominal + limit:
            return False
        peers = self.peers(queue)
        return sum(self.used[q.name].get(key, 0.0) for q in peers) + amount <= sum(q.nominal.get(key, 0.0)
                                                                                   for q in peers)

    def assign(self, queue: Queue, requests: dict[str, float]) -> dict[str, str] | None:
        """The flavor of each requested resource, the first of the queue's flavors where all of them fit."""
        for flavor, covered in queue.flavors:
            if not all(resource in covered for resource in requests):
                continue
            if all(self.fits(queue, (flavor, resource), amount) for resource, amount in requests.items()):
                return {resource: flavor for resource in requests}
        return None

    def within_nominal(self, queue: Queue, requests: dict[str, float]) -> bool:
        return any(all(self.used[queue.name].get((flavor, r), 0.0) + a <= queue.nominal.get((flavor, r), 0.0)
                       for r, a in requests.items())
                   for flavor, covered in queue.flavors if all(r in covered for r in requests))

    def borrowing(self, queue: Queue, usage: dict[FlavorResource, float]) -> bool:
        return any(self.used[queue.name].get(key, 0.0) > queue.nominal.get(key, 0.0) for key in usage)


def uncovered(queue: Queue, requests: dict[str, float]) -> list[str]:
    """Requested resources no resource group of the queue covers: such a workload is never admitted there."""
    covered = {resource for _, resources in queue.flavors for resource in resources}
    return sorted(resource for resource in requests if resource not in covered)


def usage_of(requests: dict[str, float], flavors: dict[str, str]) -> dict[FlavorResource, float]:
    return {(flavors[resource], resource): amount for resource, amount in requests.items()}


def schedule(queues: dict[str, Queue], pending: Iterable[Pending], admitted: list[Admitted]) -> Decision:
    usage = _Usage(queues, admitted)
    decision = Decision()
    blocked: set[str] = set()  # StrictFIFO queues whose head waits, queues waiting for their victims to leave
    # per queue, requests that found neither quota nor victims this cycle: usage only grows within a cycle and the
    # order goes down in priority, so a request asking at least as much of each resource cannot fit either
    failed: dict[str, list[dict[str, float]]] = {}
    preempted: set[tuple[str, str]] = set()
    for workload in sorted(pending, key=lambda w: (-w.priority, w.order)):
        queue = queues.get(workload.queue)
        if queue is None or queue.name in blocked or _dominates_failed(workload.requests, failed.get(queue.name)):
            continue
        flavors = usage.assign(queue, workload.requests)
        if flavors is not None:
            usage.add(queue.name, usage_of(workload.requests, flavors), 1)
            decision.admit.append((workload, flavors))
            continue
        victims = []
        if queue.within_queue != "Never" or queue.reclaim_within_cohort != "Never":
            victims = preemption_victims(queue, workload, usage, [a for a in admitted if a.key not in preempted])
        for victim, reason in victims:
            preempted.add(victim.key)
            decision.preempt.append((victim, reason, workload))
        if victims or queue.strategy == STRICT_FIFO:
            blocked.add(queue.name)
        else:
            failed.setdefault(queue.name, []).append(workload.requests)
    return decision


def _dominates_failed(requests: dict[str, float], failed: list[dict[str, float]] | None) -> bool:
    return any(all(requests.get(name, 0.0) >= amount for name, amount in smaller.items()) for smaller in failed or ())


def preemption_victims(queue: Queue, workload: Pending, usage: _Usage,
                       admitted: list[Admitted]) -> list[tuple[Admitted, str]]:
    """The fewest admitted workloads (lowest priority first, then newest) whose removal lets `workload` fit, with
    Kueue's Preempted reason; none when no such set exists under the queue's preemption policies."""
    candidates: list[tuple[Admitted, str]] = []
    if queue.within_queue in ("LowerPriority", "LowerOrNewerEqualPriority"):
        candidates += [(a, "InClusterQueue") for a in admitted if a.queue == queue.name and (
            a.priority < workload.priority or (queue.within_queue == "LowerOrNewerEqualPriority"
                                               and a.priority == workload.priority and a.order > workload.order))]
    if queue.reclaim_within_cohort != "Never" and queue.cohort is not None and usage.within_nominal(
            queue, workload.requests):
        candidates += [(a, "InCohortReclamation") for a in admitted
                       if a.queue != queue.name and queues_cohort(usage, a.queue) == queue.cohort
                       and usage.borrowing(usage.queues[a.queue], a.usage)
                       and (queue.reclaim_within_cohort == "Any" or a.priority < workload.priority)]
    candidates.sort(key=lambda c: c[0].order, reverse=True)  # newest first, then (stable) lowest priority first
    candidates.sort(key=lambda c: c[0].priority)
    chosen: list[tuple[Admitted, str]] = []
    for victim, reason in candidates:
        if usage.assign(queue, workload.requests) is not None:
            break
        if reason == "InCohortReclamation" and not usage.borrowing(usage.queues[victim.queue], victim.usage):
            continue  # that peer no longer borrows: its nominal quota is its own
        usage.add(victim.queue, victim.usage, -1)
        chosen.append((victim, reason))
    fits = usage.assign(queue, workload.requests) is not None
    for victim, _ in chosen:  # the cycle goes on with the victims still holding their quota
        usage.add(victim.queue, victim.usage, 1)
    return chosen if fits else []


def queues_cohort(usage: _Usage, name: str) -> str | None:
    queue = usage.queues.get(name)
    return queue.cohort if queue is not None else None

