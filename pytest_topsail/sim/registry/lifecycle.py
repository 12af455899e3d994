"""Deletion and what follows it, as the apiserver's registry and its garbage collector and namespace controllers do:
deletion with finalizers and propagation policies, owner-reference garbage collection and namespace lifecycle.

``Lifecycle`` is the part of the registry's ``Store`` (store.py, its subclass) that commits updates and deletions:
- ``delete(rtype, namespace, name, *, propagation_policy=None, preconditions=None, dry_run=False)``: with finalizers
  the object gets ``deletionTimestamp`` and stays until an update removes the last one; otherwise it is removed.
  Dependents (``ownerReferences``) are collected: Background (default; batch/v1 jobs and cronjobs default to Orphan
  like the real apiserver), Foreground (the owner waits under the ``foregroundDeletion`` finalizer) and Orphan (owner
  references removed). A dependent none of whose owners exists is collected once the outermost store call ends.
- A namespace being deleted is Terminating (no new content: 403), its content is deleted and it is removed once
  empty and without finalizers.
All of this runs synchronously inside the store call that caused it (the delete returns with its dependents gone, in
commit order), not in a controller: the in-process controllers, the server and a bare ``Store`` see one behaviour.
The ``Store`` supplies what a CRD's commit or removal does to the served types (``_crd_committed``,
``_crd_removed``).
"""

from __future__ import annotations

import builtins
import json
from typing import Any

from pytest_topsail.sim.machinery import apierror
from pytest_topsail.sim.machinery.resources import ResourceType
from pytest_topsail.sim.machinery.times import format_time
from pytest_topsail.sim.registry.typeregistry import TypeRegistry
from pytest_topsail.sim.storage.objects import Obj, ObjectStorage
from pytest_topsail.sim.storage.storetable import ObjKey, Table

NAMESPACES = ("", "namespaces")
CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
# Per-resource defaults of the real apiserver when a delete names no propagationPolicy.
_ORPHAN_BY_DEFAULT = {("batch", "jobs"), ("batch", "cronjobs"), ("", "replicationcontrollers")}


