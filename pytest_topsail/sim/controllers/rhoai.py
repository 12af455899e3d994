"""OpenShift AI's components serving their kinds (docs/simulator-profile.md "Fresh cluster"): a component's CRDs are
registered while a DataScienceCluster (datasciencecluster.opendatahub.io/v1) has it `managementState: Managed`, and
removed (with every object of theirs) when it turns Removed or the DataScienceCluster is deleted, as the
opendatahub-operator deploys and deletes the component's manifests. `Unmanaged` leaves them as they are.

The components (`COMPONENT_CRDS`): trainingoperator -> the Kubeflow training jobs (kubeflow.org), kserve ->
serving.kserve.io, kueue -> kueue.x-k8s.io. A component in the profile's `preinstalled` has its CRDs from the start
and keeps them whatever the DataScienceCluster says. Only CRDs this controller registered (label
`sim.topsail.io/component`) are ever removed. The DataScienceCluster's status is a stage of operator_stages.yaml,
Ready only once the Managed components' kinds are served.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from pytest_topsail.sim.controllers.kueue import crd_manifests as kueue_crds
from pytest_topsail.sim.controllers.olm import OperatorController, crd_manifest
from pytest_topsail.sim.controllers.pytorchjob import crd_manifest as pytorchjob_crd

DSC_KEY = ("datasciencecluster.opendatahub.io", "datascienceclusters")
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
COMPONENT_LABEL = "sim.topsail.io/component"
SYNC = "sync"


def _kserve_crds() -> list[dict[str, Any]]:
    group = "serving.kserve.io"
    isvc = crd_manifest(group, "v1beta1", "InferenceService", "inferenceservices", "Namespaced")
    isvc["spec"]["names"]["shortNames"] = ["isvc"]
    return [isvc, crd_manifest(group, "v1alpha1", "ServingRuntime", "servingruntimes", "Namespaced"),
            crd_manifest(group, "v1alpha1", "ClusterServingRuntime", "clusterservingruntimes", "Cluster"),
            crd_manifest(group, "v1alpha1", "InferenceGraph", "inferencegraphs", "Namespaced"),
            crd_manifest(group, "v1alpha1", "TrainedModel", "trainedmodels", "Namespaced"),
            crd_manifest(group, "v1alpha1", "ClusterStorageContainer", "clusterstoragecontainers", "Cluster")]


def _training_crds() -> list[dict[str, Any]]:
    others = [crd_manifest("kubeflow.org", "v1", kind, f"{kind.lower()}s", "Namespaced")
              for kind in ("TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob")]
    return [pytorchjob_crd(), *others]


COMPONENT_CRDS = {"trainingoperator": _training_crds, "kserve": _kserve_crds, "kueue": kueue_crds}


def component_crds(component: str) -> list[dict[str, Any]]:
    """The CRD manifests a component serves, labelled with the component."""
    manifests = COMPONENT_CRDS[component]()
    for manifest in manifests:
        manifest["metadata"]["labels"] = {**(manifest["metadata"].get("labels") or {}), COMPONENT_LABEL: component}
    return manifests


def management_states(dscs: list[dict[str, Any]]) -> dict[str, str]:
    """component -> Managed / Removed / Unmanaged over the DataScienceClusters not being deleted (Managed wins)."""
    states: dict[str, str] = {}
    for dsc in dscs:
        if dsc["metadata"].get("deletionTimestamp"):
            continue
        for component, settings in (((dsc.get("spec") or {}).get("components") or {}).items()):
            state = str((settings or {}).get("managementState") or "Removed")
            if states.get(component) != "Managed":
                states[component] = state
    return states


class RhoaiController(OperatorController):
    name = "rhoai"

    async def on_start(self) -> None:
        self.crds = self.store.resource_type(*reversed(CRD_KEY))
        self.preinstalled = {component for component in COMPONENT_CRDS if self.profile.preinstalls(component)}
        for component in sorted(self.preinstalled):
            for manifest in component_crds(component):
                self.store.register_crd(manifest)
        self.watch_key(DSC_KEY, lambda _event, _obj: self.enqueue(SYNC))
        self.enqueue(SYNC)

    async def reconcile(self, key: Hashable) -> None:
        dsc_type = self.type_of(*DSC_KEY)
        states = management_states(self.store.list(dsc_type) if dsc_type is not None else [])
        for component in COMPONENT_CRDS:
            if component in self.preinstalled or states.get(component) == "Unmanaged":
                continue
            served = states.get(component) == "Managed"
            for manifest in component_crds(component):
                name = manifest["metadata"]["name"]
                existing = self.store.find(self.crds, None, name)
                if served and existing is None:
                    self.store.register_crd(manifest)
                elif not served and existing is not None and \
                        (existing["metadata"].get("labels") or {}).get(COMPONENT_LABEL) == component:
                    self.store.delete(self.crds, None, name)
