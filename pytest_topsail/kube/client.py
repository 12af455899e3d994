"""The one Kubernetes access layer: a connection to an API server and the operations suites and fixtures need.

`connect(kubeconfig, context, timeout=10, pool_size=...)` loads a kubeconfig, checks that the server answers within
`timeout` seconds and returns a `Kube`. Objects are plain dicts (the JSON the API returns; no model conversion, so
thousands of objects per second cost little); an object is named by an `ObjectRef`; plurals come from discovery.
`Kube.typed(CoreV1Api)` gives the official typed API on the same connection. `Kube.watch` lists then watches with
resume. Every request has a timeout; failures become `KubeError` (a TopsailError) naming the object and the server,
carrying the API's Status, never credentials.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.retry import DEFAULT_POLICY, RetryPolicy
from pytest_topsail.waiting import Deadline

DEFAULT_CONNECT_TIMEOUT = 10.0
WATCH_POLL_S = 0.5  # a watch checks its stop flag at least this often
DEFAULT_REQUEST_TIMEOUT = 30.0
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
USER_AGENT = "pytest-topsail"
FIELD_VALIDATION_ENV = "TOPSAIL_FIELD_VALIDATION"
DEFAULT_POOL_SIZE = 4
T = TypeVar("T")


class KubeError(TopsailError):
    """A failed Kubernetes request: the one error type of API failures.

    `status` is the HTTP status (0 when the server could not be reached), `reason` the Status reason
    (NotFound, AlreadyExists, Conflict, ...), `api_status` the Status object the server answered (when it did),
    `retry_after` the seconds the server asked to wait (429, 503).
    """

    def __init__(self, message: str, status: int = 0, reason: str = "", *, api_status: dict[str, Any] | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.api_status = api_status
        self.retry_after = retry_after


class KubeConnectionError(KubeError):
    """The API server cannot be reached or refuses the credentials."""


@dataclass(frozen=True)
class ObjectRef:
    """Names one object: apiVersion, kind, name and (for namespaced kinds) namespace."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None

    @classmethod
    def of(cls, obj: dict[str, Any]) -> ObjectRef:
        meta = obj.get("metadata") or {}
        return cls(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ObjectRef:
        return cls(data["api_version"], data["kind"], data["name"], data.get("namespace"))

    def to_dict(self) -> dict[str, Any]:
        return {"api_version": self.api_version, "kind": self.kind, "name": self.name, "namespace": self.namespace}

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


@dataclass(frozen=True)
class ResourceInfo:
    """What discovery says about a kind: its plural name and whether it lives in namespaces."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if subresource:
            base += f"/{subresource}"
        return base


@dataclass(frozen=True)
class ApplyResult:
    """The object as stored after `Kube.apply`, and whether this call created it."""

    object: dict[str, Any]
    created: bool


class Kube:
    """A connection to one API server. Thread-safe for concurrent requests."""

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        *,
        description: str,
        context: str | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        retry: RetryPolicy = DEFAULT_POLICY,
        field_validation: str | None = None,
    ) -> None:
        self.api_client = api_client
        # fieldValidation sent with every write (Ignore, Warn, Strict); TOPSAIL_FIELD_VALIDATION=Strict makes a
        # misspelled field in any manifest we send an error instead of a field the server silently drops
        self.field_validation = field_validation or os.environ.get(FIELD_VALIDATION_ENV) or None
        self.description = description  # "https://host:port (kubeconfig PATH, context NAME)": no credentials
        self.context = context
        self.request_timeout = request_timeout
        self.retry = retry
        self.kubeconfig: Path | None = None  # set by connect(): named in the commands given to users
        # labels added to every Namespace this connection creates: the run's ownership (cluster/namespaces.py)
        self.namespace_labels: dict[str, str] = {}
        self.retried = 0  # requests sent again after a transient failure (kube.retry), for diagnostics
        self._local = threading.local()  # per thread: the attempts of its last request (last_attempts)
        self._discovery: dict[str, dict[str, ResourceInfo]] = {}
        self._discovery_lock = threading.Lock()

    @property
    def last_attempts(self) -> int:
        """How many times this thread's last request was sent (1 when it was not retried)."""
        return int(getattr(self._local, "attempts", 0))

    @property
    def server(self) -> str:
        return self.api_client.configuration.host

    def close(self) -> None:
        self.api_client.close()

    def with_pool(self, pool_size: int) -> Kube:
        """A new connection to the same server with `pool_size` pooled connections (one per concurrent thread);
        close it when done. Discovery already done is shared."""
        configuration = copy.deepcopy(self.api_client.configuration)
        other = Kube(_api_client(configuration, pool_size), description=self.description, context=self.context,
                     request_timeout=self.request_timeout, retry=self.retry, field_validation=self.field_validation)
        other.kubeconfig = self.kubeconfig
        other.namespace_labels = dict(self.namespace_labels)
        with self._discovery_lock:
            other._discovery = dict(self._discovery)
        return other

    def with_namespace_labels(self, labels: dict[str, str]) -> Kube:
        """This connection (shared, not a new one) whose namespace creations also carry `labels`."""
        other = copy.copy(self)
        other.namespace_labels = {**self.namespace_labels, **labels}
        return other

    def command(self, *args: str) -> str:
        """The kubectl command line doing ``args`` on this cluster, for messages a user copies."""
        import shlex

        target = ["--kubeconfig", str(self.kubeconfig)] if self.kubeconfig else []
        target += ["--context", self.context] if self.context else []
        return shlex.join(["kubectl", *target, *args])

    def typed(self, api_class: Callable[[k8s_client.ApiClient], T]) -> T:
        """The official client's typed API on this connection, e.g. ``kube.typed(kubernetes.client.CoreV1Api)``."""
        return api_class(self.api_client)

    # -- raw requests ------------------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
        what: str | None = None,
        raw: bool = False,
        outcome_known: bool = False,
    ) -> Any:
        """One HTTP request; returns the decoded JSON (or text when `raw`). Raises KubeError on any failure.
        `outcome_known`: the caller tells a repeated request's effect apart, so it is retried like an idempotent one
        (kube/retry.py)."""
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        query_params = [(k, v) for k, v in (query or {}).items() if v is not None]
        if self.field_validation and method in ("POST", "PUT", "PATCH"):
            query_params.append(("fieldValidation", self.field_validation))
        seconds = timeout or self.request_timeout
        target = what or f"{method} {path}"
        response = self._send(method, path, query_params, headers, body, (min(seconds, 5.0), seconds), target,
                              outcome_known)
        try:
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeConnectionError(f"{target}: cannot reach {self.description}: {_reason(exc)}") from None
        text = data.decode("utf-8", errors="replace") if data else ""
        if response.status >= 400:
            raise _api_error(target, response.status, text, self.description, response.getheader("Retry-After"))
        if raw:
            return text
        return json.loads(text) if text else None

    def _send(self, method: str, path: str, query_params: list[tuple[str, Any]], headers: dict[str, str], body: Any,
              timeout: tuple[float, float], target: str, outcome_known: bool = False) -> Any:
        """Send one request, the response not yet read. Every request of the layer passes here, so this is the one
        place transient failures (429, 5xx, connection reset) are retried, as `self.retry` says (kube/retry.py)."""
        attempt = 1
        while True:
            self._local.attempts = attempt
            try:
                prepared = self.api_client.param_serialize(
                    method, path, query_params=query_params, header_params=headers, body=body,
                    auth_settings=["BearerToken"],
                )
                response = self.api_client.call_api(*prepared, _request_timeout=timeout)
            except ApiException as exc:
                raise KubeConnectionError(f"{target}: {self.description}: {exc.reason or exc}",
                                          exc.status or 0) from None
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if not self.retry.retries_connection_error(method, exc, attempt, outcome_known):
                    raise KubeConnectionError(f"{target}: cannot reach {self.description}: {_reason(exc)}") from None
                wait = self.retry.delay(attempt)
            else:
                if response.status < 400 or not self.retry.retries_status(method, response.status, attempt,
                                                                          outcome_known):
                    return response
                wait = self.retry.delay(attempt, response.getheader("Retry-After"))
                _discard(response)
            self.retried += 1
            attempt += 1
            time.sleep(wait)

    def version(self, timeout: float | None = None) -> dict[str, Any]:
        return self.request("GET", "/version", timeout=timeout, what="server version")

    # -- discovery ---------------------------------------------------------------------------------------------
    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """Discovery for `kind` in `api_version`, refreshed once when the kind is unknown (CRDs appear at run time)."""
        known = self._discovery.get(api_version)  # the hot path (thousands of creates per second): no lock
        info = known.get(kind) if known is not None else self._discovered(api_version, refresh=False).get(kind)
        if info is None:
            info = self._discovered(api_version, refresh=True).get(kind)
        if info is None:
            raise KubeError(f"kind {kind} ({api_version}) is not served by this cluster ({self.server})"
                            f"{served_by(api_version)}", 404, "NotFound")
        return info

    def has_kind(self, api_version: str, kind: str) -> bool:
        try:
            self.resource(api_version, kind)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _discovered(self, api_version: str, *, refresh: bool) -> dict[str, ResourceInfo]:
        with self._discovery_lock:
            if not refresh and api_version in self._discovery:
                return self._discovery[api_version]
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        try:
            listing = self.request("GET", path, what=f"discovery of {api_version}")
        except KubeError as exc:
            if exc.status != 404:
                raise
            listing = {"resources": []}
        kinds = {}
        for item in listing.get("resources") or []:
            if "/" in item.get("name", ""):
                continue  # subresource such as pods/status
            kinds[item["kind"]] = ResourceInfo(api_version, item["kind"], item["name"], bool(item.get("namespaced")))
        with self._discovery_lock:
            self._discovery[api_version] = kinds
        return kinds

    # -- objects -----------------------------------------------------------------------------------------------
    def get(self, ref: ObjectRef) -> dict[str, Any] | None:
        """The object, or None when it does not exist (or its kind is not served)."""
        try:
            info = self.resource(ref.api_version, ref.kind)
            return self.request("GET", info.path(ref.namespace, ref.name), what=f"get {ref}")
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Objects of a kind (all namespaces when `namespace` is None); [] when the kind is not served."""
        try:
            info = self.resource(api_version, kind)
        except KubeError as exc:
            if exc.status == 404:
                return []
            raise
        return self.list_raw(info, namespace=namespace, label_selector=label_selector,
                             field_selector=field_selector)["items"]

    def list_raw(self, info: ResourceInfo, *, namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None) -> dict[str, Any]:
        """The whole list answer (``items`` and ``metadata.resourceVersion``, where a watch starts from)."""
        query = {"labelSelector": label_selector, "fieldSelector": field_selector}
        result = self.request("GET", info.path(namespace), query=query,
                              what=f"list {info.kind} in {info.api_version}") or {}
        items = result.get("items") or []
        for item in items:  # lists omit apiVersion/kind on items
            item.setdefault("apiVersion", info.api_version)
            item.setdefault("kind", info.kind)
        result["items"] = items
        return result

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        stop: threading.Event | None = None,
        timeout: float | None = None,
        on_listed: Callable[[], None] | None = None,
        on_error: Callable[[KubeError], None] | None = None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event type, object) pairs: first ADDED for every object listed, then the watch's ADDED/MODIFIED/DELETED.

        The watch resumes from the last resourceVersion seen when the server closes it, and lists again when that
        version is too old (410 Gone: ADDED again for every object). It ends when `stop` is set (checked at least
        every `WATCH_POLL_S`) or after `timeout` seconds. A failed first list raises KubeError; later failures are
        passed to `on_error` (if given) and the watch is retried after a short pause. `on_listed` is called after
        the first list, so that a caller knows nothing created afterwards can be missed.
        """
        info = self.resource(api_version, kind)
        deadline = Deadline(timeout, f"watch {kind}")
        stop = stop or threading.Event()
        resource_version: str | None = None
        listed = False
        while not stop.is_set() and not deadline.expired():
            try:
                if resource_version is None:
                    listing = self.list_raw(info, namespace=namespace, label_selector=label_selector,
                                            field_selector=field_selector)
                    for item in listing["items"]:
                        yield "ADDED", item
                    resource_version = (listing.get("metadata") or {}).get("resourceVersion") or "0"
                    if not listed and on_listed is not None:
                        on_listed()
                    listed = True
                for event in self.watch_events(info.path(namespace), resource_version, label_selector=label_selector,
                                               field_selector=field_selector, stop=stop):
                    kind_of_event, obj = event.get("type", ""), event.get("object") or {}
                    if kind_of_event == "ERROR":
                        if obj.get("code") == 410:
                            resource_version = None  # too old: list again
                            break
                        raise _status_error(f"watch {kind} in {api_version}", obj, self.description)
                    resource_version = (obj.get("metadata") or {}).get("resourceVersion") or resource_version
                    if kind_of_event != "BOOKMARK":
                        obj.setdefault("apiVersion", api_version)
                        obj.setdefault("kind", kind)
                        yield kind_of_event, obj
                    if stop.is_set():
                        return
            except KubeError as exc:
                if not listed:
                    raise
                if on_error is not None:
                    on_error(exc)
                stop.wait(0.2)

    def watch_events(self, path: str, resource_version: str, *, label_selector: str | None = None,
                     field_selector: str | None = None, server_timeout_s: int = 60,
                     read_timeout_s: float = WATCH_POLL_S,
                     stop: threading.Event | None = None) -> Iterator[dict[str, Any]]:
        """One watch request: decoded events until the server ends it or nothing came for `read_timeout_s`.

        A read timeout ends the iteration quietly, so that callers can check a stop flag and watch again from the
        last resourceVersion they saw (`watch` does all of that). When `stop` is a `WatchStop`, setting it closes
        the connection, so that a thread blocked reading here returns at once (quietly too).
        """
        query = [("watch", "true"), ("resourceVersion", resource_version), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", server_timeout_s)]
        query += [(k, v) for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v]
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        target = f"watch {path}"
        response = self._send("GET", path, query, headers, None, (10.0, read_timeout_s), target)
        raw = response.response
        if isinstance(stop, WatchStop):
            stop.track(raw)
        try:
            if response.status >= 400:
                text = raw.data.decode("utf-8", errors="replace") if raw.data else ""
                raise _api_error(target, response.status, text, self.description, response.getheader("Retry-After"))
            yield from _json_lines(raw.stream(amt=None, decode_content=False))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if stop is not None and stop.is_set():
                return  # the connection was closed by WatchStop.set()
            if "timed out" not in str(exc).lower() and "timeout" not in type(exc).__name__.lower():
                raise KubeConnectionError(f"{target}: {self.description}: {_reason(exc)}") from None
        finally:  # a stream left mid-way is never handed back to the pool
            if isinstance(stop, WatchStop):
                stop.untrack(raw)
            raw.close()
            raw.release_conn()

    def create(self, manifest: dict[str, Any], namespace: str | None = None, *,
               lost_answer_ok: bool = False) -> dict[str, Any]:
        """Create the object (in `namespace`, else the manifest's); the object as stored.

        `lost_answer_ok`: the name is the caller's own (no one else creates it), so the create is also retried when
        its outcome is unknown (500, 502, 504, connection lost mid-request), and a 409 AlreadyExists on a later
        attempt counts as created: an earlier attempt got through before its answer was lost. ``last_attempts``
        tells how many times it was sent."""
        ref = ObjectRef.of(manifest)
        namespace = namespace or ref.namespace
        if self.namespace_labels and (ref.api_version, ref.kind) == ("v1", "Namespace"):
            metadata = manifest.get("metadata") or {}
            manifest = {**manifest, "metadata": {**metadata, "labels": {**(metadata.get("labels") or {}),
                                                                         **self.namespace_labels}}}
        info = self.resource(ref.api_version, ref.kind)
        what = f"create {ref.kind} {namespace + '/' if namespace else ''}{ref.name}"
        try:
            return self.request("POST", info.path(namespace), body=manifest, what=what, outcome_known=lost_answer_ok)
        except KubeError as exc:
            if not (lost_answer_ok and exc.status == 409 and self.last_attempts > 1):
                raise
        attempts = self.last_attempts
        stored = self.get(ObjectRef(ref.api_version, ref.kind, ref.name, namespace))
        self._local.attempts = attempts
        return stored if stored is not None else manifest

    def patch(self, ref: ObjectRef, patch: Any, *, content_type: str = MERGE_PATCH, subresource: str | None = None):
        info = self.resource(ref.api_version, ref.kind)
        path = info.path(ref.namespace, ref.name, subresource)
        return self.request("PATCH", path, body=patch, content_type=content_type, what=f"patch {ref}")

    def apply(self, manifest: dict[str, Any]) -> ApplyResult:
        """Create the object, or merge-patch it with the manifest when it exists (like `kubectl apply`)."""
        ref = ObjectRef.of(manifest)
        try:
            return ApplyResult(self.create(manifest), created=True)
        except KubeError as exc:
            if exc.status != 409:
                raise
        return ApplyResult(self.patch(ref, manifest), created=False)

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> bool:
        """Ask for deletion; True when the object existed. Use wait.wait_deleted to wait until it is gone."""
        try:
            info = self.resource(ref.api_version, ref.kind)
            body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
            self.request("DELETE", info.path(ref.namespace, ref.name), body=body, what=f"delete {ref}")
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True



# the API groups an OpenShift AI component serves once Managed (docs/fresh-cluster.md): the hint of a 404 on a kind
COMPONENT_GROUPS = {"kubeflow.org": "trainingoperator", "serving.kserve.io": "kserve", "kueue.x-k8s.io": "kueue",
                    "ray.io": "ray", "workload.codeflare.dev": "codeflare"}


def served_by(api_version: str) -> str:
    """Why a kind of `api_version` may be missing, when a component of the cluster's preparation serves it."""
    component = COMPONENT_GROUPS.get(api_version.partition("/")[0])
    if component is None:
        return ""
    return (f": OpenShift AI's {component} component is not Managed (set rhoai.components.{component}: true with "
            f"rhoai in the suite's cluster.stack, or prepare it yourself and set rhoai.prepare: false)")


def connect(
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    *,
    timeout: float = DEFAULT_CONNECT_TIMEOUT,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    pool_size: int = DEFAULT_POOL_SIZE,
) -> Kube:
    """Load `kubeconfig` (else $KUBECONFIG, else ~/.kube/config), select `context` and check the server answers.

    `pool_size`: connections kept for concurrent requests (one per thread that uses this connection at once).

    Raises KubeConnectionError (a TopsailError) within about `timeout` seconds when the file is missing or invalid,
    the context unknown, or the server unreachable or refusing the credentials.
    """
    path = _kubeconfig_path(kubeconfig)
    where = f"kubeconfig {path}" + (f", context {context}" if context else "")
    if not path.is_file():
        raise KubeConnectionError(f"{where}: no such file")
    configuration = k8s_client.Configuration()
    try:
        k8s_config.load_kube_config(
            config_file=str(path), context=context, client_configuration=configuration, persist_config=False
        )
    except (ConfigException, yaml.YAMLError, KeyError, TypeError, ValueError, OSError) as exc:
        raise KubeConnectionError(f"{where}: cannot be used: {_config_problem(exc)}") from None
    configuration.retries = 0  # fail fast; callers that wait poll again
    api_client = _api_client(configuration, pool_size)
    kube = Kube(api_client, description=f"{configuration.host} ({where})", context=context,
                request_timeout=request_timeout)
    kube.kubeconfig = path
    try:
        kube.version(timeout=timeout)
    except KubeError as exc:
        kube.close()
        if exc.status in (401, 403):
            raise KubeConnectionError(f"the API server {configuration.host} refused the credentials of {where}",
                                      exc.status) from None
        raise KubeConnectionError(str(exc).removeprefix("server version: "), exc.status) from None
    return kube


def _api_client(configuration: k8s_client.Configuration, pool_size: int) -> k8s_client.ApiClient:
    configuration.connection_pool_maxsize = max(pool_size, 1)
    hook = configuration.refresh_api_key_hook
    if hook is not None and not isinstance(hook, ThrottledRefresh):
        configuration.refresh_api_key_hook = ThrottledRefresh(hook)
    api_client = k8s_client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT
    return api_client


class ThrottledRefresh:
    """The kubeconfig loader's credential refresh, run at most every `interval_s` instead of before every request.

    The loader re-applies the whole kubeconfig (host, proxy environment, token) on each call: about 0.3 ms, half of
    the client's CPU per create. Exec-plugin and OIDC tokens live for minutes, so a refresh every 10 s is enough.
    """

    def __init__(self, hook: Any, interval_s: float = 10.0) -> None:
        self.hook = hook
        self.interval_s = interval_s
        self.next_refresh = 0.0
        self.lock = threading.Lock()

    def __deepcopy__(self, memo: dict[int, Any]) -> ThrottledRefresh:
        """A copied Configuration (Kube.with_pool) gets its own throttle over the same loader hook."""
        return ThrottledRefresh(self.hook, self.interval_s)

    def __call__(self, configuration: k8s_client.Configuration) -> None:
        now = time.monotonic()
        if now < self.next_refresh:
            return
        with self.lock:
            if now >= self.next_refresh:
                self.hook(configuration)
                self.next_refresh = now + self.interval_s
                # The loader's hook installs a fresh copy of itself on every call: keep throttling that one.
                if configuration.refresh_api_key_hook not in (None, self):
                    self.hook = configuration.refresh_api_key_hook
                    configuration.refresh_api_key_hook = self


def _json_lines(chunks: Iterator[bytes]) -> Iterator[dict[str, Any]]:
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while (newline := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:newline], buffer[newline + 1:]
            if line.strip():
                yield json.loads(line)


class WatchStop(threading.Event):
    """A stop flag for `Kube.watch` that also shuts down the connections of the watches it stops, so that a watch
    blocked in a read returns at once instead of after its read timeout (`WATCH_POLL_S`)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._streams: set[Any] = set()

    def track(self, raw: Any) -> None:
        with self._lock:
            self._streams.add(raw)
        if self.is_set():
            _shutdown(raw)

    def untrack(self, raw: Any) -> None:
        with self._lock:
            self._streams.discard(raw)

    def set(self) -> None:
        super().set()
        with self._lock:
            streams = list(self._streams)
        for raw in streams:
            _shutdown(raw)


def _shutdown(raw: Any) -> None:
    """Wake a thread blocked reading `raw` (a urllib3 response): shut its socket down (the reader sees EOF)."""
    sock = getattr(getattr(raw, "_connection", None), "sock", None)
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _kubeconfig_path(kubeconfig: str | os.PathLike[str] | None) -> Path:
    if kubeconfig:
        return Path(kubeconfig).expanduser()
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), "")
    return Path(first or "~/.kube/config").expanduser()


def _discard(response: Any) -> None:
    """Read and drop an answer that will be retried, so that its connection goes back to the pool."""
    try:
        response.read()
    except (urllib3.exceptions.HTTPError, OSError):
        pass
    finally:
        release = getattr(getattr(response, "response", None), "release_conn", None)
        if release is not None:
            release()


def _config_problem(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _reason(exc: BaseException) -> str:
    """The innermost cause of a urllib3 error, in words ("Connection refused", "timed out")."""
    reason = getattr(exc, "reason", None)
    while reason is not None and getattr(reason, "reason", None) is not None and reason is not reason.reason:
        reason = reason.reason
    text = str(reason or exc)
    if "Connection refused" in text:
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out"
    return text.split(": ", 1)[-1][:300] if "object at 0x" in text else text[:300]


MAX_BODY_SHOWN = 1000  # a body that is not a Status (an HTML error page, a proxy's text): its beginning


def _api_error(target: str, status: int, text: str, server: str, retry_after: str | None = None) -> KubeError:
    """The error of one answer: the API's message (whole: a 422's reason comes after long field paths), its reason,
    the HTTP status and the server with its kubeconfig (``server`` is the connection's description)."""
    reason, message, api_status = "", "", None
    try:
        body = json.loads(text)
        if isinstance(body, dict):
            reason, message = str(body.get("reason") or ""), str(body.get("message") or "")
            api_status = body if body.get("kind") == "Status" else None
    except ValueError:
        message = " ".join(text.split())[:MAX_BODY_SHOWN]
    detail = message or reason or "the answer gives no reason"
    answer = f"HTTP {status}{' ' + reason if reason else ''} from {server}"
    wait = _seconds(retry_after)
    if status in (401, 403):
        return KubeConnectionError(f"{target}: {server} refused the request ({status} {reason}): {detail}", status,
                                   reason, api_status=api_status, retry_after=wait)
    return KubeError(f"{target}: {detail} ({answer})", status, reason, api_status=api_status, retry_after=wait)


def _status_error(target: str, api_status: dict[str, Any], server: str) -> KubeError:
    """A Status object received inside a watch stream, as a KubeError."""
    return _api_error(target, int(api_status.get("code") or 0), json.dumps(api_status), server)


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None
