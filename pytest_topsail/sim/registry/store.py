"""The simulated cluster's object store: the state behind the API server, used in-process by the controllers.

Built in layers, as the apiserver's generic registry store: ``storage.objects.ObjectStorage`` keeps objects, indexes,
resource versions, the watch event log, listeners and pod logs; ``lifecycle.Lifecycle`` commits updates and deletions
with finalizers, garbage collection and namespace lifecycle; ``Store`` (here) adds the types and the create, update
and patch paths through the registry's strategies (defaults.py, typeregistry.py, patch.py, fieldmanager.py).

Interface (stable; the controllers and the server code against it)
------------------------------------------------------------------
- ``ResourceType`` (from ``machinery/resources.py``): group, version, plural, kind, namespaced, subresources, ...
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
import logging
import time
from collections.abc import Callable
from typing import Any

from pytest_topsail.sim.machinery import apierror
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.machinery.resources import ResourceType
from pytest_topsail.sim.machinery.times import format_micro_time, format_time
from pytest_topsail.sim.registry import fieldmanager
from pytest_topsail.sim.registry.creatememo import HEAD, MEMO_LIMIT, CheckedBody, content_key, head
from pytest_topsail.sim.registry.defaults import apply_create_defaults, check_kind, validate, validate_name
from pytest_topsail.sim.registry.lifecycle import CRDS, NAMESPACES, Lifecycle, check_no_new_finalizers
from pytest_topsail.sim.registry.patch import APPLY_PATCH, apply_patch
from pytest_topsail.sim.registry.schema import FieldValidation, Schema
from pytest_topsail.sim.registry.typeregistry import TypeRegistry, api_service, crd_status
from pytest_topsail.sim.storage.objects import Obj
from pytest_topsail.sim.storage.storetable import Table

logger = logging.getLogger(__name__)

PODS = ("", "pods")
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
KUBERNETES_SERVICE_IP = "10.96.0.1"


class Store(Lifecycle):
    """The API's objects with their semantics: types, create/update/patch/delete through the registry's strategies,
    garbage collection and namespace lifecycle (lifecycle.py), Events; storage and watches below (storage/)."""

    def __init__(self, *, watch_log_size: int = 20_000, seed: int | None = None,
                 clock: Callable[[], float] = time.time, root_ca: str = "") -> None:
        super().__init__(watch_log_size=watch_log_size, seed=seed, clock=clock)
        self._create_mutators: dict[tuple[str, str], list[Callable[[Obj], Obj]]] = {}
        self._registry = TypeRegistry()
        self._tables.update((rtype.key, Table()) for rtype in self._registry.types())
        self._root_ca = root_ca
        self._event_counter = 0
        self._checked_bodies: dict[tuple[Any, ...], CheckedBody] = {}
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

    def _crd_committed(self, crd: Obj) -> None:
        for rtype in self._registry.install(crd):
            self._tables.setdefault(rtype.key, Table())
        self._sync_api_services()

    def _crd_removed(self, crd: Obj) -> None:
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
        for mutate in self._create_mutators.get(rtype.key, ()):
            obj = mutate(obj)
        table = self._table(rtype)
        memo_key = content_key(rtype, obj, validation)
        checked = self._checked_bodies.get(memo_key) if memo_key is not None else None
        check_kind(rtype, obj if checked is None else head(obj))
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
            new.update((k, v) for k, v in obj.items() if k not in HEAD)
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
            self._crd_committed(new)
        self._emit("ADDED", rtype, new, table, None)
        self._note_owners(rtype, key, new)
        if rtype.key == NAMESPACES:
            self._add_namespace_defaults(name)
        return new

    def _remember_checked(self, key: tuple[Any, ...], body: Obj, new: Obj) -> CheckedBody:
        if len(self._checked_bodies) >= MEMO_LIMIT:
            self._checked_bodies.clear()
        checked = self._checked_bodies[key] = CheckedBody(
            {k: v for k, v in new.items() if k not in HEAD},
            {k: fieldmanager.field_tree(v) for k, v in body.items() if k not in HEAD})
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

    # ----------------------------------------------------------------- update

    def add_create_mutator(self, key: tuple[str, str], mutate: Callable[[Obj], Obj]) -> None:
        """A mutating admission webhook: every create of the (group, plural) type passes its body through
        `mutate` (which returns a new dict, or the body unchanged) before defaults and validation."""
        self._create_mutators[key] = [*self._create_mutators.get(key, ()), mutate]

    def remove_create_mutator(self, key: tuple[str, str], mutate: Callable[[Obj], Obj]) -> None:
        remaining = [m for m in self._create_mutators.get(key, ()) if m is not mutate]
        if remaining:
            self._create_mutators[key] = remaining
        else:
            self._create_mutators.pop(key, None)

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
            check_no_new_finalizers(rtype, old, metadata)
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

    # ----------------------------------------------------------------- events

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
