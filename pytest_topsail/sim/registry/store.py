"""The simulated cluster's object store: the state behind the API server, used in-process by the controllers.

Interface (stable; the controllers and the server code against it)
------------------------------------------------------------------
- ``ResourceType`` (from ``resources.py``): group, version, plural, kind, namespaced, subresources, ...
  ``store.resource_type(plural, group="")`` returns the preferred version of a known resource, e.g.
  ``resource_type("pods")``, ``resource_type("jobs", "batch")``, ``resource_type("pytorchjobs", "kubeflow.org")``;
  unknown -> ``ApiError`` 404. Built-ins: core/v1 (pods, nodes, namespaces, services, endpoints, configmaps, secrets,
  events, persistentvolumeclaims, persistentvolumes, serviceaccounts, resourcequotas, limitranges), apps/v1
  (deployments, replicasets, statefulsets, daemonsets), batch/v1 (jobs, cronjobs), apiextensions.k8s.io/v1
  (customresourcedefinitions), rbac, storage.k8s.io storageclasses, coordination leases, scheduling priorityclasses.
  Creating a CustomResourceDefinition registers its types (they appear in discovery); ``register_crd(crd_dict)`` is
  the shortcut for controllers that pre-install CRDs (create if absent, returns the preferred ResourceType).
- ``create(rtype, obj, namespace=None) -> dict``: sets uid, resourceVersion, creationTimestamp, generation,
  generateName, per-kind defaults; 409 AlreadyExists, 404 if the namespace does not exist, 403 if it is Terminating,
  422 Invalid for bad names or kind-specific required fields.
- ``get(rtype, namespace, name) -> dict`` (404 ApiError if absent); ``find(...)`` returns None instead.
- ``list(rtype, namespace=None, label_selector=None, field_selector=None) -> list[dict]`` sorted by namespace/name;
  selectors are strings in the apiserver syntax or dicts (matchLabels style / field path -> value).
- ``update(rtype, obj, subresource=None) -> dict``: PUT semantics. If ``metadata.resourceVersion`` is set and stale,
  409 Conflict. For types with a status subresource, a main-resource update keeps the stored status and
  ``subresource="status"`` changes only the status; ``subresource="binding"`` (pods) takes the spec and the status
  in one write, as the apiserver's pods/binding sets spec.nodeName and the PodScheduled condition together.
  generation is bumped when anything outside metadata/status changes. An update that changes nothing is not written
  (no new resourceVersion, no event).
- ``patch(rtype, namespace, name, patch, patch_type, subresource=None) -> dict``: ``patch_type`` is a content type
  from ``patch.py`` (merge, JSON, strategic merge, apply; apply creates the object when absent).
- ``delete(rtype, namespace, name, *, propagation_policy=None, preconditions=None) -> dict``: with finalizers the
  object gets ``deletionTimestamp`` and stays (returned dict still has finalizers) until an update removes the last
  one; otherwise it is removed and the final state is returned. Dependents (``ownerReferences``) are garbage
  collected: Background (default; batch/v1 jobs default to Orphan like the real apiserver), Foreground (owner waits
  for its dependents under the ``foregroundDeletion`` finalizer) and Orphan (owner references removed).
  Deleting a namespace marks it Terminating, deletes its content and removes it once empty.
- ``add_listener(callback, with_old=False)`` / ``remove_listener(callback)``: ``callback(event_type, rtype, obj)``
  (``callback(event_type, rtype, obj, old)`` with ``with_old``: the previous version, None for ADDED; for DELETED
  the object before its removal) with event_type "ADDED" | "MODIFIED" | "DELETED" is called synchronously on the
  event loop's thread after each commit, in commit order, once the outermost store call has finished (a listener
  may call the store; its commits are delivered after the current event to every listener). Exceptions in
  listeners are logged, never propagated.
- ``record_event(involved_object, reason, message, type="Normal", source="simulator") -> dict | None``: a core/v1
  Event in the object's namespace ("default" for cluster-scoped objects) with eventTime, first/lastTimestamp, count.
- Pod logs, per run of a container (the kubelet keeps the current and the previous one): ``start_log_run(namespace,
  pod, container)`` when a container (re)starts, ``append_log(namespace, pod, container, text)`` (each line stamped
  with the clock), ``read_log(namespace, pod, container, previous=False) -> str``, ``log_run(...) -> LogRun | None``
  (the stamped lines); removed with the pod.
- Watch support for the server: ``events_since(rtype, resource_version) -> list[(type, obj, old)]`` (410 ApiError
  when the bounded per-resource event log no longer reaches back that far); ``objects_at(rtype, resource_version)``
  the objects as they were at that resourceVersion (rebuilt from the same log; 410 when it does not reach back);
  ``resource_version`` is the current global RV.
- Every namespace gets what the apiserver's controllers give it at once: the ``default`` ServiceAccount and the
  ``kube-root-ca.crt`` ConfigMap (``root_ca`` PEM); ``default`` holds the ``kubernetes`` Service. A dependent whose
  owners (by uid) do not exist is collected right after its commit, as the garbage collector does.
- Errors: ``ApiError(code, reason, message)``; the server renders it as a ``kind: Status`` body.

Returned dicts are shared with the store and READ-ONLY for callers: never mutate them; build a new dict (a
``copy.deepcopy`` or shallow copies along the path you change) and pass it to ``update``/``patch``. The store also
takes ownership of the dicts passed to ``create``/``update``: do not mutate them after the call. The store itself never
mutates a committed object, so an object reference always shows one consistent version.

Not thread-safe: use it from the event loop's thread only (the server and the controllers share one loop).
"""

