"""The simulator born as bare as a new OpenShift cluster (profile `preinstalled: []`, the default), through the real
API as a user on a real cluster would go: no Kubeflow, KServe or Kueue kind and no advertised GPU at first; NFD and
the GPU operator installed through OLM make every GPU node advertise its GPUs; OpenShift AI's DataScienceCluster
serves the kinds of its Managed components and removes them again; `preinstalled: all` is today's ready cluster."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from controller_harness import CORE, profile, run, running_sim, wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

from pytest_topsail.errors import TopsailError
from pytest_topsail.sim.controllers.olm import PACKAGES
from pytest_topsail.sim.controllers.profile import Profile
from pytest_topsail.sim.node.devices import devices

WAIT = 60.0
POOLS = [{"name": "train", "count": 2, "gpu_profile": "h100", "gpus_per_node": 4},
         {"name": "infer", "count": 1, "gpu_profile": "t4"},
         {"name": "cpu", "count": 1, "gpu_profile": "none"}]
GPU_NODES = {"train-0000": 4, "train-0001": 4, "infer-0000": 4}
OPERATOR_KINDS = ("kubeflow.org", "serving.kserve.io", "kueue.x-k8s.io")


def olm_install(namespace: str, package: str) -> str:
    """What a user applies to install an operator through OLM."""
    return f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {namespace}}}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {{name: {package}, namespace: {namespace}}}
spec: {{targetNamespaces: [{namespace}]}}
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {{name: {package}, namespace: {namespace}}}
spec: {{name: {package}, channel: stable, source: redhat-operators, sourceNamespace: openshift-marketplace}}
"""


CLUSTER_POLICY = """
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: gpu-cluster-policy}
spec: {operator: {defaultRuntime: crio}, daemonsets: {}, driver: {enabled: true}, toolkit: {enabled: true},
       devicePlugin: {enabled: true}, dcgm: {enabled: true}, dcgmExporter: {enabled: true},
       gfd: {enabled: true}, nodeStatusExporter: {enabled: true}}
"""
NFD = """
apiVersion: nfd.openshift.io/v1
kind: NodeFeatureDiscovery
metadata: {name: nfd-instance, namespace: openshift-nfd}
spec: {operand: {servicePort: 12000}}
"""
PYTORCHJOB = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: tiny, namespace: default}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        metadata: {annotations: {sim.topsail.io/duration-seconds: "0.2"}}
        spec: {containers: [{name: pytorch, image: quay.io/example/train:1}]}
"""


def dsc(**components: str) -> str:
    return yaml.safe_dump({"apiVersion": "datasciencecluster.opendatahub.io/v1", "kind": "DataScienceCluster",
                           "metadata": {"name": "default-dsc"},
                           "spec": {"components": {name: {"managementState": state}
                                                   for name, state in components.items()}}})


@pytest.fixture
def bare(start_sim: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from start_sim(tmp_path_factory, "fresh-sim", profile={"seed": 3, "node_pools": POOLS, "preinstalled": []})


def served_kinds(sim: Any) -> list[str]:
    return [name for group in OPERATOR_KINDS
            for name in sim.kubectl("api-resources", f"--api-group={group}", "-o", "name").stdout.split()]


def nodes(sim: Any) -> dict[str, Any]:
    return {n.metadata.name: n for n in client.CoreV1Api(sim.api_client()).list_node().items}


def advertised(node: Any) -> int:
    return int((node.status.allocatable or {}).get("nvidia.com/gpu", "0"))


def operator_labels(node: Any) -> dict[str, str]:
    return {k: v for k, v in (node.metadata.labels or {}).items()
            if k.startswith(("nvidia.com/", "feature.node.kubernetes.io/", "run.ai/"))}


def test_a_fresh_simulator_serves_no_operator_kind_and_advertises_no_gpu(bare: Any, wait_until: Any) -> None:
    assert served_kinds(bare) == []
    for node in nodes(bare).values():
        assert "nvidia.com/gpu" not in (node.status.capacity or {})
        assert operator_labels(node) == {}
    applied = bare.kubectl("apply", "-f", "-", stdin=PYTORCHJOB, check=False)
    assert applied.returncode != 0
    assert 'no matches for kind "PyTorchJob" in version "kubeflow.org/v1"' in applied.stderr
    custom = client.CustomObjectsApi(bare.api_client())
    with pytest.raises(ApiException) as raised:
        custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs",
                                               yaml.safe_load(PYTORCHJOB))
    assert raised.value.status == 404
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wants-a-gpu"},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    core = client.CoreV1Api(bare.api_client())
    core.create_namespaced_pod("default", pod)
    message = wait_until(lambda: next((c.message for c in core.read_namespaced_pod("wants-a-gpu", "default")
                                       .status.conditions or () if c.reason == "Unschedulable"), None),
                         WAIT, "the GPU pod to be unschedulable")
    assert message == "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."


def install_gpu_operator(sim: Any) -> None:
    """NFD and the GPU operator as TOPSAIL's prepare_gpu_operator installs them: OLM, then their custom resources."""
    for namespace, package, csv in (("openshift-nfd", "nfd", "nfd.v4.17.0"),
                                    ("nvidia-gpu-operator", "gpu-operator-certified",
                                     "gpu-operator-certified.v24.9.2")):
        sim.kubectl("apply", "-f", "-", stdin=olm_install(namespace, package))
        sim.kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", f"csv/{csv}", "-n", namespace,
                    f"--timeout={WAIT:.0f}s")
        if package == "nfd":
            sim.kubectl("apply", "-f", "-", stdin=NFD)
            sim.kubectl("wait", "--for=condition=Available", "nodefeaturediscovery/nfd-instance", "-n",
                        namespace, f"--timeout={WAIT:.0f}s")
    sim.kubectl("apply", "-f", "-", stdin=CLUSTER_POLICY)
    sim.kubectl("wait", "--for=jsonpath={.status.state}=ready", "clusterpolicy/gpu-cluster-policy",
                f"--timeout={WAIT:.0f}s")


