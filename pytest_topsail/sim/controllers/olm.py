"""Operator Lifecycle Manager, simulated: CatalogSource, OperatorGroup, Subscription -> InstallPlan ->
ClusterServiceVersion (Pending -> Installing -> Succeeded), and the CRDs each operator owns (registered by the
InstallPlan, as OLM does).

The catalog is built in (`PACKAGES`): the NFD, NVIDIA GPU, RHOAI and Open Data Hub operators; every CatalogSource
serves it (a CatalogSource's READY connection state is a stage of operator_stages.yaml). An unknown package gives
the Subscription a ResolutionFailed condition; a namespace without an OperatorGroup makes the CSV fail with reason
NoOperatorGroup, like the real OLM.

Timings and faults of the simulated operators come from the ConfigMap `kube-system/topsail-sim-operators` (key
`behaviour.yaml`, see `OperatorBehaviour`), read each time a decision needs them: the fixtures create it from the
suite's `cluster.sim.operators` section; without it the defaults apply. A package listed in `never_ready` keeps its
CSV Installing forever (for testing timeouts).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, cast

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_topsail.sim.controllers.base import Controller, now_seconds, set_condition
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.registry.crd_schemas import openapi_schema
from pytest_topsail.yamlparse import parse_yaml

log = logging.getLogger(__name__)

OLM_GROUP = "operators.coreos.com"
BEHAVIOUR_NAMESPACE = "kube-system"
BEHAVIOUR_CONFIGMAP = "topsail-sim-operators"
BEHAVIOUR_KEY = "behaviour.yaml"
MARKETPLACE_NAMESPACE = "openshift-marketplace"
DEFAULT_CATALOGS = ("redhat-operators", "certified-operators", "community-operators")


class OperatorBehaviour(BaseModel):
    """How the simulated operators behave (ConfigMap kube-system/topsail-sim-operators, key behaviour.yaml)."""

    model_config = ConfigDict(extra="forbid")

    install_ms: float = Field(200, ge=0)  # InstallPlan created -> CSV Succeeded
    ready_ms: float = Field(100, ge=0)  # an operator's custom resource created -> ready
    never_ready: list[str] = Field(default_factory=list)  # packages whose CSV stays Installing


@dataclass(frozen=True)
class OwnedCrd:
    group: str
    version: str
    kind: str
    plural: str
    scope: str  # "Namespaced" | "Cluster"
    short_names: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"

    def manifest(self) -> dict[str, Any]:
        manifest = crd_manifest(self.group, self.version, self.kind, self.plural, self.scope)
        if self.short_names:
            manifest["spec"]["names"]["shortNames"] = list(self.short_names)
        return manifest


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    display_name: str
    deployment: str
    owned: tuple[OwnedCrd, ...]

    @property
    def csv_name(self) -> str:
        return f"{self.name}.v{self.version}"


_DSCI = OwnedCrd("dscinitialization.opendatahub.io", "v1", "DSCInitialization", "dscinitializations", "Cluster",
                 ("dsci",))
_DSC = OwnedCrd("datasciencecluster.opendatahub.io", "v1", "DataScienceCluster", "datascienceclusters", "Cluster",
                ("dsc",))

PACKAGES: dict[str, Package] = {
    p.name: p
    for p in (
        Package("nfd", "4.17.0", "Node Feature Discovery Operator", "nfd-controller-manager", (
            OwnedCrd("nfd.openshift.io", "v1", "NodeFeatureDiscovery", "nodefeaturediscoveries", "Namespaced"),
            OwnedCrd("nfd.openshift.io", "v1alpha1", "NodeFeatureRule", "nodefeaturerules", "Namespaced"),
        )),
        Package("gpu-operator-certified", "24.9.2", "NVIDIA GPU Operator", "gpu-operator", (
            OwnedCrd("nvidia.com", "v1", "ClusterPolicy", "clusterpolicies", "Cluster"),
            OwnedCrd("nvidia.com", "v1alpha1", "NVIDIADriver", "nvidiadrivers", "Cluster"),
        )),
        Package("rhods-operator", "2.16.0", "Red Hat OpenShift AI", "rhods-operator", (_DSCI, _DSC)),
        Package("opendatahub-operator", "2.22.0", "Open Data Hub Operator", "opendatahub-operator-controller-manager",
                (_DSCI, _DSC)),
    )
}

# The OLM kinds, registered when the simulator starts (an OpenShift cluster has them from the start).
OLM_CRDS = (
    OwnedCrd(OLM_GROUP, "v1alpha1", "CatalogSource", "catalogsources", "Namespaced", ("catsrc",)),
    OwnedCrd(OLM_GROUP, "v1alpha1", "Subscription", "subscriptions", "Namespaced", ("sub", "subs")),
    OwnedCrd(OLM_GROUP, "v1alpha1", "InstallPlan", "installplans", "Namespaced", ("ip",)),
    OwnedCrd(OLM_GROUP, "v1alpha1", "ClusterServiceVersion", "clusterserviceversions", "Namespaced", ("csv", "csvs")),
    OwnedCrd(OLM_GROUP, "v1", "OperatorGroup", "operatorgroups", "Namespaced", ("og",)),
)


def crd_manifest(group: str, version: str, kind: str, plural: str, scope: str) -> dict[str, Any]:
    """A CustomResourceDefinition serving one version with a status subresource and its structural schema."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [{
                "name": version, "served": True, "storage": True, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": openapi_schema(group, kind, version)},
            }],
        },
    }


