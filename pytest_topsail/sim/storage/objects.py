"""Versioned object storage: the objects of every resource type with their indexes, resource versions, watch event
logs, commit listeners and pod logs. ``registry.store.Store`` builds the API's semantics on it.

Interface (for the registry's ``Store``, which subclasses it; controllers and the server use the ``Store``)
--------------------------------------------------------------------------------------------------------
- One ``Table`` (storetable.py) per resource type in ``_tables``, keyed by ``(group, plural)``: objects by
  ``(namespace, name)`` with namespace/label/field indexes, the JSON cache and the bounded event log of that resource.
- Writes: ``_next_rv()`` hands out the next global resourceVersion; ``_index``/``_unindex`` keep a table and the uid
  index; ``_index_owners`` the owner uid -> dependents index; ``_emit(event_type, rtype, obj, table, old)`` logs a
  watch event and queues it for the listeners.
- Calls nest: ``_begin()``/``_end()`` bracket every public write; when the outermost one ends, the queued events go to
  the listeners (``add_listener(callback, with_old=False)`` / ``remove_listener``), synchronously and in commit order;
  commits a listener makes are delivered after the current event to every listener; a listener's exception is logged,
  never propagated.
- Reads: ``find``/``get`` (404 ApiError), ``list`` with label and field selectors (strings in the apiserver syntax,
  dicts or parsed requirements) optionally at a past ``resource_version``, ``to_json`` (cached per stored version),
  ``events_since`` and ``objects_at`` for watches (410 when the event log no longer reaches back),
  ``object_counts``.
- Pod logs per container run: ``start_log_run``, ``append_log``, ``log_run``, ``read_log`` (logstore.py).

Stored dicts are never mutated once committed; callers get them read-only. Not thread-safe: one event loop's thread.
"""

from __future__ import annotations

import builtins
import collections
import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import Any

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
from pytest_topsail.sim.storage.logstore import LogRun, PodLogs
from pytest_topsail.sim.storage.storetable import ObjKey, Table

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
Listener = Callable[..., None]
# The variant (RFC 4122) and version (4) bits of a UUID, as uuid.UUID(int=..., version=4) sets them.
_UUID_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_UUID_SET = (0x8000 << 48) | (4 << 76)


class ObjectStorage:
    """Objects, indexes, resource versions, the watch event log, commit listeners and pod logs."""

    def __init__(self, *, watch_log_size: int = 20_000, seed: int | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._random = random.Random(seed)
        self._watch_log_size = watch_log_size
        self._rv = 0
        self._tables: dict[tuple[str, str], Table] = {}
        self._by_uid: dict[str, tuple[ResourceType, ObjKey]] = {}
        self._dependents: dict[str, set[tuple[tuple[str, str], ObjKey]]] = {}
        self._listeners: list[tuple[Listener, bool]] = []  # (callback, wants the previous version)
        self._pending: collections.deque = collections.deque()
        self._depth = 0
        self._logs = PodLogs(clock)

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

    # ----------------------------------------------------------------- pod logs
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


def _as_label_requirements(selector: Any) -> list[Requirement]:
    if selector is None or isinstance(selector, (str, dict)):
        return parse_label_selector(selector)
    return list(selector)


def _as_field_requirements(selector: Any) -> list[FieldRequirement]:
    if selector is None or isinstance(selector, (str, dict)):
        return parse_field_selector(selector)
    return list(selector)
