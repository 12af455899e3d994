"""Red Hat OpenShift AI / Open Data Hub, simulated: DSCInitialization and DataScienceCluster become Ready.

- DSCInitialization: `status.phase` Ready (condition Available=True) after the behaviour's `ready_ms`.
- DataScienceCluster: waits for a Ready DSCInitialization, then after `ready_ms` reports one condition per component
  (`<component>Ready`: True when `managementState: Managed`, False with reason Removed otherwise),
  `status.installedComponents`, condition Ready=True and phase Ready.
The kinds exist only once OLM installed the operator (see olm.py).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, cast

from pytest_topsail.sim.controllers.olm import OperatorController, condition

DSCI_GROUP = "dscinitialization.opendatahub.io"
DSC_GROUP = "datasciencecluster.opendatahub.io"


class RhoaiController(OperatorController):
    name = "rhoai"

    async def on_start(self) -> None:
        self.listen(DSCI_GROUP, "dscinitializations", self.enqueue_on("dsci"))
        self.listen(DSC_GROUP, "datascienceclusters", self.enqueue_on("dsc"))
        self.listen(DSCI_GROUP, "dscinitializations", self._dsci_changed)

    def _dsci_changed(self, event_type: str, dsci: dict[str, Any]) -> None:
        dscs = self.type_of(DSC_GROUP, "datascienceclusters")
        for dsc in self.store.list(dscs) if dscs else ():
            self.enqueue(("dsc", "", dsc["metadata"]["name"]))

    async def reconcile(self, key: Hashable) -> None:
        kind, _, name = cast(tuple[str, str, str], key)
        if kind == "dsci":
            self._reconcile_dsci(key, name)
        elif kind == "dsc":
            self._reconcile_dsc(key, name)

    def _reconcile_dsci(self, key: Hashable, name: str) -> None:
        rtype = self.type_of(DSCI_GROUP, "dscinitializations")
        dsci = self.store.find(rtype, None, name) if rtype else None
        if dsci is None:
            self.forget(key)
            return
        if (dsci.get("status") or {}).get("phase") == "Ready":
            return
        if not self.ready_delay_over(key, dsci):
            if not dsci.get("status"):
                self.set_status(rtype, dsci, {"phase": "Progressing", "conditions": [
                    condition("Available", False, "Reconciling", "initializing the platform")]})
            return
        self.set_status(rtype, dsci, {
            "phase": "Ready",
            "conditions": [condition("Available", True, "ReconcileCompleted", "reconcile completed"),
                           condition("Degraded", False, "ReconcileCompleted", "")],
            "release": {"name": "OpenShift AI Self-Managed", "version": "2.16.0"},
        })
        self.store.record_event(dsci, "ReconcileCompleted", "DSCInitialization is ready", source="rhods-operator")

    def _reconcile_dsc(self, key: Hashable, name: str) -> None:
        rtype = self.type_of(DSC_GROUP, "datascienceclusters")
        dsc = self.store.find(rtype, None, name) if rtype else None
        if dsc is None:
            self.forget(key)
            return
        components = (dsc.get("spec") or {}).get("components") or {}
        managed = {c: (s or {}).get("managementState") == "Managed" for c, s in sorted(components.items())}
        status = dsc.get("status") or {}
        if status.get("phase") == "Ready" and status.get("installedComponents") == managed:
            return
        if not self._dsci_ready():
            self.set_status(rtype, dsc, {"phase": "Not Ready", "conditions": [
                condition("Ready", False, "DSCInitializationNotReady", "waiting for a Ready DSCInitialization")]})
            return
        if not self.ready_delay_over(key, dsc):
            if status.get("phase") != "Progressing":
                self.set_status(rtype, dsc, {"phase": "Progressing", "conditions": [
                    condition("Ready", False, "Reconciling", "deploying the enabled components")]})
            return
        conditions = [
            condition(f"{component}Ready", True, "Ready", f"{component} is ready") if enabled
            else condition(f"{component}Ready", False, "Removed", f"{component} is removed (managementState)")
            for component, enabled in managed.items()
        ]
        conditions.append(condition("Ready", True, "Ready", "all enabled components are ready"))
        self.set_status(rtype, dsc, {"phase": "Ready", "conditions": conditions, "installedComponents": managed,
                                     "release": {"name": "OpenShift AI Self-Managed", "version": "2.16.0"}})
        self.store.record_event(dsc, "Ready", f"components ready: {', '.join(c for c, on in managed.items() if on)}",
                                source="rhods-operator")

    def _dsci_ready(self) -> bool:
        rtype = self.type_of(DSCI_GROUP, "dscinitializations")
        return any((d.get("status") or {}).get("phase") == "Ready" for d in (self.store.list(rtype) if rtype else ()))