class OperatorController(Controller):
    """Shared machinery of the simulated operators (OLM here, the stages of stages.py): reading the operator behaviour
    ConfigMap, looking up kinds that may not exist yet (CRDs registered at run time), writing a status."""

    def behaviour(self) -> OperatorBehaviour:
        configmap = self.store.find(self.store.resource_type("configmaps"), BEHAVIOUR_NAMESPACE, BEHAVIOUR_CONFIGMAP)
        text = ((configmap or {}).get("data") or {}).get(BEHAVIOUR_KEY)
        if not text:
            return OperatorBehaviour()
        try:
            return OperatorBehaviour.model_validate(parse_yaml(text) or {})
        except (yaml.YAMLError, ValidationError) as exc:
            log.warning("sim %s: ConfigMap %s/%s is invalid, using defaults: %s", self.name, BEHAVIOUR_NAMESPACE,
                        BEHAVIOUR_CONFIGMAP, exc)
            return OperatorBehaviour()

    def type_of(self, group: str, plural: str) -> Any | None:
        try:
            return self.store.resource_type(plural, group)
        except ApiError:
            return None

    def set_status(self, rtype: Any, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        if obj.get("status") == status:
            return obj
        return self.store.update(rtype, {**obj, "status": status}, subresource="status")

    def enqueue_on(self, prefix: str) -> Callable[[str, dict[str, Any]], None]:
        def handler(event_type: str, obj: dict[str, Any]) -> None:
            if event_type != "DELETED":
                meta = obj.get("metadata") or {}
                self.enqueue((prefix, meta.get("namespace") or "", meta.get("name") or ""))
        return handler


def condition(kind: str, status: bool, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message,
            "lastTransitionTime": now_seconds()}


class OlmController(OperatorController):
    name = "olm"

    async def on_start(self) -> None:
        for crd in OLM_CRDS:
            self.store.register_crd(crd.manifest())
        self.catalogsources = self.store.resource_type("catalogsources", OLM_GROUP)
        self.subscriptions = self.store.resource_type("subscriptions", OLM_GROUP)
        self.installplans = self.store.resource_type("installplans", OLM_GROUP)
        self.csvs = self.store.resource_type("clusterserviceversions", OLM_GROUP)
        self.operatorgroups = self.store.resource_type("operatorgroups", OLM_GROUP)
        self.crds = self.store.resource_type("customresourcedefinitions", "apiextensions.k8s.io")
        self.watch_key((OLM_GROUP, "subscriptions"), self.enqueue_on("subscription"))
        self.watch_key((OLM_GROUP, "installplans"), self.enqueue_on("installplan"))
        self.watch_key((OLM_GROUP, "clusterserviceversions"), self.enqueue_on("csv"))
        self.watch_key((OLM_GROUP, "operatorgroups"), self._operatorgroup_changed)
        self._create_default_catalogs()

    def _operatorgroup_changed(self, event_type: str, group: dict[str, Any]) -> None:
        namespace = group["metadata"].get("namespace") or ""
        for csv in self.store.list(self.csvs, namespace):
            self.enqueue(("csv", namespace, csv["metadata"]["name"]))

    def _create_default_catalogs(self) -> None:
        namespaces = self.store.resource_type("namespaces")
        if self.store.find(namespaces, None, MARKETPLACE_NAMESPACE) is None:
            self.store.create(namespaces, {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": MARKETPLACE_NAMESPACE}})
        for name in DEFAULT_CATALOGS:
            if self.store.find(self.catalogsources, MARKETPLACE_NAMESPACE, name) is None:
                self.store.create(self.catalogsources, {
                    "apiVersion": f"{OLM_GROUP}/v1alpha1", "kind": "CatalogSource",
                    "metadata": {"name": name, "namespace": MARKETPLACE_NAMESPACE},
                    "spec": {"sourceType": "grpc", "displayName": name, "publisher": "simulated",
                             "image": f"registry.sim.local/{name}-index:latest"},
                })

    async def reconcile(self, key: Hashable) -> None:
        kind, namespace, name = cast(tuple[str, str, str], key)
        if kind == "subscription":
            self._reconcile_subscription(namespace, name)
        elif kind == "installplan":
            self._reconcile_installplan(namespace, name)
        elif kind == "csv":
            self._reconcile_csv(namespace, name)

    def _reconcile_subscription(self, namespace: str, name: str) -> None:
        sub = self.store.find(self.subscriptions, namespace, name)
        if sub is None or sub.get("metadata", {}).get("deletionTimestamp"):
            return
        status = dict(sub.get("status") or {})
        if status.get("installPlanRef"):
            self._sync_installed(sub)
            return
        spec = sub.get("spec") or {}
        source, source_ns = spec.get("source", ""), spec.get("sourceNamespace") or namespace
        package = PACKAGES.get(spec.get("name", ""))
        conditions = list(status.get("conditions") or [])
        if self.store.find(self.catalogsources, source_ns, source) is None:
            message = f"targeted catalogsource {source_ns}/{source} missing"
            if _has_condition(conditions, "CatalogSourcesUnhealthy", message):
                return  # already reported: one event per problem, not one per reconcile
            unhealthy = condition("CatalogSourcesUnhealthy", True, "UnhealthyCatalogSourceFound", message)
            conditions = set_condition(conditions, unhealthy)
            self.set_status(self.subscriptions, sub, {**status, "conditions": conditions, "state": "UpgradePending"})
            self.store.record_event(sub, "ResolutionFailed", message, "Warning", source="operator-lifecycle-manager")
            return
        if package is None:
            message = (f"constraints not satisfiable: no operators found in package {spec.get('name')} in the "
                       f"catalog referenced by subscription {name}")
            if _has_condition(conditions, "ResolutionFailed", message):
                return
            conditions = set_condition(conditions, condition("ResolutionFailed", True, "ConstraintsNotSatisfiable",
                                                             message))
            self.set_status(self.subscriptions, sub, {**status, "conditions": conditions})
            self.store.record_event(sub, "ResolutionFailed", message, "Warning", source="operator-lifecycle-manager")
            return
        plan_name = "install-" + hashlib.blake2b(f"{namespace}/{name}/{package.csv_name}".encode(),
                                                 digest_size=4).hexdigest()[:5]
        if self.store.find(self.installplans, namespace, plan_name) is None:
            meta = sub["metadata"]
            self.store.create(self.installplans, {
                "apiVersion": f"{OLM_GROUP}/v1alpha1", "kind": "InstallPlan",
                "metadata": {"name": plan_name, "namespace": namespace, "ownerReferences": [{
                    "apiVersion": sub["apiVersion"], "kind": "Subscription", "name": meta["name"],
                    "uid": meta["uid"], "blockOwnerDeletion": False, "controller": False}]},
                "spec": {"approval": spec.get("installPlanApproval") or "Automatic", "approved": True,
                         "clusterServiceVersionNames": [package.csv_name], "generation": 1},
            })
        conditions = set_condition(conditions, condition("CatalogSourcesUnhealthy", False, "AllCatalogSourcesHealthy",
                                                         "all available catalogsources are healthy"))
        self.set_status(self.subscriptions, sub, {
            **status, "conditions": conditions, "currentCSV": package.csv_name, "state": "UpgradePending",
            "installPlanRef": {"apiVersion": f"{OLM_GROUP}/v1alpha1", "kind": "InstallPlan", "name": plan_name,
                               "namespace": namespace},
            "installplan": {"apiVersion": f"{OLM_GROUP}/v1alpha1", "kind": "InstallPlan", "name": plan_name},
            "lastUpdated": now_seconds(),
        })
        self.store.record_event(sub, "InstallPlanCreated", f"install plan {plan_name} created for {package.csv_name}",
                                source="operator-lifecycle-manager")

    def _sync_installed(self, sub: dict[str, Any]) -> None:
        status = sub.get("status") or {}
        csv = self.store.find(self.csvs, sub["metadata"]["namespace"], status.get("currentCSV", ""))
        if csv is None or (csv.get("status") or {}).get("phase") != "Succeeded":
            return
        if status.get("installedCSV") != csv["metadata"]["name"]:
            self.set_status(self.subscriptions, sub, {**status, "installedCSV": csv["metadata"]["name"],
                                                      "state": "AtLatestKnown", "lastUpdated": now_seconds()})

    def _reconcile_installplan(self, namespace: str, name: str) -> None:
        plan = self.store.find(self.installplans, namespace, name)
        if plan is None or (plan.get("status") or {}).get("phase") == "Complete":
            return
        csv_name = (plan.get("spec") or {}).get("clusterServiceVersionNames", [""])[0]
        package = next((p for p in PACKAGES.values() if p.csv_name == csv_name), None)
        if package is None:
            return
        for crd in package.owned:
            self.store.register_crd(crd.manifest())
        if self.store.find(self.csvs, namespace, csv_name) is None:
            self.store.create(self.csvs, csv_manifest(package, namespace))
        self.set_status(self.installplans, plan, {
            "phase": "Complete", "catalogSources": [],
            "conditions": [condition("Installed", True, "", "")],
            "plan": [{"resolving": csv_name, "status": "Created",
                      "resource": {"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition",
                                   "name": crd.name, "version": "v1"}} for crd in package.owned],
        })

    def _reconcile_csv(self, namespace: str, name: str) -> None:
        csv = self.store.find(self.csvs, namespace, name)
        if csv is None or csv.get("metadata", {}).get("deletionTimestamp"):
            return
        status = csv.get("status") or {}
        phase = status.get("phase")
        package = next((p for p in PACKAGES.values() if p.csv_name == name), None)
        if phase == "Succeeded" or package is None:
            self._requeue_subscriptions(namespace)
            return
        if not self.store.list(self.operatorgroups, namespace):
            if phase != "Failed":
                self._set_phase(csv, "Failed", "NoOperatorGroup", "csv in namespace with no operatorgroups")
            return
        behaviour = self.behaviour()
        if phase in (None, "", "Pending", "Failed"):
            self._set_phase(csv, "Installing", "InstallWaiting",
                            f"installing: waiting for deployment {package.deployment} to become ready")
            if package.name not in behaviour.never_ready:
                self.enqueue_after(behaviour.install_ms / 1000.0, ("csv", namespace, name))
            return
        if phase == "Installing" and package.name not in behaviour.never_ready:
            if self.has_timer(("csv", namespace, name)):
                return
            self._set_phase(csv, "Succeeded", "InstallSucceeded", "install strategy completed with no errors")
            self._requeue_subscriptions(namespace)

    def _set_phase(self, csv: dict[str, Any], phase: str, reason: str, message: str) -> None:
        status = dict(csv.get("status") or {})
        conditions = list(status.get("conditions") or [])
        conditions.append({"phase": phase, "reason": reason, "message": message, "lastTransitionTime": now_seconds(),
                           "lastUpdateTime": now_seconds()})
        status.update(phase=phase, reason=reason, message=message, conditions=conditions[-10:],
                      lastTransitionTime=now_seconds(), lastUpdateTime=now_seconds())
        self.set_status(self.csvs, csv, status)
        kind = "Warning" if phase == "Failed" else "Normal"
        self.store.record_event(csv, reason, message, kind, source="operator-lifecycle-manager")

    def _requeue_subscriptions(self, namespace: str) -> None:
        for sub in self.store.list(self.subscriptions, namespace):
            self.enqueue(("subscription", namespace, sub["metadata"]["name"]))


def _has_condition(conditions: list[dict[str, Any]], kind: str, message: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" and c.get("message") == message
               for c in conditions)


def csv_manifest(package: Package, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{OLM_GROUP}/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": package.csv_name, "namespace": namespace,
                     "labels": {f"operators.coreos.com/{package.name}.{namespace}": ""}},
        "spec": {
            "displayName": package.display_name,
            "version": package.version,
            "customresourcedefinitions": {"owned": [
                {"name": crd.name, "kind": crd.kind, "version": crd.version} for crd in package.owned]},
            "install": {"strategy": "deployment", "spec": {"deployments": [{"name": package.deployment}]}},
        },
    }
