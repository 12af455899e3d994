"""The simulated cluster's Kubernetes REST API (aiohttp), backed by an in-process ``Store``.

One catch-all route parses the Kubernetes URL layout itself (``/api/v1/namespaces/{ns}/{plural}/{name}/{sub}``,
``/apis/{group}/{version}/...``) and dispatches on method: list/get/create/update/patch/delete/deletecollection and
the ``status`` subresource here; watches (watch.py), pods/log and the pod streams (pods.py), discovery and OpenAPI
(documents.py); the policy of scale, binding and eviction is the registry's (registry/scale.py, registry/pods.py).
Errors are ``kind: Status`` bodies (messages.py); nothing ever answers with a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import yaml
from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from pytest_topsail.sim.api import discovery, openapi, pods
from pytest_topsail.sim.api.documents import Documents
from pytest_topsail.sim.api.listoptions import EXACT, check_list_options, requested_version, too_large
from pytest_topsail.sim.api.messages import (
    expect,
    field_validation,
    json_response,
    not_simulated,
    page,
    read_body,
    request_manager,
    status_response,
)
from pytest_topsail.sim.api.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from pytest_topsail.sim.api.metrics import REPORTED_VERBS, ApiMetrics
from pytest_topsail.sim.api.table import TABLE_MARKER, table_for
from pytest_topsail.sim.api.watch import Watches
from pytest_topsail.sim.machinery import apierror, gojson
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.machinery.resources import CREATE_ONLY, ResourceType
from pytest_topsail.sim.machinery.selectors import (
    FieldRequirement,
    Requirement,
    check_field_selector,
    parse_field_selector,
    parse_label_selector,
)
from pytest_topsail.sim.machinery.times import format_micro_time
from pytest_topsail.sim.node import exporters
from pytest_topsail.sim.registry import fieldmanager, reviews, scale
from pytest_topsail.sim.registry import pods as pods_policy
from pytest_topsail.sim.registry.patch import APPLY_PATCH, PATCH_TYPES, STRATEGIC_MERGE_PATCH, apply_patch
from pytest_topsail.sim.registry.store import Store
from pytest_topsail.waiting import Deadline

logger = logging.getLogger(__name__)

MAX_BODY = 16 * 1024 * 1024
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


class ApiServer:
    """Serves one ``Store``. ``make_server()`` returns the aiohttp server; ``close()`` releases the audit log."""

    def __init__(self, store: Store, *, token: str, api_faults: Sequence[ApiFaultSpec] = (), seed: int = 0,
                 audit_log: Path | None = None, server_address: str = "127.0.0.1") -> None:
        self.store = store
        self._authorization = f"Bearer {token}"
        self._token = token
        self.metrics = ApiMetrics(store.object_counts)
        self.exporters = exporters.Exporters(store)  # dcgm-exporter and cAdvisor series (sim/node/exporters.py)
        # path -> Prometheus text of a simulated component (e.g. /metrics/kueue), plugged in by the run layer
        self.component_metrics: dict[str, Callable[[], bytes]] = {}
        self._faults = list(api_faults)
        self._random = random.Random(seed)
        self._audit = open(audit_log, "a", encoding="utf-8", buffering=1) if audit_log else None  # noqa: SIM115
        self.server_address = server_address
        self.documents = Documents(store, server_address)
        self._targets: dict[str, _Target | None] = {}
        self._targets_generation = -1
        self.watches = Watches(store, self.metrics, self._serialize)

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
        self.watches.close()
        if self._audit is not None:
            self._audit.close()
            self._audit = None

    def close_watches(self) -> None:
        """End the watches in progress (the server is stopping)."""
        self.watches.close_all()

    # ----------------------------------------------------------------- entry point
    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Every request of the API."""
        if request.headers.get("Authorization") != self._authorization:
            return status_response(ApiError(401, "Unauthorized", "Unauthorized"))
        if "Expect" in request.headers:
            await expect(request)
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
        if path in self.component_metrics:
            return web.Response(body=self.component_metrics[path](), headers={"Content-Type": METRICS_CONTENT_TYPE})
        if path == "/version":
            return json_response(discovery.version_info())
        if path == openapi.V2_PATH and "protobuf" in request.headers.get("Accept", ""):
            # the "@" of the requested media type does not parse as a response Content-Type in Go
            return web.Response(body=self.documents.swagger_protobuf(), content_type="application/octet-stream")
        documents = self.documents
        body = documents.openapi(path) if path.startswith("/openapi/") else documents.discovery(path)
        if body is None:
            return status_response(ApiError(404, "NotFound", "the server could not find the requested resource"))
        return json_response(body)

    # ----------------------------------------------------------------- resource requests
    async def _dispatch(self, request: web.Request, parsed: _Request) -> web.StreamResponse:
        verb, rtype = parsed.verb, parsed.rtype
        if parsed.subresource == "log":
            if verb != "get":
                raise apierror.method_not_allowed("pods/log supports only GET")
            return await pods.serve_log(self.store, request, rtype, parsed.namespace or "", parsed.name or "")
        if parsed.subresource == "scale":
            return await self._scale(request, parsed)
        if parsed.subresource in ("exec", "attach", "portforward"):
            return await pods.serve_stream(self.store, request, rtype, parsed.subresource, parsed.namespace or "",
                                           parsed.name or "")
        if parsed.subresource in ("eviction", "binding"):
            return await self._pod_action(request, parsed)
        if parsed.subresource not in (None, "status"):
            raise not_simulated(f"{rtype.plural}/{parsed.subresource}")
        if rtype.verbs == CREATE_ONLY:
            if verb != "create" or parsed.name is not None:
                raise apierror.method_not_allowed("the server does not allow this method on the requested resource")
            body = await read_body(request)
            if not isinstance(body, dict):
                raise apierror.bad_request("the body of the request is not a JSON object")
            return json_response(reviews.answer(rtype, body, parsed.namespace, self._token), 201)
        if rtype.namespaced and parsed.namespace is None and verb in ("create", "get", "update", "patch", "delete",
                                                                       "deletecollection"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        dry_run = request.query.get("dryRun")
        if dry_run not in (None, "All"):
            raise apierror.bad_request(f"unsupported dry run directive {dry_run!r}: only All is supported")
        if verb == "list":
            return await self._list(request, parsed)
        if verb == "watch":
            labels, fields = self._selectors(request, rtype)
            return await self.watches.serve(request, rtype, parsed.namespace, labels, fields,
                                            self._metric_labels(parsed))
        if verb == "get":
            await self._wait_for_version(requested_version(request.query))
            obj = self.store.get(rtype, parsed.namespace, parsed.name or "")
            if TABLE_MARKER in request.headers.get("Accept", "") and parsed.subresource is None:
                return json_response(table_for(rtype, [obj], obj["metadata"]["resourceVersion"],
                                                request.query.get("includeObject", "Metadata")))
            return json_response(self._serialize(rtype, obj))
        if verb == "create":
            if parsed.name is not None:
                raise apierror.method_not_allowed("the server does not allow this method on the requested resource")
            body = await read_body(request)
            validation = field_validation(request)
            obj = self.store.create(rtype, body, parsed.namespace, dry_run=bool(dry_run),
                                    manager=request_manager(request), field_validation=validation)
            return json_response(self._serialize(rtype, obj), 201, validation)
        if verb == "update":
            return await self._update(request, parsed)
        if verb == "patch":
            return await self._patch(request, parsed)
        if verb == "delete":
            return await self._delete(request, parsed)
        return await self._delete_collection(request, parsed)

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
        deadline = Deadline(FRESHNESS_WAIT_SECONDS)
        while self.store.resource_version < wanted:
            if deadline.expired():
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
        items, list_metadata = page(items, request.query.get("limit"), request.query.get("continue"),
                                     resource_version)
        if TABLE_MARKER in request.headers.get("Accept", ""):
            table = table_for(rtype, items, resource_version, request.query.get("includeObject", "Metadata"))
            table["metadata"].update(list_metadata)
            return json_response(table)
        head = gojson.dumps({"kind": rtype.list_kind, "apiVersion": rtype.api_version, "metadata": list_metadata})
        body = head[:-1] + b',"items":[' + b",".join(self._serialize(rtype, obj) for obj in items) + b"]}"
        return json_response(body)

    async def _update(self, request: web.Request, parsed: _Request) -> web.Response:
        body = await read_body(request)
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
                                dry_run=request.query.get("dryRun") == "All", manager=request_manager(request),
                                field_validation=validation)
        return json_response(self._serialize(parsed.rtype, obj), validation=validation)

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
            manager = request_manager(request)
        validation = field_validation(request)
        obj = self.store.patch(parsed.rtype, parsed.namespace, parsed.name or "", patch, content_type,
                               parsed.subresource, dry_run=request.query.get("dryRun") == "All", manager=manager,
                               force=request.query.get("force") == "true", field_validation=validation)
        return json_response(self._serialize(parsed.rtype, obj), 200 if existed else 201, validation)

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
            return json_response(self._serialize(rtype, obj))  # 200 with the object, as the apiserver does
        if rtype.key in _RETURN_DELETED or rtype.crd_name:
            return json_response(self._serialize(rtype, obj))
        details = apierror.ordered_details({"name": parsed.name, "group": rtype.group, "kind": rtype.plural,
                                            "uid": obj["metadata"]["uid"]})
        return json_response(gojson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
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
        return json_response(head[:-1] + b',"items":[' + items + b"]}")

    # ----------------------------------------------------------------- subresources (policy: registry/)
    async def _scale(self, request: web.Request, parsed: _Request) -> web.Response:
        """``deployments/{name}/scale`` and the like: an autoscaling/v1 Scale view of ``spec.replicas``."""
        if parsed.namespace is None or parsed.name is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        obj = self.store.get(parsed.rtype, parsed.namespace, parsed.name)
        if parsed.verb not in ("get", "update", "patch"):
            raise apierror.method_not_allowed(f"{parsed.rtype.plural}/scale supports get, update and patch")
        if parsed.verb != "get":
            if parsed.verb == "update":
                wanted = await read_body(request)
                scale.check_fresh(parsed.rtype, obj, wanted)
            else:
                content_type = request.content_type
                if content_type not in PATCH_TYPES:
                    raise apierror.unsupported_media_type(content_type)
                raw = await request.read()
                patch = yaml.safe_load(raw.decode()) if content_type == APPLY_PATCH else json.loads(raw or b"null")
                wanted = apply_patch(scale.scale_of(obj), patch, content_type)
            obj = scale.set_scale(self.store, parsed.rtype, obj, wanted, request_manager(request))
        return json_response(scale.scale_of(obj))

    async def _pod_action(self, request: web.Request, parsed: _Request) -> web.Response:
        """POST pods/{name}/eviction (refused with 429 while a PodDisruptionBudget allows no disruption) and
        pods/{name}/binding (what a scheduler sends: sets spec.nodeName)."""
        if parsed.verb != "create":
            raise apierror.method_not_allowed(f"pods/{parsed.subresource} supports only POST")
        pod = self.store.get(parsed.rtype, parsed.namespace or "", parsed.name or "")
        body = await read_body(request)
        if parsed.subresource == "binding":
            pods_policy.bind(self.store, parsed.rtype, pod, body)
        else:
            pods_policy.evict(self.store, parsed.rtype, pod)
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "code": 201}, 201)
