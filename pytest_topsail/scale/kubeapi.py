"""Thin, fast access to the Kubernetes REST API through the official client's transport.

The typed APIs of the official ``kubernetes`` client validate every argument with pydantic and turn every response
into model objects; at 1,000+ objects per second that costs more than the API server itself. This module keeps the
official client's transport (configuration from a kubeconfig, TLS, bearer token refresh, urllib3 connection pool
reused across threads) and exchanges plain JSON dicts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
from kubernetes.client import ApiClient, Configuration

from pytest_topsail.errors import TopsailError

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}

# (apiVersion, kind) -> plural resource name, for the kinds the scale suite creates and watches.
PLURALS = {
    ("v1", "Pod"): "pods",
    ("v1", "PersistentVolumeClaim"): "persistentvolumeclaims",
    ("v1", "Namespace"): "namespaces",
    ("v1", "Event"): "events",
    ("batch/v1", "Job"): "jobs",
    ("apps/v1", "Deployment"): "deployments",
    ("kubeflow.org/v1", "PyTorchJob"): "pytorchjobs",
}


class ApiError(Exception):
    """A non-2xx answer of the API server (status 0: no answer at all)."""

    def __init__(self, status: int, reason: str, body: str = "", retry_after: float | None = None) -> None:
        super().__init__(f"{status} {reason}: {body[:300]}")
        self.status = status
        self.reason = reason
        self.body = body
        self.retry_after = retry_after


def api_client_from_kubeconfig(kubeconfig: str, context: str | None = None, pool_size: int = 16) -> ApiClient:
    """An ApiClient whose connection pool holds ``pool_size`` connections (one per concurrent thread)."""
    configuration = Configuration()
    try:
        kubernetes.config.load_kube_config(
            config_file=str(kubeconfig), context=context, client_configuration=configuration
        )
    except Exception as exc:  # the loader raises many types; all mean "this kubeconfig is unusable"
        raise TopsailError(f"cannot load kubeconfig {kubeconfig}: {exc}") from exc
    return api_client_for(configuration, pool_size)


def api_client_for(configuration: Configuration, pool_size: int = 16) -> ApiClient:
    """An ApiClient on ``configuration`` with ``pool_size`` connections and a throttled credential refresh."""
    configuration.connection_pool_maxsize = max(pool_size, 1)
    hook = configuration.refresh_api_key_hook
    if hook is not None and not isinstance(hook, ThrottledRefresh):
        configuration.refresh_api_key_hook = ThrottledRefresh(hook)
    return ApiClient(configuration)


class ThrottledRefresh:
    """The kubeconfig loader's credential refresh, run at most every ``interval_s`` instead of before every request.

    The loader re-applies the whole kubeconfig (host, proxy environment, token) on each call: about 0.3 ms, half of
    the client's CPU per create. Exec-plugin and OIDC tokens live for minutes, so a refresh every 10 s is enough.
    """

    def __init__(self, hook: Any, interval_s: float = 10.0) -> None:
        self.hook = hook
        self.interval_s = interval_s
        self.next_refresh = 0.0
        self.lock = threading.Lock()

    def __call__(self, configuration: Configuration) -> None:
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


def collection_path(api_version: str, kind: str, namespace: str | None) -> str:
    """The REST path of the collection holding objects of ``kind`` (namespaced when ``namespace`` is given)."""
    plural = PLURALS.get((api_version, kind)) or kind.lower() + "s"
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespace:
        return f"{root}/namespaces/{namespace}/{plural}"
    return f"{root}/{plural}"


def object_path(obj: dict[str, Any], namespace: str | None = None) -> str:
    metadata = obj.get("metadata", {})
    ns = namespace or metadata.get("namespace")
    return f"{collection_path(obj['apiVersion'], obj['kind'], ns)}/{metadata['name']}"


@dataclass
class RawApi:
    """JSON requests over an official ``ApiClient`` (thread-safe: urllib3 pools are)."""

    client: ApiClient
    timeout_s: float = 30.0

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: list[tuple[str, Any]] | None = None,
        timeout: float | tuple[float, float] | None = None,
        stream: bool = False,
    ) -> Any:
        """Send one request; return the decoded JSON body (or the raw urllib3 response when ``stream``)."""
        method_, url, headers, body_, _ = self.client.param_serialize(
            method,
            path,
            query_params=query or None,
            header_params=dict(JSON_HEADERS),
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.client.call_api(method_, url, headers, body_, _request_timeout=timeout or self.timeout_s)
        except kubernetes.client.ApiException as exc:
            raise ApiError(exc.status or 0, str(exc.reason)) from exc
        except Exception as exc:  # urllib3 connection/read errors
            raise ApiError(0, type(exc).__name__, str(exc)) from exc
        raw = response.response
        if not 200 <= response.status <= 299:
            text = raw.data.decode("utf-8", "replace") if raw.data else ""
            retry_after = raw.headers.get("Retry-After")
            raise ApiError(response.status, str(response.reason), text, float(retry_after) if retry_after else None)
        if stream:
            return raw
        data = raw.data
        return json.loads(data) if data else None

    def create(self, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        return self.request("POST", collection_path(obj["apiVersion"], obj["kind"], ns), body=obj)

    def list(self, path: str, label_selector: str | None = None, field_selector: str | None = None) -> dict[str, Any]:
        return self.request("GET", path, query=selector_query(label_selector, field_selector))

    def delete(self, path: str, propagation: str = "Background") -> dict[str, Any] | None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        try:
            return self.request("DELETE", path, body=body)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def delete_collection(self, path: str, label_selector: str | None = None) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        self.request("DELETE", path, body=body, query=selector_query(label_selector, None))

    def watch_events(
        self,
        path: str,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 60,
        read_timeout_s: float = 1.0,
    ) -> Iterator[dict[str, Any]]:
        """Yield watch events (decoded JSON) until the server closes the stream or nothing came for ``read_timeout_s``.

        A read timeout ends the iteration quietly, so that callers can check a stop flag and watch again from the
        last resourceVersion they saw.
        """
        query = selector_query(label_selector, field_selector)
        query += [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        raw = self.request("GET", path, query=query, timeout=(10.0, read_timeout_s), stream=True)
        buffer = b""
        try:
            for chunk in raw.stream(amt=None, decode_content=False):
                buffer += chunk
                while True:
                    newline = buffer.find(b"\n")
                    if newline < 0:
                        break
                    line, buffer = buffer[:newline], buffer[newline + 1 :]
                    if line.strip():
                        yield json.loads(line)
        except Exception as exc:  # read timeout or closed connection: the caller watches again
            if "timed out" not in str(exc).lower() and "timeout" not in type(exc).__name__.lower():
                raise ApiError(0, type(exc).__name__, str(exc)) from exc
        finally:
            # A stream may be left mid-way (timeout, consumer stopped): never hand such a connection back to the pool.
            raw.close()
            raw.release_conn()


def selector_query(label_selector: str | None, field_selector: str | None) -> list[tuple[str, Any]]:
    query: list[tuple[str, Any]] = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query
