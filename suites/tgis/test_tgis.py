"""tgis-tester as pytest: one item per (model, config, case), judged against the reference config's answers."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

import pytest_topsail as topsail
from pytest_topsail.tgis.casefile import TgisCase
from pytest_topsail.tgis.client import TgisClient
from pytest_topsail.tgis.evaluation import compare, merge_stream, response_dict, stream_problems
from pytest_topsail.tgis.model_config import ModelConfig
from pytest_topsail.tgis.recording import record_expectation


def skip_reason(config: ModelConfig, case: TgisCase, reference: bool, recording: bool) -> str | None:
    """tgis-tester's skips, and the ones of record mode."""
    if recording and not reference:
        return "record mode (--tgis-record): only each model's reference config (its first) runs"
    if not recording and case.needs_record:
        return f"{case.source}: no expectation yet (neither response nor error): run with --tgis-record"
    if config.is_sharded and case.single_shard_only:
        return f"single_shard_only case on a sharded config (num_shard {config.num_shard})"
    if config.flash_attention and case.prefix_id:
        return "prefix case on a flash attention config (tgis-tester skips them)"
    return None


async def call(target: str, model: str, case: TgisCase, runner: Any) -> dict[str, Any]:
    """The case's request: unary answers (or the gRPC error), the streamed messages, the latency."""
    outcome: dict[str, Any] = {"responses": None, "error": None, "stream": None}
    async with TgisClient(target, model_id=model, timeout=runner.request_timeout_s) as client:
        began = time.perf_counter()
        try:
            answer = await client.generate(list(case.texts), case.parameters(), prefix_id=case.prefix_id,
                                           adapter_id=case.adapter_id)
            outcome["responses"] = [response_dict(response) for response in answer.responses]
        except grpc.aio.AioRpcError as error:
            outcome["error"] = [error.code().name, error.details() or ""]
        outcome["latency_ms"] = (time.perf_counter() - began) * 1000
        if runner.generate_stream and not case.batched and outcome["error"] is None and not case.skip_check:
            outcome["stream"] = [message async for message in client.generate_stream(
                case.texts[0], case.parameters(), prefix_id=case.prefix_id, adapter_id=case.adapter_id)]
    return outcome


def judge(case: TgisCase, outcome: dict[str, Any], runner: Any) -> list[str]:
    """What differs from the expectation, one line per field."""
    if case.error is not None:
        if outcome["error"] is None:
            return [f"expected error {case.error[0]}: {case.error[1]!r}, got {len(outcome['responses'])} response(s)"]
        if tuple(outcome["error"]) != case.error:
            return [f"error: expected {case.error[0]}: {case.error[1]!r}, got {outcome['error'][0]}: "
                    f"{outcome['error'][1]!r}"]
        return []
    if outcome["error"] is not None:
        return [f"expected a response, got error {outcome['error'][0]}: {outcome['error'][1]!r}"]
    if case.skip_check:
        return []
    expected = list(case.expected or [])
    problems = [str(d) for d in compare(expected, outcome["responses"], runner.evaluation_strategy,
                                        runner.rel_tolerance)]
    if outcome["stream"] is not None:
        problems += stream_problems(outcome["stream"])
        merged = compare(expected[:1], [merge_stream(outcome["stream"])], runner.evaluation_strategy,
                         runner.rel_tolerance)
        problems += [f"stream (merged) {difference}" for difference in merged]
    return problems


def test_tgis(case: topsail.Case, tgis_workers: Any, worker_settings: Any, runner_settings: Any,
              request: pytest.FixtureRequest, artifact_dir: Path, kpis: topsail.KpiRecorder) -> None:
    settings = case.settings
    config = ModelConfig.model_validate(settings["config"])
    tgis_case = TgisCase.from_settings(settings["case"])
    recording = bool(request.config.getoption("tgis_record"))
    reason = skip_reason(config, tgis_case, settings["reference"], recording)
    if reason:
        pytest.skip(reason)
    try:
        worker = tgis_workers.worker(request, settings["model"], config, worker_settings,
                                     worker_settings.env.get(config.name, {}))
    except topsail.TopsailError as error:
        pytest.fail(str(error), pytrace=False)
    outcome = asyncio.run(call(worker.target, settings["model"], tgis_case, runner_settings))
    saved = {**outcome, "stream": [response_dict(m) for m in outcome["stream"]] if outcome["stream"] else None}
    (artifact_dir / "answer.json").write_text(json.dumps(saved, indent=1, default=str), encoding="utf-8")
    kpis.record_from({"latency_ms": outcome["latency_ms"], "load_seconds": worker.load_seconds})
    if recording:
        record_expectation(request.config.rootpath, tgis_case, outcome)
        return
    problems = judge(tgis_case, outcome, runner_settings)
    if problems:
        pytest.fail(f"{case.id}: {len(problems)} difference(s) from the reference's answer "
                    f"({tgis_case.source}):\n" + "\n".join(problems[:20]), pytrace=False)
