"""kubectl against the simulated cluster: the commands a suite author types."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: {app}}}
spec:
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo hello from {name}; sleep infinity"]
"""

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: work
        image: busybox
        command: ["sleep", "0.2"]
"""

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""

WIDGET = """
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: {size}
  colours: [red, blue]
"""


@pytest.fixture(scope="module")
def kubectl(cluster_sim: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    cache = tmp_path_factory.mktemp("kubectl-cache")

    def run(*args: str, stdin: str | None = None, check: bool = True, binary: str = "kubectl") -> Any:
        return cluster_sim.kubectl("--cache-dir", str(cache), *args, stdin=stdin, check=check, binary=binary)

    return run


def test_get_nodes_shows_ready_gpu_nodes(kubectl: Any) -> None:
    lines = kubectl("get", "nodes", "--no-headers").stdout.splitlines()
    assert len(lines) == 2
    assert all(line.split()[1] == "Ready" for line in lines)


def test_apply_creates_then_updates(kubectl: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD.format(name="applied", app="first"))
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "pod/applied created"
    manifest.write_text(POD.format(name="applied", app="second"))
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "pod/applied configured"
    pod = json.loads(kubectl("get", "pod", "applied", "-o", "json").stdout)
    assert pod["metadata"]["labels"] == {"app": "second"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in pod["metadata"]["annotations"]
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "pod/applied unchanged"


def _versioned_kubectl(minor: int) -> str | None:
    name = f"kubectl.1.{minor}"
    return shutil.which(name) or shutil.which(name, path="/usr/lib/google-cloud-sdk/bin")


@pytest.mark.parametrize("minor", range(27, 34))
def test_apply_with_each_kubectl_version(kubectl: Any, minor: int) -> None:
    binary = _versioned_kubectl(minor)
    if binary is None:
        pytest.skip(f"kubectl.1.{minor} is not installed")
    name = f"v1-{minor}"
    created = kubectl("apply", "-f", "-", stdin=POD.format(name=name, app="one"), binary=binary)
    assert created.stdout.strip() == f"pod/{name} created"
    updated = kubectl("apply", "-f", "-", stdin=POD.format(name=name, app="two"), binary=binary)
    assert updated.stdout.strip() == f"pod/{name} configured"
    labels = kubectl("get", "pod", name, "-o", "jsonpath={.metadata.labels.app}", binary=binary).stdout
    assert labels == "two"
    widget = WIDGET.format(size=minor).replace("name: w1", f"name: w{minor}")
    kubectl("apply", "-f", "-", stdin=CRD)
    assert kubectl("apply", "-f", "-", stdin=widget, binary=binary).stdout.strip() == \
        f"widget.example.com/w{minor} created"


def test_create_wait_ready_logs_and_delete_a_pod(kubectl: Any) -> None:
    assert kubectl("create", "-f", "-", stdin=POD.format(name="talker", app="t")).stdout.strip() == \
        "pod/talker created"
    duplicate = kubectl("create", "-f", "-", stdin=POD.format(name="talker", app="t"), check=False)
    assert duplicate.returncode != 0 and "AlreadyExists" in duplicate.stderr
    kubectl("wait", "--for=condition=Ready", "pod/talker", "--timeout=30s")
    assert kubectl("logs", "talker").stdout == "hello from talker\n"
    assert kubectl("delete", "pod", "talker", "--wait=true", "--timeout=30s").stdout.strip() == \
        'pod "talker" deleted'
    missing = kubectl("get", "pod", "talker", check=False)
    assert missing.returncode != 0 and 'pods "talker" not found' in missing.stderr


def test_wait_for_a_job_to_complete(kubectl: Any) -> None:
    kubectl("create", "-f", "-", stdin=JOB.format(name="short"))
    kubectl("wait", "--for=condition=complete", "job/short", "--timeout=30s")
    job = json.loads(kubectl("get", "job", "short", "-o", "json").stdout)
    assert job["status"]["succeeded"] == 2


def test_get_pods_all_namespaces_as_json(kubectl: Any) -> None:
    kubectl("apply", "-f", "-", stdin=POD.format(name="listed", app="l"))
    document = json.loads(kubectl("get", "pods", "-A", "-o", "json").stdout)
    assert document["kind"] == "List"
    assert "listed" in {item["metadata"]["name"] for item in document["items"]}
    assert all(item["kind"] == "Pod" for item in document["items"])


def test_api_resources_and_raw_apis(kubectl: Any) -> None:
    resources = kubectl("api-resources", "--no-headers").stdout
    names = {line.split()[0] for line in resources.splitlines()}
    assert {"pods", "nodes", "namespaces", "deployments", "jobs", "customresourcedefinitions"} <= names
    groups = json.loads(kubectl("get", "--raw", "/apis").stdout)
    assert groups["kind"] == "APIGroupList"
    assert {"apps", "batch", "apiextensions.k8s.io"} <= {g["name"] for g in groups["groups"]}


def test_custom_resource_apply_create_then_update(kubectl: Any, wait_until: Any) -> None:
    kubectl("apply", "-f", "-", stdin=CRD)
    wait_until(lambda: "widgets" in kubectl("api-resources", "--api-group=example.com").stdout, what="widgets")
    assert kubectl("apply", "-f", "-", stdin=WIDGET.format(size=1)).stdout.strip() == "widget.example.com/w1 created"
    assert kubectl("apply", "-f", "-", stdin=WIDGET.format(size=3)).stdout.strip() == \
        "widget.example.com/w1 configured"
    widget = json.loads(kubectl("get", "wd", "w1", "-o", "json").stdout)
    assert widget["spec"] == {"size": 3, "colours": ["red", "blue"]}
    assert kubectl("delete", "widget", "w1").stdout.strip() == 'widget.example.com "w1" deleted'


def test_get_unknown_resource_is_a_clear_error(kubectl: Any) -> None:
    result = kubectl("get", "gizmos", check=False)
    assert result.returncode != 0
    assert 'the server doesn\'t have a resource type "gizmos"' in result.stderr


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: nginx, command: ["sleep", "infinity"]}]
"""


