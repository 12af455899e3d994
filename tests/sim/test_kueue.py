"""Kueue in the simulator: Jobs labelled with a LocalQueue wait suspended for quota, are admitted by ClusterQueues
within nominal quota plus borrowing in their cohort, in FIFO order, and lower-priority ones are preempted for
higher-priority ones. Driven through the in-process store on the virtual clock (controller_harness)."""

from __future__ import annotations

from typing import Any

from controller_harness import CORE, Sim, condition_status, now, phase, profile, run, running_sim, wait_for

KUEUE = [*CORE, "pytest_topsail.sim.controllers.kueue:KueueController"]
GROUP = "kueue.x-k8s.io"
API = f"{GROUP}/v1beta1"


def flavor(name: str = "default-flavor", **spec: Any) -> dict:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(name: str, gpus: int, *, cohort: str | None = None, borrowing_limit: int | None = None,
                  strategy: str = "StrictFIFO", preemption: dict | None = None) -> dict:
    resource: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": gpus}
    if borrowing_limit is not None:
        resource["borrowingLimit"] = borrowing_limit
    spec: dict[str, Any] = {"namespaceSelector": {}, "queueingStrategy": strategy, "resourceGroups": [
        {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "default-flavor", "resources": [resource]}]}]}
    if cohort:
        spec["cohort"] = cohort
    if preemption:
        spec["preemption"] = preemption
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, namespace: str, cq: str) -> dict:
    return {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cq}}


def gpu_job(name: str, namespace: str, queue: str | None, seconds: float, *, priority_class: str | None = None,
            gpus: int = 1) -> dict:
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{
        "name": "train", "image": "registry.example/train:1",
        "resources": {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace,
                                                                   "labels": labels},
            "spec": {"template": {"metadata": {"annotations": {"sim.topsail.io/duration-seconds": str(seconds)}},
                                  "spec": pod_spec}}}


class QuotaWatch:
    """At every commit of a Workload, the GPUs each ClusterQueue holds (quota reserved, not finished); the order in
    which Workloads first got quota, with the loop's time."""

    def __init__(self, store: Any) -> None:
        self.holding: dict[tuple[str, str], tuple[str, float]] = {}  # workload -> (cluster queue, gpus)
        self.peak: dict[str, float] = {}
        self.peak_total = 0.0
        self.admitted: list[tuple[float, str, str]] = []  # (time, namespace, job name)
        self.evicted: list[str] = []
        store.add_listener(self)

    def __call__(self, event_type: str, rtype: Any, obj: dict) -> None:
        if rtype.kind != "Workload":
            return
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        reserved = condition_status(obj, "QuotaReserved") == "True" and condition_status(obj, "Finished") != "True"
        if reserved and event_type != "DELETED":
            admission = obj["status"]["admission"]
            gpus = sum(float(a["resourceUsage"]["nvidia.com/gpu"]) for a in admission["podSetAssignments"])
            if key not in self.holding:
                job = obj["metadata"]["ownerReferences"][0]["name"]
                self.admitted.append((now(), key[0], job))
            self.holding[key] = (admission["clusterQueue"], gpus)
        else:
            if key in self.holding and condition_status(obj, "Evicted") == "True":
                self.evicted.append(obj["metadata"]["ownerReferences"][0]["name"])
            self.holding.pop(key, None)
        used: dict[str, float] = {}
        for cq, gpus in self.holding.values():
            used[cq] = used.get(cq, 0.0) + gpus
        for cq, gpus in used.items():
            self.peak[cq] = max(self.peak.get(cq, 0.0), gpus)
        self.peak_total = max(self.peak_total, sum(used.values()))


def _setup(sim: Any, queues: list[dict], locals_: list[dict]) -> dict[str, Any]:
    kinds = {plural: sim.store.resource_type(plural, GROUP)
             for plural in ("resourceflavors", "clusterqueues", "localqueues", "workloads")}
    sim.store.create(kinds["resourceflavors"], flavor())
    for cq in queues:
        sim.store.create(kinds["clusterqueues"], cq)
    for lq in locals_:
        sim.store.create(sim.store.resource_type("namespaces"), {"metadata": {"name": lq["metadata"]["namespace"]}})
        sim.store.create(kinds["localqueues"], lq)
    return kinds