def dcgm_gpus(sim: Any) -> list[str]:
    """The GPUs dcgm-exporter reports (`node/gpu modelName`)."""
    lines = sim.raw("GET", "/metrics/dcgm").text.splitlines()
    samples = [line for line in lines if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    return sorted(re.sub(r'.*gpu="(\d+)".*modelName="([^"]*)".*Hostname="([^"]*)".*', r"\3/\1 \2", line)
                  for line in samples)


def test_the_gpu_operator_makes_every_gpu_node_advertise_its_gpus_until_its_policy_goes(
        bare: Any, wait_until: Any) -> None:
    assert dcgm_gpus(bare) == []
    install_gpu_operator(bare)
    assert dcgm_gpus(bare) == sorted(f"{node}/{index} {'Tesla T4' if node == 'infer-0000' else 'NVIDIA H100 80GB HBM3'}"
                                     for node in GPU_NODES for index in range(4))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "smi"}, "spec": {
        "nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"}, "containers": [{
            "name": "cuda", "image": "nvidia/cuda", "command": ["sleep", "infinity"],
            "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}
    client.CoreV1Api(bare.api_client()).create_namespaced_pod("default", pod)
    bare.kubectl("wait", "--for=condition=Ready", "pod/smi", f"--timeout={WAIT:.0f}s")
    listed = bare.kubectl("exec", "smi", "--", "nvidia-smi", "-L").stdout.splitlines()
    assert [line.split(" (UUID: ")[0] for line in listed] == ["GPU 0: Tesla T4", "GPU 1: Tesla T4"]
    found = nodes(bare)
    assert {name: advertised(node) for name, node in found.items()} == {**GPU_NODES, "cpu-0000": 0}
    assert found["infer-0000"].status.allocatable["nvidia.com/gpu"] == "4"  # a node's, whatever its pods use
    train = found["train-0000"].metadata.labels
    assert train["feature.node.kubernetes.io/pci-10de.present"] == "true"
    assert train["feature.node.kubernetes.io/system-os_release.ID"] == "rhcos"
    assert train["nvidia.com/gpu.present"] == "true"
    assert train["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert (train["nvidia.com/gpu.product"], train["nvidia.com/gpu.count"], train["nvidia.com/gpu.memory"]) == (
        "NVIDIA-H100-80GB-HBM3", "4", "81559")
    assert train["nvidia.com/gpu.family"] == "hopper"
    assert found["infer-0000"].metadata.labels["nvidia.com/gpu.product"] == "Tesla-T4"
    cpu = operator_labels(found["cpu-0000"])
    assert cpu["feature.node.kubernetes.io/system-os_release.ID"] == "rhcos"
    assert not any(key.startswith("nvidia.com/") or "10de" in key for key in cpu)
    pods = client.CoreV1Api(bare.api_client()).list_namespaced_pod("nvidia-gpu-operator").items
    per_node = sorted((p.metadata.labels["app"], p.spec.node_name, p.status.phase) for p in pods)
    assert per_node == sorted((app, node, "Running") for node in GPU_NODES
                              for app in ("nvidia-dcgm-exporter", "nvidia-device-plugin-daemonset"))
    assert {p.metadata.owner_references[0].kind for p in pods} == {"ClusterPolicy"}
    policy = yaml.safe_load(bare.kubectl("get", "clusterpolicy/gpu-cluster-policy", "-o", "yaml").stdout)
    ready = next(c for c in policy["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Reconciled")

    bare.kubectl("delete", "pod/smi", "--wait=false")
    bare.kubectl("delete", "clusterpolicy/gpu-cluster-policy", f"--timeout={WAIT:.0f}s")
    wait_until(lambda: not any(advertised(n) for n in nodes(bare).values()), WAIT, "the GPUs to be withdrawn")
    assert dcgm_gpus(bare) == []
    wait_until(lambda: not client.CoreV1Api(bare.api_client()).list_namespaced_pod("nvidia-gpu-operator").items,
               WAIT, "the operand pods to go")
    left = operator_labels(nodes(bare)["train-0000"])
    assert not any(key.startswith("nvidia.com/") for key in left)
    assert left["feature.node.kubernetes.io/pci-10de.present"] == "true"  # NFD is still there


def test_a_datasciencecluster_serves_the_kinds_of_its_managed_components_only(bare: Any, wait_until: Any) -> None:
    bare.kubectl("apply", "-f", "-", stdin=olm_install("redhat-ods-operator", "rhods-operator"))
    bare.kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "csv/rhods-operator.v2.16.0", "-n",
                 "redhat-ods-operator", f"--timeout={WAIT:.0f}s")
    bare.kubectl("apply", "-f", "-", stdin="apiVersion: dscinitialization.opendatahub.io/v1\n"
                 "kind: DSCInitialization\nmetadata: {name: default-dsci}\nspec: {}\n")
    bare.kubectl("apply", "-f", "-", stdin=dsc(trainingoperator="Managed", kserve="Removed", kueue="Removed"))
    bare.kubectl("wait", "--for=jsonpath={.status.phase}=Ready", "dsc/default-dsc", f"--timeout={WAIT:.0f}s")
    status = yaml.safe_load(bare.kubectl("get", "dsc/default-dsc", "-o", "yaml").stdout)["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["TrainingOperatorReady"] == "True"
    kinds = served_kinds(bare)
    assert "pytorchjobs.kubeflow.org" in kinds
    assert not [k for k in kinds if not k.endswith(".kubeflow.org")]

    bare.kubectl("apply", "-f", "-", stdin=PYTORCHJOB)
    bare.kubectl("wait", "--for=condition=Succeeded", "pytorchjob/tiny", f"--timeout={WAIT:.0f}s")

    bare.kubectl("apply", "-f", "-", stdin=dsc(trainingoperator="Removed", kserve="Managed", kueue="Managed"))
    wait_until(lambda: "pytorchjobs.kubeflow.org" not in served_kinds(bare), WAIT, "PyTorchJob to be removed")
    kinds = served_kinds(bare)
    assert {"inferenceservices.serving.kserve.io", "servingruntimes.serving.kserve.io",
            "clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io"} <= set(kinds)
    assert not bare.kubectl("get", "pytorchjobs", check=False).returncode == 0
    bare.kubectl("wait", "--for=jsonpath={.status.installedComponents.kueue}=true", "dsc/default-dsc",
                 f"--timeout={WAIT:.0f}s")

    bare.kubectl("delete", "dsc/default-dsc", f"--timeout={WAIT:.0f}s")
    wait_until(lambda: served_kinds(bare) == [], WAIT, "the components' kinds to be removed")


def test_preinstalled_all_is_a_ready_cluster(start_sim: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    for sim in start_sim(tmp_path_factory, "ready-sim",
                         profile={"seed": 3, "node_pools": POOLS, "preinstalled": ["all"]}):
        assert {"pytorchjobs.kubeflow.org", "inferenceservices.serving.kserve.io",
                "workloads.kueue.x-k8s.io"} <= set(served_kinds(sim))
        found = nodes(sim)
        assert {name: advertised(node) for name, node in found.items()} == {**GPU_NODES, "cpu-0000": 0}
        assert found["train-0000"].metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert found["train-0000"].metadata.labels["run.ai/simulated-gpu-node-pool"] == "train"


def test_an_unknown_preinstalled_name_is_one_clear_message(tmp_path: Any) -> None:
    with pytest.raises(TopsailError) as raised:
        Profile.from_dict({"preinstalled": ["gpu_operator", "rhoai"]}, source="sim.yaml")
    assert str(raised.value) == ("sim.yaml: invalid simulator profile: key preinstalled: unknown 'rhoai'; known: all, "
                                 "gpu_operator, kserve, kueue, trainingoperator")
    assert Profile.from_dict({"preinstalled": "kserve,kueue"}).preinstalled == ["kserve", "kueue"]
    result = subprocess.run([sys.executable, "-m", "pytest_topsail.sim", "--preinstalled", "all,gpu",
                             "--kubeconfig", str(tmp_path / "kubeconfig")],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == ("python -m pytest_topsail.sim: error: command line: invalid simulator profile: key "
                             "preinstalled: unknown 'gpu'; known: all, gpu_operator, kserve, kueue, trainingoperator "
                             "(got 'all,gpu')\n")


def test_preinstalled_components_keep_their_kinds_whatever_the_datasciencecluster_says() -> None:
    def served(sim: Any, crd: str) -> bool:
        return sim.store.find(sim.store.resource_type("customresourcedefinitions", "apiextensions.k8s.io"),
                              None, crd) is not None

    async def scenario() -> None:
        async with running_sim(profile(preinstalled=["kserve"]), CORE) as sim:
            kinds = {crd.plural: sim.store.register_crd(crd.manifest()) for crd in PACKAGES["rhods-operator"].owned}
            assert served(sim, "inferenceservices.serving.kserve.io")
            assert not served(sim, "pytorchjobs.kubeflow.org")
            components = {"kserve": {"managementState": "Removed"}, "trainingoperator": {"managementState": "Managed"},
                          "kueue": {"managementState": "Unmanaged"}}
            sim.store.create(kinds["datascienceclusters"], {
                "apiVersion": "datasciencecluster.opendatahub.io/v1", "kind": "DataScienceCluster",
                "metadata": {"name": "default-dsc"}, "spec": {"components": components}})
            await wait_for(lambda: served(sim, "pytorchjobs.kubeflow.org"), "PyTorchJob served")
            assert served(sim, "tfjobs.kubeflow.org") and served(sim, "inferenceservices.serving.kserve.io")
            assert not served(sim, "workloads.kueue.x-k8s.io")  # Unmanaged: the DSC deploys nothing
            sim.store.delete(kinds["datascienceclusters"], None, "default-dsc")
            await wait_for(lambda: not served(sim, "pytorchjobs.kubeflow.org"), "PyTorchJob removed")
            assert served(sim, "inferenceservices.serving.kserve.io")  # preinstalled: never removed

    run(scenario, virtual_time=True)


OPERATOR_SPECS = [*CORE, "pytest_topsail.sim.controllers.stages:StagesController",
                  "pytest_topsail.sim.controllers.gpuoperator:GpuOperatorController"]


def _operator_objects(sim: Any) -> dict[str, Any]:
    """The NFD and GPU operator kinds (as OLM's InstallPlan registers them), a NodeFeatureDiscovery and a
    ClusterPolicy created; their resource types by plural."""
    kinds = {crd.plural: sim.store.register_crd(crd.manifest())
             for package in ("nfd", "gpu-operator-certified") for crd in PACKAGES[package].owned}
    sim.store.create(kinds["nodefeaturediscoveries"], yaml.safe_load(NFD.replace("openshift-nfd", "default")))
    sim.store.create(kinds["clusterpolicies"], yaml.safe_load(CLUSTER_POLICY))
    return kinds


def test_a_cluster_policy_without_gpu_nodes_is_ready_with_reason_no_gpu_nodes() -> None:
    async def scenario() -> dict[str, Any]:
        prof = profile(preinstalled=[], node_pools=[{"name": "cpu", "count": 2, "gpu_profile": "none"}])
        async with running_sim(prof, OPERATOR_SPECS) as sim:
            policies = _operator_objects(sim)["clusterpolicies"]
            return await wait_for(lambda: (sim.store.get(policies, None, "gpu-cluster-policy").get("status") or {})
                                  .get("state") == "ready" and sim.store.get(policies, None, "gpu-cluster-policy"),
                                  "policy ready")

    policy = run(scenario, virtual_time=True)
    ready = next(c for c in policy["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "NoGPUNodes")


def test_the_device_plugin_advertises_only_the_gpus_a_fault_left() -> None:
    async def scenario() -> tuple[str, str]:
        async with running_sim(profile(preinstalled=[]), OPERATOR_SPECS) as sim:
            _operator_objects(sim)
            await wait_for(lambda: (sim.store.get(sim.nodes, None, "gpu-0000")["status"]["allocatable"]
                                    .get("nvidia.com/gpu")), "gpu-0000 advertising")
            devices(sim.store).lose("gpu-0000", 3)  # fallen off the bus: the restarted device plugin leaves it out
            plugin = next(p for p in sim.store.list(sim.pods, "nvidia-gpu-operator", label_selector={
                "app": "nvidia-device-plugin-daemonset"}) if p["spec"]["nodeName"] == "gpu-0000")
            sim.store.delete(sim.pods, "nvidia-gpu-operator", plugin["metadata"]["name"])
            await wait_for(lambda: sim.store.get(sim.nodes, None, "gpu-0000")["status"]["allocatable"]
                           .get("nvidia.com/gpu") == "7", "gpu-0000 advertising 7")
            status = sim.store.get(sim.nodes, None, "gpu-0000")["status"]
            return status["capacity"]["nvidia.com/gpu"], status["allocatable"]["nvidia.com/gpu"]

    assert run(scenario, virtual_time=True) == ("8", "7")