def test_scale_and_rollout_status_of_a_deployment(kubectl: Any, wait_until: Any) -> None:
    kubectl("apply", "-f", "-", stdin=DEPLOYMENT)
    assert kubectl("scale", "deployment", "web", "--replicas=3").stdout.strip() == "deployment.apps/web scaled"
    kubectl("rollout", "status", "deployment/web", "--timeout=30s")
    scale = json.loads(kubectl("get", "--raw", "/apis/apps/v1/namespaces/default/deployments/web/scale").stdout)
    assert (scale["kind"], scale["spec"]["replicas"], scale["status"]["selector"]) == ("Scale", 3, "app=web")
    ready = kubectl("get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}").stdout
    assert ready == "3"


def test_get_events_prints_the_event_columns(kubectl: Any, wait_until: Any) -> None:
    kubectl("apply", "-f", "-", stdin=POD.format(name="eventful", app="e"))
    kubectl("wait", "--for=condition=Ready", "pod/eventful", "--timeout=30s")
    output = kubectl("get", "events", "--field-selector", "involvedObject.name=eventful").stdout
    header, *rows = output.splitlines()
    assert header.split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert any(row.split()[2] == "Scheduled" and row.split()[3] == "pod/eventful" for row in rows)


def test_finished_pod_status_and_follow_of_a_restarting_container(kubectl: Any) -> None:
    done = POD.format(name="done", app="d").replace("echo hello from done; sleep infinity", "echo bye")
    kubectl("apply", "-f", "-", stdin=done.replace("spec:\n", "spec:\n  restartPolicy: Never\n", 1))
    kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/done", "--timeout=30s")
    assert kubectl("get", "pod", "done", "--no-headers").stdout.split()[2] == "Completed"
    looping = POD.format(name="looping", app="l").replace("echo hello from looping; sleep infinity",
                                                          "echo a; sleep 0.5; echo b")
    kubectl("apply", "-f", "-", stdin=looping)
    kubectl("wait", "--for=condition=Ready", "pod/looping", "--timeout=30s")
    # restartPolicy Always: the stream ends with the container instance it followed, not with the pod
    assert kubectl("logs", "-f", "looping").stdout.endswith("a\nb\n")


