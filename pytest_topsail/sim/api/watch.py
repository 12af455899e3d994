"""Watches of the REST API (``?watch=true``): each one a ``Watcher`` fed by the store's commit listener, written as
newline-delimited JSON events (``ADDED``/``MODIFIED``/``DELETED``, ``BOOKMARK``s when asked, an ``ERROR`` 410 when the
store's event log no longer reaches back to the requested resourceVersion). Selections are judged as the apiserver's
watch cache does: an object entering a watcher's selection arrives as ADDED, one leaving it as DELETED."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from pytest_topsail.sim.api.listoptions import check_list_options
from pytest_topsail.sim.api.messages import JSON
from pytest_topsail.sim.api.metrics import ApiMetrics
from pytest_topsail.sim.api.table import TABLE_MARKER, table_for
from pytest_topsail.sim.machinery import apierror, gojson
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.machinery.resources import ResourceType
from pytest_topsail.sim.machinery.selectors import FieldRequirement, Requirement, fields_match, labels_match
from pytest_topsail.sim.registry.store import Store
from pytest_topsail.waiting import Deadline

DEFAULT_WATCH_SECONDS = 1800
WATCH_QUEUE_LIMIT = 100_000
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(eq=False)  # identity hash: watchers live in sets
class Watcher:
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


Serialize = Callable[[ResourceType, dict[str, Any]], bytes]


class Watches:
    """The watches in progress of one server. ``close()`` unsubscribes from the store; ``close_all()`` ends the
    watches (the server is stopping)."""

    def __init__(self, store: Store, metrics: ApiMetrics, serialize: Serialize) -> None:
        self.store = store
        self._metrics = metrics
        self._serialize = serialize
        self._watchers: dict[tuple[str, str], set[Watcher]] = {}
        store.add_listener(self._on_store_event, with_old=True)

    def close(self) -> None:
        self.store.remove_listener(self._on_store_event)

    def close_all(self) -> None:
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.close()

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

    async def serve(self, request: web.Request, rtype: ResourceType, namespace: str | None,
                    labels: list[Requirement], fields: list[FieldRequirement],
                    metric_labels: tuple[str, ...]) -> web.StreamResponse:
        """A watch request: the initial events (a list, or the log since ``resourceVersion``), then the live ones
        until ``timeoutSeconds``, the client leaves or the server stops."""
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
        watcher = Watcher(rtype, namespace, labels, fields, table)
        # Snapshot and subscription happen with no await in between, so no event is lost or duplicated.
        error: ApiError | None = None
        if since == "0" or initial_events:
            initial = [self._event_line("ADDED", rtype, obj, table)
                       for obj in self.store.list(rtype, namespace, labels, fields)]
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
        self._metrics.watching(metric_labels, +1)
        try:
            await response.prepare(request)
            if initial:
                await response.write(b"".join(initial))
            await _pump(watcher, response, Deadline(timeout))
            if bookmarks and not watcher.overflowed:
                # every event up to the current resourceVersion has been written: the client may resume from it
                await response.write(self._bookmark_line(rtype))
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._metrics.watching(metric_labels, -1)
            watchers = self._watchers.get(rtype.key)
            if watchers is not None:
                watchers.discard(watcher)
        return response


async def _pump(watcher: Watcher, response: web.StreamResponse, deadline: Deadline) -> None:
    while not watcher.closed:
        remaining = deadline.left()
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


def _as_seen(seen: str, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
    """The object a watcher receives: for an object that left its selection, the previous content at the event's
    resourceVersion (as the watch cache sends it)."""
    if seen == "DELETED" and event_type == "MODIFIED" and old is not None:
        return {**old, "metadata": {**old["metadata"], "resourceVersion": obj["metadata"]["resourceVersion"]}}
    return obj
