"""Job, Deployment, Service and PersistentVolumeClaim controllers, driven through the in-process store."""

from __future__ import annotations

import copy
import ipaddress

import pytest
from controller_harness import condition_status, phase, profile, run, running_sim, wait_for


def _job(name: str, command: list[str] | None, *, completions: int | None = None, parallelism: int = 1,
         backoff_limit: int | None = None) -> dict:
    container: dict = {"name": "work", "image": "registry.example/job:1"}
    if command is not None:
        container["command"] = command
    spec: dict = {"parallelism": parallelism,
                  "template": {"metadata": {"labels": {"app": name}},
                               "spec": {"containers": [container], "restartPolicy": "Never"}}}
    if completions is not None:
        spec["completions"] = completions
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _deployment(name: str, replicas: int, image: str = "registry.example/web:1") -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": image}]}}}}


def _job_pods(sim, name: str) -> list[dict]:
    return sim.store.list(sim.pods, "default", label_selector={"job-name": name})


def _finished_condition(job: dict) -> dict | None:
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return cond
    return None


def test_job_runs_completions_with_at_most_parallelism_pods_at_once():
    async def scenario():
        async with running_sim(profile()) as sim:
            sim.store.create(sim.jobs, _job("train", ["sleep", "0.15"], completions=5, parallelism=2))
            most_active = 0

            def done():
                nonlocal most_active
                running = [p for p in _job_pods(sim, "train") if phase(p) not in ("Succeeded", "Failed")]
                most_active = max(most_active, len(running))
                job = sim.store.get(sim.jobs, "default", "train")
                return _finished_condition(job) and job

            job = await wait_for(done, "job finished")
            return job, most_active, _job_pods(sim, "train"), sim.event_reasons("train")

    job, most_active, pods, reasons = run(scenario, virtual_time=True)
    assert _finished_condition(job)["type"] == "Complete"
    assert job["status"]["succeeded"] == 5
    assert "active" not in job["status"]
    assert job["status"]["completionTime"] >= job["status"]["startTime"]
    assert most_active == 2
    assert len(pods) == 5 and all(phase(p) == "Succeeded" for p in pods)
    assert all(p["metadata"]["name"].startswith("train-") for p in pods)
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "Job" for p in pods)
    assert reasons.count("SuccessfulCreate") == 5 and reasons[-1] == "Completed"


def test_job_fails_once_more_pods_failed_than_its_backoff_limit():
    async def scenario():
        async with running_sim(profile()) as sim:
            sim.store.create(sim.jobs, _job("flaky", ["sh", "-c", "exit 1"], completions=3, backoff_limit=1))
            job = await wait_for(lambda: _finished_condition(sim.store.get(sim.jobs, "default", "flaky")) and
                                 sim.store.get(sim.jobs, "default", "flaky"), "job finished")
            return job, _job_pods(sim, "flaky"), sim.event_reasons("flaky")

    job, pods, reasons = run(scenario)
    cond = _finished_condition(job)
    assert (cond["type"], cond["reason"]) == ("Failed", "BackoffLimitExceeded")
    assert job["status"]["failed"] == 2
    assert "succeeded" not in job["status"]
    assert sum(phase(p) == "Failed" for p in pods) == 2
    assert "BackoffLimitExceeded" in reasons


def test_work_queue_job_without_completions_ends_when_its_pods_succeeded():
    prof = profile(stages={"complete": {"delay_ms": 100, "jitter_ms": 1000}})  # workers end at different times

    async def scenario():
        async with running_sim(prof) as sim:
            sim.store.create(sim.jobs, _job("queue", None, parallelism=3))
            job = await wait_for(lambda: _finished_condition(sim.store.get(sim.jobs, "default", "queue")) and
                                 sim.store.get(sim.jobs, "default", "queue"), "job finished")
            pods = _job_pods(sim, "queue")
            ends = sorted(sim.timeline.first("Pod", p["metadata"]["name"], lambda s: s.startswith("Succeeded"))
                          for p in pods)
            return job, pods, ends

    job, pods, ends = run(scenario, virtual_time=True)
    assert "completions" not in job["spec"]
    assert _finished_condition(job)["type"] == "Complete"
    assert job["status"]["succeeded"] == 3
    assert len(pods) == 3  # no pod added after the first one succeeded
    assert ends[0] < ends[-1]


def test_job_pod_without_a_duration_runs_for_the_complete_stage():
    prof = profile(stages={"complete": {"delay_ms": 300}})

    async def scenario():
        async with running_sim(prof) as sim:
            sim.store.create(sim.jobs, _job("plain", None))
            job = await wait_for(lambda: _finished_condition(sim.store.get(sim.jobs, "default", "plain")) and
                                 sim.store.get(sim.jobs, "default", "plain"), "job finished")
            pod = _job_pods(sim, "plain")[0]["metadata"]["name"]
            ran_for = sim.timeline.first("Pod", pod, lambda s: s.startswith("Succeeded")) - \
                sim.timeline.first("Pod", pod, lambda s: s.startswith("Running"))
            return job, ran_for

    job, ran_for = run(scenario, virtual_time=True)
    assert ran_for == pytest.approx(0.3)  # float sums of virtual times
    assert _finished_condition(job)["type"] == "Complete"