def test_watch_in_table_form_for_kubectl_get_w(cluster_sim: Any, kubectl: Any) -> None:
    import requests

    kubectl("apply", "-f", "-", stdin=POD.format(name="watched", app="w"))
    kubeconfig = cluster_sim.kubeconfig_path
    cluster_sim.raw("GET", "/version")  # writes the CA file beside the kubeconfig
    response = requests.get(f"{cluster_sim.url}/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1",
                            headers={"Authorization": f"Bearer {cluster_sim.token()}",
                                     "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
                            verify=str(kubeconfig.with_name("ca.crt")), timeout=30)
    assert response.status_code == 200, response.text
    events = [json.loads(line) for line in response.text.splitlines()]
    assert events, "the watch starts with the current pods"
    assert events[0]["type"] == "ADDED"
    for event in events:
        table = event["object"]
        assert (table["kind"], len(table["rows"])) == ("Table", 1)
        assert [c["name"] for c in table["columnDefinitions"]][:3] == ["Name", "Ready", "Status"]


def test_generator_commands_whose_bodies_kubectl_sends_in_protobuf(kubectl: Any) -> None:
    kubectl("create", "namespace", "generated")
    namespace = json.loads(kubectl("get", "namespace", "generated", "-o", "json").stdout)
    assert namespace["status"]["phase"] == "Active"
    ns = ("-n", "generated")
    kubectl("create", "configmap", "settings", "--from-literal=a=1", "--from-literal=empty=", *ns)
    assert json.loads(kubectl("get", "configmap", "settings", "-o", "json", *ns).stdout)["data"] == \
        {"a": "1", "empty": ""}
    kubectl("create", "secret", "generic", "creds", "--from-literal=password=s3cret", *ns)
    secret = json.loads(kubectl("get", "secret", "creds", "-o", "json", *ns).stdout)
    assert (secret["type"], secret["data"]) == ("Opaque", {"password": "czNjcmV0"})
    kubectl("create", "job", "gen-job", "--image=busybox", *ns, "--", "sleep", "0.2")
    kubectl("wait", "--for=condition=complete", "job/gen-job", "--timeout=30s", *ns)
    kubectl("create", "deployment", "gen-deploy", "--image=nginx", "--replicas=2", *ns)
    kubectl("rollout", "status", "deployment/gen-deploy", "--timeout=30s", *ns)
    kubectl("create", "service", "clusterip", "gen-svc", "--tcp=80:8080", *ns)
    ports = json.loads(kubectl("get", "service", "gen-svc", "-o", "json", *ns).stdout)["spec"]["ports"]
    assert (ports[0]["port"], ports[0]["targetPort"]) == (80, 8080)
    kubectl("create", "role", "reader", "--verb=get", "--resource=pods", *ns)
    rules = json.loads(kubectl("get", "role", "reader", "-o", "json", *ns).stdout)["rules"]
    assert rules == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    unsupported = kubectl("create", "priorityclass", "high", "--value=1000", check=False)
    if unsupported.returncode != 0:  # kubectl >= 1.32 sends protobuf, which the simulator decodes for some kinds only
        assert "send it as application/json" in unsupported.stderr


def test_server_dry_run_and_diff(kubectl: Any) -> None:
    result = kubectl("apply", "--dry-run=server", "-f", "-", stdin=POD.format(name="dry", app="one"))
    assert result.stdout.strip() == "pod/dry created (server dry run)"
    assert kubectl("get", "pod", "dry", check=False).returncode != 0  # nothing was stored
    kubectl("apply", "-f", "-", stdin=POD.format(name="dry", app="one"))
    changed = kubectl("diff", "-f", "-", stdin=POD.format(name="dry", app="two"), check=False)
    assert changed.returncode == 1, changed.stderr  # 1: differences found
    assert "-    app: one" in changed.stdout and "+    app: two" in changed.stdout
    same = kubectl("diff", "-f", "-", stdin=POD.format(name="dry", app="one"), check=False)
    assert same.returncode == 0, same.stdout + same.stderr
    assert kubectl("get", "pod", "dry", "-o", "jsonpath={.metadata.labels.app}").stdout == "one"
