"""The LLM load test: one load point per item (a case's concurrency or rate list is its sweep), KPIs per point;
the sweep figures are the suite figures of kpis.py."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

import pytest_topsail as topsail
from pytest_topsail.llmload import (
    CA_FILE,
    SERVER_KEY,
    SERVER_METRICS,
    AutoSweep,
    GeneratorPool,
    LoadSettings,
    ServerSampler,
    audit_point,
    case_load_settings,
    check_generator_image,
    failure_message,
    run_distributed,
    run_load_test,
)


def test_llm_load(case: topsail.Case, llm_endpoint: Any, llm_settings: Any, artifact_dir: Path,
                  kpis: topsail.KpiRecorder, progress: topsail.Progress, request: pytest.FixtureRequest) -> None:
    options = llm_settings
    settings = case_settings(case, options)
    load_dir = artifact_dir / "load"
    failure = None
    try:
        prompts = settings.prompts(request.config.rootpath)
        backend = settings.make_backend(http_url=llm_endpoint.http_url, grpc_target=llm_endpoint.grpc_target,
                                         served_model=llm_endpoint.served_model, api_key=options.api_key.value(),
                                         rootdir=request.config.rootpath)
        point = settings.load_point()
        what = "automatic sweep from " if settings.mode == "sweep" else ""
        progress(f"{case.id}: {what}{point.label} over {settings.backend}"
                 + (f" for {point.warmup_s + point.duration_s:g} s" if point.duration_s else ""))
        sampler = (ServerSampler(llm_endpoint.http_url, options.server_metrics_interval_s)
                   if options.server_metrics_interval_s and llm_endpoint.http_url else None)
        with sampler or contextlib.nullcontext():
            summary, sweep, dead, ended = run_point(case, settings, prompts, backend, llm_endpoint, options,
                                                    load_dir, request, progress)
        server = sampler.figures() if sampler else {}
        if server:
            (artifact_dir / SERVER_METRICS).write_text(json.dumps(server, indent=1), encoding="utf-8")
        for line in [point_line(case, s) for s in sweep] or [point_line(case, summary)]:
            progress(line)
        if server:
            progress(server_line(case, server, {"stats": {}} if sweep else summary))  # a sweep's: all points
    except topsail.TopsailError as error:
        failure = str(error)
    fault = served_fault(llm_endpoint, request)
    if failure is not None:  # outside the except: the message once, not chained on itself
        pytest.fail(f"{fault}; {failure}" if fault else failure, pytrace=False)
    serving = {"load_duration_s": llm_endpoint.load_duration_s, "accelerator": llm_endpoint.accelerator,
               "replicas": llm_endpoint.replicas}
    (artifact_dir / "serving.json").write_text(json.dumps(serving, indent=1), encoding="utf-8")
    kpis.labels(model=settings.model, runtime_image=options.runtime_image, virtual_users=settings.concurrency,
                test_duration=settings.duration_s, streaming=settings.streaming,
                deployment_mode=options.deployment_mode, replicas=llm_endpoint.replicas,
                accelerator=llm_endpoint.accelerator)
    kpis.scope("worker", model=settings.model, server=case.settings.get(SERVER_KEY) or {},  # the served model
               runtime_image=options.runtime_image, deployment_mode=options.deployment_mode,
               serving=options.serving, replicas=llm_endpoint.replicas, accelerator=llm_endpoint.accelerator)
    kpis.record_from({"summary": summary, "sweep": sweep, "serving": serving, "server": server})
    if fault is not None:  # measured through the fault: kept and shown with why, never history points
        kpis.exclude(fault)
        pytest.fail(f"{fault}; the point: {point_line(case, summary)}; records: {load_dir / 'records.jsonl'}",
                    pytrace=False)
    audits = [(done, audit_point(done, None if sweep else server)) for done in sweep or [summary]]
    warnings = [f"{done['label']}: {reason}" for done, reasons in audits for reason in reasons]
    for warning in warnings + ([ended] if ended else []):  # never silent: terminal summary and report
        kpis.warn(warning)
        progress(f"{case.id}: {warning}")
    stopped = next((s["stopped_by"] for s in sweep or [summary] if s.get("stopped_by")), None)
    if stopped:
        pytest.fail(f"{stopped}; records: {load_dir / 'records.jsonl'}", pytrace=False)
    if dead:
        pytest.fail(f"load generator pod(s) died during the run: {'; '.join(dead)}; the records of every pod up to "
                    f"its end are kept in {load_dir / 'records.jsonl'}", pytrace=False)
    worst = max(sweep or [summary], key=lambda s: s["failure_rate"])
    failed = worst["failure_rate"]
    if failed > options.max_failure_rate:
        pytest.fail(f"{worst['label']}: {failed:.1%} of the requests failed ({worst['failures']}) > "
                    f"tests.llm_load.max_failure_rate "
                    f"{options.max_failure_rate}; records: {load_dir / 'records.jsonl'}\n"
                    f"{(load_dir / 'summary.txt').read_text()}", pytrace=False)


def served_fault(endpoint: Any, request: pytest.FixtureRequest) -> str | None:
    """The cluster fault that ended the pod serving the item's model (docs/reliability.md "Fault catalogue")."""
    return request.getfixturevalue("llm_models").fault(endpoint, request)


