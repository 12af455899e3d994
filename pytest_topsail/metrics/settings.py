"""A suite's ``metrics:`` section: where Prometheus is and which queries become KPIs (docs/metrics.md).

Validated at start-up (``Suite.validate``) by ``metrics_settings(config)``. A suite without the section has no
metric KPIs. ``queries`` are added to the defaults (``defaults: false`` drops those); a query named like a default
replaces it.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import pydantic

from pytest_topsail.config import Config
from pytest_topsail.settings import Settings, validate

METRICS_KEY = "metrics"
PLACEHOLDERS = ("namespace", "pod", "start", "end", "duration", "rate_window")
_PLACEHOLDER = re.compile(r"\$([a-z_]+)")
_KPI_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

_GPU = 'namespace="$namespace", pod=~"$pod"'
_CONTAINER = 'namespace="$namespace", pod=~"$pod", container!="", container!="POD"'
GIB = 1 / 1024  # MiB -> GiB
BYTES_GIB = 1 / 2**30


class Query(Settings):
    """One PromQL query over the item's window and the KPI made of its samples."""

    kpi: str
    query: str
    unit: str
    help: str = ""
    direction: Literal["lower", "higher"] = "lower"
    aggregation: Literal["avg", "max", "min", "last"] = "avg"  # over every sample of every series in the window
    scale: float = 1.0  # multiplies the values (MiB -> GiB: 0.0009765625)
    format: str = "{:.2f}"
    figure: str | None = None  # title of the over-time figure of this query's series (one line per series)

    @pydantic.field_validator("kpi")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _KPI_NAME.match(value):
            raise ValueError("must be a valid metric name ([a-zA-Z_][a-zA-Z0-9_]*)")
        return value

    @pydantic.field_validator("query")
    @classmethod
    def _placeholders(cls, value: str) -> str:
        unknown = sorted(set(_PLACEHOLDER.findall(value)) - set(PLACEHOLDERS))
        if unknown:
            raise ValueError(f"unknown placeholder ${unknown[0]}; known: "
                             + ", ".join(f"${name}" for name in PLACEHOLDERS))
        return value


class PrometheusSettings(Settings):
    # auto: the simulator's own Prometheus (started for the run), on a real cluster OpenShift's Thanos Querier
    # (route thanos-querier in openshift-monitoring); or any URL (also --topsail-prometheus URL)
    url: str = "auto"
    token: str = "kubeconfig"  # kubeconfig (the cluster's bearer token) | none | a file holding a token
    ca_file: str | None = None  # verify the server with this CA; else the system's CAs
    insecure: bool = False  # do not verify the server's certificate
    timeout_s: float = pydantic.Field(10.0, gt=0, le=300)
    binary: str = "prometheus"  # the local server (Debian package prometheus)
    scrape_interval_s: float = pydantic.Field(1.0, gt=0, le=60)  # of the local server
    start_timeout_s: float = pydantic.Field(15.0, gt=0, le=300)  # until the local server scraped its targets


class MetricsSettings(Settings):
    enabled: bool = True
    prometheus: PrometheusSettings = PrometheusSettings()
    namespace: str | None = None  # $namespace: default the suite's namespace (namespace.name, else topsail-<suite>)
    pod: str = ".+"  # $pod: a regular expression
    step_s: float | None = pydantic.Field(None, gt=0)  # query resolution; default the scrape interval (local) or 15 s
    # $rate_window, for rate() of counters: default 4 scrapes of the local server, else 2 minutes
    rate_window_s: float | None = pydantic.Field(None, gt=0)
    defaults: bool = True
    queries: list[Query] = []

    def all_queries(self) -> list[Query]:
        own = {query.kpi: query for query in self.queries}
        merged = [own.pop(query.kpi, query) for query in DEFAULT_QUERIES] if self.defaults else []
        return merged + list(own.values())


DEFAULT_QUERIES: tuple[Query, ...] = (
    Query(kpi="gpu_utilization_avg", query=f"avg by (pod) (DCGM_FI_DEV_GPU_UTIL{{{_GPU}}})", unit="%",
          help="GPU utilization of the item's pods, averaged over the item (DCGM_FI_DEV_GPU_UTIL)",
          aggregation="avg", format="{:.1f}", figure="GPU utilization (%)"),
    Query(kpi="gpu_utilization_max", query=f"max by (pod) (DCGM_FI_DEV_GPU_UTIL{{{_GPU}}})", unit="%",
          help="Highest GPU utilization of the item's pods (DCGM_FI_DEV_GPU_UTIL)", aggregation="max",
          format="{:.1f}"),
    Query(kpi="gpu_memory_used_max", query=f"max by (pod) (DCGM_FI_DEV_FB_USED{{{_GPU}}})", unit="GiB",
          help="Most GPU memory used on one GPU by the item's pods (DCGM_FI_DEV_FB_USED)", aggregation="max",
          scale=GIB, figure="GPU memory used (GiB)"),
    Query(kpi="gpu_power_avg", query=f"sum by (pod) (DCGM_FI_DEV_POWER_USAGE{{{_GPU}}})", unit="W",
          help="Power drawn by the GPUs of the item's pods, averaged over the item (DCGM_FI_DEV_POWER_USAGE)",
          aggregation="avg", format="{:.0f}"),
    Query(kpi="container_cpu_max",
          query=f"sum by (pod, container) (rate(container_cpu_usage_seconds_total{{{_CONTAINER}}}[$rate_window]))",
          unit="cores", help="Most CPU used by one container of the item's pods (container_cpu_usage_seconds_total)",
          aggregation="max", format="{:.2f}"),
    Query(kpi="container_memory_max",
          query=f"max by (pod, container) (container_memory_working_set_bytes{{{_CONTAINER}}})", unit="GiB",
          help="Largest working set of one container of the item's pods (container_memory_working_set_bytes)",
          aggregation="max", scale=BYTES_GIB),
)


def metrics_settings(config: Config) -> MetricsSettings | None:
    """The suite's validated ``metrics:`` section; None when it has none or says ``enabled: false``."""
    if METRICS_KEY not in config:
        return None
    raw: Any = config.get(METRICS_KEY)
    settings = validate(MetricsSettings, raw, f"{config.source}: {METRICS_KEY}", "invalid metrics settings")
    kpis = [query.kpi for query in settings.queries]
    if len(kpis) != len(set(kpis)):
        from pytest_topsail.errors import TopsailError

        twice = sorted({kpi for kpi in kpis if kpis.count(kpi) > 1})
        raise TopsailError(f"{config.source}: {METRICS_KEY}.queries: KPI {twice[0]!r} named twice")
    return settings if settings.enabled else None


def render(query: str, values: dict[str, str]) -> str:
    """The query with its ``$placeholders`` replaced (longest names first: ``$end`` is no prefix problem here)."""
    return _PLACEHOLDER.sub(lambda match: values.get(match.group(1), match.group(0)), query)
