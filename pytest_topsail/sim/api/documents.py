"""The API's self-description, built from the store's current types and cached until they change: discovery
(``/api``, ``/apis``, ``/apis/{group}[/{version}]``), OpenAPI v2 and v3 (``/openapi/...``) and the v2 document in
protobuf (what kubectl asks for)."""

from __future__ import annotations

from typing import Any

from pytest_topsail.sim.api import discovery, openapi
from pytest_topsail.sim.machinery import gojson
from pytest_topsail.sim.registry.store import Store


class Documents:
    """The discovery and OpenAPI bodies of one server, each built once per set of resource types."""

    def __init__(self, store: Store, server_address: str) -> None:
        self.store = store
        self.server_address = server_address
        self._cache: dict[str, bytes] = {}
        self._generation = -1

    def _cached(self, path: str) -> bytes | None:
        """A discovery or OpenAPI body served before for the current set of resource types."""
        if self._generation != self.store.types_generation:
            self._cache.clear()
            self._generation = self.store.types_generation
        return self._cache.get(path)

    def openapi(self, path: str) -> bytes | None:
        body = self._cached(path)
        if body is None:
            document = openapi.document(self.store, path, self.server_address)
            if document is None:
                return None
            body = self._cache[path] = gojson.dumps(document)
        return body

    def swagger_protobuf(self) -> bytes:
        key = "protobuf:" + openapi.V2_PATH
        body = self._cached(key)
        if body is None:
            body = self._cache[key] = openapi.swagger_protobuf(openapi.swagger_document(self.store.types()))
        return body

    def discovery(self, path: str) -> bytes | None:
        cached = self._cached(path)
        if cached is not None:
            return cached
        types, preferred = self.store.types(), self.store.preferred_types()
        parts = [p for p in path.split("/") if p]
        document: dict[str, Any] | None = None
        if parts == ["api"]:
            document = discovery.api_versions(self.server_address)
        elif parts == ["api", "v1"]:
            document = discovery.api_resource_list(types, "", "v1")
        elif parts == ["apis"]:
            document = discovery.api_group_list(types, preferred)
        elif len(parts) == 2 and parts[0] == "apis":
            document = discovery.api_group(types, preferred, parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            document = discovery.api_resource_list(types, parts[1], parts[2])
        if document is None:
            return None
        body = gojson.dumps(document)
        self._cache[path] = body
        return body
