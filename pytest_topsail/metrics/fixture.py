"""pytest side of the metrics (registered by pytest_topsail.plugin): the run's Prometheus, and each item's metric
KPIs, series and figures.

An item gets metric KPIs when its suite has a ``metrics:`` section and the ``cluster`` fixture was opened in its
process (the run's Prometheus is chosen, or started, right after it). The window is the item's call phase; its
queries run when the call ends, through the item's ``kpis`` recorder (labels and verdicts as the suite's own KPIs).
Problems (no binary, Prometheus unreachable, 401/403) are one line each, shown once per process, noted in the item's
``metrics/NOTE.txt``; the item itself is never failed by them.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from concurrent.futures import Future

    from pytest_topsail.metrics.settings import MetricsSettings
    from pytest_topsail.metrics.source import Source
    from pytest_topsail.suites import Suite

CALL_WINDOW_KEY = pytest.StashKey[tuple[float, float]]()
POD_KEY = pytest.StashKey[str]()  # the item's own $pod (topsail_metric_pods)
SETTLE_MARGIN_S = 0.5
SCRAPING_TIMEOUT_S = 15.0  # the first item's wait for the first scrapes of a new server


@dataclass
class MetricsRun:
    """Per-process state (``config.stash``)."""

    source: Source | None = None
    starting: Future[Source] | None = None  # the local server, starting in the background (``_source``)
    told: set[str] = field(default_factory=set)
    scraping: bool = False  # the local server's targets were seen up


RUN_KEY = pytest.StashKey[MetricsRun]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("topsail", "pytest-topsail (performance and scale suites)")
    group.addoption("--topsail-prometheus", dest="topsail_prometheus", default=None, metavar="URL",
                    help="read the metric KPIs from this Prometheus (overrides metrics.prometheus.url)")


def pytest_topsail_check_suite(suite: Suite) -> None:
    """The suite's ``metrics:`` section, checked at start-up."""
    if "metrics" not in suite.config:  # (metrics.settings.METRICS_KEY) a suite without one imports no pydantic
        return
    from pytest_topsail.metrics.settings import metrics_settings

    metrics_settings(suite.config)


def _run(config: pytest.Config) -> MetricsRun:
    return config.stash.setdefault(RUN_KEY, MetricsRun())


def _source(config: pytest.Config) -> Source | None:
    """The run's source once chosen; waits for a local server still starting."""
    state = _run(config)
    if state.source is None and state.starting is not None:
        state.source, state.starting = state.starting.result(), None
    return state.source


def tell(config: pytest.Config, item: pytest.Item | None, message: str) -> None:
    """One line per distinct problem and process: the progress stream (terminal) and a pytest warning."""
    state = _run(config)
    if message in state.told:
        return
    state.told.add(message)
    from pytest_topsail.progress import Progress

    Progress(config)(message)
    if item is not None:
        item.warn(pytest.PytestWarning(message))


