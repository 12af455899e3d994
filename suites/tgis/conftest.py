"""The TGIS suite's items: (model, config) x case, built from the validated ``tests.tgis`` (settings.py).

Ids read ``<model>/<config short name>/<case name>``; with ``runner.generate_stream`` every case with one text and no
expected error also has a streaming twin, as tgis-tester makes them: ``<model>/<config short name>/<case name>/stream``
(GenerateStream, judged by the streaming rules and, merged, against the same expectation). The items of one worker
share an xdist group, so under ``pytest -n`` one process runs them all against one deployment.
"""

from __future__ import annotations

from typing import Any

import pytest

import pytest_topsail as topsail
from pytest_topsail.tgis import RunnerSettings


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" not in metafunc.fixturenames or not metafunc.config.pluginmanager.hasplugin("topsail"):
        return  # with -p no:topsail the item errors on its missing fixtures, as every suite's
    suite = topsail.load_suite(metafunc.config, "tgis")
    worker = suite.settings("worker")
    streams = suite.settings("runner", RunnerSettings).generate_stream
    cases: list[topsail.Case] = []
    for spec in suite.settings("tests.tgis").root:
        model = spec.model.rsplit("/", 1)[-1]
        for index, config in enumerate(spec.configs):
            group = f"{model}/{config.name}"
            for tgis_case in spec.tgis_cases:
                settings: dict[str, Any] = {
                    "model": spec.model, "config_name": config.name, "reference": index == 0,
                    "config": config.model_dump(mode="json"), "image": worker.image,
                    "deploy_mode": worker.deploy_mode, "case": tgis_case.as_settings(), "stream": False}
                cases.append(topsail.Case(name=tgis_case.name, id=f"{group}/{tgis_case.name}", settings=settings,
                                  source=tgis_case.source, xdist_group=group))
                if streams and tgis_case.streamable:
                    cases.append(topsail.Case(name=f"{tgis_case.name} [stream]", id=f"{group}/{tgis_case.name}/stream",
                                      settings={**settings, "stream": True}, source=tgis_case.source,
                                      xdist_group=group))
    topsail.parametrize_cases(metafunc, cases)


@pytest.fixture
def runner_settings(topsail_suite: topsail.Suite) -> RunnerSettings:
    return topsail_suite.settings("runner", RunnerSettings)
