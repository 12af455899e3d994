"""The LLM load test: one load point per item (a case's concurrency list is its sweep), KPIs per point, figures of
the whole sweep on its last item."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.cases import Case
from pytest_topsail.config import Config
from pytest_topsail.errors import TopsailError
from pytest_topsail.kpi import KpiRecorder
from pytest_topsail.llmload.metrics import format_table, summarize_point, sweep_table
from pytest_topsail.llmload.plots import figures
from pytest_topsail.llmload.run import merge_directories, run_load_test
from pytest_topsail.llmload.settings import LoadSettings

SERVER_KEY = "server"  # case key: the reference server's ModelConfig (tgis-tester's keys)
LOAD_DIRS = pytest.StashKey[dict[str, Path]]()  # nodeid -> the load directory of each item that ran


def test_llm_load(case: Case, llm_endpoint: Any, artifact_dir: Path, kpis: KpiRecorder, topsail_config: Config,
                  request: pytest.FixtureRequest) -> None:
    options = topsail_config.get("tests.llm_load", {}) or {}
    settings = case_settings(case, options)
    load_dir = artifact_dir / "load"
    try:
        prompts = settings.prompts(request.config.rootpath)
        backend = settings.make_backend(http_url=llm_endpoint.http_url, grpc_target=llm_endpoint.grpc_target,
                                         served_model=llm_endpoint.served_model)
        summary = run_load_test(backend, prompts, [settings.load_point()], load_dir)[0]
    except TopsailError as error:
        pytest.fail(str(error), pytrace=False)
    serving = {"load_duration_s": llm_endpoint.load_duration_s, "accelerator": llm_endpoint.accelerator,
               "replicas": llm_endpoint.replicas}
    (artifact_dir / "serving.json").write_text(json.dumps(serving, indent=1), encoding="utf-8")
    kpis.labels(model=settings.model, runtime_image=options.get("runtime_image"), virtual_users=settings.concurrency,
                test_duration=settings.duration_s, streaming=settings.streaming,
                deployment_mode=options.get("deployment_mode"), replicas=llm_endpoint.replicas,
                accelerator=llm_endpoint.accelerator)
    kpis.record_from({"summary": summary, "serving": serving})
    request.config.stash.setdefault(LOAD_DIRS, {})[request.node.nodeid] = load_dir
    add_sweep_figures(request, case, kpis, artifact_dir)
    failed = summary["failure_rate"]
    if failed > float(options.get("max_failure_rate", 0.0)):
        pytest.fail(f"{failed:.1%} of the requests failed ({summary['failures']}) > max_failure_rate "
                    f"{options.get('max_failure_rate', 0.0)}; records: {load_dir / 'records.jsonl'}\n"
                    f"{(load_dir / 'summary.txt').read_text()}", pytrace=False)


def case_settings(case: Case, options: dict[str, Any]) -> LoadSettings:
    values = {key: value for key, value in case.settings.items() if key != SERVER_KEY}
    for key in ("timeout_s", "drain_timeout_s"):
        if key in options:
            values.setdefault(key, options[key])
    try:
        return LoadSettings.parse(values, f"{case.source or 'cases'}: case {case.id}")
    except TopsailError as error:
        pytest.fail(str(error), pytrace=False)


def sweep_group(item: pytest.Item) -> str | None:
    """Items of one sweep: the same case with every setting equal but the concurrency."""
    case = getattr(getattr(item, "callspec", None), "params", {}).get("case")
    if not isinstance(case, Case):
        return None
    others = {key: value for key, value in case.settings.items() if key != "concurrency"}
    return json.dumps([case.name, others], sort_keys=True, default=str)


def add_sweep_figures(request: pytest.FixtureRequest, case: Case, kpis: KpiRecorder, artifact_dir: Path) -> None:
    """On the last item of its sweep: throughput, latency and rate against load, distributions per point."""
    group = sweep_group(request.node)
    members = [item for item in request.session.items if sweep_group(item) == group]
    if not members or members[-1] is not request.node:
        return
    ran = request.config.stash.get(LOAD_DIRS, {})
    directories = [ran[item.nodeid] for item in members if item.nodeid in ran]
    points, by_point = merge_directories(directories)
    summaries = [summarize_point(point, by_point.get(point["index"], [])) for point in points]
    (artifact_dir / "sweep.txt").write_text(format_table(sweep_table(summaries)), encoding="utf-8")
    (artifact_dir / "sweep.json").write_text(json.dumps([str(d) for d in directories], indent=1), encoding="utf-8")
    for name, figure in figures(points, by_point, summaries).items():
        kpis.add_figure(f"{case.name}: {name}", figure)
