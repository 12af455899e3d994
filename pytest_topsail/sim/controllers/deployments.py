"""Deployment controller (apps/v1), simplified: the Deployment owns its pods directly (no ReplicaSet objects).
Pods carry a `pod-template-hash` label; when the template changes, new pods are created and the old ones deleted once
the new ones are available (Recreate: deleted first). Status: observedGeneration, replicas, updatedReplicas,
readyReplicas, availableReplicas, unavailableReplicas, Available and Progressing conditions (what
`kubectl rollout status` and `kubectl wait --for=condition=Available` read). minReadySeconds is not simulated."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable
from typing import Any

from pytest_topsail.sim.apierror import ApiError
from pytest_topsail.sim.controllers.base import Controller, condition, now_seconds, set_condition
from pytest_topsail.sim.controllers.jobs import owned_pods, owner_key, pod_from_template, suffix

HASH_LABEL = "pod-template-hash"


def template_hash(deployment: dict[str, Any]) -> str:
    text = json.dumps((deployment.get("spec") or {}).get("template") or {}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _ready(pod: dict[str, Any]) -> bool:
    cond = condition(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


class DeploymentController(Controller):
    name = "deployments"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deployments = self.store.resource_type("deployments", "apps")
        self.pods = self.store.resource_type("pods")
        self.created: dict[str, int] = {}

    async def on_start(self) -> None:
        self.watch("deployments", "apps", self._on_deployment)
        self.watch("pods", "", self._on_pod)
        for deployment in self.store.list(self.deployments):
            self._on_deployment("ADDED", deployment)

    def _on_deployment(self, event_type: str, deployment: dict[str, Any]) -> None:
        key = (deployment["metadata"].get("namespace") or "", deployment["metadata"]["name"])
        if event_type == "DELETED":
            self.created.pop(deployment["metadata"]["uid"], None)
            self.cancel_timer(key)
        elif event_type == "ADDED":
            self.enqueue_after(self.delay(self.profile.deployments.sync, *key), key)
        elif not self.has_timer(key):
            self.enqueue(key)

    def _on_pod(self, event_type: str, pod: dict[str, Any]) -> None:
        key = owner_key(pod, "Deployment")
        if key is not None and not self.has_timer(key):
            self.enqueue(key)

    async def reconcile(self, key: Hashable) -> None:
        namespace, name = key  # type: ignore[misc]
        deployment = self.store.find(self.deployments, namespace, name)
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
            self.store.update(self.deployments, {**deployment, "status": status}, subresource="status")


def _without_times(status: dict[str, Any]) -> dict[str, Any]:
    conditions = [{k: v for k, v in c.items() if k not in ("lastUpdateTime", "lastTransitionTime")}
                  for c in status.get("conditions") or ()]
    return {**status, "conditions": conditions}