def test_two_teams_in_a_cohort_share_24_gpus_within_quota_and_borrowing_in_fifo_order():
    """The issue's scenario: ClusterQueues of 16 and 8 GPUs in a cohort, 200 one-GPU jobs from 2 teams."""
    teams = {"team-a": ("cq-a", 16, 8), "team-b": ("cq-b", 8, 4)}  # namespace: (queue, nominal, borrowing limit)

    async def scenario():
        prof = profile(node_pools=[{"name": "gpu", "count": 4, "gpu_profile": "a100"}])  # 32 GPUs, quota 24
        async with running_sim(prof, KUEUE) as sim:
            kinds = _setup(sim, [cluster_queue(cq, gpus, cohort="research", borrowing_limit=limit)
                                 for cq, gpus, limit in teams.values()],
                           [local_queue("queue", ns, cq) for ns, (cq, _, _) in teams.items()])
            watch = QuotaWatch(sim.store)
            submitted: dict[str, list[str]] = {ns: [] for ns in teams}
            for index in range(200):
                namespace = "team-a" if index % 3 else "team-b"  # 133 and 67 jobs
                name = f"job-{index:03d}"
                sim.store.create(sim.jobs, gpu_job(name, namespace, "queue", 5 + index % 7))
                submitted[namespace].append(name)
            first = sim.store.get(sim.jobs, "team-a", "job-001")
            await wait_for(lambda: all(condition_status(w, "Finished") == "True"
                                       for w in sim.store.list(kinds["workloads"])) and
                           len(sim.store.list(kinds["workloads"])) == 200, "every workload finished", timeout=600)
            cqs = {cq["metadata"]["name"]: cq for cq in sim.store.list(kinds["clusterqueues"])}
            return watch, submitted, first, sim.store.list(kinds["workloads"]), cqs, sim.store.list(sim.jobs)

    watch, submitted, first, workloads, cqs, jobs = run(scenario, virtual_time=True)
    assert first["spec"]["suspend"] is True  # the webhook suspended it at creation
    assert len(watch.admitted) == 200 and not watch.evicted
    for namespace, (cq, nominal, limit) in teams.items():
        assert watch.peak[cq] <= nominal + limit, (cq, watch.peak)
        order = [job for _, ns, job in watch.admitted if ns == namespace]
        assert order == submitted[namespace]  # StrictFIFO: admitted in submission order
    assert watch.peak_total == 24  # the cohort's quota was used in full, never more
    assert watch.peak["cq-b"] > 8  # team-b borrowed team-a's idle quota once team-a's backlog was gone
    assert all(j["status"].get("succeeded") == 1 and j["spec"]["suspend"] is False for j in jobs)
    workload = workloads[0]
    assert workload["metadata"]["name"].startswith("job-job-")
    assert workload["spec"]["podSets"][0]["name"] == "main" and workload["spec"]["podSets"][0]["count"] == 1
    types = [c["type"] for c in workload["status"]["conditions"]]
    assert types.index("QuotaReserved") < types.index("Admitted") < types.index("Finished")
    assert workload["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"nvidia.com/gpu": "default-flavor"}
    assert all(c.get("lastTransitionTime") for c in workload["status"]["conditions"])
    assert cqs["cq-a"]["status"]["pendingWorkloads"] == 0 and cqs["cq-a"]["status"]["admittedWorkloads"] == 0


def test_a_high_priority_job_preempts_a_low_priority_one_when_the_quota_is_full():
    async def scenario():
        async with running_sim(profile(), KUEUE) as sim:
            kinds = _setup(sim, [cluster_queue("cq", 4, preemption={"withinClusterQueue": "LowerPriority"})],
                           [local_queue("queue", "team", "cq")])
            classes = sim.store.resource_type("priorityclasses", "scheduling.k8s.io")
            sim.store.create(classes, {"metadata": {"name": "urgent"}, "value": 1000})
            watch = QuotaWatch(sim.store)
            for index in range(4):
                sim.store.create(sim.jobs, gpu_job(f"low-{index}", "team", "queue", 100))
            await wait_for(lambda: len(watch.admitted) == 4, "4 low-priority jobs admitted")
            await wait_for(lambda: all(phase(p) == "Running" for p in sim.store.list(sim.pods, "team"))
                           and len(sim.store.list(sim.pods, "team")) == 4, "their pods running")
            preempted_at = now()
            sim.store.create(sim.jobs, gpu_job("urgent", "team", "queue", 10, priority_class="urgent"))
            await wait_for(lambda: any(job == "urgent" for _, _, job in watch.admitted), "urgent admitted")
            victim = watch.evicted[0]
            victim_job = sim.store.get(sim.jobs, "team", victim)
            evicted = victim_workload(sim, kinds, victim)
            victim_pods = await wait_for(lambda: not any(p["metadata"]["labels"]["job-name"] == victim
                                                         for p in sim.store.list(sim.pods, "team")) or None,
                                         "the victim's pods deleted")
            urgent_done = await wait_for(lambda: (sim.store.get(sim.jobs, "team", "urgent")["status"].get(
                "succeeded") and now()), "urgent job done")
            await wait_for(lambda: sum(1 for _, _, job in watch.admitted if job == victim) == 2, "victim readmitted")
            return (watch, victim_job, victim_pods, preempted_at, urgent_done, evicted,
                    victim_workload(sim, kinds, victim), sim.events_about(victim, "Suspended", "team"))

    watch, victim_job, _, preempted_at, urgent_done, evicted, readmitted, suspended = run(scenario, virtual_time=True)
    assert watch.peak["cq"] == 4  # never more than the quota, preemptor included
    assert len(watch.evicted) == 1 and watch.evicted[0].startswith("low-")
    assert watch.evicted[0] == "low-3"  # the most recently admitted of the lowest priority
    assert victim_job["spec"]["suspend"] is True and suspended
    assert urgent_done - preempted_at < 30  # it ran at once, not after the 100 s jobs
    reasons = {c["type"]: (c["status"], c.get("reason")) for c in evicted["status"]["conditions"]}
    assert reasons["Evicted"] == ("True", "Preempted") and reasons["Preempted"] == ("True", "InClusterQueue")
    assert reasons["QuotaReserved"] == reasons["Admitted"] == ("False", "Preempted")
    assert reasons["Requeued"] == ("True", "Preempted") and "admission" not in evicted["status"]
    # requeued, then admitted again once the urgent job finished
    reasons = {c["type"]: (c["status"], c.get("reason")) for c in readmitted["status"]["conditions"]}
    assert reasons["QuotaReserved"] == ("True", "QuotaReserved") and reasons["Evicted"][0] == "False"


def victim_workload(sim: Any, kinds: dict[str, Any], job: str) -> dict:
    return next(w for w in sim.store.list(kinds["workloads"], "team")
                if w["metadata"]["ownerReferences"][0]["name"] == job)


def test_jobs_without_a_queue_name_are_not_managed():
    async def scenario():
        async with running_sim(profile(), KUEUE) as sim:
            sim.store.create(sim.jobs, gpu_job("plain", "default", None, 1))
            job = await wait_for(lambda: (plain := sim.store.get(sim.jobs, "default", "plain")).get(
                "status", {}).get("succeeded") and plain, "plain job done")
            return job, sim.store.list(sim.store.resource_type("workloads", GROUP))

    job, workloads = run(scenario, virtual_time=True)
    assert job["spec"]["suspend"] is False and not workloads


def test_kueue_metrics_count_admissions_and_time_the_wait_in_kueue_buckets():
    from prometheus_client import generate_latest

    from pytest_topsail.sim.controllers import start_controllers
    from pytest_topsail.sim.registry.store import Store

    async def scenario():
        prof = profile()
        store = Store(seed=prof.seed)
        controllers = await start_controllers(store, prof, KUEUE)
        try:
            sim = Sim(store)
            kinds = _setup(sim, [cluster_queue("cq", 2)], [local_queue("queue", "team", "cq")])
            for index in range(4):
                store.create(sim.jobs, gpu_job(f"job-{index}", "team", "queue", 3))
            await wait_for(lambda: sum(condition_status(w, "Finished") == "True"
                                       for w in store.list(kinds["workloads"])) == 4, "4 workloads finished")
            await wait_for(lambda: store.get(kinds["clusterqueues"], None, "cq")["status"]["admittedWorkloads"] == 0,
                           "the queue's status updated")
            return generate_latest(controllers["kueue"].metrics.registry).decode()
        finally:
            await controllers.stop()

    text = run(scenario, virtual_time=True)
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line and not line.startswith("#")}
    assert samples['kueue_admitted_workloads_total{cluster_queue="cq"}'] == 4
    assert samples['kueue_admission_wait_time_seconds_bucket{cluster_queue="cq",le="1.0"}'] == 2  # at once
    assert samples['kueue_admission_wait_time_seconds_bucket{cluster_queue="cq",le="5.0"}'] == 4  # after a 3 s job
    assert samples['kueue_admission_wait_time_seconds_bucket{cluster_queue="cq",le="10240.0"}'] == 4
    assert samples['kueue_pending_workloads{cluster_queue="cq",status="active"}'] == 0
    labels = 'cluster_queue="cq",cohort="",flavor="default-flavor",resource="nvidia.com/gpu"'
    assert samples[f"kueue_cluster_queue_nominal_quota{{{labels}}}"] == 2
    assert samples[f"kueue_cluster_queue_resource_usage{{{labels}}}"] == 0


