"""pytest entry point of pytest-topsail: hooks only; everything else is delegated.

Kept tiny: importing it must cost nothing measurable when no suite is collected.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_topsail import engine_fixtures, hookspec, xdist_hooks
    from pytest_topsail.cluster import plugin as cluster_plugin
    from pytest_topsail.metrics import fixture as metrics_plugin
    from pytest_topsail.report import plugin as report_plugin

    pluginmanager.add_hookspecs(hookspec)
    pluginmanager.register(engine_fixtures, "topsail-engine-fixtures")
    pluginmanager.register(xdist_hooks, "topsail-xdist")
    pluginmanager.register(cluster_plugin, "topsail-cluster")
    pluginmanager.register(report_plugin, "topsail-report")
    pluginmanager.register(metrics_plugin, "topsail-metrics")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    from pytest_topsail.rootdir import fix_rootdir

    fix_rootdir(early_config, parser, args)


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_topsail import session

    session.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not config.getoption("topsail_show_config", False):
        return None
    from pytest_topsail import session

    return session.show_config(config)


def pytest_configure(config: pytest.Config) -> None:
    from pytest_topsail import session

    session.configure(config)
    config.pluginmanager.register(ShortInterrupt(config), "topsail-short-interrupt")


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
    try:
        return (yield)
    except pytest.UsageError as exc:  # "not found: suites/x/test_x.py::test[id]": an id only a preset selects?
        from pytest_topsail import session as topsail_session

        hint = topsail_session.preset_hint(session.config)
        if hint is None:
            raise
        raise pytest.UsageError(*exc.args, hint) from None


@pytest.hookimpl(trylast=True)  # after the suites' own pytest_generate_tests, which may parametrize "case" themselves
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    from pytest_topsail import session

    session.generate_tests(metafunc)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from pytest_topsail import session

    session.modify_items(config, items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    from pytest_topsail import session

    with session.item_context(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    from pytest_topsail import session

    report = yield
    session.after_report(item, call, report)
    return report


def pytest_unconfigure(config: pytest.Config) -> None:
    from pytest_topsail import session

    session.unconfigure(config)


class ShortInterrupt:
    """Ctrl-C: pytest formats the interrupt's whole traceback with every frame's source and arguments (seconds, for
    a stack deep in gRPC, Kubernetes or asyncio calls on a loaded machine), then prints only its last line unless
    ``--full-trace``; an xdist worker prints none of it. The traceback is cut to its last shown entry first: the same
    output, without the wait."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        if self.config.getoption("fulltrace", False):
            return
        entries = excinfo.traceback
        shown = next((i for i in range(len(entries) - 1, -1, -1) if not entries[i].ishidden(excinfo)), None)
        if shown is not None:
            excinfo.traceback = entries[shown:]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    from pytest_topsail import session

    session.terminal_summary(terminalreporter, config)
