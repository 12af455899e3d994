"""The simulated cluster's Kubernetes REST API (aiohttp), backed by an in-process ``Store``.

One catch-all route parses the Kubernetes URL layout itself (``/api/v1/namespaces/{ns}/{plural}/{name}/{sub}``,
``/apis/{group}/{version}/...``) and dispatches on method: list/watch/get/create/update/patch/delete/deletecollection,
the ``status`` subresource and ``pods/log``. Errors are ``kind: Status`` bodies; nothing ever answers with a traceback.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import functools
import json
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import orjson
import yaml
from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import HttpVersion11, RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from pytest_topsail.sim.api import discovery, openapi, protobuf
from pytest_topsail.sim.api.listoptions import EXACT, check_list_options, requested_version, too_large
from pytest_topsail.sim.api.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from pytest_topsail.sim.api.metrics import REPORTED_VERBS, ApiMetrics
from pytest_topsail.sim.api.table import TABLE_MARKER, table_for
from pytest_topsail.sim.machinery import apierror, gojson
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.machinery.resources import CREATE_ONLY, ResourceType
from pytest_topsail.sim.machinery.selectors import (
    FieldRequirement,
    Requirement,
    check_field_selector,
    fields_match,
    label_selector_from_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from pytest_topsail.sim.machinery.times import format_micro_time
from pytest_topsail.sim.node import exporters
from pytest_topsail.sim.node.podlogs import LogOptions
from pytest_topsail.sim.registry import fieldmanager, reviews
from pytest_topsail.sim.registry.patch import APPLY_PATCH, MERGE_PATCH, PATCH_TYPES, STRATEGIC_MERGE_PATCH, apply_patch
from pytest_topsail.sim.registry.schema import FIELD_VALIDATION, FieldValidation
from pytest_topsail.sim.registry.store import Store
from pytest_topsail.sim.streams import podexec, portforward

logger = logging.getLogger(__name__)

JSON = "application/json"
MAX_BODY = 16 * 1024 * 1024
DEFAULT_WATCH_SECONDS = 1800
WATCH_QUEUE_LIMIT = 100_000
LOG_POLL_SECONDS = 0.1
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
FRESHNESS_WAIT_SECONDS = 3.0  # how long a read of a future resourceVersion waits before 504, as the apiserver
_MUTATING = {"create", "update", "patch", "delete", "deletecollection"}
_WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
# Resources whose DELETE answers with the object rather than a Status, as the real registries do (their OpenAPI
# declares the object as the DELETE response; the official client deserializes it so).
_RETURN_DELETED = {("", "pods"), ("", "persistentvolumeclaims"), ("", "persistentvolumes"), ("", "services"),
                   ("", "serviceaccounts"), ("", "resourcequotas"), ("", "podtemplates"),
                   ("storage.k8s.io", "storageclasses"), ("storage.k8s.io", "csidrivers"),
                   ("storage.k8s.io", "csinodes"), ("storage.k8s.io", "volumeattachments")}


class ApiFaultSpec(Protocol):
    """What the server needs of a profile's API fault (pytest_topsail.sim.run.profile.ApiFault)."""

    error_rate: float
    code: int
    latency_ms: float

    def matches(self, verb: str, resource: str, group: str = "") -> bool: ...


_Target = tuple[ResourceType, str | None, str | None, str | None]  # (rtype, namespace, name, subresource)
_UNRESOLVED = object()
_TARGETS_LIMIT = 4096


@dataclass
class _Request:
    """A parsed resource request."""

    rtype: ResourceType
    verb: str
    namespace: str | None
    name: str | None
    subresource: str | None