# ------------------------------------------------------------------ the run's Prometheus
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The run's own Prometheus (simulator, ``url: auto``) sends itself its targets ~5 s after it starts: the items of
    suites without metrics run first (each group in its order), so that the server, started as soon as the first of
    them opens the cluster, is scraping by the first item with metrics (``pytest suites``: no wait at all)."""
    from pytest_topsail.cluster.state import cluster_mode
    from pytest_topsail.errors import TopsailError
    from pytest_topsail.metrics.settings import metrics_settings
    from pytest_topsail.suites import suite_of_item

    if cluster_mode(config) != "sim" or config.getoption("topsail_prometheus", None):
        return
    settings = _first_settings(config)
    if settings is None or settings.prometheus.url != "auto":
        return
    with_metrics: dict[str, bool] = {}

    def has_metrics(item: pytest.Item) -> bool:
        try:
            suite = suite_of_item(item)
        except TopsailError:
            return False
        if suite is None:
            return False
        if suite.name not in with_metrics:
            try:
                with_metrics[suite.name] = metrics_settings(suite.config) is not None
            except TopsailError:
                with_metrics[suite.name] = False
        return with_metrics[suite.name]

    items[:] = sorted(items, key=has_metrics)  # stable


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Generator[
        None, object, object]:
    """As soon as the cluster is open (a fixture of the item asked for it), the run's Prometheus is chosen or started:
    a local server starts in the background (the items before the first one with metrics go on meanwhile)."""
    result = yield
    state = _run(request.config)
    if fixturedef.argname == "cluster" and state.source is None and state.starting is None:
        settings = _first_settings(request.config)
        if settings is not None and _is_local(request.config, settings, result):
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(1, thread_name_prefix="topsail-prometheus")
            state.starting = pool.submit(open_source, request.config, settings, result)
            pool.shutdown(wait=False)
        elif settings is not None:
            open_source(request.config, settings, result)
    return result


def _is_local(config: pytest.Config, settings: MetricsSettings, cluster: Any) -> bool:
    url = config.getoption("topsail_prometheus", None) or settings.prometheus.url
    return bool(url == "auto" and cluster.mode == "sim")


@pytest.fixture(scope="session")
def topsail_prometheus(request: pytest.FixtureRequest, cluster: Any) -> Source:
    """The run's Prometheus (docs/metrics.md): ``.prometheus`` (query, query_range, targets) and ``.description``,
    or ``.problem`` saying why there is none."""
    from pytest_topsail.metrics.settings import MetricsSettings

    source = _source(request.config)
    if source is None:
        source = open_source(request.config, _first_settings(request.config) or MetricsSettings(), cluster)
    return source


def _first_settings(config: pytest.Config) -> MetricsSettings | None:
    from pytest_topsail.errors import TopsailError
    from pytest_topsail.metrics.settings import metrics_settings
    from pytest_topsail.suites import load_suites_in_scope

    try:
        found = [metrics_settings(suite.config) for suite in load_suites_in_scope(config)]
    except TopsailError:
        return None
    return next((settings for settings in found if settings is not None), None)


def open_source(config: pytest.Config, settings: MetricsSettings, cluster: Any) -> Source:
    """Where the metrics of the run come from (see metrics/source.py): chosen once per process with the settings of
    the first suite in scope that has metrics (the local server: once per run)."""
    from pytest_topsail.errors import TopsailError
    from pytest_topsail.metrics.source import Source, remote_source

    url = config.getoption("topsail_prometheus", None) or settings.prometheus.url
    try:
        if _is_local(config, settings, cluster):
            source = _local_source(config, settings, cluster)
        else:
            source = remote_source(settings.prometheus, url, cluster.kube, "metrics.prometheus")
    except (TopsailError, OSError) as error:  # metrics never stop a run
        source = Source(description="none", problem=f"metrics: {error}; metric KPIs absent"
                        if not str(error).startswith("metrics:") else f"{error}; metric KPIs absent")
    _run(config).source = source
    return source


def _local_source(config: pytest.Config, settings: MetricsSettings, cluster: Any) -> Source:
    from pytest_topsail.cluster.state import run_once
    from pytest_topsail.metrics.client import Prometheus
    from pytest_topsail.metrics.source import Source

    shared = run_once(config, "prometheus", lambda: _start_local(config, settings, cluster),
                      wait_timeout=settings.prometheus.start_timeout_s + 60)
    if shared.get("problem"):
        return Source(description="none", problem=shared["problem"])
    interval = float(shared["interval_s"])  # the server's, whichever process started it
    return Source(description=f"{shared['url']} (Prometheus scraping the simulator every {interval:g} s)",
                  prometheus=Prometheus(shared["url"], timeout_s=settings.prometheus.timeout_s),
                  local_interval_s=interval, local_pid=shared["pid"], local_artifacts=shared["artifacts"])


def _start_local(config: pytest.Config, settings: MetricsSettings, cluster: Any) -> dict[str, Any]:
    import os

    from pytest_topsail.artifacts import next_artifact_dir
    from pytest_topsail.cluster.state import shared_dir
    from pytest_topsail.errors import TopsailError
    from pytest_topsail.metrics.local import INSTALL_HINT, find_binary, start_local
    from pytest_topsail.metrics.source import kubeconfig_credentials
    from pytest_topsail.run import artifacts_root

    options = settings.prometheus
    binary = find_binary(options.binary)
    if binary is None:
        return {"problem": INSTALL_HINT.format(binary=options.binary)}
    _, token, ca = kubeconfig_credentials(cluster.kubeconfig_path, cluster.context)
    try:
        local = start_local(binary=binary, private_dir=shared_dir(config) / "prometheus",
                            artifacts_dir=next_artifact_dir("prometheus", parent=artifacts_root(config)),
                            target_url=cluster.url, token=token, ca_pem=ca, interval_s=options.scrape_interval_s,
                            watch_pid=cluster.sim_pid or os.getpid(), timeout_s=options.start_timeout_s)
    except TopsailError as error:
        return {"problem": f"{error}; metric KPIs absent"}
    return {"url": local.url, "pid": local.pid, "artifacts": str(local.config_path.parent),
            "interval_s": options.scrape_interval_s}


# ------------------------------------------------------------------ each item
@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    state = item.config.stash.get(RUN_KEY, None)
    if state is not None and not state.scraping and _item_settings(item) is not None:
        source = _source(item.config)  # the first item with metrics: its window needs samples
        if source is not None and source.local_interval_s:
            state.scraping = True
            _wait_scraping(item, source)
    start = time.time()
    try:
        return (yield)
    finally:
        item.stash[CALL_WINDOW_KEY] = (start, time.time())


def _wait_scraping(item: pytest.Item, source: Source) -> None:
    """Prometheus sends a new server its targets after ~5 s (its discovery manager): the first item waits for the
    first scrapes of the targets scraped at the points' resolution (GPU and container series), so that its window
    has samples (the other preparation overlaps most of that wait)."""
    from pytest_topsail.metrics.client import PrometheusError
    from pytest_topsail.metrics.local import POINT_JOBS
    from pytest_topsail.waiting import WaitTimeout, poll

    assert source.prometheus is not None
    prometheus = source.prometheus
    started = time.monotonic()

    def waited(targets: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [target for target in targets if (target.get("labels") or {}).get("job") in POINT_JOBS]

    try:
        targets = poll(prometheus.targets, lambda found: bool(waited(found)) and all(
                           target.get("health") == "up" for target in waited(found)),
                       what=f"the targets of Prometheus {source.url} ({', '.join(sorted(POINT_JOBS))}) to be up",
                       timeout=SCRAPING_TIMEOUT_S, interval=0.1, first_interval=0.1)
    except PrometheusError as error:
        tell(item.config, item, f"metrics: {error}")
        return
    except WaitTimeout as error:
        tell(item.config, item, f"metrics: {error}")
        return
    if source.local_artifacts and Path(source.local_artifacts).is_dir():
        (Path(source.local_artifacts) / "targets.json").write_text(json.dumps(targets, indent=1), encoding="utf-8")
    from pytest_topsail.progress import Progress

    Progress(item.config)(f"metrics: {source.description}: {len(waited(targets))} targets up (waited "
                          f"{time.monotonic() - started:.1f} s for the first scrapes)")


@pytest.fixture
def topsail_metric_pods(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Call it with a regular expression of this item's pods (``$pod``): items running at the same time in one
    namespace (xdist) then each see only their own."""
    def select(pattern: str) -> None:
        try:
            re.compile(pattern)
        except re.error as error:
            from pytest_topsail.errors import TopsailError

            raise TopsailError(f"topsail_metric_pods({pattern!r}): not a regular expression ({error})") from None
        request.node.stash[POD_KEY] = pattern

    return select


