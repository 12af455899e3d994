"""The apiserver's own Prometheus metrics, served at ``/metrics`` (perf suites scrape them): request counts and
latencies per verb, group, version, resource, subresource and scope, watches in flight, stored objects per resource.
Names, labels and buckets as kube-apiserver 1.32 exposes them.

Every request updates the request counter and histogram, so they are plain numbers in one dict lookup per request
(prometheus_client's own Counter and Histogram take a lock per increment, three a request); ``_RequestMetrics``
turns them into the very series prometheus_client's Counter and Histogram expose (same samples, same order, the
``_created`` series unless prometheus_client's switch disables them). The server updates them on the event loop's
thread only."""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component")
_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0,
            20.0, 30.0, 45.0, 60.0, float("inf"))
_LE = tuple(floatToGoString(bound) for bound in _BUCKETS)
# The store's verbs as the apiserver reports them (a server-side apply patch is APPLY).
REPORTED_VERBS = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT",
                  "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETECOLLECTION"}
_TOTAL_HELP = ("Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, "
               "scope, component, and HTTP response code.")
_DURATION_HELP = ("Response latency distribution in seconds for each verb, dry run value, group, version, resource, "
                  "subresource, scope and component.")


class _StoredObjects(Collector):
    def __init__(self, counts: Callable[[], Iterable[tuple[str, int]]]) -> None:
        self._counts = counts

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily("apiserver_storage_objects", "Number of stored objects at the time of last "
                                   "check split by kind.", labels=["resource"])
        for resource, count in self._counts():
            family.add_metric([resource], count)
        yield family


class _Count:
    __slots__ = ("value", "created")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()


class _Histogram:
    __slots__ = ("buckets", "sum", "created")

    def __init__(self) -> None:
        self.buckets = [0.0] * len(_BUCKETS)  # per bucket, not cumulative, as prometheus_client keeps them
        self.sum = 0.0
        self.created = time.time()

    def observe(self, seconds: float) -> None:
        self.sum += seconds
        self.buckets[bisect.bisect_left(_BUCKETS, seconds)] += 1.0  # the first bound >= seconds


class _RequestMetrics(Collector):
    """apiserver_request_total and apiserver_request_duration_seconds, by label values (in first-seen order)."""

    def __init__(self) -> None:
        self.totals: dict[tuple[str, ...], _Count] = {}
        self.durations: dict[tuple[str, ...], _Histogram] = {}

    def collect(self) -> Iterable[Metric]:
        created = prometheus_metrics._use_created  # noqa: SLF001 - prometheus_client's PROMETHEUS_DISABLE_CREATED_SERIES
        total = Metric("apiserver_request", _TOTAL_HELP, "counter")
        for values, count in self.totals.items():
            labels = dict(zip((*_LABELS, "code"), values, strict=True))
            total.add_sample("apiserver_request_total", labels, count.value)
            if created:
                total.add_sample("apiserver_request_created", labels, count.created)
        duration = Metric("apiserver_request_duration_seconds", _DURATION_HELP, "histogram")
        name = "apiserver_request_duration_seconds"
        for values, histogram in self.durations.items():
            labels = dict(zip(_LABELS, values, strict=True))
            cumulative = 0.0
            for le, in_bucket in zip(_LE, histogram.buckets, strict=True):
                cumulative += in_bucket
                duration.add_sample(name + "_bucket", {**labels, "le": le}, cumulative)
            duration.add_sample(name + "_count", labels, cumulative)
            duration.add_sample(name + "_sum", labels, histogram.sum)
            if created:
                duration.add_sample(name + "_created", labels, histogram.created)
        return [total, duration]


class ApiMetrics:
    """One registry per server (several simulators may run in one process)."""

    def __init__(self, stored_counts: Callable[[], Iterable[tuple[str, int]]]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._requests = _RequestMetrics()
        self.registry.register(self._requests)
        self._longrunning = Gauge("apiserver_longrunning_requests", "Gauge of all active long-running apiserver "
                                  "requests broken out by verb, group, version, resource, scope and component.",
                                  ["verb", "group", "version", "resource", "subresource", "scope", "component"],
                                  registry=self.registry)
        self.registry.register(_StoredObjects(stored_counts))
        self._series: dict[tuple[str, tuple[str, ...], int], tuple[_Count, _Histogram | None]] = {}

    def observe(self, verb: str, labels: tuple[str, ...], code: int, seconds: float) -> None:
        """One finished request; ``labels`` are (dry_run, group, version, resource, subresource, scope).
        Watches count but, being long-running, have no latency, as on the apiserver."""
        series = self._series.get((verb, labels, code))
        if series is None:
            series = self._series[(verb, labels, code)] = self._new_series(verb, labels, code)
        series[0].value += 1.0
        if series[1] is not None:
            series[1].observe(seconds)

    def _new_series(self, verb: str, labels: tuple[str, ...], code: int) -> tuple[_Count, _Histogram | None]:
        values = (verb, *labels, "apiserver")
        count = self._requests.totals.setdefault((*values, str(code)), _Count())
        histogram = None if verb == "WATCH" else self._requests.durations.setdefault(values, _Histogram())
        return count, histogram

    def watching(self, labels: tuple[str, ...], delta: int) -> None:
        """A watch started (+1) or ended (-1); ``labels`` as for ``observe`` without dry_run."""
        self._longrunning.labels("WATCH", *labels, "apiserver").inc(delta)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