@dataclass(eq=False)  # identity hash: watchers live in sets
class _Watcher:
    rtype: ResourceType
    namespace: str | None
    labels: list[Requirement]
    fields: list[FieldRequirement]
    table: str | None = None  # includeObject of a Table watch (kubectl get -w); None: plain objects
    lines: collections.deque = field(default_factory=collections.deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    overflowed: bool = False
    closed: bool = False

    def transition(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> str | None:
        """The event this watcher sees, as the apiserver's watch cache decides it: an object entering the
        selection arrives as ADDED, one leaving it as DELETED; None when the watcher sees nothing."""
        now = self.wants(obj)
        if event_type != "MODIFIED" or old is None or not (self.labels or self.fields):
            return event_type if now else None
        before = self.wants(old)
        if now:
            return "MODIFIED" if before else "ADDED"
        return "DELETED" if before else None

    def wants(self, obj: dict[str, Any]) -> bool:
        metadata = obj["metadata"]
        if self.namespace is not None and metadata.get("namespace") != self.namespace:
            return False
        if self.labels and not labels_match(self.labels, metadata.get("labels")):
            return False
        return not self.fields or fields_match(self.fields, obj)

    def push(self, line: bytes) -> None:
        if len(self.lines) >= WATCH_QUEUE_LIMIT:
            self.overflowed = True
        else:
            self.lines.append(line)
        self.wakeup.set()

    def close(self) -> None:
        self.closed = True
        self.wakeup.set()


def status_response(error: ApiError) -> web.Response:
    headers = {"Retry-After": "1"} if error.code in (429, 503, 504) else None
    return web.Response(status=error.code, body=error.body() + b"\n", content_type=JSON,
                        headers=headers)


def _json_response(body: bytes | dict[str, Any], status: int = 200,
                   validation: FieldValidation | None = None) -> web.Response:
    if isinstance(body, dict):
        body = gojson.dumps(body)
    response = web.Response(status=status, body=body, content_type=JSON)
    for warning in validation.warnings if validation is not None else ():
        response.headers.add("Warning", f"299 - {json.dumps(warning)}")  # kubectl prints "Warning: <text>"
    return response


def field_validation(request: web.Request) -> FieldValidation:
    """The write's fieldValidation directive (Warn when absent, as kube-apiserver since 1.27); 400 if unknown."""
    directive = request.query.get("fieldValidation") or "Warn"
    if directive not in FIELD_VALIDATION:
        raise apierror.bad_request(f"fieldValidation parameter unsupported: {directive}")
    return FieldValidation(directive)


class ApiServer:
    """Serves one ``Store``. ``make_server()`` returns the aiohttp server; ``close()`` releases the audit log."""

    def __init__(self, store: Store, *, token: str, api_faults: Sequence[ApiFaultSpec] = (), seed: int = 0,
                 audit_log: Path | None = None, server_address: str = "127.0.0.1") -> None:
        self.store = store
        self._authorization = f"Bearer {token}"
        self._token = token
        self.metrics = ApiMetrics(store.object_counts)
        self.exporters = exporters.Exporters(store)  # dcgm-exporter and cAdvisor series (sim/node/exporters.py)
        self._faults = list(api_faults)
        self._random = random.Random(seed)
        self._audit = open(audit_log, "a", encoding="utf-8", buffering=1) if audit_log else None  # noqa: SIM115
        self.server_address = server_address
        self._watchers: dict[tuple[str, str], set[_Watcher]] = {}
        self._discovery_cache: dict[str, bytes] = {}
        self._discovery_generation = -1
        self._targets: dict[str, _Target | None] = {}
        self._targets_generation = -1
        store.add_listener(self._on_store_event, with_old=True)

    def make_server(self) -> web.Server:
        """aiohttp's low-level server with ``handle`` as its one handler, which parses the Kubernetes URL layout
        itself: an application's router would first resolve every path again (a tenth of the handling of a
        create). Call ``close_watches()`` before stopping it."""
        loop = asyncio.get_running_loop()

        def request(message: RawRequestMessage, payload: StreamReader, protocol: RequestHandler,
                    writer: AbstractStreamWriter, task: asyncio.Task[None]) -> web.Request:
            return web.Request(message, payload, protocol, writer, task, loop, client_max_size=MAX_BODY)

        handler = cast("Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]", self.handle)  # gets web.Request
        return web.Server(handler, request_factory=request, access_log=None)

    def close(self) -> None:
        self.store.remove_listener(self._on_store_event)
        if self._audit is not None:
            self._audit.close()
            self._audit = None

    def close_watches(self) -> None:
        """End the watches in progress (the server is stopping)."""
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.close()

    # ----------------------------------------------------------------- entry point
    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Every request of the API."""
        if request.headers.get("Authorization") != self._authorization:
            return status_response(ApiError(401, "Unauthorized", "Unauthorized"))
        if "Expect" in request.headers:
            await _expect(request)
        parsed: _Request | None = None
        started = time.monotonic()
        try:
            parsed = self._parse(request)
            if parsed is None:
                return self._non_resource(request)
            await self._apply_faults(parsed)
            response = await self._dispatch(request, parsed)
        except ApiError as error:
            response = status_response(error)
        except (json.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as error:
            response = status_response(apierror.bad_request(f"the request body could not be decoded: {error}"))
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as error:  # an apiserver answers with a Status, never a traceback
            logger.exception("internal error serving %s %s", request.method, request.path_qs)
            response = status_response(ApiError(500, "InternalError", f"internal error: {type(error).__name__}"))
        if parsed is not None:
            self._observe(request, parsed, response.status, time.monotonic() - started)
            if parsed.verb in _MUTATING and self._audit is not None:
                self._write_audit(request, parsed, response)
        return response

    @staticmethod
    def _metric_labels(parsed: _Request) -> tuple[str, ...]:
        """(group, version, resource, subresource, scope) as the apiserver labels its request metrics."""
        scope = "resource" if parsed.name else ("namespace" if parsed.namespace else "cluster")
        rtype = parsed.rtype
        return (rtype.group, rtype.version, rtype.plural, parsed.subresource or "", scope)

    def _observe(self, request: web.Request, parsed: _Request, code: int, seconds: float) -> None:
        verb = REPORTED_VERBS.get(parsed.verb, parsed.verb.upper())
        if verb == "PATCH" and request.content_type == APPLY_PATCH:
            verb = "APPLY"
        dry_run = "All" if request.query.get("dryRun") == "All" else ""
        self.metrics.observe(verb, (dry_run, *self._metric_labels(parsed)), code, seconds)

    def _write_audit(self, request: web.Request, parsed: _Request, response: web.StreamResponse) -> None:
        resource = parsed.rtype.plural + (f"/{parsed.subresource}" if parsed.subresource else "")
        record = {
            "time": format_micro_time(time.time()), "verb": parsed.verb, "group": parsed.rtype.group,
            "resource": resource, "namespace": parsed.namespace, "name": parsed.name,
            "userAgent": request.headers.get("User-Agent", ""), "code": response.status,
        }
        assert self._audit is not None
        self._audit.write(json.dumps(record) + "\n")

    async def _apply_faults(self, parsed: _Request) -> None:
        delay = 0.0
        failure: int | None = None
        for fault in self._faults:
            if not fault.matches(parsed.verb, parsed.rtype.plural, parsed.rtype.group):
                continue
            delay += fault.latency_ms / 1000.0
            if failure is None and fault.error_rate > 0 and self._random.random() < fault.error_rate:
                failure = fault.code
        if delay:
            await asyncio.sleep(delay)
        if failure is not None:
            reasons = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
            raise ApiError(failure, reasons.get(failure, "InternalError"),
                           f"simulated fault: {parsed.verb} {parsed.rtype} failed with {failure}")

    # ----------------------------------------------------------------- URL parsing
    def _parse(self, request: web.Request) -> _Request | None:
        target = self._target(request.path)
        if target is None:
            return None
        rtype, namespace, name, subresource = target
        return _Request(rtype, self._verb(request, name), namespace, name, subresource)

    def _target(self, path: str) -> _Target | None:
        """The resource a path names, resolved once per path while the set of resource types stays the same (a
        client sends the same few paths again and again); None for a non-resource path."""
        if self._targets_generation != self.store.types_generation:
            self._targets.clear()
            self._targets_generation = self.store.types_generation
        target = self._targets.get(path, _UNRESOLVED)
        if target is _UNRESOLVED:
            target = self._resolve(path)  # raises for an unknown resource: not remembered
            if len(self._targets) >= _TARGETS_LIMIT:
                self._targets.clear()
            self._targets[path] = target
        return cast("_Target | None", target)

    def _resolve(self, path: str) -> _Target | None:
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 2 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if not rest:
            return None
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3 and rest[2] != "proxy":  # proxy paths go on: .../pods/{name}/proxy/{path}
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        plural, name, subresource = rest[0], (rest[1] if len(rest) > 1 else None), (rest[2] if len(rest) > 2 else None)
        rtype = self.store.type_for(group, version, plural)
        if rtype is None or (namespace is not None and not rtype.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if subresource is not None and subresource not in rtype.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return rtype, namespace, name, subresource

    @staticmethod
    def _verb(request: web.Request, name: str | None) -> str:
        method = request.method
        if method == "GET":
            if name is not None:
                return "get"
            return "watch" if request.query.get("watch") in ("true", "1") else "list"
        if method == "DELETE":
            return "delete" if name is not None else "deletecollection"
        verb = _WRITE_VERBS.get(method)
        if verb is None:
            raise apierror.method_not_allowed(f"the server does not allow this method ({method}) on the resource")
        return verb

    # ----------------------------------------------------------------- non-resource paths
    def _non_resource(self, request: web.Request) -> web.Response:
        path = request.path.rstrip("/") or "/"
        if request.method != "GET":
            return status_response(apierror.method_not_allowed("the server does not allow this method"))
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if path == "/metrics":
            return web.Response(body=self.metrics.exposition(), headers={"Content-Type": METRICS_CONTENT_TYPE})
        if path in exporters.PATHS:
            return web.Response(body=self.exporters.render(path), headers={"Content-Type": exporters.CONTENT_TYPE})
        if path == "/version":
            return _json_response(discovery.version_info())
        if path == openapi.V2_PATH and "protobuf" in request.headers.get("Accept", ""):
            # the "@" of the requested media type does not parse as a response Content-Type in Go
            return web.Response(body=self._swagger_protobuf(), content_type="application/octet-stream")
        body = self._openapi(path) if path.startswith("/openapi/") else self._discovery(path)
        if body is None:
            return status_response(ApiError(404, "NotFound", "the server could not find the requested resource"))
        return _json_response(body)

    def _cached_document(self, path: str) -> bytes | None:
        """A discovery or OpenAPI body served before for the current set of resource types."""
        if self._discovery_generation != self.store.types_generation:
            self._discovery_cache.clear()
            self._discovery_generation = self.store.types_generation
        return self._discovery_cache.get(path)

    def _openapi(self, path: str) -> bytes | None:
        body = self._cached_document(path)
        if body is None:
            document = openapi.document(self.store, path, self.server_address)
            if document is None:
                return None
            body = self._discovery_cache[path] = gojson.dumps(document)
        return body

    def _swagger_protobuf(self) -> bytes:
        key = "protobuf:" + openapi.V2_PATH
        body = self._cached_document(key)
        if body is None:
            body = self._discovery_cache[key] = openapi.swagger_protobuf(openapi.swagger_document(self.store.types()))
        return body

    def _discovery(self, path: str) -> bytes | None:
        cached = self._cached_document(path)
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
        self._discovery_cache[path] = body
        return body

    # ----------------------------------------------------------------- resource requests
    async def _dispatch(self, request: web.Request, parsed: _Request) -> web.StreamResponse:
        verb, rtype = parsed.verb, parsed.rtype
        if parsed.subresource == "log":
            if verb != "get":
                raise apierror.method_not_allowed("pods/log supports only GET")
            return await self._log(request, parsed)
        if parsed.subresource == "scale":
            return await self._scale(request, parsed)
        if parsed.subresource in ("exec", "attach", "portforward"):
            return await self._stream(request, parsed)
        if parsed.subresource in ("eviction", "binding"):
            return await self._pod_action(request, parsed)
        if parsed.subresource not in (None, "status"):
            raise not_simulated(f"{rtype.plural}/{parsed.subresource}")
        if rtype.verbs == CREATE_ONLY:
            if verb != "create" or parsed.name is not None:
                raise apierror.method_not_allowed("the server does not allow this method on the requested resource")
            body = await self._body(request)
            if not isinstance(body, dict):
                raise apierror.bad_request("the body of the request is not a JSON object")
            return _json_response(reviews.answer(rtype, body, parsed.namespace, self._token), 201)
        if rtype.namespaced and parsed.namespace is None and verb in ("create", "get", "update", "patch", "delete",
                                                                       "deletecollection"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        dry_run = request.query.get("dryRun")
        if dry_run not in (None, "All"):
            raise apierror.bad_request(f"unsupported dry run directive {dry_run!r}: only All is supported")
        if verb == "list":
            return await self._list(request, parsed)
        if verb == "watch":
            return await self._watch(request, parsed)
        if verb == "get":
            await self._wait_for_version(requested_version(request.query))
            obj = self.store.get(rtype, parsed.namespace, parsed.name or "")
            if TABLE_MARKER in request.headers.get("Accept", "") and parsed.subresource is None:
                return _json_response(table_for(rtype, [obj], obj["metadata"]["resourceVersion"],
                                                request.query.get("includeObject", "Metadata")))
            return _json_response(self._serialize(rtype, obj))
        if verb == "create":
            if parsed.name is not None:
                raise apierror.method_not_allowed("the server does not allow this method on the requested resource")
            body = await self._body(request)
            validation = field_validation(request)
            obj = self.store.create(rtype, body, parsed.namespace, dry_run=bool(dry_run), manager=_manager(request),
                                    field_validation=validation)
            return _json_response(self._serialize(rtype, obj), 201, validation)
        if verb == "update":
            return await self._update(request, parsed)
        if verb == "patch":
            return await self._patch(request, parsed)
        if verb == "delete":
            return await self._delete(request, parsed)
        return await self._delete_collection(request, parsed)

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            raise apierror.bad_request("the request body is empty")
        content_type = request.content_type
        if content_type.endswith("yaml"):
            return yaml.safe_load(raw.decode())
        if content_type == protobuf.PROTOBUF:
            return protobuf.decode_object(raw)
        if content_type != JSON and "Content-Type" in request.headers:  # no Content-Type: JSON, as the apiserver
            raise apierror.unsupported_media_type(content_type)
        return _loads(raw)

    def _serialize(self, rtype: ResourceType, obj: dict[str, Any]) -> bytes:
        if obj.get("apiVersion") != rtype.api_version:
            return gojson.dumps({**obj, "apiVersion": rtype.api_version})
        return self.store.to_json(rtype, obj)

    @staticmethod
    def _selectors(request: web.Request, rtype: ResourceType) -> tuple[list[Requirement], list[FieldRequirement]]:
        fields = parse_field_selector(request.query.get("fieldSelector"))
        check_field_selector(rtype.group, rtype.plural, fields)
        return parse_label_selector(request.query.get("labelSelector")), fields

    async def _wait_for_version(self, wanted: int | None) -> None:
        """A read of a resourceVersion not reached yet waits for it a little, then gets 504 (as the apiserver)."""
        if wanted is None or wanted <= self.store.resource_version:
            return
        deadline = time.monotonic() + FRESHNESS_WAIT_SECONDS
        while self.store.resource_version < wanted:
            if time.monotonic() >= deadline:
                raise too_large(wanted, self.store.resource_version)
            await asyncio.sleep(0.05)

    async def _list(self, request: web.Request, parsed: _Request) -> web.Response:
        rtype = parsed.rtype
        labels, fields = self._selectors(request, rtype)
        check_list_options(request.query, watch=False)
        wanted = requested_version(request.query)
        await self._wait_for_version(wanted)
        if request.query.get("resourceVersionMatch") == EXACT and wanted is not None:
            items = self.store.list(rtype, parsed.namespace, labels, fields, resource_version=wanted)
            resource_version = str(wanted)
        else:
            items = self.store.list(rtype, parsed.namespace, labels, fields)
            resource_version = str(self.store.resource_version)
        items, list_metadata = _page(items, request.query.get("limit"), request.query.get("continue"),
                                     resource_version)
        if TABLE_MARKER in request.headers.get("Accept", ""):
            table = table_for(rtype, items, resource_version, request.query.get("includeObject", "Metadata"))
            table["metadata"].update(list_metadata)
            return _json_response(table)
        head = gojson.dumps({"kind": rtype.list_kind, "apiVersion": rtype.api_version, "metadata": list_metadata})
        body = head[:-1] + b',"items":[' + b",".join(self._serialize(rtype, obj) for obj in items) + b"]}"
        return _json_response(body)

    async def _update(self, request: web.Request, parsed: _Request) -> web.Response:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise apierror.bad_request("the body of the request is not a JSON object")
        metadata = dict(body.get("metadata") or {})
        if metadata.get("name") != parsed.name:
            raise apierror.bad_request(f"the name of the object ({metadata.get('name')}) does not match the name on "
                                       f"the URL ({parsed.name})")
        if parsed.rtype.namespaced:
            if metadata.get("namespace") not in (None, "", parsed.namespace):
                raise apierror.bad_request("the namespace of the provided object does not match the namespace sent "
                                           "on the request")
            metadata["namespace"] = parsed.namespace
        validation = field_validation(request)
        obj = self.store.update(parsed.rtype, {**body, "metadata": metadata}, parsed.subresource,
                                dry_run=request.query.get("dryRun") == "All", manager=_manager(request),
                                field_validation=validation)
        return _json_response(self._serialize(parsed.rtype, obj), validation=validation)

    async def _patch(self, request: web.Request, parsed: _Request) -> web.Response:
        content_type = request.content_type
        if content_type not in PATCH_TYPES:
            raise apierror.unsupported_media_type(content_type)
        if content_type == STRATEGIC_MERGE_PATCH and parsed.rtype.crd_name:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                                                        "media types include: application/json-patch+json, "
                                                        "application/merge-patch+json, application/apply-patch+yaml")
        raw = await request.read()
        if not raw:
            raise apierror.bad_request("the request body is empty")
        patch = yaml.safe_load(raw.decode()) if content_type == APPLY_PATCH else json.loads(raw)
        existed = self.store.find(parsed.rtype, parsed.namespace, parsed.name or "") is not None
        if content_type == APPLY_PATCH:
            manager = fieldmanager.require_manager(request.query.get("fieldManager"))
        else:
            manager = _manager(request)
        validation = field_validation(request)
        obj = self.store.patch(parsed.rtype, parsed.namespace, parsed.name or "", patch, content_type,
                               parsed.subresource, dry_run=request.query.get("dryRun") == "All", manager=manager,
                               force=request.query.get("force") == "true", field_validation=validation)
        return _json_response(self._serialize(parsed.rtype, obj), 200 if existed else 201, validation)

    async def _delete_options(self, request: web.Request) -> tuple[str | None, dict[str, str] | None, bool]:
        """(propagationPolicy, preconditions, dry run) from the query and the DeleteOptions body."""
        options: dict[str, Any] = {}
        raw = await request.read()
        if raw.strip():
            loaded = json.loads(raw)
            options = loaded if isinstance(loaded, dict) else {}
        directives = options.get("dryRun") or []
        if not isinstance(directives, list) or any(directive != "All" for directive in directives):
            raise apierror.bad_request(f"unsupported dry run directive {directives!r}: only All is supported")
        dry_run = bool(directives) or request.query.get("dryRun") == "All"
        policy = request.query.get("propagationPolicy") or options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        if policy is None and request.query.get("orphanDependents") is not None:
            policy = "Orphan" if request.query["orphanDependents"] == "true" else "Background"
        return policy, options.get("preconditions"), dry_run

    async def _delete(self, request: web.Request, parsed: _Request) -> web.Response:
        policy, preconditions, dry_run = await self._delete_options(request)
        rtype = parsed.rtype
        obj = self.store.delete(rtype, parsed.namespace, parsed.name or "", propagation_policy=policy,
                                preconditions=preconditions, dry_run=dry_run)
        pending = bool(obj["metadata"].get("deletionTimestamp")) and (dry_run or self.store.find(
            rtype, parsed.namespace, parsed.name or "") is not None)
        if pending:
            return _json_response(self._serialize(rtype, obj))  # 200 with the object, as the apiserver does
        if rtype.key in _RETURN_DELETED or rtype.crd_name:
            return _json_response(self._serialize(rtype, obj))
        details = apierror.ordered_details({"name": parsed.name, "group": rtype.group, "kind": rtype.plural,
                                            "uid": obj["metadata"]["uid"]})
        return _json_response(gojson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                                "status": "Success", "details": details}))

    async def _delete_collection(self, request: web.Request, parsed: _Request) -> web.Response:
        policy, _, dry_run = await self._delete_options(request)
        labels, fields = self._selectors(request, parsed.rtype)
        deleted = []
        for obj in self.store.list(parsed.rtype, parsed.namespace, labels, fields):
            metadata = obj["metadata"]
            if self.store.find(parsed.rtype, metadata.get("namespace"), metadata["name"]) is not None:
                deleted.append(self.store.delete(parsed.rtype, metadata.get("namespace"), metadata["name"],
                                                 propagation_policy=policy, dry_run=dry_run))
        head = gojson.dumps({"kind": parsed.rtype.list_kind, "apiVersion": parsed.rtype.api_version,
                             "metadata": {"resourceVersion": str(self.store.resource_version)}})
        items = b",".join(gojson.dumps(obj) for obj in deleted)
        return _json_response(head[:-1] + b',"items":[' + items + b"]}")

    # ----------------------------------------------------------------- scale subresource
    async def _scale(self, request: web.Request, parsed: _Request) -> web.Response:
        """``deployments/{name}/scale`` and the like: an autoscaling/v1 Scale view of ``spec.replicas``."""
        if parsed.namespace is None or parsed.name is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        obj = self.store.get(parsed.rtype, parsed.namespace, parsed.name)
        if parsed.verb not in ("get", "update", "patch"):
            raise apierror.method_not_allowed(f"{parsed.rtype.plural}/scale supports get, update and patch")
        if parsed.verb != "get":
            current = _scale_of(obj)
            if parsed.verb == "update":
                wanted = await self._body(request)
                stale = ((wanted or {}).get("metadata") or {}).get("resourceVersion")
                if stale and stale != obj["metadata"]["resourceVersion"]:
                    raise apierror.conflict(parsed.rtype.plural, parsed.rtype.group, parsed.name)
            else:
                content_type = request.content_type
                if content_type not in PATCH_TYPES:
                    raise apierror.unsupported_media_type(content_type)
                raw = await request.read()
                patch = yaml.safe_load(raw.decode()) if content_type == APPLY_PATCH else json.loads(raw or b"null")
                wanted = apply_patch(current, patch, content_type)
            replicas = ((wanted or {}).get("spec") or {}).get("replicas")
            if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
                cause = f"Invalid value: {replicas!r}: must be a non-negative integer"
                raise apierror.invalid("Scale", "autoscaling", parsed.name, [("spec.replicas", cause)])
            obj = self.store.patch(parsed.rtype, parsed.namespace, parsed.name, {"spec": {"replicas": replicas}},
                                   MERGE_PATCH, manager=_manager(request))
        return _json_response(_scale_of(obj))

    # ----------------------------------------------------------------- watch
    def _on_store_event(self, event_type: str, rtype: ResourceType, obj: dict[str, Any],
                        old: dict[str, Any] | None) -> None:
        watchers = self._watchers.get(rtype.key)
        if not watchers:
            return
        lines: dict[tuple[str, str | None, str], bytes] = {}
        for watcher in watchers:
            seen = watcher.transition(event_type, obj, old)
            if seen is None:
                continue
            line_key = (watcher.rtype.api_version, watcher.table, seen)
            if line_key not in lines:
                lines[line_key] = self._event_line(seen, watcher.rtype, _as_seen(seen, event_type, obj, old),
                                                   watcher.table)
            watcher.push(lines[line_key])

    def _bookmark_line(self, rtype: ResourceType, initial_events_end: bool = False) -> bytes:
        bookmark: dict[str, Any] = {"kind": rtype.kind, "apiVersion": rtype.api_version,
                                    "metadata": {"resourceVersion": str(self.store.resource_version)}}
        if initial_events_end:
            bookmark["metadata"]["annotations"] = {INITIAL_EVENTS_END: "true"}
        return b'{"type":"BOOKMARK","object":' + gojson.dumps(bookmark) + b"}\n"

    def _event_line(self, event_type: str, rtype: ResourceType, obj: dict[str, Any],
                    table: str | None = None) -> bytes:
        if table is not None:
            body = gojson.dumps(table_for(rtype, [obj], obj["metadata"]["resourceVersion"], table))
        else:
            body = self._serialize(rtype, obj)
        return b'{"type":"' + event_type.encode() + b'","object":' + body + b"}\n"

    async def _watch(self, request: web.Request, parsed: _Request) -> web.StreamResponse:
        rtype = parsed.rtype
        labels, fields = self._selectors(request, rtype)
        try:
            timeout = float(request.query.get("timeoutSeconds") or DEFAULT_WATCH_SECONDS)
        except ValueError:
            raise apierror.bad_request("timeoutSeconds must be a number") from None
        check_list_options(request.query, watch=True)
        since = request.query.get("resourceVersion") or "0"
        if not since.isdigit():
            raise apierror.bad_request(f"invalid resourceVersion {since!r}")
        table = request.query.get("includeObject", "Metadata") if TABLE_MARKER in request.headers.get("Accept", "") \
            else None
        bookmarks = request.query.get("allowWatchBookmarks") == "true"
        initial_events = request.query.get("sendInitialEvents") == "true"
        watcher = _Watcher(rtype, parsed.namespace, labels, fields, table)
        # Snapshot and subscription happen with no await in between, so no event is lost or duplicated.
        error: ApiError | None = None
        if since == "0" or initial_events:
            initial = [self._event_line("ADDED", rtype, obj, table)
                       for obj in self.store.list(rtype, parsed.namespace, labels, fields)]
            if initial_events and bookmarks:
                initial.append(self._bookmark_line(rtype, initial_events_end=True))
        else:
            try:
                initial = []
                for event_type, obj, old in self.store.events_since(rtype, int(since)):
                    seen = watcher.transition(event_type, obj, old)
                    if seen is not None:
                        initial.append(self._event_line(seen, rtype, _as_seen(seen, event_type, obj, old), table))
            except ApiError as gone:
                initial, error = [], gone
        response = web.StreamResponse(headers={"Content-Type": JSON})
        response.enable_chunked_encoding()
        if error is not None:
            await response.prepare(request)
            await response.write(b'{"type":"ERROR","object":' + error.body() + b"}\n")
            await response.write_eof()
            return response
        self._watchers.setdefault(rtype.key, set()).add(watcher)
        self.metrics.watching(self._metric_labels(parsed), +1)
        try:
            await response.prepare(request)
            if initial:
                await response.write(b"".join(initial))
            await self._pump(watcher, response, time.monotonic() + timeout)
            if bookmarks and not watcher.overflowed:
                # every event up to the current resourceVersion has been written: the client may resume from it
                await response.write(self._bookmark_line(rtype))
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.metrics.watching(self._metric_labels(parsed), -1)
            watchers = self._watchers.get(rtype.key)
            if watchers is not None:
                watchers.discard(watcher)
        return response

    @staticmethod
    async def _pump(watcher: _Watcher, response: web.StreamResponse, deadline: float) -> None:
        while not watcher.closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if not watcher.lines:
                watcher.wakeup.clear()
                try:
                    await asyncio.wait_for(watcher.wakeup.wait(), remaining)
                except TimeoutError:
                    return
            if watcher.lines:
                batch = b"".join(watcher.lines)
                watcher.lines.clear()
                await response.write(batch)
            if watcher.overflowed:
                return  # the client resumes from its last resourceVersion

    # ----------------------------------------------------------------- pod logs
    async def _log(self, request: web.Request, parsed: _Request) -> web.StreamResponse:
        namespace, name = parsed.namespace or "", parsed.name or ""
        pod = self.store.get(parsed.rtype, namespace, name)
        container = self._log_container(pod, request.query.get("container"))
        options = LogOptions.from_query(request.query, name, time.time())
        if options.previous:  # the run lastState.terminated names, as the kubelet: in back-off, the one just ended
            status = self._container_status(pod, container)
            ended = (status.get("lastState") or {}).get("terminated")
            waiting = "waiting" in (status.get("state") or {})
            run = self.store.log_run(namespace, name, container, previous=not waiting) if ended else None
            if run is None:
                raise apierror.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
            return web.Response(text=options.render(run.lines), content_type="text/plain")
        self._check_container_started(pod, container)
        run = self.store.log_run(namespace, name, container)
        lines = run.lines if run is not None else []
        text = options.render(lines)
        if request.query.get("follow") != "true":
            return web.Response(text=text, content_type="text/plain")
        budget = None if options.limit_bytes is None else options.limit_bytes - len(text.encode())
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(text.encode())
        position = run.end if run is not None else 0
        try:
            while budget is None or budget > 0:
                current = self.store.find(parsed.rtype, namespace, name)
                run = self.store.log_run(namespace, name, container)
                if run is not None and run.end > position:
                    chunk = "".join(options.format(entry) for entry in run.since(position)).encode()
                    position = run.end
                    if budget is not None:
                        chunk, budget = chunk[:budget], budget - len(chunk)
                    await response.write(chunk)
                if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"] or \
                        _container_terminated(current, container) or \
                        _restart_count(current, container) != _restart_count(pod, container):
                    break  # the followed container instance is gone
                await asyncio.sleep(LOG_POLL_SECONDS)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    async def _pod_action(self, request: web.Request, parsed: _Request) -> web.Response:
        """POST pods/{name}/eviction (refused with 429 while a PodDisruptionBudget allows no disruption) and
        pods/{name}/binding (what a scheduler sends: sets spec.nodeName)."""
        if parsed.verb != "create":
            raise apierror.method_not_allowed(f"pods/{parsed.subresource} supports only POST")
        namespace, name = parsed.namespace or "", parsed.name or ""
        pod = self.store.get(parsed.rtype, namespace, name)
        body = await self._body(request)
        if parsed.subresource == "binding":
            node = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
            if not node:
                raise apierror.invalid("Binding", "", name, [("target.name", "Required value")])
            if (pod.get("spec") or {}).get("nodeName"):
                raise apierror.conflict("pods/binding", "", name, f"pod {name} is already assigned to node "
                                                                   f'"{pod["spec"]["nodeName"]}"')
            self.store.update(parsed.rtype, {**pod, "spec": {**pod["spec"], "nodeName": node}})
        else:
            self._check_disruption_budgets(pod)
            self.store.delete(parsed.rtype, namespace, name)
        return _json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                               "code": 201}, 201)

    def _check_disruption_budgets(self, pod: dict[str, Any]) -> None:
        """429 when a PodDisruptionBudget selecting the pod allows no disruption now (computed here, as the
        disruption controller would: healthy = Ready pods it selects, desired from minAvailable/maxUnavailable)."""
        budgets = self.store.resource_type("poddisruptionbudgets", "policy")
        namespace, labels = pod["metadata"]["namespace"], pod["metadata"].get("labels") or {}
        for budget in self.store.list(budgets, namespace):
            spec = budget.get("spec") or {}
            selector = label_selector_from_match(spec.get("selector"))
            if not selector or not labels_match(selector, labels):
                continue
            selected = self.store.list(self.store.resource_type("pods"), namespace, selector)
            healthy = sum(1 for p in selected if _is_ready(p))
            desired = _desired_healthy(spec, len(selected))
            if healthy - desired < 1:
                raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption "
                                                       "budget.",
                               {"causes": [{"reason": "DisruptionBudget", "message": f"The disruption budget "
                                            f"{budget['metadata']['name']} needs {desired} healthy pods and has "
                                            f"{healthy} currently"}]})

    async def _stream(self, request: web.Request, parsed: _Request) -> web.StreamResponse:
        """pods/exec, pods/attach, pods/portforward: WebSocket streams served by podexec and portforward."""
        if request.method not in ("GET", "POST"):
            raise apierror.method_not_allowed(f"pods/{parsed.subresource} supports GET and POST")
        pod = self.store.get(parsed.rtype, parsed.namespace or "", parsed.name or "")
        if parsed.subresource == "portforward":
            return await portforward.serve(request, pod)
        container = self._log_container(pod, request.query.get("container"))
        if parsed.subresource == "attach":
            raise apierror.bad_request("the simulated cluster does not support pods/attach: a simulated container "
                                       "has no process to attach to (kubectl logs -f follows its output)")
        self._check_container_started(pod, container)
        if _container_terminated(pod, container):
            raise apierror.bad_request(f'container "{container}" in pod "{pod["metadata"]["name"]}" is not '
                                       f"running: cannot exec into a container that has terminated")
        return await podexec.serve(request, self.store, pod, container)

    @staticmethod
    def _log_container(pod: dict[str, Any], wanted: str | None) -> str:
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        names += [c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []]
        pod_name = pod["metadata"]["name"]
        if wanted:
            if wanted not in names:
                raise apierror.bad_request(f"container {wanted} is not valid for pod {pod_name}")
            return wanted
        if len(names) == 1 or (names and len((pod.get("spec") or {}).get("containers") or []) == 1):
            return names[0]
        raise apierror.bad_request(f"a container name must be specified for pod {pod_name}, choose one of: "
                                   f"[{' '.join(names)}]")

    @staticmethod
    def _container_status(pod: dict[str, Any], container: str) -> dict[str, Any]:
        status = pod.get("status") or {}
        entries = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
        return next((entry for entry in entries if entry.get("name") == container), {})

    @classmethod
    def _check_container_started(cls, pod: dict[str, Any], container: str) -> None:
        entry = cls._container_status(pod, container)
        state = entry.get("state") or {}
        if "running" in state or "terminated" in state or (entry.get("lastState") or {}).get("terminated"):
            return
        reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
        raise apierror.bad_request(f'container "{container}" in pod "{pod["metadata"]["name"]}" is waiting to '
                                   f"start: {reason}")


def _is_ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _desired_healthy(spec: dict[str, Any], expected: int) -> int:
    """How many selected pods a PodDisruptionBudget wants healthy (percentages round up, as the apiserver)."""
    def count(value: Any) -> int:
        if isinstance(value, str) and value.endswith("%"):
            return -(-int(value[:-1] or 0) * expected // 100)
        return int(value or 0)

    if spec.get("minAvailable") is not None:
        return count(spec["minAvailable"])
    if spec.get("maxUnavailable") is not None:
        return max(0, expected - count(spec["maxUnavailable"]))
    return expected


async def _expect(request: web.Request) -> None:
    """``Expect: 100-continue`` (curl sends it before a large body), answered as an aiohttp application does."""
    expect = request.headers["Expect"]
    if request.version == HttpVersion11:
        if expect.lower() != "100-continue":
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect}")
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer's own size starts after it


def _loads(raw: bytes) -> Any:
    """A JSON body, decoded by orjson (a few times faster). What orjson refuses (NaN, lone surrogates), malformed
    bodies and bodies that may hold an integer beyond 64 bits (orjson makes it a float) go to ``json``, whose
    results and error messages the API has always had."""
    # a run of 19 digits needs 19 digits in all: counting them is ten times cheaper than the search
    if len(raw) - len(raw.translate(None, _DIGITS)) < 19 or _LONG_DIGITS.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


_DIGITS = b"0123456789"
_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def _manager(request: web.Request) -> str:
    return _manager_of(request.query.get("fieldManager"), request.headers.get("User-Agent", ""))


_manager_of = functools.lru_cache(maxsize=256)(fieldmanager.manager_from)  # a client sends the same one each time


def not_simulated(what: str) -> ApiError:
    """The answer for a part of the API the simulator leaves out on purpose (listed in docs/simulator.md)."""
    return ApiError(405, "MethodNotAllowed", f"{what} is not supported by the simulated cluster "
                                             "(pytest-topsail simulator): see docs/simulator.md for what it serves",
                    {"kind": what})


def _as_seen(seen: str, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
    """The object a watcher receives: for an object that left its selection, the previous content at the event's
    resourceVersion (as the watch cache sends it)."""
    if seen == "DELETED" and event_type == "MODIFIED" and old is not None:
        return {**old, "metadata": {**old["metadata"], "resourceVersion": obj["metadata"]["resourceVersion"]}}
    return obj


def _scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    metadata, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    match_labels = (spec.get("selector") or {}).get("matchLabels") or {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {key: metadata[key] for key in ("name", "namespace", "uid", "resourceVersion",
                                                        "creationTimestamp") if key in metadata},
            "spec": {"replicas": spec.get("replicas", 1)},
            "status": {"replicas": status.get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))}}


def _page(items: list[dict[str, Any]], limit: str | None, token: str | None,
          resource_version: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``limit``/``continue`` paging of a sorted list. Unlike the apiserver there is no snapshot: a continued page
    shows the objects as they are now, after the last (namespace, name) of the previous page."""
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if token:
        try:
            start = json.loads(base64.urlsafe_b64decode(token.encode()))["start"]
            after = (str(start[0]), str(start[1]))
        except (ValueError, KeyError, TypeError, IndexError):
            raise apierror.bad_request("continue key is not valid") from None
        items = [obj for obj in items if _sort_key(obj) > after]
    if limit is not None:
        if not limit.isdigit():
            raise apierror.bad_request(f"invalid limit {limit!r}")
        count = int(limit)
        if 0 < count < len(items):
            last = _sort_key(items[count - 1])
            metadata["continue"] = base64.urlsafe_b64encode(json.dumps({"start": last}).encode()).decode()
            metadata["remainingItemCount"] = len(items) - count
            items = items[:count]
    return items, metadata


def _sort_key(obj: dict[str, Any]) -> tuple[str, str]:
    metadata = obj["metadata"]
    return (metadata.get("namespace") or "", metadata["name"])


def _restart_count(pod: dict[str, Any], container: str) -> int:
    for entry in (pod.get("status") or {}).get("containerStatuses") or []:
        if entry.get("name") == container:
            return int(entry.get("restartCount") or 0)
    return 0


def _container_terminated(pod: dict[str, Any], container: str) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    for entry in status.get("containerStatuses") or []:
        if entry.get("name") == container:
            return "terminated" in (entry.get("state") or {})
    return False
