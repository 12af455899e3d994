"""Deployment controller (apps/v1), simplified: the Deployment owns its pods directly (no ReplicaSet objects).
Pods carry a `pod-template-hash` label; when the template changes, new pods are created and the old ones deleted once
the new ones are available (Recreate: deleted first). Status: observedGeneration, replicas, updatedReplicas,
readyReplicas, availableReplicas, unavailableReplicas, Available and Progressing conditions (what
`kubectl rollout status` and `kubectl wait --for=condition=Available` read). minReadySeconds is not simulated."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, cast

from pytest_topsail.sim.controllers.base import condition, now_seconds, set_condition
from pytest_topsail.sim.controllers.workload import WorkloadController, owned_pods, pod_from_template, suffix
from pytest_topsail.sim.machinery.apierror import ApiError

if TYPE_CHECKING:
    from pytest_topsail.sim.controllers.profile import Stage

HASH_LABEL = "pod-template-hash"


def template_hash(deployment: dict[str, Any]) -> str:
    text = json.dumps((deployment.get("spec") or {}).get("template") or {}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _ready(pod: dict[str, Any]) -> bool:
    cond = condition(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


class DeploymentController(WorkloadController):
    name = "deployments"
    owner_kind = "Deployment"
    owner_resource = ("deployments", "apps")

    def sync_stage(self) -> Stage:
        return self.profile.deployments.sync

    async def reconcile(self, key: Hashable) -> None:
        namespace, name = cast(tuple[str, str], key)
        deployment = self.store.find(self.owners, namespace, name)
        if deployment is None or deployment["metadata"].get("deletionTimestamp"):
            return
        spec = deployment.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        current_hash = template_hash(deployment)
        pods = [p for p in owned_pods(self.store, self.pods, deployment) if not p["metadata"].get("deletionTimestamp")]
        finished = [p for p in pods if p.get("status", {}).get("phase") in ("Succeeded", "Failed")]
        self._delete(finished)  # a ReplicaSet replaces pods that ended
        live = [p for p in pods if p not in finished]
        current = [p for p in live if p["metadata"].get("labels", {}).get(HASH_LABEL) == current_hash]
        old = [p for p in live if p not in current]
        recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
        if recreate and old:
            self._delete(old)
            old = []
        if len(current) > replicas:
            surplus = sorted(current, key=lambda p: (_ready(p), p["metadata"]["name"]))[: len(current) - replicas]
            self._delete(surplus)
            current = [p for p in current if p not in surplus]
        elif len(current) < replicas and not (recreate and old):
            current += self._create(deployment, current_hash, replicas - len(current))
        available = [p for p in current if _ready(p)]
        if old and len(available) >= replicas:
            self._delete(old)
            old = []
        self._write_status(deployment, replicas, current, old, available)

    def _create(self, deployment: dict[str, Any], pod_hash: str, count: int) -> list[dict[str, Any]]:
        uid = deployment["metadata"]["uid"]
        base = deployment["metadata"]["name"][:45]
        created = []
        for _ in range(count):
            number = self.created.get(uid, 0)
            self.created[uid] = number + 1
            name = f"{base}-{pod_hash}-{suffix(self.seed, uid, number)}"
            try:
                created.append(self.store.create(self.pods, pod_from_template(deployment, name,
                                                                              {HASH_LABEL: pod_hash})))
            except ApiError as exc:
                if exc.reason != "AlreadyExists":
                    self.store.record_event(deployment, "FailedCreate", f"Error creating: {exc.message}",
                                            type="Warning", source="deployment-controller")
                    break
        return created

    def _delete(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            try:
                self.store.delete(self.pods, pod["metadata"]["namespace"], pod["metadata"]["name"])
            except ApiError:
                pass

    def _write_status(self, deployment: dict[str, Any], replicas: int, current: list[dict[str, Any]],
                      old: list[dict[str, Any]], available: list[dict[str, Any]]) -> None:
        now = now_seconds()
        status = dict(deployment.get("status") or {})
        total = len(current) + len(old)
        ready = sum(1 for p in current + old if _ready(p))
        all_available = sum(1 for p in current + old if _ready(p))
        status.update({
            "observedGeneration": deployment["metadata"].get("generation", 1),
            "replicas": total,
            "updatedReplicas": len(current),
            "readyReplicas": ready,
            "availableReplicas": all_available,
            "unavailableReplicas": max(0, replicas - all_available),
        })
        for zero in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"):
            if not status[zero]:
                del status[zero]
        conditions = list(status.get("conditions") or ())
        is_available = all_available >= replicas
        conditions = set_condition(conditions, {
            "type": "Available", "status": "True" if is_available else "False",
            "reason": "MinimumReplicasAvailable" if is_available else "MinimumReplicasUnavailable",
            "message": "Deployment has minimum availability." if is_available
            else "Deployment does not have minimum availability.",
            "lastUpdateTime": now, "lastTransitionTime": now,
        })
        done = len(current) == replicas and len(available) == replicas and not old
        conditions = set_condition(conditions, {
            "type": "Progressing", "status": "True",
            "reason": "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
            "message": f'Deployment "{deployment["metadata"]["name"]}" has successfully progressed.' if done
            else f'Deployment "{deployment["metadata"]["name"]}" is progressing.',
            "lastUpdateTime": now, "lastTransitionTime": now,
        })
        status["conditions"] = conditions
        if _without_times(status) != _without_times(deployment.get("status") or {}):
            self.store.update(self.owners, {**deployment, "status": status}, subresource="status")


def _without_times(status: dict[str, Any]) -> dict[str, Any]:
    conditions = [{k: v for k, v in c.items() if k not in ("lastUpdateTime", "lastTransitionTime")}
                  for c in status.get("conditions") or ()]
    return {**status, "conditions": conditions}
