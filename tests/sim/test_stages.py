"""Simple operators as data (sim/controllers/stages.py + operator_stages.yaml): NFD, the GPU operator's
ClusterPolicy and OpenShift AI's DSCInitialization / DataScienceCluster on the virtual clock, and the messages for a
wrong stage file."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from controller_harness import CORE, condition_status, phase, profile, run, running_sim, wait_for

from pytest_topsail.errors import TopsailError
from pytest_topsail.sim.controllers.olm import PACKAGES, crd_manifest
from pytest_topsail.sim.controllers.stages import load_stages

SPECS = [*CORE, "pytest_topsail.sim.controllers.stages:StagesController",
         "pytest_topsail.sim.controllers.gpuoperator:GpuOperatorController"]  # the ClusterPolicy's status


def _install(store: Any, *packages: str) -> dict[str, Any]:
    """Register the kinds the packages own (as OLM's InstallPlan does); their resource types by plural."""
    return {crd.plural: store.register_crd(crd.manifest()) for name in packages for crd in PACKAGES[name].owned}


def _status(store: Any, rtype: Any, name: str) -> dict[str, Any]:
    return store.get(rtype, None, name).get("status") or {}


def test_openshift_ai_waits_for_its_initialization_then_reports_each_component():
    async def scenario():
        async with running_sim(profile(), SPECS) as sim:
            kinds = _install(sim.store, "rhods-operator")
            dsc, dsci = kinds["datascienceclusters"], kinds["dscinitializations"]
            sim.store.create(dsc, {"apiVersion": "datasciencecluster.opendatahub.io/v1", "kind": "DataScienceCluster",
                                   "metadata": {"name": "default-dsc"}, "spec": {"components": {
                                       "kserve": {"managementState": "Managed"},
                                       "kueue": {"managementState": "Removed"}}}})
            waiting = await wait_for(lambda: _status(sim.store, dsc, "default-dsc").get("phase"), "DSC status")
            assert waiting == "Not Ready"
            await asyncio.sleep(5)
            assert phase(sim.store.get(dsc, None, "default-dsc")) == "Not Ready"
            sim.store.create(dsci, {"apiVersion": "dscinitialization.opendatahub.io/v1", "kind": "DSCInitialization",
                                    "metadata": {"name": "default-dsci"}, "spec": {}})
            started = asyncio.get_running_loop().time()
            await wait_for(lambda: phase(sim.store.get(dsci, None, "default-dsci")) == "Ready", "DSCI Ready")
            await wait_for(lambda: phase(sim.store.get(dsc, None, "default-dsc")) == "Ready", "DSC Ready")
            elapsed = asyncio.get_running_loop().time() - started
            ready = sim.store.get(dsc, None, "default-dsc")
            assert ready["status"]["installedComponents"] == {"kserve": True, "kueue": False}
            assert condition_status(ready, "KserveReady") == "True"
            assert condition_status(ready, "KueueReady") == "False"
            assert condition_status(ready, "Ready") == "True"
            assert 0.2 <= elapsed < 0.3  # ready_ms (100 ms) for the initialization, then for the cluster
            events = {e["reason"]: e["message"] for e in sim.store.list(sim.events)}
            assert events["Ready"] == "components ready: kserve"
            assert events["ReconcileCompleted"] == "DSCInitialization is ready"

    run(scenario, virtual_time=True)


def test_cluster_policy_is_ready_only_when_every_gpu_node_advertises_gpus():
    async def scenario():
        prof = profile(node_pools=[{"name": "gpu", "count": 2, "gpu_profile": "a100", "not_ready": 1},
                                   {"name": "cpu", "count": 1, "gpu_profile": "none"}])
        async with running_sim(prof, SPECS) as sim:
            kinds = _install(sim.store, "gpu-operator-certified", "nfd")
            policies = kinds["clusterpolicies"]
            components = ("operator", "daemonsets", "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter",
                          "nodeStatusExporter", "gfd")  # what the CRD requires
            sim.store.create(policies, {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                                        "metadata": {"name": "policy"}, "spec": {c: {} for c in components}})
            nfd = kinds["nodefeaturediscoveries"]
            sim.store.create(nfd, {"apiVersion": "nfd.openshift.io/v1", "kind": "NodeFeatureDiscovery",
                                   "metadata": {"name": "nfd-instance", "namespace": "default"}, "spec": {}})
            await asyncio.sleep(2)
            policy = sim.store.get(policies, None, "policy")
            assert policy["status"]["state"] == "notReady"
            ready = next(c for c in policy["status"]["conditions"] if c["type"] == "Ready")
            assert ready["message"] == "waiting for 1 GPU node(s) to advertise nvidia.com/gpu: gpu-0001"
            assert condition_status(sim.store.get(nfd, "default", "nfd-instance"), "Available") == "True"
            node = sim.store.get(sim.nodes, None, "gpu-0001")
            conditions = [{**c, "status": "True"} if c["type"] == "Ready" else c
                          for c in node["status"]["conditions"]]
            sim.store.update(sim.nodes, {**node, "status": {**node["status"], "conditions": conditions}},
                             subresource="status")
            await wait_for(lambda: _status(sim.store, policies, "policy").get("state") == "ready", "policy ready")
            assert condition_status(sim.store.get(policies, None, "policy"), "Ready") == "True"

    run(scenario, virtual_time=True)


@pytest.mark.parametrize(("text", "expected"), [
    ("- {name: a, resource: pods, status: '{}', delay: soon}\n",
     "stage [0] a: key delay: 'soon' is no operator behaviour field; known: install_ms, never_ready, ready_ms"),
    ("- {name: b, resource: pods, status: '{% if %}'}\n", "stage [0] b: key status: not a valid Jinja template"),
    ("- {name: c, resource: pods}\n", "stage [0] c: key status: required key missing"),
    ("name: d\n", "must be a list of stages"),
])
def test_a_wrong_stage_file_is_one_message_naming_the_file_and_the_stage(tmp_path, text, expected):
    path = tmp_path / "stages.yaml"
    path.write_text(text)
    with pytest.raises(TopsailError) as info:
        load_stages(path)
    assert str(info.value).startswith(f"simulator stages {path}: ")
    assert expected in str(info.value)


def test_a_suite_describes_its_own_operator_as_stages(tmp_path):
    (tmp_path / "widgets.yaml").write_text(
        "- name: widget-ready\n  resource: widgets.example.com\n  when: obj.status.phase != 'Ready'\n  delay: 250\n"
        "  status: 'phase: Ready\n\n    size: {{ obj.spec.size * 2 }}'\n"
        "  event: {reason: Ready, message: 'widget {{ obj.metadata.name }} is ready', source: widget-operator}\n")
    (tmp_path / "widgets.py").write_text(
        "from pathlib import Path\n\nfrom pytest_topsail.sim.controllers.stages import StagesController\n\n\n"
        "class Widgets(StagesController):\n    name = 'widgets'\n"
        "    stages_file = Path(__file__).with_name('widgets.yaml')\n")

    async def scenario():
        async with running_sim(profile(), [*CORE, f"{tmp_path / 'widgets.py'}:Widgets"]) as sim:
            widgets = sim.store.register_crd(crd_manifest("example.com", "v1", "Widget", "widgets", "Namespaced"))
            sim.store.create(widgets, {"apiVersion": "example.com/v1", "kind": "Widget",
                                       "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 3}})
            started = asyncio.get_running_loop().time()
            await wait_for(lambda: sim.store.get(widgets, "default", "w").get("status"), "widget status")
            assert asyncio.get_running_loop().time() - started == pytest.approx(0.25, abs=0.01)
            assert sim.store.get(widgets, "default", "w")["status"] == {"phase": "Ready", "size": 6}
            assert sim.event_reasons("w") == ["Ready"]

    run(scenario, virtual_time=True)


def test_the_default_catalog_sources_connect_once_olm_created_them():
    async def scenario():
        specs = [*CORE, "pytest_topsail.sim.controllers.olm:OlmController", *SPECS[len(CORE):]]
        async with running_sim(profile(), specs) as sim:
            catalogs = sim.store.resource_type("catalogsources", "operators.coreos.com")
            ready = await wait_for(lambda: sim.store.get(catalogs, "openshift-marketplace", "redhat-operators")
                                   .get("status"), "catalog status")
            assert ready["connectionState"]["lastObservedState"] == "READY"
            assert ready["connectionState"]["address"] == "redhat-operators.openshift-marketplace.svc:50051"
            assert ready["registryService"] == {"protocol": "grpc", "serviceName": "redhat-operators",
                                                "serviceNamespace": "openshift-marketplace", "port": "50051"}

    run(scenario, virtual_time=True)
