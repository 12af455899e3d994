"""Connection to a Kubernetes API server and the object operations the rest of the project needs.

`connect(kubeconfig, context, timeout=10)` loads a kubeconfig, checks that the server answers within `timeout`
seconds and returns a `Kube`. Objects are plain dicts (the JSON the API returns); an object is named by an
`ObjectRef`. Every request has a timeout; failures become `KubeError` (a TopsailError) naming the object and the
server, never carrying credentials.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from pytest_topsail.errors import TopsailError

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_REQUEST_TIMEOUT = 30.0
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
USER_AGENT = "pytest-topsail"


class KubeError(TopsailError):
    """A failed Kubernetes request. `status` is the HTTP status (0 when the server could not be reached)."""

    def __init__(self, message: str, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


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
    ) -> None:
        self.api_client = api_client
        self.description = description  # "https://host:port (kubeconfig PATH, context NAME)": no credentials
        self.context = context
        self.request_timeout = request_timeout
        self._discovery: dict[str, dict[str, ResourceInfo]] = {}
        self._discovery_lock = threading.Lock()

    @property
    def server(self) -> str:
        return self.api_client.configuration.host

    def close(self) -> None:
        self.api_client.close()

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
    ) -> Any:
        """One HTTP request; returns the decoded JSON (or text when `raw`). Raises KubeError on any failure."""
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        query_params = [(k, v) for k, v in (query or {}).items() if v is not None]
        seconds = timeout or self.request_timeout
        target = what or f"{method} {path}"
        try:
            prepared = self.api_client.param_serialize(
                method, path, query_params=query_params, header_params=headers, body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api_client.call_api(*prepared, _request_timeout=(min(seconds, 5.0), seconds))
            data = response.read()
        except ApiException as exc:
            raise KubeConnectionError(f"{target}: {self.description}: {exc.reason or exc}", exc.status or 0) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeConnectionError(f"{target}: cannot reach {self.description}: {_reason(exc)}") from None
        text = data.decode("utf-8", errors="replace") if data else ""
        if response.status >= 400:
            raise _api_error(target, response.status, text, self.description)
        if raw:
            return text
        return json.loads(text) if text else None

    def version(self, timeout: float | None = None) -> dict[str, Any]:
        return self.request("GET", "/version", timeout=timeout, what="server version")

    # -- discovery ---------------------------------------------------------------------------------------------
    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """Discovery for `kind` in `api_version`, refreshed once when the kind is unknown (CRDs appear at run time)."""
        info = self._discovered(api_version, refresh=False).get(kind)
        if info is None:
            info = self._discovered(api_version, refresh=True).get(kind)
        if info is None:
            raise KubeError(f"the API server {self.server} does not serve kind {kind} in {api_version}", 404,
                            "NotFound")
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
        query = {"labelSelector": label_selector, "fieldSelector": field_selector}
        result = self.request("GET", info.path(namespace), query=query, what=f"list {kind} in {api_version}")
        items = result.get("items") or []
        for item in items:  # lists omit apiVersion/kind on items
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        ref = ObjectRef.of(manifest)
        info = self.resource(ref.api_version, ref.kind)
        return self.request("POST", info.path(ref.namespace), body=manifest, what=f"create {ref}")

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


def connect(
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    *,
    timeout: float = DEFAULT_CONNECT_TIMEOUT,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
) -> Kube:
    """Load `kubeconfig` (else $KUBECONFIG, else ~/.kube/config), select `context` and check the server answers.

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
    api_client = k8s_client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT
    kube = Kube(api_client, description=f"{configuration.host} ({where})", context=context,
                request_timeout=request_timeout)
    try:
        kube.version(timeout=timeout)
    except KubeError as exc:
        kube.close()
        if exc.status in (401, 403):
            raise KubeConnectionError(f"the API server {configuration.host} refused the credentials of {where}",
                                      exc.status) from None
        raise KubeConnectionError(str(exc).removeprefix("server version: "), exc.status) from None
    return kube


def _kubeconfig_path(kubeconfig: str | os.PathLike[str] | None) -> Path:
    if kubeconfig:
        return Path(kubeconfig).expanduser()
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), "")
    return Path(first or "~/.kube/config").expanduser()


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


def _api_error(target: str, status: int, text: str, server: str) -> KubeError:
    reason, message = "", ""
    try:
        body = json.loads(text)
        if isinstance(body, dict):
            reason, message = str(body.get("reason") or ""), str(body.get("message") or "")
    except ValueError:
        message = text[:300]
    detail = message or reason or f"HTTP {status}"
    if status in (401, 403):
        return KubeConnectionError(f"{target}: {server} refused the request ({status} {reason}): {detail}", status,
                                   reason)
    return KubeError(f"{target}: {detail} (HTTP {status})", status, reason)