def pytorchjob(name: str, namespace: str, seconds: float) -> dict:
    template = {"metadata": {"annotations": {"sim.topsail.io/duration-seconds": str(seconds)}},
                "spec": {"containers": [{"name": "pytorch", "image": "registry.example/train:1", "resources": {
                    "requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "queue"}},
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template}}}}


def test_pytorchjobs_wait_suspended_and_are_admitted_as_one_workload_of_their_replicas():
    async def scenario():
        specs = [*KUEUE[:-1], "pytest_topsail.sim.controllers.pytorchjob:PyTorchJobController", KUEUE[-1]]
        async with running_sim(profile(), specs) as sim:
            kinds = _setup(sim, [cluster_queue("cq", 4)], [local_queue("queue", "team", "cq")])
            jobs = sim.store.resource_type("pytorchjobs", "kubeflow.org")
            watch = QuotaWatch(sim.store)
            for name in ("first", "second"):  # 3 GPUs each: the second waits for the first
                sim.store.create(jobs, pytorchjob(name, "team", 5))
            second = sim.store.get(jobs, "team", "second")
            done = await wait_for(lambda: all(condition_status(j, "Succeeded") == "True"
                                              for j in sim.store.list(jobs, "team")) and sim.store.list(jobs, "team"),
                                  "both PyTorchJobs succeeded")
            return watch, second, done, sim.store.list(kinds["workloads"], "team")

    watch, second, done, workloads = run(scenario, virtual_time=True)
    assert second["spec"]["runPolicy"]["suspend"] is True
    assert watch.peak["cq"] == 3  # never both at once
    first_admitted, second_admitted = (when for when, _, _ in watch.admitted)
    assert second_admitted - first_admitted > 4.9  # the second started once the first finished (5 s)
    workload = next(w for w in workloads if w["metadata"]["ownerReferences"][0]["name"] == "first")
    assert workload["metadata"]["name"].startswith("pytorchjob-first-")
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("master", 1), ("worker", 2)]
    assert {p["name"]: p["resourceUsage"] for p in workload["status"]["admission"]["podSetAssignments"]} == {
        "master": {"nvidia.com/gpu": "1"}, "worker": {"nvidia.com/gpu": "2"}}
    assert all(condition_status(w, "Finished") == "True" for w in workloads)
    assert all(j["spec"]["runPolicy"]["suspend"] is False for j in done)