from __future__ import annotations

import builtins
import collections
import functools
import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from pytest_topsail.sim.machinery import apierror, gojson
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.machinery.resources import ResourceType
from pytest_topsail.sim.machinery.selectors import (
    FieldRequirement,
    Requirement,
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from pytest_topsail.sim.registry import fieldmanager
from pytest_topsail.sim.registry.defaults import apply_create_defaults, check_kind, validate, validate_name
from pytest_topsail.sim.registry.patch import APPLY_PATCH, apply_patch
from pytest_topsail.sim.registry.schema import FieldValidation, Schema
from pytest_topsail.sim.registry.typeregistry import TypeRegistry, api_service, crd_status
from pytest_topsail.sim.storage.logstore import LogRun, PodLogs
from pytest_topsail.sim.storage.storetable import ObjKey, Table

__all__ = ["ApiError", "LogRun", "ResourceType", "Store"]

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
Listener = Callable[..., None]

NAMESPACES = ("", "namespaces")
PODS = ("", "pods")
CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# Per-resource defaults of the real apiserver when a delete names no propagationPolicy.
_ORPHAN_BY_DEFAULT = {("batch", "jobs"), ("batch", "cronjobs"), ("", "replicationcontrollers")}
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
# The variant (RFC 4122) and version (4) bits of a UUID, as uuid.UUID(int=..., version=4) sets them.
_UUID_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_UUID_SET = (0x8000 << 48) | (4 << 76)
KUBERNETES_SERVICE_IP = "10.96.0.1"


def format_time(epoch: float) -> str:
    """RFC 3339 with whole seconds, as metav1.Time."""
    return _format_second(int(epoch // 1))


@functools.lru_cache(maxsize=16)  # thousands of objects are stamped within one second
def _format_second(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(epoch: float) -> str:
    """RFC 3339 with microseconds, as metav1.MicroTime."""
    second = int(epoch // 1)
    micro = round((epoch - second) * 1e6)
    if micro == 1_000_000:  # rounded up into the next second, as datetime does
        second, micro = second + 1, 0
    return f"{_format_second(second)[:-1]}.{micro:06d}Z"


class Store:
    """Objects, indexes, resource versions, watch event log, garbage collection and namespace lifecycle."""

    def __init__(self, *, watch_log_size: int = 20_000, seed: int | None = None,
                 clock: Callable[[], float] = time.time, root_ca: str = "") -> None:
        self._clock = clock
        self._random = random.Random(seed)
        self._watch_log_size = watch_log_size
        self._rv = 0
        self._registry = TypeRegistry()
        self._tables: dict[tuple[str, str], Table] = {rtype.key: Table() for rtype in self._registry.types()}
        self._by_uid: dict[str, tuple[ResourceType, ObjKey]] = {}
        self._dependents: dict[str, set[tuple[tuple[str, str], ObjKey]]] = {}
        self._listeners: list[tuple[Listener, bool]] = []  # (callback, wants the previous version)
        self._pending: collections.deque = collections.deque()
        self._ownerless: list[tuple[ResourceType, ObjKey]] = []  # dependents to check once the commit is done
        self._root_ca = root_ca
        self._depth = 0
        self._logs = PodLogs(clock)
        self._event_counter = 0
        self._checked_bodies: dict[tuple[Any, ...], _CheckedBody] = {}
        for name in INITIAL_NAMESPACES:
            self.create(self.resource_type("namespaces"), {"metadata": {"name": name}})
        self.create(self.resource_type("services"), _kubernetes_service(), "default")
        self._begin()
        try:
            self._sync_api_services()
        finally:
            self._end()

    # ----------------------------------------------------------------- types (typeregistry.py)
    @property
    def types_generation(self) -> int:
        """Bumped whenever the set of resource types changes (discovery caches)."""
        return self._registry.generation

    def resource_type(self, plural: str, group: str = "") -> ResourceType:
        """The preferred version of a known resource; 404 ApiError if unknown."""
        return self._registry.resource_type(plural, group)

    def type_for(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The resource type served at /apis/{group}/{version}/{plural} (or /api/v1/...), if any."""
        return self._registry.type_for(group, version, plural)

    def type_for_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._registry.type_for_kind(api_version, kind)

    def types(self) -> list[ResourceType]:
        """Every served (group, version, resource), built-ins first."""
        return self._registry.types()

    def preferred_types(self) -> list[ResourceType]:
        return self._registry.preferred_types()

    def schema_for(self, rtype: ResourceType) -> Schema | None:
        """The compiled structural schema of a CRD-served version (None when open or built-in)."""
        return self._registry.schema_for(rtype)

    def register_crd(self, crd: Obj) -> ResourceType:
        """Create the CRD unless one of that name exists; returns the preferred (storage) ResourceType."""
        crd_type = self.resource_type("customresourcedefinitions", "apiextensions.k8s.io")
        name = crd.get("metadata", {}).get("name", "")
        if self.find(crd_type, None, name) is None:
            self.create(crd_type, crd)
        spec = crd["spec"]
        return self.resource_type(spec["names"]["plural"], spec["group"])

    def _install_crd(self, crd: Obj) -> None:
        for rtype in self._registry.install(crd):
            self._tables.setdefault(rtype.key, Table())

    def _sync_api_services(self) -> None:
        """One Local APIService per served group-version, as the apiserver's autoregistration keeps them."""
        api_services = self.resource_type("apiservices", "apiregistration.k8s.io")
        table = self._tables[api_services.key]
        served = self._registry.served_group_versions()
        for group, version in sorted(served):
            if ("", f"{version}.{group}") not in table.objects:
                self._create(api_services, api_service(group, version, format_time(self._clock())), None)
        for obj in list(table.objects.values()):
            if (obj["spec"].get("group", ""), obj["spec"].get("version")) not in served:
                self._remove(api_services, obj, gc_policy=None)

    def _uninstall_crd(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        key = (spec.get("group") or "", (spec.get("names") or {}).get("plural") or "")
        table = self._tables.get(key)
        rtype = self._registry.preferred(key)
        if table and rtype:
            for obj in list(table.objects.values()):
                self._remove(rtype, obj, gc_policy="Background")
        self._registry.uninstall(key)
        self._tables.pop(key, None)
        self._sync_api_services()

    def object_counts(self) -> list[tuple[str, int]]:
        """(resource as "plural.group", number of stored objects) for every resource with a store."""
        return [(f"{plural}.{group}" if group else plural, len(table.objects))
                for (group, plural), table in self._tables.items()]

    # ----------------------------------------------------------------- helpers
    @property
    def resource_version(self) -> int:
        return self._rv

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _uid(self) -> str:
        """A version 4 UUID from the seeded generator: ``str(uuid.UUID(int=bits, version=4))``, formatted here."""
        bits = self._random.getrandbits(128) & _UUID_CLEAR | _UUID_SET
        text = f"{bits:032x}"
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"

    def _table(self, rtype: ResourceType) -> Table:
        table = self._tables.get(rtype.key)
        if table is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({rtype})")
        return table

    def _obj_key(self, rtype: ResourceType, namespace: str | None, name: str) -> ObjKey:
        return ((namespace or "") if rtype.namespaced else "", name)

    def _begin(self) -> None:
        self._depth += 1

    def _end(self) -> None:
        if self._depth == 1 and self._ownerless:
            self._collect_ownerless()
        self._depth -= 1
        if self._depth == 0:
            self._dispatch()

    def _dispatch(self) -> None:
        self._depth += 1  # commits made by listeners are queued behind the current event
        try:
            while self._pending:
                event_type, rtype, obj, old = self._pending.popleft()
                for listener, with_old in self._listeners:  # replaced, never changed in place: no copy needed
                    try:
                        if with_old:
                            listener(event_type, rtype, obj, old)
                        else:
                            listener(event_type, rtype, obj)
                    except Exception:
                        logger.exception("store listener %r failed on %s %s", listener, event_type, rtype)
        finally:
            self._depth -= 1

    def _emit(self, event_type: str, rtype: ResourceType, obj: Obj, table: Table, old: Obj | None) -> None:
        table.record(int(obj["metadata"]["resourceVersion"]), event_type, obj, old, self._watch_log_size)
        self._pending.append((event_type, rtype, obj, old))

    def add_listener(self, callback: Listener, with_old: bool = False) -> None:
        self._listeners = [*self._listeners, (callback, with_old)]

    def remove_listener(self, callback: Listener) -> None:
        self._listeners = [entry for entry in self._listeners if entry[0] != callback]

    # ----------------------------------------------------------------- indexes
    def _index(self, rtype: ResourceType, table: Table, key: ObjKey, obj: Obj) -> None:
        table.add(key, obj)
        self._by_uid[obj["metadata"]["uid"]] = (rtype, key)

    def _unindex(self, table: Table, key: ObjKey, obj: Obj) -> None:
        table.discard(key, obj)
        self._by_uid.pop(obj["metadata"]["uid"], None)

    def _index_owners(self, rtype: ResourceType, key: ObjKey, obj: Obj, add: bool) -> None:
        for ref in obj["metadata"].get("ownerReferences") or ():
            uid = ref.get("uid")
            if not uid:
                continue
            if add:
                self._dependents.setdefault(uid, set()).add((rtype.key, key))
            else:
                dependents = self._dependents.get(uid)
                if dependents is not None:
                    dependents.discard((rtype.key, key))
                    if not dependents:
                        del self._dependents[uid]

    # ----------------------------------------------------------------- reads
    def find(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj | None:
        return self._table(rtype).objects.get(self._obj_key(rtype, namespace, name))

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.find(rtype, namespace, name)
        if obj is None:
            raise apierror.not_found(rtype.plural, rtype.group, name)
        return obj

    def list(self, rtype: ResourceType, namespace: str | None = None,
             label_selector: str | dict[str, str] | Iterable[Requirement] | None = None,
             field_selector: str | dict[str, str] | Iterable[FieldRequirement] | None = None,
             resource_version: int | None = None) -> list[Obj]:
        """Objects of ``rtype`` (in ``namespace`` if given) matching the selectors, sorted by namespace/name; as they
        were at ``resource_version`` when given (see ``objects_at``)."""
        table = self._table(rtype)
        labels = _as_label_requirements(label_selector)
        fields = _as_field_requirements(field_selector)
        if not rtype.namespaced:
            namespace = None
        for requirement in fields:  # metadata.namespace=X narrows like a namespaced list
            if requirement.path == ("metadata", "namespace") and not requirement.negate and rtype.namespaced:
                if namespace is not None and namespace != requirement.value:
                    return []
                namespace = requirement.value
        objects = table.objects
        if resource_version is None:
            keys = table.candidate_keys(namespace, labels, fields)
        else:
            objects = self.objects_at(rtype, resource_version)
            keys = objects.keys()
        result = []
        for key in sorted(keys):
            obj = objects.get(key)
            if obj is None or (namespace is not None and key[0] != namespace):
                continue
            if labels and not labels_match(labels, obj["metadata"].get("labels")):
                continue
            if fields and not fields_match(fields, obj):
                continue
            result.append(obj)
        return result

    def to_json(self, rtype: ResourceType, obj: Obj) -> bytes:
        """The object serialized as JSON, cached while it is the stored version."""
        metadata = obj["metadata"]
        key = self._obj_key(rtype, metadata.get("namespace"), metadata["name"])
        table = self._tables.get(rtype.key)
        if table is not None:
            cached = table.raw.get(key)
            if cached is not None and cached[0] is obj:
                return cached[1]
        raw = gojson.dumps(obj)
        if table is not None and table.objects.get(key) is obj:
            table.raw[key] = (obj, raw)
        return raw

    def events_since(self, rtype: ResourceType, resource_version: int) -> builtins.list[tuple[str, Obj, Obj | None]]:
        """Watch events of ``rtype`` with a resourceVersion above ``resource_version``, oldest first, each with the
        object's previous version."""
        return self._table(rtype).events_since(resource_version)

    def objects_at(self, rtype: ResourceType, resource_version: int) -> dict[ObjKey, Obj]:
        """The objects of ``rtype`` as they were at ``resource_version``: the current ones with the logged events
        after it undone. 410 when the event log no longer reaches back that far."""
        return self._table(rtype).objects_at(resource_version, lambda obj: self._obj_key(
            rtype, obj["metadata"].get("namespace"), obj["metadata"]["name"]))

    # ----------------------------------------------------------------- create
    def create(self, rtype: ResourceType, obj: Obj, namespace: str | None = None, *, dry_run: bool = False,
               manager: str | None = None, field_validation: FieldValidation | None = None) -> Obj:
        """``manager``: the field manager of an API request (managedFields are recorded), None for controllers;
        ``field_validation``: the request's directive for unknown fields of custom resources (warnings are added
        to it), None for controllers (unknown fields dropped silently)."""
        self._begin()
        try:
            return self._create(rtype, obj, namespace, dry_run, (manager, "Update") if manager else None,
                                field_validation)
        finally:
            self._end()

    def _create(self, rtype: ResourceType, obj: Obj, namespace: str | None, dry_run: bool = False,
                managed_by: tuple[str, str] | None = None, validation: FieldValidation | None = None) -> Obj:
        if not isinstance(obj, dict):
            raise apierror.bad_request("the body of the request is not a JSON object")
        table = self._table(rtype)
        memo_key = _memo_key(rtype, obj, validation)
        checked = self._checked_bodies.get(memo_key) if memo_key is not None else None
        check_kind(rtype, obj if checked is None else _head(obj))
        metadata = dict(obj.get("metadata") or {})
        name = metadata.get("name") or ""
        if not name and metadata.get("generateName"):
            name = metadata["generateName"] + "".join(self._random.choices(_GENERATE_ALPHABET, k=5))
        if not name:
            raise apierror.invalid(rtype.kind, rtype.group, "", [("metadata.name", "Required value: name or "
                                                                                   "generateName is required")])
        validate_name(rtype, name)
        if rtype.namespaced:
            body_namespace = metadata.get("namespace")
            if namespace and body_namespace and body_namespace != namespace:
                raise apierror.bad_request("the namespace of the provided object does not match the namespace sent "
                                           "on the request")
            namespace = namespace or body_namespace or "default"
            self._check_namespace_open(namespace, rtype, name)
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
            namespace = ""
        key = (namespace, name)
        if key in table.objects:
            raise apierror.already_exists(rtype.plural, rtype.group, name)
        timestamp = format_time(self._clock())
        metadata["name"] = name
        metadata["uid"] = self._uid()
        metadata["resourceVersion"] = ""
        metadata["creationTimestamp"] = timestamp
        metadata["generation"] = 1
        for transient in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            metadata.pop(transient, None)
        new: Obj = {"kind": rtype.kind, "apiVersion": self.resource_type(rtype.plural, rtype.group).api_version,
                    "metadata": metadata}
        hit = checked is not None
        if hit:
            validate(rtype, new, spec_checked=True)
        else:
            new.update((k, v) for k, v in obj.items() if k not in _HEAD)
            apply_create_defaults(rtype, new)
            validate(rtype, new)
        if rtype.crd_name or validation is not None:
            admitted = self._registry.admit(rtype, new, validation)
            if memo_key is not None and not hit and admitted is new:  # no unknown field anywhere
                checked = self._remember_checked(memo_key, obj, new)
            new = admitted
            metadata = new["metadata"]
        elif memo_key is not None and not hit:
            checked = self._remember_checked(memo_key, obj, new)
        if hit:
            assert checked is not None
            new.update(checked.parts)
        if rtype.key == CRDS:
            self._registry.crd_types(new)
            new["status"] = crd_status(new, timestamp)
        if managed_by is not None:
            manager, operation = managed_by
            metadata["managedFields"] = [fieldmanager.entry_for(manager, operation, new["apiVersion"], timestamp, obj,
                                                                checked.trees if checked is not None else None)]
        else:
            metadata.pop("managedFields", None)
        if dry_run:
            return new  # validated and defaulted, not stored (resourceVersion stays empty)
        metadata["resourceVersion"] = self._next_rv()
        self._index(rtype, table, key, new)
        self._index_owners(rtype, key, new, add=True)
        if rtype.key == CRDS:
            self._install_crd(new)
            self._sync_api_services()
        self._emit("ADDED", rtype, new, table, None)
        self._note_owners(rtype, key, new)
        if rtype.key == NAMESPACES:
            self._add_namespace_defaults(name)
        return new

    def _remember_checked(self, key: tuple[Any, ...], body: Obj, new: Obj) -> _CheckedBody:
        if len(self._checked_bodies) >= _MEMO_LIMIT:
            self._checked_bodies.clear()
        checked = self._checked_bodies[key] = _CheckedBody(
            {k: v for k, v in new.items() if k not in _HEAD},
            {k: fieldmanager.field_tree(v) for k, v in body.items() if k not in _HEAD})
        return checked

    def _add_namespace_defaults(self, namespace: str) -> None:
        """What the service account and root CA publisher controllers put in every new namespace."""
        self._create(self.resource_type("serviceaccounts"), {"metadata": {"name": "default"}}, namespace)
        description = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
                       "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
                       "guaranteed across distributions of Kubernetes clusters.")
        self._create(self.resource_type("configmaps"), {
            "metadata": {"name": ROOT_CA_CONFIGMAP, "annotations": {"kubernetes.io/description": description}},
            "data": {"ca.crt": self._root_ca}}, namespace)

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

    def _check_namespace_open(self, namespace: str, rtype: ResourceType, name: str) -> None:
        ns = self._tables[NAMESPACES].objects.get(("", namespace))
        if ns is None:
            raise apierror.not_found("namespaces", "", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise apierror.forbidden(f'{rtype.plural} "{name}" is forbidden: unable to create new content in '
                                     f"namespace {namespace} because it is being terminated")

    # ----------------------------------------------------------------- update
    def update(self, rtype: ResourceType, obj: Obj, subresource: str | None = None, *, dry_run: bool = False,
               manager: str | None = None, field_validation: FieldValidation | None = None) -> Obj:
        self._begin()
        try:
            return self._update(rtype, obj, subresource, dry_run, manager, validation=field_validation)
        finally:
            self._end()

    def _update(self, rtype: ResourceType, obj: Obj, subresource: str | None, dry_run: bool = False,
                manager: str | None = None, managed: builtins.list[Obj] | None = None,
                validation: FieldValidation | None = None) -> Obj:
        """``manager``: record the fields this write changes as its (operation Update); ``managed``: the
        managedFields to store as they are (an apply computed them)."""
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise apierror.bad_request("the body of the request is not an object with metadata")
        incoming_meta = obj["metadata"]
        table = self._table(rtype)
        check_kind(rtype, obj, self._stored(rtype, table, incoming_meta))
        name = incoming_meta.get("name") or ""
        if not name:
            raise apierror.invalid(rtype.kind, rtype.group, "", [("metadata.name", "Required value")])
        key = self._obj_key(rtype, incoming_meta.get("namespace"), name)
        old = table.objects.get(key)
        if old is None:
            raise apierror.not_found(rtype.plural, rtype.group, name)
        wanted_rv = incoming_meta.get("resourceVersion")
        if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
            raise apierror.conflict(rtype.plural, rtype.group, name)
        if subresource == "status":
            new = dict(old)
            if "status" in obj:
                new["status"] = obj["status"]
            metadata = dict(old["metadata"])
        elif subresource == "binding" and rtype.key == PODS:
            new = {**old, "spec": obj["spec"], "status": obj["status"]}
            metadata = dict(old["metadata"])
        elif subresource is None:
            new = {"kind": old["kind"], "apiVersion": old["apiVersion"]}
            new.update((k, v) for k, v in obj.items() if k not in ("kind", "apiVersion"))
            if rtype.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            metadata = dict(incoming_meta)
            for immutable in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp",
                              "deletionGracePeriodSeconds", "generation"):
                if immutable in old["metadata"]:
                    metadata[immutable] = old["metadata"][immutable]
                else:
                    metadata.pop(immutable, None)
        else:
            raise apierror.not_found(f"{rtype.plural}/{subresource}", rtype.group, name)
        metadata["resourceVersion"] = old["metadata"]["resourceVersion"]
        new["metadata"] = metadata
        if rtype.crd_name or validation is not None:
            new = self._registry.admit(rtype, new, validation)
            metadata = new["metadata"]
        if old["metadata"].get("deletionTimestamp"):
            _check_no_new_finalizers(rtype, old, metadata)
        if managed is not None:
            metadata["managedFields"] = managed
        elif manager is not None:
            metadata["managedFields"] = fieldmanager.record_update(
                old, new, manager, old["apiVersion"], format_time(self._clock()), subresource)
        elif "managedFields" in old["metadata"]:
            metadata["managedFields"] = old["metadata"]["managedFields"]
        else:
            metadata.pop("managedFields", None)
        if subresource != "status":
            if _spec_changed(old, new):
                metadata["generation"] = old["metadata"].get("generation", 1) + 1
            validate(rtype, new, old)  # what it shares with the stored version is not checked again
        if new == old:
            return old
        if rtype.key == CRDS and subresource is None:
            self._registry.crd_types(new)
        if dry_run:
            return new
        return self._commit_update(rtype, table, key, old, new)

    def _stored(self, rtype: ResourceType, table: Table, metadata: Obj) -> Obj | None:
        """The stored version named by ``metadata`` (None if absent or if the name is not even a string)."""
        name, namespace = metadata.get("name"), metadata.get("namespace")
        if isinstance(name, str) and (namespace is None or isinstance(namespace, str)):
            return table.objects.get(self._obj_key(rtype, namespace, name))
        return None

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
            self._install_crd(new)
            self._sync_api_services()
        self._emit("MODIFIED", rtype, new, table, old)
        if owners_changed:
            self._note_owners(rtype, key, new)
        if deleting and rtype.key == NAMESPACES:
            self._maybe_finish_namespace(key[1])
        return new

    def patch(self, rtype: ResourceType, namespace: str | None, name: str, patch: Any, patch_type: str,
              subresource: str | None = None, *, dry_run: bool = False, manager: str | None = None,
              force: bool = False, field_validation: FieldValidation | None = None) -> Obj:
        """``manager``: the request's field manager (required by an apply through the API); ``force``: an apply
        takes conflicting fields from their managers."""
        self._begin()
        try:
            old = self.find(rtype, namespace, name)
            if old is None:
                if patch_type == APPLY_PATCH and subresource is None and isinstance(patch, dict):
                    body = dict(patch)
                    body["metadata"] = {**(patch.get("metadata") or {}), "name": name}
                    return self._create(rtype, body, namespace, dry_run, (manager, "Apply") if manager else None,
                                        field_validation)
                raise apierror.not_found(rtype.plural, rtype.group, name)
            patched = apply_patch(old, patch, patch_type)
            managed = None
            if patch_type == APPLY_PATCH and manager is not None and isinstance(patched, dict):
                patched = fieldmanager.apply(old, patch, patched, manager, old["apiVersion"],
                                             format_time(self._clock()), force, subresource)
                managed = patched["metadata"]["managedFields"]
                manager = None
            if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
                raise apierror.invalid(rtype.kind, rtype.group, name, [("metadata", "Required value")])
            for identity in ("name", "namespace"):
                if patched["metadata"].get(identity) != old["metadata"].get(identity):
                    raise apierror.invalid(rtype.kind, rtype.group, name, [(f"metadata.{identity}",
                                                                            "field is immutable")])
            return self._update(rtype, patched, subresource, dry_run, manager, managed, field_validation)
        finally:
            self._end()

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
            self._uninstall_crd(obj)
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
        self._remove(self.resource_type("namespaces"), ns, gc_policy="Background")

    # ----------------------------------------------------------------- events and logs
    def record_event(self, involved_object: Obj, reason: str, message: str, type: str = "Normal",
                     source: str = "simulator", action: str | None = None) -> Obj | None:
        """Create a core/v1 Event about ``involved_object``; None if its namespace no longer accepts content."""
        metadata = involved_object.get("metadata") or {}
        namespace = metadata.get("namespace") or "default"
        now = self._clock()
        self._event_counter += 1
        name = f"{metadata.get('name', 'object')}.{int(now * 1e9) + self._event_counter:x}"
        timestamp = format_time(now)
        event = {
            "kind": "Event", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": namespace, "uid": "", "resourceVersion": "",
                         "creationTimestamp": timestamp, "generation": 1},
            "involvedObject": {
                "kind": involved_object.get("kind"), "apiVersion": involved_object.get("apiVersion"),
                "namespace": metadata.get("namespace"), "name": metadata.get("name"), "uid": metadata.get("uid"),
                "resourceVersion": metadata.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": source},
            "firstTimestamp": timestamp,
            "lastTimestamp": timestamp,
            "eventTime": format_micro_time(now),
            "count": 1,
            "reportingComponent": source,
            "reportingInstance": source,
        }
        if action:
            event["action"] = action
        self._begin()
        try:
            return self._add_event(event)
        except ApiError as error:
            logger.debug("event %s on %s not recorded: %s", reason, metadata.get("name"), error.message)
            return None
        finally:
            self._end()

    def _add_event(self, event: Obj) -> Obj:
        """Store an Event built by record_event, as create would store it (tests/sim/test_create_path.py compares
        them): create's checks and defaults can neither fail on it nor change it, so only what can fail is done
        (two Events a pod makes per start cost about as much as its create otherwise)."""
        events = self.resource_type("events")
        table = self._table(events)
        metadata = event["metadata"]
        key = (metadata["namespace"], metadata["name"])
        self._check_namespace_open(key[0], events, key[1])
        if key in table.objects:
            raise apierror.already_exists(events.plural, events.group, key[1])
        metadata["uid"] = self._uid()
        metadata["resourceVersion"] = self._next_rv()
        self._index(events, table, key, event)
        self._emit("ADDED", events, event, table, None)
        return event

    def start_log_run(self, namespace: str, pod: str, container: str) -> None:
        """A container (re)starts: its output so far becomes the previous run's."""
        self._logs.start_run(namespace, pod, container)

    def append_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        """Append simulated output of a container's current run (up to 1 MiB per run, oldest lines dropped)."""
        self._logs.append(namespace, pod, container, text)

    def log_run(self, namespace: str, pod: str, container: str, previous: bool = False) -> LogRun | None:
        return self._logs.run(namespace, pod, container, previous)

    def read_log(self, namespace: str, pod: str, container: str, previous: bool = False) -> str:
        run = self.log_run(namespace, pod, container, previous)
        return "" if run is None else "".join(line for _, line in run.lines)


@dataclass(frozen=True)
class _CheckedBody:
    """What a create made of a body's fields outside kind, apiVersion and metadata: the stored object's fields
    (checked, defaulted, without unknown fields) and the managedFields tree of each body field. Pods are created by
    the thousand from one manifest or template, differing only in metadata: a create whose body has the same content
    there shares these parts (the store never mutates what it holds) instead of checking and defaulting them again."""

    parts: Obj
    trees: dict[str, Obj]


_HEAD = ("kind", "apiVersion", "metadata")
# Kinds whose defaults and checks of the fields outside metadata read nothing of the metadata (a Job's defaults
# use its name and uid; a Namespace's touch its labels).
_MEMO_KINDS = {("", "pods"), ("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")}
_MEMO_LIMIT = 1024


def _memo_key(rtype: ResourceType, obj: Any, validation: FieldValidation | None) -> tuple[Any, ...] | None:
    """The key of a create body's non-metadata content for ``_CheckedBody`` (None: not remembered). Its JSON says
    every value and the keys' order (what the stored object and its encoding depend on), except that NaN and
    infinities are written as null like None: bodies holding a null are not remembered."""
    if rtype.key not in _MEMO_KINDS or rtype.crd_name or not isinstance(obj, dict):
        return None
    try:
        raw = orjson.dumps({k: v for k, v in obj.items() if k not in _HEAD})
    except TypeError:  # not JSON orjson writes (integers beyond 64 bits, keys that are not strings)
        return None
    if b"null" in raw:
        return None
    return (rtype.key, rtype.version, validation is None, tuple(obj), raw)


def _head(obj: Obj) -> Obj:
    return {k: obj[k] for k in _HEAD if k in obj}


def _as_label_requirements(selector: Any) -> list[Requirement]:
    if selector is None or isinstance(selector, (str, dict)):
        return parse_label_selector(selector)
    return list(selector)


def _as_field_requirements(selector: Any) -> list[FieldRequirement]:
    if selector is None or isinstance(selector, (str, dict)):
        return parse_field_selector(selector)
    return list(selector)


def _check_no_new_finalizers(rtype: ResourceType, old: Obj, metadata: Obj) -> None:
    before = old["metadata"].get("finalizers") or ()
    added = [name for name in metadata.get("finalizers") or () if name not in before]
    if added:
        found = ", ".join(json.dumps(name) for name in added)
        raise apierror.invalid(rtype.kind, rtype.group, metadata.get("name", ""), [(
            "metadata.finalizers", "Forbidden: no new finalizers can be added if the object is being deleted, "
                                   f"found new finalizers []string{{{found}}}")])


def _kubernetes_service() -> Obj:
    return {"metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": KUBERNETES_SERVICE_IP, "clusterIPs": [KUBERNETES_SERVICE_IP],
                     "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None",
                     "internalTrafficPolicy": "Cluster",
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}}


def _spec_changed(old: Obj, new: Obj) -> bool:
    ignored = ("metadata", "status", "kind", "apiVersion")
    old_rest = {k: v for k, v in old.items() if k not in ignored}
    new_rest = {k: v for k, v in new.items() if k not in ignored}
    return old_rest != new_rest
