"""Which Prometheus answers the queries of a run, chosen once per run (docs/metrics.md):

- ``metrics.prometheus.url: auto`` (default) on the simulator: a local Prometheus scraping it (local.py), started by
  the first process that needs it (once under xdist) and stopped with the simulator;
- ``auto`` on a real cluster: OpenShift's Thanos Querier, found through the route ``thanos-querier`` in
  ``openshift-monitoring``, with the kubeconfig's bearer token (or a service account token file);
- any other value (or ``--topsail-prometheus URL``): that server.

When none can be used, ``Source.problem`` says why in one line naming the URL and the cause; the items still run
and have no metric KPIs. A token is kept in memory only (and, for the local server, in a private 0600 file).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.metrics.client import Prometheus, PrometheusError
from pytest_topsail.metrics.settings import PrometheusSettings
from pytest_topsail.yamlparse import parse_yaml

ROUTE = ("openshift-monitoring", "thanos-querier")
PROBE = "vector(1)"


@dataclass
class Source:
    description: str  # where the metrics come from, for the terminal and the artifacts (never the token)
    prometheus: Prometheus | None = None
    problem: str | None = None  # why there are no metric KPIs in this run
    local_interval_s: float | None = None  # the local server's scrape interval (it is waited for, see plugin.py)
    local_pid: int | None = None
    local_artifacts: str | None = None  # the local server's NNN__prometheus directory

    @property
    def url(self) -> str:
        return self.prometheus.url if self.prometheus is not None else ""


def kubeconfig_credentials(path: Path, context: str | None = None) -> tuple[str, str, str]:
    """(server URL, bearer token, CA PEM) of a kubeconfig's context (the simulator writes all three inline)."""
    document = parse_yaml(path.read_text(encoding="utf-8")) or {}
    name = context or document.get("current-context")
    ctx: dict[str, Any] = next((c["context"] for c in document.get("contexts") or () if c.get("name") == name), {})
    cluster: dict[str, Any] = next(
        (c["cluster"] for c in document.get("clusters") or () if c.get("name") == ctx.get("cluster")), {})
    user: dict[str, Any] = next((u["user"] for u in document.get("users") or () if u.get("name") == ctx.get("user")),
                                {})
    ca = base64.b64decode(cluster.get("certificate-authority-data") or b"").decode()
    return str(cluster.get("server") or ""), str(user.get("token") or ""), ca


def kube_token(kube: Any) -> str | None:
    """The bearer token the Kubernetes client sends (kubeconfig token, token file, or an exec plugin's)."""
    configuration = kube.api_client.configuration
    if configuration.refresh_api_key_hook is not None:
        configuration.refresh_api_key_hook(configuration)
    keys = configuration.api_key or {}
    value = str(keys.get("BearerToken") or keys.get("authorization") or "")  # the client's key name, old and new
    return value.removeprefix("Bearer ").strip() or None


def token_of(settings: PrometheusSettings, kube: Any | None, where: str) -> str | None:
    if settings.token == "none":
        return None
    if settings.token == "kubeconfig":
        return kube_token(kube) if kube is not None else None
    path = Path(settings.token).expanduser()
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError as error:
        raise TopsailError(f"{where}.token: the token file {path} cannot be read ({error.strerror or error})") from None


def verify_of(settings: PrometheusSettings) -> bool | str:
    if settings.ca_file:
        return str(Path(settings.ca_file).expanduser())
    return not settings.insecure


def openshift_querier(kube: Any) -> str:
    """The URL of OpenShift's Thanos Querier, from its route (https unless the route has no TLS)."""
    from pytest_topsail.kube.client import KubeError, ObjectRef

    namespace, name = ROUTE
    try:
        route = kube.get(ObjectRef("route.openshift.io/v1", "Route", name, namespace))
    except KubeError as error:
        raise TopsailError(f"metrics: the route {namespace}/{name} cannot be read ({error}); not OpenShift? set "
                           "metrics.prometheus.url") from None
    host = ((route or {}).get("spec") or {}).get("host")
    if not host:
        raise TopsailError(f"metrics: no route {namespace}/{name} with a host on this cluster (not OpenShift, or "
                           "its monitoring is off); set metrics.prometheus.url")
    scheme = "https" if (route.get("spec") or {}).get("tls") else "http"
    return f"{scheme}://{host}"


def remote_source(settings: PrometheusSettings, url: str, kube: Any | None, where: str) -> Source:
    """A Prometheus given by URL or found on the cluster, probed once: a problem line when it does not answer."""
    try:
        if url == "auto":
            if kube is None:
                raise TopsailError("metrics: no cluster to find Prometheus on; set metrics.prometheus.url")
            url = openshift_querier(kube)
        prometheus = Prometheus(url, token=token_of(settings, kube, where), verify=verify_of(settings),
                                timeout_s=settings.timeout_s)
    except TopsailError as error:
        return Source(description="none", problem=f"{error}; metric KPIs absent")
    try:
        prometheus.query(PROBE)
    except PrometheusError as error:
        prometheus.close()
        return Source(description=url, problem=f"metrics: {error}; metric KPIs absent")
    return Source(description=url, prometheus=prometheus)
