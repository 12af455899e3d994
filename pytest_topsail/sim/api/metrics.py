"""The apiserver's own Prometheus metrics, served at ``/metrics`` (perf suites scrape them): request counts and
latencies per verb, group, version, resource, subresource and scope, watches in flight, stored objects per resource.
Names, labels and buckets as kube-apiserver 1.32 exposes them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component")
_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0,
            20.0, 30.0, 45.0, 60.0)
# The store's verbs as the apiserver reports them (a server-side apply patch is APPLY).
REPORTED_VERBS = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT",
                  "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETECOLLECTION"}


class _StoredObjects(Collector):
    def __init__(self, counts: Callable[[], Iterable[tuple[str, int]]]) -> None:
        self._counts = counts

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily("apiserver_storage_objects", "Number of stored objects at the time of last "
                                   "check split by kind.", labels=["resource"])
        for resource, count in self._counts():
            family.add_metric([resource], count)
        yield family


class ApiMetrics:
    """One registry per server (several simulators may run in one process)."""

    def __init__(self, stored_counts: Callable[[], Iterable[tuple[str, int]]]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._total = Counter("apiserver_request_total", "Counter of apiserver requests broken out for each verb, "
                              "dry run value, group, version, resource, scope, component, and HTTP response code.",
                              [*_LABELS, "code"], registry=self.registry)
        self._duration = Histogram("apiserver_request_duration_seconds", "Response latency distribution in seconds "
                                   "for each verb, dry run value, group, version, resource, subresource, scope and "
                                   "component.", _LABELS, buckets=_BUCKETS, registry=self.registry)
        self._longrunning = Gauge("apiserver_longrunning_requests", "Gauge of all active long-running apiserver "
                                  "requests broken out by verb, group, version, resource, scope and component.",
                                  ["verb", "group", "version", "resource", "subresource", "scope", "component"],
                                  registry=self.registry)
        self.registry.register(_StoredObjects(stored_counts))
        self._children: dict[tuple[str, tuple[str, ...], int], tuple[Any, Any]] = {}

    def observe(self, verb: str, labels: tuple[str, ...], code: int, seconds: float) -> None:
        """One finished request; ``labels`` are (dry_run, group, version, resource, subresource, scope).
        Watches count but, being long-running, have no latency, as on the apiserver."""
        key = (verb, labels, code)
        children = self._children.get(key)
        if children is None:  # labels() costs more than the count itself: one lookup per request instead
            values = (verb, *labels, "apiserver")
            children = self._children[key] = (self._total.labels(*values, str(code)),
                                              None if verb == "WATCH" else self._duration.labels(*values))
        children[0].inc()
        if children[1] is not None:
            children[1].observe(seconds)

    def watching(self, labels: tuple[str, ...], delta: int) -> None:
        """A watch started (+1) or ended (-1); ``labels`` as for ``observe`` without dry_run."""
        self._longrunning.labels("WATCH", *labels, "apiserver").inc(delta)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
