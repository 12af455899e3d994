"""The metrics pieces on their own: settings validation, the simulator's exporters, KPIs from series documents,
Prometheus API errors (no cluster, no Prometheus binary)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.config import Config
from pytest_topsail.errors import TopsailError
from pytest_topsail.metrics.client import Prometheus, PrometheusError
from pytest_topsail.metrics.collect import kpi_values
from pytest_topsail.metrics.settings import DEFAULT_QUERIES, metrics_settings, render
from pytest_topsail.sim.node.exporters import DCGM_PATH, Exporters
from pytest_topsail.sim.node.gpuactivity import Live, Phases, Usage, gpu_activity


def config(metrics: Any) -> Config:
    return Config({"metrics": metrics}, source="suites/x/config.yaml")


# ------------------------------------------------------------------ settings
def test_defaults_and_own_queries() -> None:
    settings = metrics_settings(config({"queries": [
        {"kpi": "gpu_memory_used_max", "query": "max(DCGM_FI_DEV_FB_USED)", "unit": "MiB", "aggregation": "max"},
        {"kpi": "gpu_temperature_max", "query": 'max(DCGM_FI_DEV_GPU_TEMP{namespace="$namespace"})', "unit": "C"}]}))
    assert settings is not None
    kpis = [query.kpi for query in settings.all_queries()]
    assert kpis == [query.kpi for query in DEFAULT_QUERIES] + ["gpu_temperature_max"]
    replaced = next(q for q in settings.all_queries() if q.kpi == "gpu_memory_used_max")
    assert replaced.unit == "MiB"
    assert metrics_settings(Config({}, source="x")) is None
    assert metrics_settings(config({"enabled": False})) is None


@pytest.mark.parametrize(("section", "expected"), [
    ({"queries": [{"kpi": "x", "query": "up{pod=\"$podname\"}", "unit": "s"}]}, "unknown placeholder $podname"),
    ({"queries": [{"kpi": "x", "query": "up", "unit": "s", "aggregation": "median"}]},
     "key metrics.queries[0].aggregation"),
    ({"queries": [{"kpi": "9x", "query": "up", "unit": "s"}]}, "key metrics.queries[0].kpi"),
    ({"promethus": {}}, "key metrics.promethus: unknown key"),
    ({"prometheus": {"insecure": "yes"}}, "key metrics.prometheus.insecure"),
    ({"queries": [{"kpi": "a", "query": "up", "unit": "s"}, {"kpi": "a", "query": "up", "unit": "s"}]},
     "KPI 'a' named twice"),
])
def test_bad_settings_name_file_and_key(section: dict[str, Any], expected: str) -> None:
    with pytest.raises(TopsailError) as caught:
        metrics_settings(config(section))
    assert str(caught.value).startswith("suites/x/config.yaml: ")
    assert expected in str(caught.value)


def test_placeholders() -> None:
    assert render('up{namespace="$namespace", pod=~"$pod"}[$rate_window] @ $end',
                  {"namespace": "ns", "pod": "a.+", "rate_window": "4s", "end": "12.000"}) == \
        'up{namespace="ns", pod=~"a.+"}[4s] @ 12.000'


# ------------------------------------------------------------------ the simulator's exporters
class FakeStore:
    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.objects = {"nodes": nodes, "pods": pods}

    def resource_type(self, plural: str, group: str = "") -> str:
        return plural

    def list(self, rtype: str) -> list[dict[str, Any]]:
        return self.objects[rtype]


def node(name: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
                                                  "nvidia.com/gpu.memory": "40960"}},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)}}}


def pod(name: str, node_name: str, gpus: int, uid: str, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "creationTimestamp": created},
            "spec": {"nodeName": node_name, "containers": [
                {"name": "main", "image": "img", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}},
                {"name": "sidecar", "image": "side"}]},
            "status": {"phase": "Running"}}


def samples(text: str, metric: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line.startswith(metric + "{"):
            labels, value = line[len(metric):].rsplit(" ", 1)
            found[labels] = float(value)
    return found


def test_dcgm_series_follow_the_reported_use_idle_gpus_read_zero() -> None:
    store = FakeStore([node("gpu-0", 2), node("gpu-1", 2)], [pod("trainer", "gpu-0", 1, "u1")])
    gpu_activity(store).report("u1", Phases(((0.0, Usage(10, 100)), (1e12, Usage(0, 0))), container="main"))
    text = Exporters(store).render(DCGM_PATH).decode()
    utilization = samples(text, "DCGM_FI_DEV_GPU_UTIL")
    assert len(utilization) == 4
    held = [labels for labels in utilization if 'pod="trainer"' in labels]
    assert len(held) == 1 and 'Hostname="gpu-0"' in held[0] and 'container="main"' in held[0]
    assert 'modelName="NVIDIA A100-SXM4-40GB"' in held[0] and 'gpu="0"' in held[0] and 'UUID="GPU-' in held[0]
    assert utilization[held[0]] == 10
    assert samples(text, "DCGM_FI_DEV_FB_USED")[held[0]] == 100
    assert samples(text, "DCGM_FI_DEV_FB_FREE")[held[0]] == 40960 - 100
    idle = [labels for labels in utilization if 'Hostname="gpu-1"' in labels]
    assert [utilization[labels] for labels in idle] == [0, 0]
    assert all('pod=' not in labels for labels in idle)
    assert all(samples(text, "DCGM_FI_DEV_FB_USED")[labels] == 0 for labels in idle)


def test_gpus_are_kept_by_their_pod_and_live_use_is_read_at_each_scrape() -> None:
    first = pod("a", "gpu-0", 1, "ua", "2026-01-01T00:00:01Z")
    second = pod("b", "gpu-0", 1, "ub", "2026-01-01T00:00:02Z")
    store = FakeStore([node("gpu-0", 2)], [first, second])
    occupancy = {"running": 1}
    gpu_activity(store).report("ub", Live(lambda: Usage(occupancy["running"] * 10.0, 2048), container="main"))
    exporters = Exporters(store)

    def util_of_b() -> tuple[str, float]:
        found = samples(exporters.render(DCGM_PATH).decode(), "DCGM_FI_DEV_GPU_UTIL")
        labels = next(labels for labels in found if 'pod="b"' in labels)
        return labels, found[labels]

    labels, value = util_of_b()
    assert 'gpu="1"' in labels and value == 10  # dcgm-exporter reports whole percents
    store.objects["pods"] = [second]  # a finished: b keeps GPU 1
    occupancy["running"] = 8
    assert util_of_b() == (labels, 80.0)


def test_cadvisor_counts_cpu_seconds_and_reports_the_working_set() -> None:
    store = FakeStore([node("gpu-0", 1)], [pod("trainer", "gpu-0", 1, "u1")])
    gpu_activity(store).report("u1", Phases(((0.0, Usage(90, 1000, cpu_cores=2.0, memory_bytes=3 * 2**30)),),
                                            container="main"))
    exporters = Exporters(store)
    import time
    before = time.time()
    exporters.render("/metrics/cadvisor")
    time.sleep(0.2)
    text = exporters.render("/metrics/cadvisor").decode()
    between = time.time() - before  # at load the sleep may last much longer than 0.2 s
    cpu = samples(text, "container_cpu_usage_seconds_total")
    main = next(labels for labels in cpu if 'container="main"' in labels)
    assert 2 * 0.2 <= cpu[main] <= 2 * between  # 2 cores x the wall time between the two scrapes
    assert samples(text, "container_memory_working_set_bytes")[main] == 3 * 2**30
    sidecar = next(labels for labels in cpu if 'container="sidecar"' in labels)
    assert cpu[sidecar] < cpu[main] / 100 and 'namespace="ns"' in sidecar and 'pod="trainer"' in sidecar


# ------------------------------------------------------------------ KPIs from a series document
def document(results: list[list[tuple[float, str]]]) -> dict[str, Any]:
    specs = {query.kpi: query for query in DEFAULT_QUERIES}
    return {"start": 100.0, "end": 110.0, "queries": [
        {"spec": specs["gpu_utilization_avg"].model_dump(mode="json"), "query": "q",
         "result": [{"metric": {"pod": f"p{index}"}, "values": [[t, v] for t, v in points]}
                    for index, points in enumerate(results)]},
        {"spec": specs["gpu_memory_used_max"].model_dump(mode="json"), "query": "q",
         "result": [{"metric": {"pod": "p0"}, "values": [[101, "2048"], [102, "4096"]]}]},
        {"spec": specs["container_cpu_max"].model_dump(mode="json"), "query": "q", "result": []}]}


def test_kpis_aggregate_over_every_sample_and_are_absent_without_samples() -> None:
    values = {metric.query.kpi: metric.value for metric in kpi_values(document([[(101, "50"), (102, "100")],
                                                                                 [(101, "0"), (102, "NaN")]]))}
    assert values == {"gpu_utilization_avg": 50.0, "gpu_memory_used_max": 4.0}


def test_metric_kpis_carry_their_sample_size_and_extremes_are_informational() -> None:
    from pytest_topsail.items import ItemRecord
    from pytest_topsail.kpi import KpiRecorder, SuiteKpis
    from pytest_topsail.metrics.collect import record_kpis

    record = ItemRecord(suite="s", nodeid="n", test_id="n")
    record_kpis(KpiRecorder(record, SuiteKpis(None, {})), document([[(101, "50"), (102, "100")], [(101, "0")]]))
    by_name = {entry["name"]: entry for entry in record.kpis}
    average, peak = by_name["gpu_utilization_avg"], by_name["gpu_memory_used_max"]
    assert average["samples"] == 3 and not average["ignored_for_regression"], "judged from 100 samples on"
    assert peak["ignored_for_regression"] and "extreme" in peak["why"]


# ------------------------------------------------------------------ Prometheus API errors
class Refusing(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        ok = self.headers.get("Authorization") == "Bearer s3cret"
        body = b'{"status":"success","data":{"resultType":"vector","result":[]}}' if ok else b"Unauthorized\n"
        self.send_response(200 if ok else 401)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_401_names_the_url_and_cause_never_the_token(refusing_url: str) -> None:
    with pytest.raises(PrometheusError) as caught:
        Prometheus(refusing_url, token="wrong-token").query("up")
    message = str(caught.value)
    assert refusing_url in message and "401" in message and "token was refused" in message
    assert "wrong-token" not in message
    with pytest.raises(PrometheusError, match="no token was sent"):
        Prometheus(refusing_url).query("up")
    assert Prometheus(refusing_url, token="s3cret").query("up") == []


def test_unreachable_names_the_url(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(PrometheusError) as caught:
        Prometheus(f"http://127.0.0.1:{port}", timeout_s=2).query("up")
    assert f"Prometheus http://127.0.0.1:{port}: unreachable" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("items", [2, 9])
def test_suite_figures_name_lines_by_item_and_fold_a_long_legend(tmp_path: Path, items: int) -> None:
    """A suite's over-time figure: a line per item and pod named by the item's name in the report (its varying
    settings), the legend up to 8 lines (beyond, the names on hover: a legend of long names leaves the figure)."""
    from pytest_topsail.items import ItemRecord
    from pytest_topsail.metrics.collect import save, suite_figures

    records = []
    for index in range(items):
        directory = tmp_path / f"{index:03d}__test_x"
        save(directory, document([[(101, "50"), (102, "60")]]))
        records.append(ItemRecord(suite="s", nodeid=f"t.py::test_x[size={index}]", test_id=f"test_x[size={index}]",
                                  artifact_dir=str(directory)))
    names = {record.nodeid: f"size={index}" for index, record in enumerate(records)}
    built = suite_figures(records, names)
    figure = built["metrics: GPU utilization (%)"]
    assert [trace.name for trace in figure.data] == [f"size={index}: p0" for index in range(items)]
    assert figure.layout.showlegend is (items <= 8) and figure.layout.hoverlabel.namelength == -1
    unnamed = suite_figures(records[:1])["metrics: GPU utilization (%)"]
    assert unnamed.data[0].name == "test_x[size=0]: p0"