def test_deployment_becomes_available_and_follows_replicas():
    async def scenario():
        async with running_sim(profile()) as sim:
            sim.store.create(sim.deployments, _deployment("web", 3))

            def status():
                return sim.store.get(sim.deployments, "default", "web").get("status") or {}

            available = await wait_for(lambda: status().get("availableReplicas") == 3 and
                                       sim.store.get(sim.deployments, "default", "web"), "3 available")
            first_pods = sim.store.list(sim.pods, "default", label_selector={"app": "web"})
            scaled = copy.deepcopy(sim.store.get(sim.deployments, "default", "web"))  # the store hands out its own
            scaled["spec"]["replicas"] = 1
            sim.store.update(sim.deployments, scaled)
            await wait_for(lambda: len(sim.store.list(sim.pods, "default", label_selector={"app": "web"})) == 1,
                           "one pod left")
            await wait_for(lambda: status().get("replicas") == 1, "status replicas 1")
            return available, first_pods, status()

    available, first_pods, scaled_status = run(scenario)
    status = available["status"]
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (3, 3, 3)
    assert condition_status(available, "Available") == "True"
    assert len(first_pods) == 3 and all(phase(p) == "Running" for p in first_pods)
    assert all("pod-template-hash" in p["metadata"]["labels"] for p in first_pods)
    assert scaled_status["availableReplicas"] == 1


def test_deployment_rollout_replaces_pods_of_the_old_template():
    async def scenario():
        async with running_sim(profile()) as sim:
            sim.store.create(sim.deployments, _deployment("api", 2))
            await wait_for(lambda: (sim.store.get(sim.deployments, "default", "api").get("status") or {})
                           .get("availableReplicas") == 2, "2 available")
            old = {p["metadata"]["name"] for p in sim.store.list(sim.pods, "default")}
            deployment = copy.deepcopy(sim.store.get(sim.deployments, "default", "api"))
            deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example/web:2"
            sim.store.update(sim.deployments, deployment)

            def rolled_out():
                pods = sim.store.list(sim.pods, "default", label_selector={"app": "api"})
                names = {p["metadata"]["name"] for p in pods}
                return len(pods) == 2 and not names & old and all(phase(p) == "Running" for p in pods) and pods

            return await wait_for(rolled_out, "new pods only")

    pods = run(scenario)
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"registry.example/web:2"}


def test_services_get_distinct_cluster_ips_except_headless_and_external_name():
    def service(name: str, **spec) -> dict:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
                "spec": {"ports": [{"port": 80}], **spec}}

    async def scenario():
        async with running_sim(profile()) as sim:
            for name in ("a", "b"):
                sim.store.create(sim.services, service(name, selector={"app": name}))
            sim.store.create(sim.services, service("headless", clusterIP="None"))
            sim.store.create(sim.services, service("external", type="ExternalName", externalName="example.com"))
            sim.store.create(sim.services, service("lb", type="LoadBalancer"))
            await wait_for(lambda: all(sim.store.get(sim.services, "default", n)["spec"].get("clusterIP")
                                       for n in ("a", "b", "lb")), "cluster IPs")
            await wait_for(lambda: sim.store.get(sim.services, "default", "lb").get("status", {}).get("loadBalancer"),
                           "load balancer ingress")
            return {s["metadata"]["name"]: s for s in sim.store.list(sim.services, "default")}

    services = run(scenario)
    ips = [services[n]["spec"]["clusterIP"] for n in ("a", "b", "lb")]
    assert len(set(ips)) == 3
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network("10.96.0.0/12") for ip in ips)
    assert services["a"]["spec"]["type"] == "ClusterIP"
    assert services["headless"]["spec"]["clusterIP"] == "None"
    assert not services["external"]["spec"].get("clusterIP")
    assert services["lb"]["status"]["loadBalancer"]["ingress"][0]["ip"]


def test_claims_are_bound_to_a_new_volume_that_goes_away_with_the_claim():
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}}}

    async def scenario():
        async with running_sim(profile(volumes={"bind": {"delay_ms": 20}, "storage_class": "fast"})) as sim:
            sim.store.create(sim.claims, claim)
            bound = await wait_for(lambda: phase(sim.store.get(sim.claims, "default", "data")) == "Bound" and
                                   sim.store.get(sim.claims, "default", "data"), "claim Bound")
            volume = sim.store.get(sim.volumes, None, bound["spec"]["volumeName"])
            sim.store.delete(sim.claims, "default", "data")
            await wait_for(lambda: not sim.store.list(sim.volumes), "volume deleted")
            return bound, volume, sim.event_reasons("data")

    bound, volume, reasons = run(scenario)
    assert bound["status"]["capacity"] == {"storage": "5Gi"}
    assert bound["spec"]["storageClassName"] == "fast"
    assert volume["spec"]["claimRef"]["name"] == "data"
    assert volume["spec"]["capacity"] == {"storage": "5Gi"}
    assert "ProvisioningSucceeded" in reasons