def run_point(case: topsail.Case, settings: LoadSettings, prompts: Any, backend: Any, endpoint: Any, options: Any,
              load_dir: Path, request: pytest.FixtureRequest, progress: topsail.Progress
              ) -> tuple[dict[str, Any], list[dict[str, Any]], list[str], str | None]:
    """The item's load: (its summary, an automatic sweep's points, dead generator pods, why a sweep ended early)."""
    if options.generators:
        summary, dead = distributed(case, settings, prompts, endpoint, options, load_dir, request, progress)
        return summary, [], dead, None
    plan = settings.plan()
    sweep = run_load_test(backend, prompts, plan, load_dir, slo=slo_targets(options),
                          on_point=(lambda done: progress(f"{case.id}: {done.point.label} done"))
                          if settings.mode == "sweep" else None)
    ended = None
    if isinstance(plan, AutoSweep) and not sweep[-1].get("stopped_by"):
        ended = plan.ended_early([s["requests_per_s"] for s in sweep])
    return result_summary(sweep), sweep if settings.mode == "sweep" else [], [], ended


def distributed(case: topsail.Case, settings: LoadSettings, prompts: Any, endpoint: Any, options: Any,
                load_dir: Path, request: pytest.FixtureRequest, progress: topsail.Progress
                ) -> tuple[dict[str, Any], list[str]]:
    """The point as ``tests.llm_load.generators`` pods of a Job (pytest_topsail/llmload/distributed.py); on the
    simulator the endpoint the predictor publishes stands for its Service's address (docs/llm-load.md)."""
    cluster = request.getfixturevalue("cluster")
    namespace = request.getfixturevalue("namespace")
    pool = options.generator_pool
    if cluster.mode == "sim":
        check_sim_runs_generators(request.config, pool.image, options.generators)
    values = settings.model_dump(exclude_defaults=True)
    files = {}
    if settings.grpc_ca_file:  # a CA bundle is public: it travels in the ConfigMap, beside load.json
        files[CA_FILE] = (request.config.rootpath / settings.grpc_ca_file).read_text(encoding="utf-8")
        values["grpc_ca_file"] = CA_FILE  # the worker reads it relative to the mounted settings directory
    name = "llm-load-" + re.sub(r"[^a-z0-9]+", "-", case.id.lower())[:40].strip("-")  # a DNS label ends alphanumeric
    summary, generators = run_distributed(
        cluster.kube, namespace, name, values, prompts,
        {"http_url": endpoint.http_url, "grpc_target": endpoint.grpc_target, "served_model": endpoint.served_model},
        settings.load_point(),
        GeneratorPool(options.generators, pool.image, pool.node_selector, pool.tolerations, pool.start_delay_s,
                      pool.late_s), load_dir, progress, slo=slo_targets(options), files=files,
        api_key=options.api_key.value())
    dead = [f"{failure_message([g])}, {g.requests} records kept" for g in generators if g.state != "Succeeded"]
    return summary, dead


def check_sim_runs_generators(config: pytest.Config, image: str, count: int) -> None:
    """The start-up check again (settings.py: the suite's own runtime entries) against the simulator's joined
    ``cluster.sim.runtime`` table of every suite in scope."""
    check_generator_image(image, count, topsail.sim_runtime_images(config))


def result_summary(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary an item's KPIs come from: its point's, or an automatic sweep's max-throughput point's (its
    second; the first when the sweep stopped after one point)."""
    return summaries[min(1, len(summaries) - 1)]


def slo_targets(options: Any) -> dict[str, float]:
    return options.slo.model_dump(exclude_none=True)


def point_line(case: topsail.Case, summary: dict[str, Any]) -> str:
    ttft = summary["stats"].get("ttft_ms") or {}
    itl = summary["stats"].get("itl_ms") or {}
    streamed = f", TTFT p50 {ttft['median']:.1f} ms, ITL p50 {itl['median']:.2f} ms" if ttft and itl else ""
    good = f", goodput {summary['slo']['goodput']:.2f}/s" if summary.get("slo") else ""
    return (f"{case.id}: {summary['label']}: {summary['succeeded']}/{summary['requests']} requests ok, "
            f"{summary['requests_per_s']:.2f} requests/s{good}, {summary['output_tokens_per_s']:.0f} tokens/s"
            f"{streamed}")


def server_line(case: topsail.Case, server: dict[str, Any], summary: dict[str, Any]) -> str:
    """The server's view of the point (its /metrics): what it reports, in a line, its TTFT beside the client's."""
    parts = [f"KV cache usage max {server['kv_cache_usage_max']:.2f}" if server["kv_cache_usage_max"] is not None
             else "", f"{server['preemptions']:.0f} preemptions" if server["preemptions"] is not None else "",
             f"waiting max {server['waiting_max']:.0f}" if server["waiting_max"] is not None else "",
             f"prefix cache hit rate {server['prefix_cache_hit_rate']:.1%}"
             if server["prefix_cache_hit_rate"] is not None else "",
             f"{server['lora_loads']:.0f} LoRA loads, requests per adapter "
             + ", ".join(f"{name} {count:.0f}" for name, count in server["lora_requests"].items())
             if server["lora_requests"] else "", server_ttft(server, summary)]
    return f"{case.id}: server: " + ", ".join(part for part in parts if part)


def server_ttft(server: dict[str, Any], summary: dict[str, Any]) -> str:
    """``TTFT mean 10.2 ms (client 11.1 ms), p99 24.0 ms``: the server's, from the request's arrival."""
    if server.get("ttft_mean_ms") is None:
        return ""
    client = (summary["stats"].get("ttft_ms") or {}).get("mean")
    p99 = server.get("ttft_p99_ms")
    return (f"TTFT mean {server['ttft_mean_ms']:.1f} ms" + (f" (client {client:.1f} ms)" if client is not None else "")
            + (f", p99 {p99:.1f} ms" if p99 is not None else ""))


def case_settings(case: topsail.Case, options: Any) -> LoadSettings:
    try:
        return case_load_settings(case.settings, f"{case.source or 'cases'}: case {case.id}",
                                  options.point_defaults())
    except topsail.TopsailError as error:
        pytest.fail(str(error), pytrace=False)