@pytest.fixture(autouse=True)
def _topsail_metrics(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the call of an item of a suite with metrics that used the cluster: its metric KPIs, series, figures."""
    settings = _item_settings(request.node)
    if settings is None:
        yield
        return
    recorder = request.getfixturevalue("kpis")  # the test's own recorder: its labels go on the metric KPIs too
    namespace = settings.namespace or _suite_namespace(request)
    yield
    source = _source(request.config)
    if source is None:  # the item never opened the cluster (e.g. in-process serving)
        return
    from pytest_topsail.errors import TopsailError

    try:
        collect_item(request.node, settings, source, recorder, namespace)
    except (TopsailError, OSError) as error:  # metrics never fail an item: one line, a note
        tell(request.config, request.node, f"metrics: {error}")


def _item_settings(item: pytest.Item) -> MetricsSettings | None:
    from pytest_topsail.items import ITEM_RECORD_KEY
    from pytest_topsail.metrics.settings import metrics_settings
    from pytest_topsail.suites import suite_of_item

    if item.stash.get(ITEM_RECORD_KEY, None) is None:
        return None
    suite = suite_of_item(item)
    return metrics_settings(suite.config) if suite is not None else None


def _suite_namespace(request: pytest.FixtureRequest) -> str:
    from pytest_topsail.cluster.namespaces import suite_namespace

    return suite_namespace(request)


def collect_item(item: pytest.Item, settings: MetricsSettings, source: Source, recorder: Any, namespace: str) -> None:
    from pytest_topsail.metrics.client import PrometheusError
    from pytest_topsail.metrics.collect import Window, fetch, figures, note, record_kpis, save

    record = recorder.item_record
    directory = record.directory
    if source.prometheus is None:
        tell(item.config, item, source.problem or "metrics: no Prometheus")
        note(directory, source.problem or "metrics: no Prometheus")
        return
    start, end = item.stash.get(CALL_WINDOW_KEY, (record.start, time.time()))
    # the local server: two steps per scrape, so that every sample is seen; the step after the end sees the last one
    local = source.local_interval_s
    step = settings.step_s or (local / 2 if local else max(1.0, (end - start) / 200))
    rate_window = settings.rate_window_s or (4 * local if local else 120.0)
    pod = item.stash.get(POD_KEY, settings.pod)
    window = Window(start, end, namespace, pod, step, rate_window)
    try:
        if source.local_interval_s:
            _settle(source, end)
        document = fetch(source.prometheus, settings.all_queries(), window, source.description)
    except PrometheusError as error:
        message = f"metrics: {error}; metric KPIs of this item absent"
        tell(item.config, item, message)
        note(directory, message)
        return
    if directory is not None:
        save(directory, document)
    if not record_kpis(recorder, document):
        note(directory, f"metrics: no samples of namespace {namespace} pods {pod} between {start:.1f} and "
                        f"{end:.1f} in {source.description}")
    if directory is not None:
        for title, figure in figures(document, f"{record.test_id}: ").items():
            recorder.add_figure(title, figure)


def _settle(source: Source, end: float) -> None:
    """Wait (at most one scrape interval and a margin) until the local server scraped after the window's end; then
    go on in any case (the window's last samples are missing)."""
    from pytest_topsail.waiting import WaitTimeout, poll

    assert source.prometheus is not None and source.local_interval_s
    prometheus, interval = source.prometheus, source.local_interval_s

    def last_scrape() -> float | None:
        found = prometheus.query('min(timestamp(up{job="dcgm-exporter"}))')
        return float(found[0]["value"][1]) if found else None

    try:  # a new scrape is due every interval: asked every tenth of it
        poll(last_scrape, lambda last: last is not None and last >= end,
             what=f"a scrape of {source.description} after the window's end", timeout=interval + SETTLE_MARGIN_S,
             interval=max(0.05, interval / 10))
    except WaitTimeout:
        pass
