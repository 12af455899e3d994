"""Custom resources meet their structural schemas as on kube-apiserver: pruned, warned about, or refused with its
message, through kubectl 1.32 (which asks for fieldValidation=Strict unless told --validate=warn|false)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_topsail.sim.controllers.olm import PACKAGES

WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "required": ["size"], "properties": {
                                   "size": {"type": "integer", "minimum": 1},
                                   "colour": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                                   "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                                   "port": {"x-kubernetes-int-or-string": True},
                                   "tags": {"type": "array", "items": {"type": "string"},
                                            "x-kubernetes-list-type": "set"},
                                   "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                   "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                   "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                                                "properties": {"data": {"type": "object",
                                                                        "additionalProperties": {"type": "string"}}}},
                               }},
                               "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}
ISVC = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {{name: {name}}}
spec:
{spec}
"""
PREDICTOR = """  predictor:
    {extra}
    model:
      modelFormat: {{name: pytorch}}
      runtime: tgis-runtime
      {model}
"""
PYTORCHJOB = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: {name}}}
spec:
  runPolicy: {{{run_policy}}}
  pytorchReplicaSpecs:
    Master:
      replicas: {replicas}
      restartPolicy: Never
      template:
        spec:
          containers: [{{name: pytorch, image: trainer, command: [sleep, "1"]}}]
"""


@pytest.fixture(scope="module")
def sim(start_sim: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Every controller (their CRDs installed), plus the CRDs of the operators OLM installs and a Widget CRD."""
    profile = {"seed": 3, "node_pools": [{"name": "gpu", "count": 1, "gpu_profile": "a100"}]}
    for sim in start_sim(tmp_path_factory, "schema-sim", profile=profile):
        crds = [WIDGET_CRD, *(crd.manifest() for package in PACKAGES.values() for crd in package.owned)]
        for crd in {crd["metadata"]["name"]: crd for crd in crds}.values():
            response = sim.raw("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json.dumps(crd))
            assert response.status_code in (201, 409), response.text
        yield sim


def _isvc(name: str, model: str = "storageUri: pvc://models/flan", extra: str = "minReplicas: 1") -> str:
    return ISVC.format(name=name, spec=PREDICTOR.format(model=model, extra=extra))


def _apply(sim: Any, manifest: str, *args: str) -> Any:
    return sim.kubectl("apply", "-f", "-", *args, stdin=manifest, check=False)


def test_kubectl_refuses_a_misspelled_field_as_a_strict_apiserver(sim: Any) -> None:
    result = _apply(sim, _isvc("typo", model="storageURI: pvc://models/flan", extra="minReplica: 1"))
    assert result.returncode == 1
    assert ('InferenceService in version "v1beta1" cannot be handled as a InferenceService: strict decoding error: '
            'unknown field "spec.predictor.minReplica", unknown field "spec.predictor.model.storageURI"'
            in result.stderr)
    assert sim.raw("GET", "/apis/serving.kserve.io/v1beta1/namespaces/default/inferenceservices/typo").status_code \
        == 404


def test_with_validate_warn_the_field_is_dropped_and_kubectl_prints_the_warning(sim: Any) -> None:
    result = _apply(sim, _isvc("warned", model="storageUri: pvc://models/flan\n      storageURI: x"),
                    "--validate=warn")
    assert result.returncode == 0, result.stderr
    assert 'Warning: unknown field "spec.predictor.model.storageURI"' in result.stderr
    stored = json.loads(sim.kubectl("get", "isvc", "warned", "-o", "json").stdout)
    assert stored["spec"]["predictor"]["model"] == {"modelFormat": {"name": "pytorch"}, "runtime": "tgis-runtime",
                                                    "storageUri": "pvc://models/flan"}


def test_a_client_sending_no_directive_gets_warning_headers(sim: Any) -> None:
    body = yaml.safe_load(_isvc("python-client", extra="minReplica: 1"))
    response = sim.raw("POST", "/apis/serving.kserve.io/v1beta1/namespaces/default/inferenceservices",
                       json.dumps(body))
    assert response.status_code == 201
    assert response.headers["Warning"] == '299 - "unknown field \\"spec.predictor.minReplica\\""'
    assert "minReplica" not in response.json()["spec"]["predictor"]


@pytest.mark.parametrize(("manifest", "message"), [
    (_isvc("two", extra='minReplicas: "two"'),
     'spec.predictor.minReplicas: Invalid value: "string": spec.predictor.minReplicas in body must be of type '
     'integer: "string"'),
    (_isvc("env-map", model="env: {A: b}"),
     'spec.predictor.model.env: Invalid value: "object": spec.predictor.model.env in body must be of type array: '
     '"object"'),
    (ISVC.format(name="empty", spec="  {}"), "spec.predictor: Required value"),
    (PYTORCHJOB.format(name="pj", run_policy="", replicas='"1"'),
     'spec.pytorchReplicaSpecs.Master.replicas: Invalid value: "string": spec.pytorchReplicaSpecs.Master.replicas '
     'in body must be of type integer: "string"'),
])
def test_values_of_the_wrong_type_or_missing_fields_get_422(sim: Any, manifest: str, message: str) -> None:
    result = _apply(sim, manifest, "--validate=false")
    assert result.returncode == 1
    assert message in result.stderr
    assert "is invalid" in result.stderr


def test_a_misspelled_run_policy_field_of_a_pytorchjob_is_refused(sim: Any) -> None:
    result = _apply(sim, PYTORCHJOB.format(name="backof", run_policy="backofLimit: 0", replicas=1))
    assert 'strict decoding error: unknown field "spec.runPolicy.backofLimit"' in result.stderr
    assert _apply(sim, PYTORCHJOB.format(name="backoff", run_policy="backoffLimit: 0", replicas=1)).returncode == 0


def test_a_pod_with_an_unknown_restart_policy_is_refused_by_kubectl(sim: Any) -> None:
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: sometimes}\nspec:\n  restartPolicy: Sometimes\n" \
          "  containers: [{name: c, image: i}]\n"
    result = _apply(sim, pod)
    assert result.returncode == 1
    assert ('The Pod "sometimes" is invalid: spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
            '"Always", "OnFailure", "Never"') in result.stderr


