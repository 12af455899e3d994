"""One resource's objects in the store: the objects by (namespace, name), the indexes by namespace and label, the
cached JSON of the stored versions, and the bounded watch event log (resume, reads at a resourceVersion, 410)."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_topsail.sim.machinery import apierror
from pytest_topsail.sim.machinery.selectors import FieldRequirement, Requirement

Obj = dict[str, Any]
ObjKey = tuple[str, str]  # (namespace or "", name)


@dataclass
class Table:
    """All objects of one (group, plural) with their indexes and watch event log."""

    objects: dict[ObjKey, Obj] = field(default_factory=dict)
    by_namespace: dict[str, dict[str, Obj]] = field(default_factory=dict)
    by_label: dict[str, dict[str, set[ObjKey]]] = field(default_factory=dict)
    raw: dict[ObjKey, tuple[Obj, bytes]] = field(default_factory=dict)
    log: collections.deque = field(default_factory=collections.deque)
    log_floor: int = 0  # events with a resourceVersion above this are all in `log`

    def add(self, key: ObjKey, obj: Obj) -> None:
        self.objects[key] = obj
        self.by_namespace.setdefault(key[0], {})[key[1]] = obj
        for label, value in (obj["metadata"].get("labels") or {}).items():
            self.by_label.setdefault(label, {}).setdefault(value, set()).add(key)

    def replace(self, key: ObjKey, old: Obj, new: Obj) -> None:
        """A new version of a stored object; the label index is touched only when its labels changed (most updates,
        such as a status update, keep them)."""
        if new["metadata"].get("labels") != old["metadata"].get("labels"):
            self.discard(key, old)
            self.add(key, new)
            return
        self.objects[key] = new
        self.by_namespace[key[0]][key[1]] = new
        self.raw.pop(key, None)

    def discard(self, key: ObjKey, obj: Obj) -> None:
        self.objects.pop(key, None)
        self.raw.pop(key, None)
        names = self.by_namespace.get(key[0])
        if names is not None:
            names.pop(key[1], None)
            if not names:
                del self.by_namespace[key[0]]
        for label, value in (obj["metadata"].get("labels") or {}).items():
            values = self.by_label.get(label)
            if values and value in values:
                values[value].discard(key)
                if not values[value]:
                    del values[value]
                if not values:
                    del self.by_label[label]

    def candidate_keys(self, namespace: str | None, labels: list[Requirement],
                       fields: list[FieldRequirement]) -> Iterable[ObjKey]:
        """The keys a selection can match, from the narrowest index (name, label, namespace), else every key."""
        for requirement in fields:
            if requirement.path == ("metadata", "name") and not requirement.negate:
                if namespace is not None:
                    return [(namespace, requirement.value)]
        best: set[ObjKey] | None = None
        for label in labels:
            if not label.indexable:
                continue
            values = self.by_label.get(label.key, {})
            matched: set[ObjKey] = set()
            for value in label.values:
                matched |= values.get(value, set())
            if best is None or len(matched) < len(best):
                best = matched
        if best is not None:
            return best
        if namespace is not None:
            return [(namespace, name) for name in self.by_namespace.get(namespace, {})]
        return self.objects.keys()

    def record(self, rv: int, event_type: str, obj: Obj, old: Obj | None, limit: int) -> None:
        """Log a watch event, dropping the oldest beyond `limit`."""
        if len(self.log) >= limit:
            self.log_floor = self.log.popleft()[0]
        self.log.append((rv, event_type, obj, old))

    def events_since(self, resource_version: int) -> list[tuple[str, Obj, Obj | None]]:
        if resource_version < self.log_floor:
            raise apierror.gone(f"too old resource version: {resource_version} ({self.log_floor + 1})")
        return [(event_type, obj, old) for rv, event_type, obj, old in self.log if rv > resource_version]

    def objects_at(self, resource_version: int, key_of: Any) -> dict[ObjKey, Obj]:
        """The objects as they were at `resource_version`: the current ones with the logged events after it undone;
        `key_of(obj)` is an object's key."""
        if resource_version < self.log_floor:
            raise apierror.gone("The resourceVersion for the provided list is too old.")
        state = dict(self.objects)
        for rv, event_type, obj, old in reversed(self.log):
            if rv <= resource_version:
                break
            if event_type == "ADDED":
                state.pop(key_of(obj), None)
            else:
                state[key_of(obj)] = old
        return state
