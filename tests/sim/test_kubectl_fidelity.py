"""kubectl 1.32 against the simulator where it relies on the standard API: groups and kinds, access reviews,
/metrics, -o wide, node leases, eviction, and the parts the simulator answers as not simulated."""

from __future__ import annotations

import json
import shutil
import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}, labels: {{app: wide}}}}
spec:
  containers: [{{name: main, image: busybox, command: [sleep, infinity]}}]
"""


@pytest.fixture(scope="module")
def core(cluster_sim: Any) -> client.CoreV1Api:
    return client.CoreV1Api(cluster_sim.api_client())


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    name = f"k-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def test_standard_groups_and_kinds_are_served(cluster_sim: Any) -> None:
    listed = cluster_sim.kubectl("api-resources", "--no-headers", "-o", "name").stdout.split()
    for resource in ("replicationcontrollers", "poddisruptionbudgets.policy", "horizontalpodautoscalers.autoscaling",
                     "networkpolicies.networking.k8s.io", "ingresses.networking.k8s.io",
                     "endpointslices.discovery.k8s.io", "events.events.k8s.io", "apiservices.apiregistration.k8s.io",
                     "selfsubjectaccessreviews.authorization.k8s.io", "selfsubjectreviews.authentication.k8s.io"):
        assert resource in listed, resource
    versions = cluster_sim.kubectl("api-versions").stdout.split()
    assert {"autoscaling/v1", "autoscaling/v2", "policy/v1", "networking.k8s.io/v1"} <= set(versions)
    services = json.loads(cluster_sim.kubectl("get", "apiservices", "-o", "json").stdout)["items"]
    names = {s["metadata"]["name"] for s in services}
    assert {"v1.", "v1.apps", "v2.autoscaling"} <= names
    assert all(s["status"]["conditions"][0]["reason"] == "Local" for s in services)


def test_standard_kinds_round_trip(cluster_sim: Any, namespace: str) -> None:
    manifest = f"""
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: pdb, namespace: {namespace}}}
spec: {{minAvailable: 1, selector: {{matchLabels: {{app: x}}}}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: hpa, namespace: {namespace}}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: d}}
  minReplicas: 1
  maxReplicas: 3
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: deny, namespace: {namespace}}}
spec: {{podSelector: {{}}}}
---
apiVersion: v1
kind: ReplicationController
metadata: {{name: rc, namespace: {namespace}}}
spec:
  replicas: 0
  selector: {{app: rc}}
  template:
    metadata: {{labels: {{app: rc}}}}
    spec: {{containers: [{{name: c, image: busybox}}]}}