def _widget(object_name: str, **spec: Any) -> str:
    return json.dumps({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": object_name},
                       "spec": spec})


def test_a_crd_created_with_a_schema_enforces_it(sim: Any) -> None:
    created = sim.raw("POST", WIDGETS, _widget("w1", size=2, port="http", tags=["a"], extra={"any": {"thing": 1}},
                                               labels={"a": "b"}, template={
                                                   "apiVersion": "v1", "kind": "ConfigMap",
                                                   "metadata": {"name": "t", "bogus": 1}, "data": {"k": "v"},
                                                   "junk": True}))
    assert created.status_code == 201, created.text
    spec = created.json()["spec"]
    assert spec["colour"] == "red"  # defaulted
    assert spec["extra"] == {"any": {"thing": 1}}  # preserved
    assert spec["template"] == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"},
                                "data": {"k": "v"}}  # embedded resource: pruned to what it declares
    warnings = created.headers["Warning"]  # one header each, joined by the HTTP client
    assert '299 - "unknown field \\"spec.template.junk\\""' in warnings
    assert '299 - "unknown field \\"spec.template.metadata.bogus\\""' in warnings
    refused = sim.raw("POST", WIDGETS, _widget("w2", size=0, colour="green", name="UPPER", port=True, tags=["a", "a"],
                                                labels={"a": 1}))
    assert refused.status_code == 422
    causes = {(cause["field"], cause["message"]) for cause in refused.json()["details"]["causes"]}
    assert causes == {
        ("spec.size", "Invalid value: 0: spec.size in body should be greater than or equal to 1"),
        ("spec.colour", 'Unsupported value: "green": supported values: "red", "blue"'),
        ("spec.name", "Invalid value: \"UPPER\": spec.name in body should match '^[a-z]+$'"),
        ("spec.port", 'Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"'),
        ("spec.tags[1]", 'Duplicate value: "a"'),
        ("spec.labels.a", 'Invalid value: "integer": spec.labels.a in body must be of type string: "integer"'),
    }
    strict = sim.raw("POST", WIDGETS + "?fieldValidation=Strict", _widget("w3", size=1, sise=2))
    assert (strict.status_code, strict.json()["message"]) == (400, 'Widget in version "v1" cannot be handled as a '
                                                                   'Widget: strict decoding error: unknown field '
                                                                   '"spec.sise"')
    ignored = sim.raw("POST", WIDGETS + "?fieldValidation=Ignore", _widget("w4", size=1, sise=2))
    assert ignored.status_code == 201 and "Warning" not in ignored.headers and "sise" not in ignored.json()["spec"]
    bad = sim.raw("POST", WIDGETS + "?fieldValidation=Loose", _widget("w5", size=1))
    assert (bad.status_code, bad.json()["message"]) == (400, "fieldValidation parameter unsupported: Loose")
    patched = sim.raw("PATCH", f"{WIDGETS}/w1?fieldValidation=Strict", '{"spec": {"size": "3"}}',
                      "application/merge-patch+json")
    assert patched.status_code == 422 and "spec.size in body must be of type integer" in patched.text


