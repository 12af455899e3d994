"""Volume controller: binds each pending PersistentVolumeClaim, after the profile's `volumes.bind` delay, to a new
PersistentVolume `pvc-<claim uid>` of the requested size (dynamic provisioning, reclaim policy Delete: the volume goes
away with its claim). No storage is simulated behind it; WaitForFirstConsumer is not honoured."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, cast

from pytest_topsail.sim.controllers.base import Controller
from pytest_topsail.sim.machinery.apierror import ApiError


class VolumeController(Controller):
    name = "pvcs"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.claims = self.store.resource_type("persistentvolumeclaims")
        self.volumes = self.store.resource_type("persistentvolumes")

    async def on_start(self) -> None:
        self.watch("persistentvolumeclaims", "", self._on_claim)
        for claim in self.store.list(self.claims):
            self._on_claim("ADDED", claim)

    def _on_claim(self, event_type: str, claim: dict[str, Any]) -> None:
        key = (claim["metadata"].get("namespace") or "", claim["metadata"]["name"])
        if event_type == "DELETED":
            self.cancel_timer(key)
            volume = (claim.get("spec") or {}).get("volumeName") or f"pvc-{claim['metadata']['uid']}"
            self.enqueue(("delete-volume", volume))
        elif (claim.get("status") or {}).get("phase") != "Bound" and not self.has_timer(key):
            self.enqueue_after(self.delay(self.profile.volumes.bind, *key), key)

    async def reconcile(self, key: Hashable) -> None:
        if key[0] == "delete-volume":  # type: ignore[index]
            volume = self.store.find(self.volumes, None, key[1])  # type: ignore[index]
            if volume is not None and (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") == "Delete":
                self.store.delete(self.volumes, None, key[1])  # type: ignore[index]
            return
        namespace, name = cast(tuple[str, str], key)
        claim = self.store.find(self.claims, namespace, name)
        if claim is None or (claim.get("status") or {}).get("phase") == "Bound":
            return
        spec = dict(claim.get("spec") or {})
        size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        access_modes = spec.get("accessModes") or ["ReadWriteOnce"]
        storage_class = spec.get("storageClassName") or self.profile.volumes.storage_class
        volume_name = spec.get("volumeName") or f"pvc-{claim['metadata']['uid']}"
        if self.store.find(self.volumes, None, volume_name) is None:
            volume = {
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": volume_name, "annotations": {"pv.kubernetes.io/provisioned-by": "sim.topsail.io"}},
                "spec": {
                    "capacity": {"storage": size}, "accessModes": access_modes,
                    "persistentVolumeReclaimPolicy": "Delete", "storageClassName": storage_class,
                    "volumeMode": spec.get("volumeMode", "Filesystem"),
                    "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
                                 "name": name, "uid": claim["metadata"]["uid"]},
                    "hostPath": {"path": f"/sim/volumes/{volume_name}"},
                },
            }
            try:
                created = self.store.create(self.volumes, volume)
                self.store.update(self.volumes, {**created, "status": {"phase": "Bound"}}, subresource="status")
            except ApiError as exc:
                if exc.reason != "AlreadyExists":
                    raise
        metadata = dict(claim["metadata"])
        metadata["annotations"] = {**(metadata.get("annotations") or {}), "pv.kubernetes.io/bind-completed": "yes",
                                   "pv.kubernetes.io/bound-by-controller": "yes"}
        spec.update(volumeName=volume_name, storageClassName=storage_class)
        spec.setdefault("volumeMode", "Filesystem")
        claim = self.store.update(self.claims, {**claim, "metadata": metadata, "spec": spec})
        status = {"phase": "Bound", "accessModes": access_modes, "capacity": {"storage": size}}
        self.store.update(self.claims, {**claim, "status": status}, subresource="status")
        self.store.record_event(claim, "ProvisioningSucceeded",
                                f"Successfully provisioned volume {volume_name}", source="sim-provisioner")
