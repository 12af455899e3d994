"""tgis-tester as pytest: one item per (model, config, case), judged against the reference config's answers; a case
with one text also has a streaming twin (``.../stream``) judged by the streaming rules."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

import pytest_topsail as topsail
from pytest_topsail.tgis import (
    ModelConfig,
    RunnerSettings,
    TgisCase,
    TgisClient,
    compare,
    merge_stream,
    record_expectation,
    response_dict,
    stream_problems,
)


def skip_reason(config: ModelConfig, case: TgisCase, reference: bool, recording: bool, stream: bool) -> str | None:
    """tgis-tester's skips, and the ones of record mode."""
    if recording and not reference:
        return "record mode (--tgis-record): only each model's reference config (its first) runs"
    if recording and stream != case.stream_form:
        recorder = "unary item" if stream else "streaming item (its file gives the stream's messages)"
        return f"record mode (--tgis-record): this case is recorded by its {recorder}"
    if not recording and case.needs_record:
        return f"{case.source}: no expectation yet (neither response nor error): run with --tgis-record"
    if config.is_sharded and case.single_shard_only:
        return f"single_shard_only case on a sharded config (num_shard {config.num_shard})"
    if config.flash_attention and case.prefix_id:
        return "prefix case on a flash attention config (tgis-tester skips them)"
    return None


async def call(client: TgisClient, case: TgisCase, runner: RunnerSettings, stream: bool) -> dict[str, Any]:
    """The case's request, unary (Generate) or streamed (GenerateStream): the answers (or the gRPC error) in JSON
    form, and the latency (in simulated time on a simulator serving on a time scale: the wall time plus what the
    scale took off, pytest_topsail/tgis/client.py)."""
    outcome: dict[str, Any] = {"responses": None, "error": None, "stream": None}
    timeout = runner.request_timeout_s
    began, compressed = time.perf_counter(), client.time_compressed_s
    try:
        if stream:
            outcome["stream"] = [response_dict(message) async for message in client.generate_stream(
                case.texts[0], case.parameters(), prefix_id=case.prefix_id, adapter_id=case.adapter_id,
                timeout=timeout)]
        else:
            answer = await client.generate(list(case.texts), case.parameters(), prefix_id=case.prefix_id,
                                           adapter_id=case.adapter_id, timeout=timeout)
            outcome["responses"] = [response_dict(response) for response in answer.responses]
    except grpc.aio.AioRpcError as error:
        outcome["error"] = [error.code().name, error.details() or ""]
    outcome["latency_ms"] = (time.perf_counter() - began + client.time_compressed_s - compressed) * 1000
    return outcome


def judge(case: TgisCase, outcome: dict[str, Any], runner: RunnerSettings) -> list[str]:
    """What differs from the expectation, one line per field."""
    answered = outcome["stream"] if outcome["stream"] is not None else outcome["responses"]
    if case.error is not None:
        if outcome["error"] is None:
            return [f"expected error {case.error[0]}: {case.error[1]!r}, got {len(answered)} response(s)"]
        if tuple(outcome["error"]) != case.error:
            return [f"error: expected {case.error[0]}: {case.error[1]!r}, got {outcome['error'][0]}: "
                    f"{outcome['error'][1]!r}"]
        return []
    if outcome["error"] is not None:
        return [f"expected a response, got error {outcome['error'][0]}: {outcome['error'][1]!r}"]
    if case.skip_check:
        return []
    expected = list(case.expected or [])
    if outcome["stream"] is None:
        return [str(d) for d in compare(expected, outcome["responses"], runner.evaluation_strategy,
                                        runner.tolerance)]
    problems = stream_problems(outcome["stream"], expected[0], case.params)
    merged = compare(expected[:1], [merge_stream(outcome["stream"])], runner.evaluation_strategy, runner.tolerance)
    return problems + [f"stream (merged) {difference}" for difference in merged]


