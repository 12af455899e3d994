"""pytest entry point of pytest-topsail: wiring only. Each engine feature is a plugin module of its own, registered
here (as pytest registers ``terminal``, ``junitxml``...):

- ``presets``: options, ini keys, the suites in scope loaded and validated at start-up, the artifacts line;
- ``collection``: cases and items (``case`` parametrization, suite markers, the preset hint of an unknown id);
- ``show_config``: ``--topsail-show-config``;
- ``resume``: ``--topsail-resume``, a stopped run continued;
- ``item_context``: around each suite item, its directory, record and configuration; the record on its report;
- ``xdist_hooks``: what each xdist role adds (``xdist_role``: the role of this process);
- ``engine_fixtures``, ``cluster.plugin``, ``metrics.fixture``, ``report.plugin``: fixtures, cluster, metrics,
  reporting; ``compare.plugin``: ``--topsail-baseline``;
- ``prepare.plugin``: the cluster preparation fixtures (``gpu_operator``, ``rhoai``, ``storage``, ``tgis_workers``)
  and each suite's ``cluster.stack``.

Kept tiny: importing it, and the plugin modules it registers, costs nothing measurable when no suite is collected
(each imports what it needs inside its hooks).
"""

from __future__ import annotations

import pytest


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_topsail import (
        collection,
        engine_fixtures,
        hookspec,
        item_context,
        presets,
        resume,
        show_config,
        xdist_hooks,
    )
    from pytest_topsail.cluster import plugin as cluster_plugin
    from pytest_topsail.compare import plugin as compare_plugin
    from pytest_topsail.metrics import fixture as metrics_plugin
    from pytest_topsail.prepare import plugin as prepare_plugin
    from pytest_topsail.report import plugin as report_plugin

    pluginmanager.add_hookspecs(hookspec)
    # pluggy calls the plugins registered last first: the engine's hooks run before the cluster's, the reporting's
    # and the metrics' (pytest_configure: the suites are validated before the cluster checks them), presets first
    for name, plugin in (("prepare", prepare_plugin), ("compare", compare_plugin), ("engine-fixtures", engine_fixtures),
                         ("cluster", cluster_plugin),
                         ("report", report_plugin), ("metrics", metrics_plugin), ("xdist", xdist_hooks),
                         ("item-context", item_context), ("show-config", show_config), ("collection", collection),
                         ("resume", resume), ("presets", presets)):
        pluginmanager.register(plugin, f"topsail-{name}")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    from pytest_topsail.rootdir import fix_rootdir

    fix_rootdir(early_config, parser, args)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ShortInterrupt(config), "topsail-short-interrupt")


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