class Lifecycle(ObjectStorage):
    """Committing updates and deletions with their consequences: finalizers, garbage collection, namespaces."""

    _registry: TypeRegistry

    def __init__(self, **storage: Any) -> None:
        super().__init__(**storage)
        self._ownerless: list[tuple[ResourceType, ObjKey]] = []  # dependents to check once the commit is done

    def _crd_committed(self, crd: Obj) -> None:
        """Serve the types of a created or changed CustomResourceDefinition (the Store's type registry)."""
        raise NotImplementedError

    def _crd_removed(self, crd: Obj) -> None:
        """Stop serving the types of a removed CustomResourceDefinition, removing their objects."""
        raise NotImplementedError

    def _end(self) -> None:
        if self._depth == 1 and self._ownerless:
            self._collect_ownerless()
        super()._end()

    def _commit_update(self, rtype: ResourceType, table: Table, key: ObjKey, old: Obj, new: Obj) -> Obj:
        metadata = new["metadata"]
        deleting = bool(metadata.get("deletionTimestamp"))
        if deleting and not metadata.get("finalizers") and rtype.key != NAMESPACES:
            return self._remove(rtype, old, gc_policy=None)
        metadata["resourceVersion"] = self._next_rv()
        table.replace(key, old, new)  # uid, name and namespace never change: the uid index stays
        owners_changed = new["metadata"].get("ownerReferences") != old["metadata"].get("ownerReferences")
        if owners_changed:
            self._index_owners(rtype, key, old, add=False)
            self._index_owners(rtype, key, new, add=True)
        if rtype.key == CRDS:
            self._crd_committed(new)
        self._emit("MODIFIED", rtype, new, table, old)
        if owners_changed:
            self._note_owners(rtype, key, new)
        if deleting and rtype.key == NAMESPACES:
            self._maybe_finish_namespace(key[1])
        return new

    # ----------------------------------------------------------------- delete
    def delete(self, rtype: ResourceType, namespace: str | None, name: str, *,
               propagation_policy: str | None = None, preconditions: dict[str, str] | None = None,
               dry_run: bool = False) -> Obj:
        self._begin()
        try:
            obj = self.get(rtype, namespace, name)
            for field_name in ("uid", "resourceVersion"):
                wanted = (preconditions or {}).get(field_name)
                if wanted and wanted != obj["metadata"].get(field_name):
                    raise apierror.conflict(rtype.plural, rtype.group, name,
                                            f"Precondition failed: {field_name} in precondition: {wanted}, "
                                            f"{field_name} in object meta: {obj['metadata'].get(field_name)}")
            if propagation_policy not in (None, "Background", "Foreground", "Orphan"):
                raise apierror.bad_request(f"unknown propagationPolicy {propagation_policy!r}")
            if dry_run:
                return self._delete_preview(rtype, obj, propagation_policy)
            if rtype.key == NAMESPACES:
                return self._delete_namespace(rtype, obj)
            return self._delete(rtype, obj, propagation_policy)
        finally:
            self._end()

    def _delete_preview(self, rtype: ResourceType, obj: Obj, policy: str | None) -> Obj:
        """What a delete would answer, changing nothing (dryRun=All): the object marked for deletion when something
        holds it (finalizers, Foreground dependents, a namespace's content), else the object as it is."""
        metadata = obj["metadata"]
        finalizers = list(metadata.get("finalizers") or ())
        if policy == "Foreground" and self._dependents.get(metadata["uid"]) and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if rtype.key != NAMESPACES and not finalizers:
            return obj
        new_meta = {**metadata, "deletionTimestamp": metadata.get("deletionTimestamp") or format_time(self._clock()),
                    "deletionGracePeriodSeconds": 0}
        if finalizers:
            new_meta["finalizers"] = finalizers
        preview = {**obj, "metadata": new_meta}
        if rtype.key == NAMESPACES:
            preview["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
        return preview

    def _delete(self, rtype: ResourceType, obj: Obj, policy: str | None) -> Obj:
        policy = policy or ("Orphan" if rtype.key in _ORPHAN_BY_DEFAULT else "Background")
        metadata = obj["metadata"]
        finalizers = list(metadata.get("finalizers") or ())
        has_dependents = bool(self._dependents.get(metadata["uid"]))
        if policy == "Foreground" and has_dependents and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if not finalizers:
            return self._remove(rtype, obj, gc_policy=policy)
        if policy == "Orphan" and has_dependents:
            self._orphan_dependents(metadata["uid"])
        if metadata.get("deletionTimestamp") and finalizers == list(metadata.get("finalizers") or ()):
            return obj
        new_meta = dict(metadata)
        new_meta["finalizers"] = finalizers
        new_meta.setdefault("deletionTimestamp", format_time(self._clock()))
        new_meta.setdefault("deletionGracePeriodSeconds", 0)
        new = {**obj, "metadata": new_meta}
        table = self._table(rtype)
        key = self._obj_key(rtype, metadata.get("namespace"), metadata["name"])
        result = self._commit_update(rtype, table, key, obj, new)
        if "foregroundDeletion" in finalizers:
            self._collect_dependents(metadata["uid"], "Background")
            self._maybe_finish_foreground(metadata["uid"])
        return self.find(rtype, metadata.get("namespace"), metadata["name"]) or result

    def _remove(self, rtype: ResourceType, obj: Obj, gc_policy: str | None) -> Obj:
        """Remove the object for good, emit DELETED, collect dependents and finish namespaces/CRDs."""
        table = self._table(rtype)
        metadata = obj["metadata"]
        key = self._obj_key(rtype, metadata.get("namespace"), metadata["name"])
        if table.objects.get(key) is not obj:
            return obj
        self._unindex(table, key, obj)
        self._index_owners(rtype, key, obj, add=False)
        final = {**obj, "metadata": {**metadata, "resourceVersion": self._next_rv()}}
        self._emit("DELETED", rtype, final, table, obj)
        if rtype.key == ("", "pods"):
            self._logs.forget(*key)
        if rtype.key == CRDS:
            self._crd_removed(obj)
        policy = gc_policy or ("Orphan" if rtype.key in _ORPHAN_BY_DEFAULT else "Background")
        if policy == "Orphan":
            self._orphan_dependents(metadata["uid"])
        else:
            self._collect_dependents(metadata["uid"], "Background")
        for ref in metadata.get("ownerReferences") or ():
            if ref.get("uid"):
                self._maybe_finish_foreground(ref["uid"])
        if key[0]:
            self._maybe_finish_namespace(key[0])
        return final

    # ----------------------------------------------------------------- garbage collection
    def _note_owners(self, rtype: ResourceType, key: ObjKey, obj: Obj) -> None:
        refs = obj["metadata"].get("ownerReferences")
        if refs and any(ref.get("uid") not in self._by_uid for ref in refs):
            self._ownerless.append((rtype, key))

    def _collect_ownerless(self) -> None:
        """The garbage collector's rule for dangling owner references: a dependent none of whose owners exists is
        deleted (in the background); one with some live owners only loses the dangling references."""
        while self._ownerless:
            rtype, key = self._ownerless.pop(0)
            obj = self._tables[rtype.key].objects.get(key) if rtype.key in self._tables else None
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                continue
            refs = obj["metadata"].get("ownerReferences") or []
            solid = [ref for ref in refs if ref.get("uid") in self._by_uid]
            if not solid:
                self._delete(rtype, obj, "Background")
            elif len(solid) < len(refs):
                self._replace_owner_refs(rtype, obj, solid)

    def _dependent_objects(self, owner_uid: str) -> builtins.list[tuple[ResourceType, Obj]]:
        result = []
        for type_key, key in sorted(self._dependents.get(owner_uid, ())):
            rtype = self._registry.preferred(type_key)
            obj = self._tables[type_key].objects.get(key) if rtype else None
            if rtype is not None and obj is not None:
                result.append((rtype, obj))
        return result

    def _collect_dependents(self, owner_uid: str, policy: str) -> None:
        for rtype, obj in self._dependent_objects(owner_uid):
            refs = obj["metadata"].get("ownerReferences") or []
            others = [r for r in refs if r.get("uid") != owner_uid and r.get("uid") in self._by_uid]
            if others:
                self._replace_owner_refs(rtype, obj, [r for r in refs if r.get("uid") != owner_uid])
            elif not obj["metadata"].get("deletionTimestamp"):
                self._delete(rtype, obj, policy)

    def _orphan_dependents(self, owner_uid: str) -> None:
        for rtype, obj in self._dependent_objects(owner_uid):
            refs = obj["metadata"].get("ownerReferences") or []
            self._replace_owner_refs(rtype, obj, [r for r in refs if r.get("uid") != owner_uid])

    def _replace_owner_refs(self, rtype: ResourceType, obj: Obj, refs: builtins.list[dict]) -> None:
        metadata = dict(obj["metadata"])
        if refs:
            metadata["ownerReferences"] = refs
        else:
            metadata.pop("ownerReferences", None)
        key = self._obj_key(rtype, metadata.get("namespace"), metadata["name"])
        self._commit_update(rtype, self._table(rtype), key, obj, {**obj, "metadata": metadata})

    def _maybe_finish_foreground(self, owner_uid: str) -> None:
        located = self._by_uid.get(owner_uid)
        if located is None:
            return
        rtype, key = located
        owner = self._tables[rtype.key].objects.get(key)
        if owner is None or "foregroundDeletion" not in (owner["metadata"].get("finalizers") or ()):
            return
        if self._dependent_objects(owner_uid):
            return
        metadata = dict(owner["metadata"])
        metadata["finalizers"] = [f for f in metadata["finalizers"] if f != "foregroundDeletion"]
        self._commit_update(rtype, self._tables[rtype.key], key, owner, {**owner, "metadata": metadata})

    # ----------------------------------------------------------------- namespaces
    def _check_namespace_open(self, namespace: str, rtype: ResourceType, name: str) -> None:
        ns = self._tables[NAMESPACES].objects.get(("", namespace))
        if ns is None:
            raise apierror.not_found("namespaces", "", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise apierror.forbidden(f'{rtype.plural} "{name}" is forbidden: unable to create new content in '
                                     f"namespace {namespace} because it is being terminated")

    def _delete_namespace(self, rtype: ResourceType, ns: Obj) -> Obj:
        name = ns["metadata"]["name"]
        if not ns["metadata"].get("deletionTimestamp"):
            metadata = {**ns["metadata"], "deletionTimestamp": format_time(self._clock()),
                        "deletionGracePeriodSeconds": 0}
            terminating = {**ns, "metadata": metadata, "status": {**(ns.get("status") or {}), "phase": "Terminating"}}
            self._commit_update(rtype, self._tables[NAMESPACES], ("", name), ns, terminating)
        for type_key, table in list(self._tables.items()):
            content_type = self._registry.preferred(type_key)
            if content_type is None or not content_type.namespaced:
                continue
            for obj in list(table.by_namespace.get(name, {}).values()):
                if not obj["metadata"].get("deletionTimestamp") and table.objects.get((name, obj["metadata"]["name"])):
                    self._delete(content_type, obj, "Background")
        self._maybe_finish_namespace(name)
        return self._tables[NAMESPACES].objects.get(("", name)) or self._last_deleted(rtype, name)

    def _last_deleted(self, rtype: ResourceType, name: str) -> Obj:
        for _rv, event_type, obj, _old in reversed(self._tables[rtype.key].log):
            if event_type == "DELETED" and obj["metadata"]["name"] == name:
                return obj
        raise apierror.not_found(rtype.plural, rtype.group, name)

    def _maybe_finish_namespace(self, name: str) -> None:
        namespaces = self._tables[NAMESPACES]
        ns = namespaces.objects.get(("", name))
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        if any(table.by_namespace.get(name) for key, table in self._tables.items() if key != NAMESPACES):
            return
        if ns["metadata"].get("finalizers"):
            return  # waits for whoever owns the metadata finalizers; their update calls back here
        self._remove(self._registry.resource_type("namespaces"), ns, gc_policy="Background")


def check_no_new_finalizers(rtype: ResourceType, old: Obj, metadata: Obj) -> None:
    """422 when an update adds a finalizer to an object being deleted."""
    before = old["metadata"].get("finalizers") or ()
    added = [name for name in metadata.get("finalizers") or () if name not in before]
    if added:
        found = ", ".join(json.dumps(name) for name in added)
        raise apierror.invalid(rtype.kind, rtype.group, metadata.get("name", ""), [(
            "metadata.finalizers", "Forbidden: no new finalizers can be added if the object is being deleted, "
                                   f"found new finalizers []string{{{found}}}")])