def workers_to_run(session: pytest.Session, recording: bool) -> list[tuple[str, ModelConfig]]:
    """The (model, config) of the selected items, in their order (record mode: the reference configs only)."""
    found: dict[tuple[str, str], tuple[str, ModelConfig]] = {}
    for item in session.items:
        case = getattr(getattr(item, "callspec", None), "params", {}).get("case")
        settings = getattr(case, "settings", None) or {}
        if "config" in settings and (settings["reference"] or not recording):
            key = (settings["model"], settings["config_name"])
            if key not in found:
                found[key] = (settings["model"], ModelConfig.model_validate(settings["config"]))
    return list(found.values())


LAST_ITEMS = pytest.StashKey[set[str]]()


def last_items(session: pytest.Session) -> set[str]:
    """The node ids of the items that are the last of their worker (model, config) in the session's order: after
    them the worker can go. Under xdist a worker's items form one group, run in this order by one process; with a
    ``--dist`` that spreads groups (e.g. ``load``) none: the workers stay until the end of the run."""
    if LAST_ITEMS not in session.stash:
        last: dict[tuple[str, str], str] = {}
        option = session.config.option  # an xdist worker keeping groups has dist "load" and loadgroup set
        spread = getattr(option, "dist", "no") not in ("no", "loadgroup") and not getattr(option, "loadgroup", False)
        for item in [] if spread else session.items:
            settings = getattr(getattr(getattr(item, "callspec", None), "params", {}).get("case"), "settings",
                               None) or {}
            if "config_name" in settings:
                last[(settings["model"], settings["config_name"])] = item.nodeid
        session.stash[LAST_ITEMS] = set(last.values())
    return session.stash[LAST_ITEMS]


def test_tgis(case: topsail.Case, tgis_workers: Any, runner_settings: RunnerSettings, request: pytest.FixtureRequest,
              artifact_dir: Path, kpis: topsail.KpiRecorder) -> None:
    settings = case.settings
    config = ModelConfig.model_validate(settings["config"])
    if request.node.nodeid in last_items(request.session):
        request.addfinalizer(lambda: tgis_workers.release(request, settings["model"], config))
    tgis_case = TgisCase.from_settings(settings["case"])
    stream = bool(settings["stream"])
    recording = bool(request.config.getoption("tgis_record"))
    reason = skip_reason(config, tgis_case, settings["reference"], recording, stream)
    if reason:
        pytest.skip(reason)
    if not tgis_workers.prefetched:  # once per process
        tgis_workers.prefetch(request, workers_to_run(request.session, recording))
    try:
        worker = tgis_workers.worker(request, settings["model"], config)
    except topsail.TopsailError as error:
        failure = str(error)
    else:
        failure = ""
    if failure:  # outside the except block: one message, not a second one "during handling of" the first
        pytest.fail(failure, pytrace=False)
    try:
        outcome = tgis_workers.run(worker, lambda client: call(client, tgis_case, runner_settings, stream))
    except Exception:
        fault = tgis_workers.fault(worker.name)  # the call failed because a cluster fault ended the worker?
        if fault is None:
            raise
        failure = fault
    if failure:
        pytest.fail(failure, pytrace=False)
    (artifact_dir / "answer.json").write_text(json.dumps(outcome, indent=1, default=str), encoding="utf-8")
    kpis.scope("worker", worker=worker.name, model=settings["model"], config_name=config.name)  # judged once
    kpis.record_from({"latency_ms": outcome["latency_ms"], "load_seconds": worker.load_seconds})
    fault = tgis_workers.fault(worker.name)
    if fault is not None:  # the worker lost its GPU (node, pod) while this item ran: its timings measure the fault
        kpis.exclude(fault)
    if recording:
        path = record_expectation(request.config.rootpath, tgis_case, outcome)
        request.node.user_properties.append(("tgis_recorded", str(path)))
        return
    problems = judge(tgis_case, outcome, runner_settings)
    if problems:
        pytest.fail(f"{case.id}: {len(problems)} difference(s) from the reference's answer "
                    f"({tgis_case.source}):\n" + "\n".join(problems[:20]), pytrace=False)
