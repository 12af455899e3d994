"""Kueue's admission decisions (controllers/kueue_admission.py), pure: queueing strategies, borrowing in a cohort,
preemption within a queue and reclaim within the cohort."""

from __future__ import annotations

from pytest_topsail.sim.controllers.kueue_admission import Admitted, Pending, Queue, cluster_queue, schedule

GPU = "nvidia.com/gpu"


def queue(name: str, gpus: int, *, cohort: str | None = None, limit: int | None = None,
          strategy: str = "BestEffortFIFO", within: str = "Never", reclaim: str = "Never") -> Queue:
    resource: dict = {"name": GPU, "nominalQuota": gpus}
    if limit is not None:
        resource["borrowingLimit"] = limit
    return cluster_queue({"metadata": {"name": name}, "spec": {
        "cohort": cohort, "queueingStrategy": strategy,
        "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": reclaim},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "f", "resources": [resource]}]}]}})


def pending(name: str, cq: str, gpus: int, order: int, priority: int = 0) -> Pending:
    return Pending(("ns", name), cq, priority, ("2026-01-01T00:00:00Z", order), {GPU: float(gpus)})


def admitted(name: str, cq: str, gpus: int, order: int, priority: int = 0) -> Admitted:
    return Admitted(("ns", name), cq, priority, ("", order), {("f", GPU): float(gpus)})


def names(decision) -> list[str]:
    return [workload.key[1] for workload, _ in decision.admit]


def test_strict_fifo_head_blocks_its_queue_best_effort_goes_on():
    work = [pending("big", "q", 4, 1), pending("small", "q", 1, 2)]
    taken = [admitted("running", "q", 2, 1)]
    assert names(schedule({"q": queue("q", 4, strategy="StrictFIFO")}, work, taken)) == []
    assert names(schedule({"q": queue("q", 4)}, work, taken)) == ["small"]


def test_priority_then_creation_order():
    work = [pending("old", "q", 1, 1), pending("new-urgent", "q", 1, 3, priority=10), pending("mid", "q", 1, 2)]
    assert names(schedule({"q": queue("q", 2)}, work, [])) == ["new-urgent", "old"]


def test_borrowing_is_capped_by_the_limit_and_by_what_the_cohort_has_left():
    queues = {"a": queue("a", 4, cohort="c", limit=2), "b": queue("b", 4, cohort="c")}
    work = [pending(f"a{i}", "a", 1, i) for i in range(8)]
    assert len(names(schedule(queues, work, []))) == 6  # 4 nominal + 2 borrowed
    assert len(names(schedule(queues, work, [admitted("b0", "b", 3, 1)]))) == 5  # b's idle quota is 1
    assert names(schedule({"a": queue("a", 4)}, work, [])) == ["a0", "a1", "a2", "a3"]  # no cohort: no borrowing


def test_lower_priority_workloads_of_the_queue_are_preempted_newest_first():
    queues = {"q": queue("q", 3, within="LowerPriority")}
    taken = [admitted("low-old", "q", 1, 1), admitted("low-new", "q", 1, 2), admitted("high", "q", 1, 3, 5)]
    decision = schedule(queues, [pending("urgent", "q", 2, 9, priority=10)], taken)
    assert [(v.key[1], reason) for v, reason, _ in decision.preempt] == [("low-new", "InClusterQueue"),
                                                                         ("low-old", "InClusterQueue")]
    assert decision.admit == []  # admitted once the victims released their quota
    none = schedule(queues, [pending("peer", "q", 1, 9, priority=0)], taken)
    assert none.preempt == [] and none.admit == []  # equal priority preempts nobody


def test_reclaim_takes_back_lent_quota_from_a_borrowing_peer():
    queues = {"a": queue("a", 4, cohort="c", reclaim="Any"), "b": queue("b", 4, cohort="c")}
    taken = [admitted(f"b{i}", "b", 1, i) for i in range(8)]  # b borrows all of a's quota
    decision = schedule(queues, [pending("a0", "a", 1, 20)], taken)
    assert [(v.key[1], reason) for v, reason, _ in decision.preempt] == [("b7", "InCohortReclamation")]
    without = schedule({**queues, "a": queue("a", 4, cohort="c")}, [pending("a0", "a", 1, 20)], taken)
    assert without.preempt == [] and without.admit == []