def _templates() -> dict[str, dict[str, Any]]:
    """Every manifest template we ship, with the contexts the fixtures render them with (their settings' defaults)."""
    from pytest_topsail.prepare import gpu_operator, rhoai

    settings = rhoai.RhoaiSettings()
    operator = {**settings.operator.manifest_values(), "operator_group": "og", "starting_csv": "x.v1"}
    return {
        "catalogsource.yaml.j2": {"name": "catalog", "namespace": "openshift-marketplace", "image": "quay.io/x/index",
                                  "tag": "v1", "display_name": "Catalog"},
        "clusterpolicy.yaml.j2": gpu_operator.GpuOperatorSettings().cluster_policy.model_dump(),
        "datasciencecluster.yaml.j2": {"name": settings.dsc.name, "components": settings.components.model_dump()},
        "dscinitialization.yaml.j2": settings.dsci.model_dump(),
        "nodefeaturediscovery.yaml.j2": {"name": "nfd-instance", "namespace": "openshift-nfd"},
        "olm_operator.yaml.j2": operator,
    }


def test_every_manifest_template_we_ship_is_valid_under_strict_field_validation(sim: Any) -> None:
    from pytest_topsail.prepare.olm import MANIFESTS, render

    shipped = sorted(path.name for path in Path(MANIFESTS).glob("*.j2"))
    assert shipped == sorted(_templates())  # a new template needs its context here
    for template, context in _templates().items():
        for manifest in render(template, **context):
            api_version, kind = manifest["apiVersion"], manifest["kind"]
            plural = {"Namespace": "namespaces"}.get(kind) or _plural(sim, api_version, kind)
            prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            namespace = manifest["metadata"].get("namespace")
            path = f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"
            response = sim.raw("POST", f"{path}?dryRun=All&fieldValidation=Strict", json.dumps(manifest))
            assert response.status_code in (201, 404), f"{template} {kind}: {response.text}"  # 404: no namespace
            assert "Warning" not in response.headers
            if response.status_code == 404:
                assert "namespaces" in response.json()["message"], response.text


def _plural(sim: Any, api_version: str, kind: str) -> str:
    resources = sim.raw("GET", f"/apis/{api_version}").json()["resources"]
    return next(r["name"] for r in resources if r["kind"] == kind and "/" not in r["name"])


