"""Slow or failing volume attach, the kubelet's side of a `volume_attach` fault event (faults.py fires it).

A pod that starts its containers after such a fault fired, matches its `pod` selector and mounts its PVC (`claim`,
any PVC when not given) stays ContainerCreating, as on a real cluster whose CSI driver cannot attach the disk:
the attach/detach controller records `FailedAttachVolume` Warnings about the pod (`AttachVolume.Attach failed for
volume "pvc-..."`), and from the second try on the kubelet records `FailedMount` (`Unable to attach or mount
volumes: unmounted volumes=[...]`). Tries follow at 0.5 s doubling up to 30 s (the simulator's time: virtual in
tests). With `attach_delay_s` the volume is attached that long after the pod's first try (`SuccessfulAttachVolume`)
and the containers start; without it never, until the pod is deleted. Nothing here is random: the same profile
delays the same pods by the same time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pytest_topsail.sim.controllers.faults import kubelet_hooks
from pytest_topsail.sim.controllers.profile import FaultEvent

FIRST_RETRY_S = 0.5
MAX_RETRY_S = 30.0


def claims_of(pod: dict[str, Any]) -> dict[str, str]:
    """Volume name -> PVC name of the pod's persistentVolumeClaim volumes."""
    return {str(v.get("name")): str(v["persistentVolumeClaim"].get("claimName"))
            for v in (pod.get("spec") or {}).get("volumes") or () if v.get("persistentVolumeClaim")}


def fault_for(faults: list[FaultEvent], pod: dict[str, Any]) -> tuple[FaultEvent, dict[str, str]] | None:
    """The first fault that hits the pod, with the volumes (name -> claim) it keeps unattached; None when none."""
    meta = pod.get("metadata") or {}
    claims = claims_of(pod)
    for event in faults:
        if event.pod is not None and not event.pod.matches(meta.get("namespace") or "", meta.get("name") or "",
                                                            meta.get("labels") or {}):
            continue
        hit = {volume: claim for volume, claim in claims.items() if event.claim in (None, claim)}
        if hit:
            return event, hit
    return None


def attach_wait(store: Any, pod: dict[str, Any]) -> float | None:
    """Seconds until the next attach try of the pod's volumes, or None when they are attached (or no fault hits
    them). Records the Events of this try."""
    hooks = kubelet_hooks(store)
    if not hooks.attach_faults:
        return None
    meta = pod["metadata"]
    found = fault_for(hooks.attach_faults, pod)
    if found is None or hooks.attach_waits.get(meta["uid"], (0.0, 0))[1] < 0:
        return None
    event, volumes = found
    now = asyncio.get_running_loop().time()
    first, tries = hooks.attach_waits.get(meta["uid"], (now, 0))
    waited = now - first
    names = {volume: _volume_name(store, meta.get("namespace") or "", claim) for volume, claim in volumes.items()}
    if event.attach_delay_s is not None and waited >= event.attach_delay_s - 1e-6:
        hooks.attach_waits[meta["uid"]] = (first, -1)  # attached: a restart of its containers starts at once
        for name in names.values():
            store.record_event(pod, "SuccessfulAttachVolume", f'AttachVolume.Attach succeeded for volume "{name}"',
                               source="attachdetach-controller")
        return None
    hooks.attach_waits[meta["uid"]] = (first, tries + 1)
    for name in names.values():
        store.record_event(pod, "FailedAttachVolume", f'AttachVolume.Attach failed for volume "{name}" : rpc error: '
                           "code = DeadlineExceeded desc = context deadline exceeded", type="Warning",
                           source="attachdetach-controller")
    if tries:
        listed = ", ".join(sorted(volumes))
        store.record_event(pod, "FailedMount", f"Unable to attach or mount volumes: unmounted volumes=[{listed}], "
                           f"unattached volumes=[{listed}]: timed out waiting for the condition", type="Warning",
                           source="kubelet")
    retry = min(MAX_RETRY_S, FIRST_RETRY_S * 2 ** tries)
    if event.attach_delay_s is not None:
        retry = min(retry, max(0.0, event.attach_delay_s - waited))
    return max(0.01, retry)


def _volume_name(store: Any, namespace: str, claim: str) -> str:
    """The PersistentVolume bound to the claim (`pvc-<uid>` once provisioned), else the claim's name."""
    found = store.find(store.resource_type("persistentvolumeclaims"), namespace, claim)
    return str(((found or {}).get("spec") or {}).get("volumeName") or claim)
