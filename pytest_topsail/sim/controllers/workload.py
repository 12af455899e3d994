"""What the controllers of pod-owning workloads (Job, Deployment, PyTorchJob) share: owner references, the pods an
owner controls, pods from a template, generated name suffixes, and the watch wiring — an owner is reconciled after its
profile's sync delay when it is added, at once when it or one of its pods changes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_topsail.sim.controllers.base import Controller, stable_fraction
from pytest_topsail.sim.machinery.apierror import ApiError

if TYPE_CHECKING:
    from pytest_topsail.sim.controllers.profile import Stage

_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def owner_key(pod: dict[str, Any], kind: str) -> tuple[str, str] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == kind and ref.get("controller"):
            return (pod["metadata"].get("namespace") or "", ref["name"])
    return None


def owned_pods(store: Any, pods_type: Any, owner: dict[str, Any],
               selector: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Pods of the owner's namespace matching `selector` (default: the owner's matchLabels) and controlled by it."""
    meta = owner["metadata"]
    if selector is None:
        selector = ((owner.get("spec") or {}).get("selector") or {}).get("matchLabels") or None
    uid = meta["uid"]
    return [
        p for p in store.list(pods_type, meta.get("namespace"), label_selector=selector)
        if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or ())
    ]


def pod_from_template(owner: dict[str, Any], name: str, extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod of the owner's template. The template's parts are shared, not copied: the store never mutates what it
    holds and takes ownership of what it is given (sim/registry/store.py), so a thousand pods of a Job cost no
    copies."""
    template = (owner.get("spec") or {}).get("template") or {}
    metadata = template.get("metadata") or {}
    labels = {**(metadata.get("labels") or {}), **(extra_labels or {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": owner["metadata"].get("namespace"),
            "labels": labels,
            "annotations": dict(metadata.get("annotations") or {}),
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": template.get("spec") or {},
    }


def suffix(seed: int, *parts: object) -> str:
    number = int(stable_fraction(seed, *parts) * 2**40)
    chars = []
    for _ in range(5):
        number, index = divmod(number, len(_SUFFIX_ALPHABET))
        chars.append(_SUFFIX_ALPHABET[index])
    return "".join(chars)


class WorkloadController(Controller):
    """Base of a controller whose objects (`owner_kind`, resource `owner_resource` = (plural, group)) own pods.
    Subclasses implement `reconcile((namespace, name))` and may override `sync_stage`."""

    owner_kind: str = ""
    owner_resource: tuple[str, str] = ("", "")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pods = self.store.resource_type("pods")
        self.created: dict[str, int] = {}  # owner uid -> pods created so far (names the next one)

    def sync_stage(self) -> Stage:
        return self.profile.jobs.sync

    @property
    def owners(self) -> Any:
        """The owners' resource type, looked up each time: a custom resource's kind may be served, removed and served
        again while the simulator runs (a 404 ApiError while it is not, which ends a reconcile quietly)."""
        return self.store.resource_type(*self.owner_resource)

    async def on_start(self) -> None:
        plural, group = self.owner_resource
        self.watch_key((group, plural), self._on_owner)
        self.watch("pods", "", self._on_pod)
        try:
            owners = self.store.list(self.owners)
        except ApiError:  # not served (yet)
            owners = []
        for owner in owners:
            self._on_owner("ADDED", owner)

    def _on_owner(self, event_type: str, owner: dict[str, Any]) -> None:
        key = (owner["metadata"].get("namespace") or "", owner["metadata"]["name"])
        if event_type == "DELETED":
            self.created.pop(owner["metadata"]["uid"], None)
            self.cancel_timer(key)
        elif event_type == "ADDED":
            self.enqueue_after(self.delay(self.sync_stage(), *key), key)
        elif not self.has_timer(key):
            self.enqueue(key)

    def _on_pod(self, event_type: str, pod: dict[str, Any]) -> None:
        key = owner_key(pod, self.owner_kind)
        if key is not None and not self.has_timer(key):
            self.enqueue(key)