def test_nvidia_smi_in_a_pod_on_a_gpu_node_lists_the_pods_gpus(sim: Any, wait_until: Any) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "smi"}, "spec": {"containers": [{
        "name": "cuda", "image": "nvidia/cuda", "command": ["sleep", "infinity"],
        "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}
    assert sim.raw("POST", "/api/v1/namespaces/default/pods", json.dumps(pod)).status_code == 201
    wait_until(lambda: sim.raw("GET", "/api/v1/namespaces/default/pods/smi").json()["status"].get("phase")
               == "Running", what="pod smi Running")
    listed = sim.kubectl("exec", "smi", "--", "nvidia-smi", "-L").stdout.splitlines()
    assert [line.split(" (UUID: GPU-")[0] for line in listed] == ["GPU 0: NVIDIA A100-SXM4-40GB",
                                                                  "GPU 1: NVIDIA A100-SXM4-40GB"]
    query = sim.kubectl("exec", "smi", "--", "nvidia-smi", "--query-gpu=index,name,memory.total",
                        "--format=csv").stdout
    assert query == ("index, name, memory.total [MiB]\n0, NVIDIA A100-SXM4-40GB, 40960 MiB\n"
                     "1, NVIDIA A100-SXM4-40GB, 40960 MiB\n")
    bare = sim.kubectl("exec", "smi", "--", "sh", "-c", "nvidia-smi --query-gpu=memory.total "
                                                        "--format=csv,noheader,nounits").stdout
    assert bare == "40960\n40960\n"
    table = sim.kubectl("exec", "smi", "--", "nvidia-smi").stdout
    assert "NVIDIA A100-SXM4-40GB" in table and "0MiB /  40960MiB" in table and "Driver Version:" in table


def test_our_kube_client_sends_the_directive_of_topsail_field_validation(sim: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_topsail.kube.client import KubeError, connect

    widget = json.loads(_widget("from-kube", size=1, sise=2))
    monkeypatch.setenv("TOPSAIL_FIELD_VALIDATION", "Strict")
    with pytest.raises(KubeError) as refused:
        connect(sim.kubeconfig_path).create({**widget, "metadata": {"name": "from-kube", "namespace": "default"}})
    assert 'strict decoding error: unknown field "spec.sise"' in str(refused.value)
    monkeypatch.delenv("TOPSAIL_FIELD_VALIDATION")
    created = connect(sim.kubeconfig_path).create({**widget, "metadata": {"name": "from-kube",
                                                                          "namespace": "default"}})
    assert "sise" not in created["spec"]  # Warn (the server's default): dropped


def test_exec_of_cat_and_of_a_shell_read_stdin_as_the_official_client_writes_it(sim: Any, wait_until: Any) -> None:
    from kubernetes import client
    from kubernetes.stream import stream

    pod = {"metadata": {"name": "stdin"}, "spec": {"containers": [{"name": "c", "image": "busybox",
                                                                    "command": ["sleep", "infinity"]}]}}
    assert sim.raw("POST", "/api/v1/namespaces/default/pods", json.dumps(pod)).status_code == 201
    wait_until(lambda: sim.raw("GET", "/api/v1/namespaces/default/pods/stdin").json()["status"].get("phase")
               == "Running", what="pod stdin Running")
    core = client.CoreV1Api(sim.api_client())
    cat = stream(core.connect_post_namespaced_pod_exec, "stdin", "default", command=["/bin/sh", "-c", "cat"],
                 stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False)
    cat.write_stdin("test-close\n")
    assert cat.readline_stdout(timeout=30) == "test-close"
    cat.close_channel(0)
    cat.run_forever(timeout=30)
    assert not cat.is_open() and cat.returncode == 0
    shell = stream(core.connect_post_namespaced_pod_exec, "stdin", "default", command=["/bin/sh"], stderr=True,
                   stdin=True, stdout=True, tty=False, _preload_content=False)
    shell.write_stdin("echo test string 1\n")
    assert shell.readline_stdout(timeout=30) == "test string 1"
    shell.write_stdin("echo test string 2 >&2\n")
    assert shell.readline_stderr(timeout=30) == "test string 2"
    shell.write_stdin("exit 4\n")
    shell.run_forever(timeout=30)
    assert shell.returncode == 4


def test_unknown_fields_of_built_in_kinds_are_warned_about_dropped_or_refused(sim: Any) -> None:
    deployment = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: typo}\nspec:\n  replica: 2\n"
                  "  selector: {matchLabels: {app: typo}}\n  template:\n    metadata: {labels: {app: typo}}\n"
                  "    spec: {containers: [{name: c, image: i, comand: [sleep]}]}\n")
    refused = _apply(sim, deployment)
    assert refused.returncode == 1
    assert ('Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field '
            '"spec.replica", unknown field "spec.template.spec.containers[0].comand"') in refused.stderr
    warned = _apply(sim, deployment, "--validate=warn")
    assert warned.returncode == 0, warned.stderr
    assert 'Warning: unknown field "spec.replica"' in warned.stderr
    stored = json.loads(sim.kubectl("get", "deployment", "typo", "-o", "json").stdout)
    assert "replica" not in stored["spec"] and stored["spec"]["replicas"] == 1
    pod = {"metadata": {"name": "extra", "bogus": 1}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    created = sim.raw("POST", "/api/v1/namespaces/default/pods", json.dumps(pod))
    assert created.status_code == 201
    assert created.headers["Warning"] == '299 - "unknown field \\"metadata.bogus\\""'
