"""What a controller may use of the simulator's object store: the `Store` Protocol.

Controllers (built-in or a suite's own, see pytest_topsail.sim.controllers) get an object with these methods; the
simulator's `pytest_topsail.sim.registry.store.Store` is one. Objects are plain dicts (the API's JSON).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pytest_topsail.sim.machinery.resources import ResourceType

Obj = dict[str, Any]


class Store(Protocol):
    def resource_type(self, plural: str, group: str = "") -> ResourceType: ...

    def register_crd(self, crd: Obj) -> ResourceType: ...

    def find(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj | None: ...

    def list(self, rtype: ResourceType, namespace: str | None = None, label_selector: Any = None,
             field_selector: Any = None, resource_version: int | None = None) -> list[Obj]: ...

    def create(self, rtype: ResourceType, obj: Obj, namespace: str | None = None, *, dry_run: bool = False,
               manager: str | None = None) -> Obj: ...

    def update(self, rtype: ResourceType, obj: Obj, subresource: str | None = None, *, dry_run: bool = False,
               manager: str | None = None) -> Obj: ...

    def patch(self, rtype: ResourceType, namespace: str | None, name: str, patch: Any, patch_type: str,
              subresource: str | None = None, *, dry_run: bool = False, manager: str | None = None,
              force: bool = False) -> Obj: ...

    def delete(self, rtype: ResourceType, namespace: str | None, name: str, *, propagation_policy: str | None = None,
               preconditions: dict[str, str] | None = None, dry_run: bool = False) -> Obj: ...

    def record_event(self, involved_object: Obj, reason: str, message: str, type: str = "Normal",
                     source: str = "simulator", action: str | None = None) -> Obj | None: ...

    def add_listener(self, callback: Callable[..., None], with_old: bool = False) -> None: ...

    def add_create_mutator(self, key: tuple[str, str], mutate: Callable[[Obj], Obj]) -> None: ...

    def remove_create_mutator(self, key: tuple[str, str], mutate: Callable[[Obj], Obj]) -> None: ...

    def remove_listener(self, callback: Callable[..., None]) -> None: ...

    def start_log_run(self, namespace: str, pod: str, container: str) -> None: ...

    def append_log(self, namespace: str, pod: str, container: str, text: str) -> None: ...
