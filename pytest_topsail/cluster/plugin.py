"""The pytest face of the cluster fixtures, registered by ``pytest_topsail.plugin``: options, hooks, and the
``cluster`` and ``namespace`` fixtures. Kept light (no Kubernetes client, no pydantic at import): every pytest run
loads it, and the work is done in ``cluster.fixture`` and ``cluster.namespaces``, imported when a test asks for it;
the per-process state the hooks read is ``cluster.state``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_topsail.cluster.state import SESSION_KEY, Cluster, cluster_mode, cluster_session
from pytest_topsail.xdist_role import role_of

if TYPE_CHECKING:
    from pytest_topsail.suites import Suite


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("topsail-cluster", "pytest-topsail cluster")
    group.addoption("--cluster", dest="topsail_cluster", choices=("sim", "kube"), default=None,
                    help="sim (default): a simulated cluster started for the run; kube: a real cluster "
                         "(--kubeconfig/--context, else $KUBECONFIG or ~/.kube/config)")
    group.addoption("--kubeconfig", dest="topsail_kubeconfig", default=None, metavar="PATH",
                    help="kubeconfig of the real cluster (implies --cluster kube)")
    group.addoption("--context", dest="topsail_context", default=None, metavar="NAME",
                    help="kubeconfig context of the real cluster (implies --cluster kube)")


def pytest_configure(config: pytest.Config) -> None:
    explicit = config.getoption("topsail_kubeconfig", None) or config.getoption("topsail_context", None)
    if cluster_mode(config) == "sim" and explicit:
        raise pytest.UsageError("--kubeconfig/--context select a real cluster: use them with --cluster kube, "
                                "not --cluster sim")
    from pytest_topsail.errors import TopsailError
    from pytest_topsail.suites import load_suites_in_scope

    try:
        suites = load_suites_in_scope(config)
    except TopsailError:
        return  # a configuration that does not load: the engine reports it
    if not suites:
        return
    try:
        check_at_start(config, suites)
    except TopsailError as error:
        raise pytest.UsageError(str(error)) from None


def check_at_start(config: pytest.Config, suites: list[Suite]) -> None:
    """What would fail every item the same way is one usage error at start-up instead: the simulator profile of the
    run (when a suite configures the cluster; else it is the built-in default), or a real cluster that cannot be used.
    The xdist controller checks for its workers; ``--collect-only`` connects to nothing. The simulator and the
    Kubernetes client are imported only when needed: a run of suites that use neither stays light."""
    if cluster_mode(config) == "sim":
        # not again on each xdist worker: the one that starts the simulator builds the profile then
        if not role_of(config).is_worker and any("cluster" in suite.config for suite in suites):
            from pytest_topsail.cluster.sim_profile import run_sim_profile

            run_sim_profile(config)
    elif not config.option.collectonly and not role_of(config).is_worker:
        from pytest_topsail.cluster.fixture import check_reachable

        check_reachable(config)


@pytest.hookimpl(optionalhook=True)
def pytest_topsail_check_suite(suite: Suite) -> None:
    """The suite's ``cluster`` and ``namespace`` sections, by their settings models."""
    if "cluster" in suite.config or "namespace" in suite.config:
        from pytest_topsail.cluster.settings import ClusterSettings, NamespaceSettings

        suite.settings("cluster", ClusterSettings)
        suite.settings("namespace", NamespaceSettings)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Every process that runs tests (an xdist worker, or pytest itself without xdist; not the xdist controller)
    counts as a participant of the run until it finishes: a run whose participants all died was killed."""
    config = session.config
    if role_of(config).runs_tests:
        cluster_session(config).run.join()


@pytest.hookimpl(trylast=True)  # after pytest's own session teardown of the fixtures
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(SESSION_KEY, None)
    if state is not None:
        from pytest_topsail.cluster.fixture import finish

        finish(state)


@pytest.hookimpl(optionalhook=True)  # with -p no:topsail the hook is not declared
def pytest_topsail_labels(item: pytest.Item) -> dict[str, Any] | None:
    state = item.config.stash.get(SESSION_KEY, None)
    if state is None or state.cluster is None or "cluster" not in getattr(item, "fixturenames", ()):
        return None
    return state.cluster.labels()


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """The cluster of the run: the simulated cluster (default) or a real one (``--kubeconfig``), once per run; see
    ``pytest_topsail.cluster.fixture``. Fails the requesting tests with one clear message."""
    from pytest_topsail.cluster.fixture import open_fixture

    return open_fixture(request)


@pytest.fixture
def namespace(request: pytest.FixtureRequest, cluster: Cluster) -> str:
    """The name of the suite's namespace (it exists and is Active); see ``pytest_topsail.cluster.namespaces``."""
    from pytest_topsail.cluster.namespaces import ensure_namespace

    return ensure_namespace(request, cluster)


@pytest.fixture(autouse=True)
def _cluster_still_there(request: pytest.FixtureRequest) -> Iterator[None]:
    """An item using the simulator fails at once, naming the cause, when the simulator died with its owner
    (before the item, or while it ran: then its teardown says why the cluster stopped answering)."""
    state = request.config.stash.get(SESSION_KEY, None) if "cluster" in request.fixturenames else None
    lost = state.cluster.lost() if state is not None and state.cluster is not None else None
    if lost:
        pytest.fail(lost, pytrace=False)
    yield
    lost = state.cluster.lost() if state is not None and state.cluster is not None else None
    if lost:
        pytest.fail(lost, pytrace=False)