"""
    applied = cluster_sim.kubectl("apply", "-f", "-", stdin=manifest).stdout
    for created in ("poddisruptionbudget.policy/pdb", "horizontalpodautoscaler.autoscaling/hpa",
                    "networkpolicy.networking.k8s.io/deny", "replicationcontroller/rc"):
        assert f"{created} created" in applied
    got = cluster_sim.kubectl("get", "pdb,hpa,netpol,rc", "-n", namespace, "-o", "name").stdout.split()
    assert sorted(got) == sorted(["poddisruptionbudget.policy/pdb", "horizontalpodautoscaler.autoscaling/hpa",
                                  "networkpolicy.networking.k8s.io/deny", "replicationcontroller/rc"])


def test_auth_can_i_and_whoami(cluster_sim: Any) -> None:
    assert cluster_sim.kubectl("auth", "can-i", "create", "pods").stdout.strip() == "yes"
    assert cluster_sim.kubectl("auth", "can-i", "delete", "nodes", "--all-namespaces").stdout.strip() == "yes"
    whoami = cluster_sim.kubectl("auth", "whoami", "-o", "json").stdout
    assert json.loads(whoami)["status"]["userInfo"]["username"] == "topsail-sim-admin"
    rules = cluster_sim.kubectl("auth", "can-i", "--list").stdout
    assert "*.*" in rules


def test_metrics_are_prometheus_text_per_verb_and_resource(cluster_sim: Any, namespace: str) -> None:
    cluster_sim.kubectl("get", "pods", "-n", namespace)
    text = cluster_sim.kubectl("get", "--raw", "/metrics").stdout
    assert "# TYPE apiserver_request_total counter" in text
    assert "# TYPE apiserver_request_duration_seconds histogram" in text
    lists = [line for line in text.splitlines() if line.startswith("apiserver_request_total{")
             and 'verb="LIST"' in line and 'resource="pods"' in line and 'scope="namespace"' in line
             and 'code="200"' in line]
    assert lists and float(lists[0].rsplit(" ", 1)[1]) >= 1
    assert any(line.startswith("apiserver_request_duration_seconds_bucket{") and 'verb="POST"' in line
               and 'resource="namespaces"' in line for line in text.splitlines())
    assert 'apiserver_storage_objects{resource="nodes"} 2.0' in text


def test_get_wide_shows_node_and_ip(cluster_sim: Any, namespace: str, wait_until: Any) -> None:
    cluster_sim.kubectl("apply", "-f", "-", stdin=POD.format(name="wide", namespace=namespace))
    cluster_sim.kubectl("wait", "--for=condition=Ready", "pod/wide", "-n", namespace, "--timeout=30s")
    lines = cluster_sim.kubectl("get", "pods", "-n", namespace, "-o", "wide").stdout.splitlines()
    header = lines[0].split()
    assert header[:8] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED"]
    row = lines[1].split()
    pod = json.loads(cluster_sim.kubectl("get", "pod", "wide", "-n", namespace, "-o", "json").stdout)
    assert row[5] == pod["status"]["podIP"] and row[6] == pod["spec"]["nodeName"]
    nodes = cluster_sim.kubectl("get", "nodes", "-o", "wide").stdout.splitlines()
    assert nodes[0].split()[:6] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP"]
    assert nodes[1].split()[5].startswith("10.")


def test_nodes_have_leases_and_describe_node_works(cluster_sim: Any, core: client.CoreV1Api) -> None:
    node = core.list_node().items[0].metadata.name
    lease = json.loads(cluster_sim.kubectl("get", "lease", node, "-n", "kube-node-lease", "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"] == node and lease["spec"]["renewTime"]
    described = cluster_sim.kubectl("describe", "node", node)
    assert "Lease:" in described.stdout and f"HolderIdentity:  {node}" in described.stdout
    assert "error" not in described.stderr.lower()


def test_eviction_respects_a_disruption_budget(cluster_sim: Any, core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, {"metadata": {"name": "guarded", "labels": {"app": "g"}},
                                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    policy = client.PolicyV1Api(cluster_sim.api_client())
    policy.create_namespaced_pod_disruption_budget(namespace, {"metadata": {"name": "g"}, "spec": {
        "maxUnavailable": 0, "selector": {"matchLabels": {"app": "g"}}}})
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "guarded",
                                                                            "namespace": namespace}}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("guarded", namespace, eviction)
    assert refused.value.status == 429
    assert "disruption budget" in json.loads(refused.value.body)["message"]
    policy.delete_namespaced_pod_disruption_budget("g", namespace)
    core.create_namespaced_pod_eviction("guarded", namespace, eviction)
    assert "guarded" not in [p.metadata.name for p in core.list_namespaced_pod(namespace).items
                             if not p.metadata.deletion_timestamp]


def test_parts_not_simulated_say_so(cluster_sim: Any, core: client.CoreV1Api) -> None:
    response = cluster_sim.raw("GET", "/api/v1/namespaces/default/services/kubernetes/proxy/healthz")
    status = response.json()
    assert (response.status_code, status["reason"]) == (405, "MethodNotAllowed")
    assert status["message"].startswith("services/proxy is not supported by the simulated cluster")
    node = core.list_node().items[0].metadata.name
    result = cluster_sim.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics", check=False)
    assert result.returncode != 0 and "nodes/proxy is not supported by the simulated cluster" in result.stderr


def test_pod_log_options(cluster_sim: Any, core: client.CoreV1Api, namespace: str, wait_until: Any) -> None:
    # The options are read from a container that printed its two lines and stays: a restarting one starts a new log
    # between two reads (at load, several reads outlast its run). --previous is read from one that exits and restarts.
    scripts = {"teller": "echo one; echo two; sleep 3600", "talker": "echo one; echo two; sleep 1; exit 3"}
    for name, script in scripts.items():
        core.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": {"containers": [{
            "name": "main", "image": "busybox", "command": ["sh", "-c", script]}]}})

    def log(**options: Any) -> str:
        try:
            return core.read_namespaced_pod_log("teller", namespace, **options)
        except ApiException:  # 400 while the container is being created
            return ""

    stamped = wait_until(lambda: (text := log(timestamps=True)).count("\n") == 2 and text, 60, "teller's two lines")
    first, second = stamped.splitlines()
    assert first.endswith("Z one") and second.endswith("Z two") and len(first.split(" ", 1)[0]) == 30
    assert core.read_namespaced_pod_log("teller", namespace, tail_lines=1) == "two\n"
    assert core.read_namespaced_pod_log("teller", namespace, limit_bytes=4) == "one\n"
    assert core.read_namespaced_pod_log("teller", namespace, since_seconds=3600) == "one\ntwo\n"
    future = "2099-01-01T00:00:00Z"
    text = cluster_sim.kubectl("logs", "teller", "-n", namespace, f"--since-time={future}").stdout
    assert text == ""
    with pytest.raises(ApiException) as invalid:
        core.read_namespaced_pod_log("teller", namespace, since_seconds=0)
    assert invalid.value.status == 422

    def ended_once() -> bool:
        statuses = core.read_namespaced_pod("talker", namespace).status.container_statuses or []  # one read
        return bool(statuses) and statuses[0].last_state.terminated is not None

    # its first run ended: in back-off or in its next run, --previous is the run lastState names, as the kubelet's
    wait_until(ended_once, 60, "talker's first run to end")
    previous = cluster_sim.kubectl("logs", "talker", "-n", namespace, "--previous").stdout
    assert previous == "one\ntwo\n"
    core.delete_namespaced_pod("teller", namespace, grace_period_seconds=0)


def test_previous_log_of_a_container_never_restarted_is_a_bad_request(cluster_sim: Any, core: client.CoreV1Api,
                                                                      namespace: str) -> None:
    cluster_sim.kubectl("apply", "-f", "-", stdin=POD.format(name="steady", namespace=namespace))
    cluster_sim.kubectl("wait", "--for=condition=Ready", "pod/steady", "-n", namespace, "--timeout=30s")
    result = cluster_sim.kubectl("logs", "steady", "-n", namespace, "--previous", check=False)
    assert result.returncode == 1
    assert 'previous terminated container "main" in pod "steady" not found' in result.stderr


def _config_map(namespace: str, data: dict[str, str]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "namespace": namespace},
                       "data": data})


def test_server_side_apply_removes_dropped_fields_and_reports_conflicts(cluster_sim: Any, core: client.CoreV1Api,
                                                                       namespace: str) -> None:
    cluster_sim.kubectl("apply", "--server-side", "-f", "-", stdin=_config_map(namespace, {"a": "1", "b": "2"}))
    managed = core.read_namespaced_config_map("ssa", namespace).metadata.managed_fields
    assert [(m.manager, m.operation) for m in managed] == [("kubectl", "Apply")]
    assert managed[0].fields_v1 == {"f:data": {"f:a": {}, "f:b": {}}}
    cluster_sim.kubectl("apply", "--server-side", "-f", "-", stdin=_config_map(namespace, {"a": "1"}))
    assert core.read_namespaced_config_map("ssa", namespace).data == {"a": "1"}  # b dropped from the manifest

    other = cluster_sim.kubectl("apply", "--server-side", "--field-manager=other", "-f", "-",
                                stdin=_config_map(namespace, {"a": "9", "c": "3"}), check=False)
    assert other.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "kubectl" using v1: .data.a' in other.stderr
    assert core.read_namespaced_config_map("ssa", namespace).data == {"a": "1"}
    cluster_sim.kubectl("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-",
                        stdin=_config_map(namespace, {"a": "9", "c": "3"}))
    owners = {m.manager: m.fields_v1 for m in core.read_namespaced_config_map("ssa", namespace).metadata.managed_fields}
    assert owners == {"other": {"f:data": {"f:a": {}, "f:c": {}}}}  # kubectl lost .data.a, its last field
    # a field two managers apply with the same value is shared: dropping it from one manifest keeps it
    cluster_sim.kubectl("apply", "--server-side", "-f", "-", stdin=_config_map(namespace, {"c": "3"}))
    cluster_sim.kubectl("apply", "--server-side", "-f", "-", stdin=_config_map(namespace, {}))
    assert core.read_namespaced_config_map("ssa", namespace).data == {"a": "9", "c": "3"}


def test_an_update_takes_the_field_and_the_next_apply_conflicts(cluster_sim: Any, namespace: str) -> None:
    apps = client.AppsV1Api(cluster_sim.api_client())
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": namespace},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {
                      "metadata": {"labels": {"app": "web"}},
                      "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    cluster_sim.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(deployment))
    cluster_sim.kubectl("scale", "deployment/web", "-n", namespace, "--replicas=3")
    result = cluster_sim.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(deployment), check=False)
    assert result.returncode == 1 and "conflict with" in result.stderr and ".spec.replicas" in result.stderr
    apps.patch_namespaced_deployment("web", namespace, {"metadata": {"labels": {"team": "a"}}})
    managers = {m.manager for m in apps.read_namespaced_deployment("web", namespace).metadata.managed_fields}
    assert "OpenAPI-Generator" in managers  # the Python client's manager, from its User-Agent
