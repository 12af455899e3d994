"""The reference server as a client sees it: TGIS's behaviour, errors and streaming rules over real gRPC."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from pytest_topsail.tgis import generation_pb2 as pb
from pytest_topsail.tgis import serving
from pytest_topsail.tgis.client import TgisClient
from pytest_topsail.tgis.model_config import ModelConfig
from pytest_topsail.tgis.server import RunningServer, ServerSettings, ServerThread
from pytest_topsail.tgis.serving import ModelServer, ServedTime
from pytest_topsail.tgis.toymodel import DecodingSettings
from tests.sim.controller_harness import run

MODEL = "bigscience/bloom-560m"
PROMPT = "Once upon a time, in a small village by the sea,"


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    settings = ServerSettings(MODEL, ModelConfig(max_sequence_length=64, max_new_tokens=40), zero_latency=True,
                              prefixes={"story": "Tell me a story."})
    with ServerThread(settings) as running:
        yield running


def call(server: RunningServer, method: str, *args: Any, **kwargs: Any) -> Any:
    async def run() -> Any:
        async with TgisClient(server.address, model_id=MODEL, timeout=20) as client:
            result = getattr(client, method)(*args, **kwargs)
            if method == "generate_stream":
                return [message async for message in result]
            return await result

    return asyncio.run(run())


def generate(server: RunningServer, params: dict[str, Any] | None = None, texts: tuple[str, ...] = (PROMPT,),
             **kwargs: Any) -> list[pb.GenerationResponse]:
    return list(call(server, "generate", texts, params, **kwargs).responses)


def error_of(server: RunningServer, params: dict[str, Any], method: str = "generate", **kwargs: Any) -> tuple:
    arguments = ((PROMPT,), params) if method == "generate" else (PROMPT, params)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        call(server, method, *arguments, **kwargs)
    return raised.value.code(), raised.value.details()


def test_greedy_defaults_to_20_tokens_and_is_deterministic(server: RunningServer) -> None:
    first, again = generate(server)[0], generate(server)[0]
    assert first.generated_token_count == 20 and first.stop_reason == pb.MAX_TOKENS
    assert first.input_token_count == 13 and first.seed == 0 and first.text.strip()
    assert (again.text, again.generated_token_count) == (first.text, first.generated_token_count)
    assert generate(server, texts=("A different prompt",))[0].text != first.text


def test_deterministic_across_processes(server: RunningServer) -> None:
    """A server in another process (another hash seed) answers byte for byte the same."""
    params = {"method": "SAMPLE", "sampling": {"seed": 7, "temperature": 0.7},
              "response": {"generatedTokens": True, "tokenLogprobs": True}}
    here = call(server, "generate", [PROMPT], params)
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    command = [sys.executable, "-m", "pytest_topsail.tgis.server", "--model", MODEL, "--port", "0",
               "--zero-latency", "--config-json", '{"max_sequence_length": 64, "max_new_tokens": 40}']
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = child.stdout.readline() if child.stdout else ""
        assert "listening on" in line, line
        address = line.rsplit(" ", 1)[-1].strip()

        async def remote() -> pb.BatchedGenerationResponse:
            async with TgisClient(address, timeout=20) as client:
                return await client.generate([PROMPT], params)

        there = asyncio.run(remote())
    finally:
        child.terminate()
        assert child.wait(timeout=20) == 0
    assert there.SerializeToString() == here.SerializeToString()


def test_sampling_with_seed_and_unseeded_reports_its_seed(server: RunningServer) -> None:
    seeded = {"method": "SAMPLE", "sampling": {"seed": 42, "temperature": 1.5, "top_k": 50}}
    first, again = generate(server, seeded)[0], generate(server, seeded)[0]
    assert first.seed == 42 and first.text == again.text
    assert generate(server, {**seeded, "sampling": {"seed": 43, "temperature": 1.5}})[0].text != first.text
    unseeded = generate(server, {"method": "SAMPLE"})[0]
    assert 0 < unseeded.seed < 2**32
    replay = generate(server, {"method": "SAMPLE", "sampling": {"seed": unseeded.seed}})[0]
    assert replay.text == unseeded.text
    greedy = generate(server)[0].text
    assert generate(server, {"method": "SAMPLE", "sampling": {"seed": 1, "top_k": 1}})[0].text == greedy


def test_min_max_new_tokens_and_eos(server: RunningServer) -> None:
    long = generate(server, {"stopping": {"maxNewTokens": 40}})[0]
    assert long.stop_reason == pb.EOS_TOKEN and long.generated_token_count < 40  # EOS grows likelier with length
    held = generate(server, {"stopping": {"maxNewTokens": 40, "minNewTokens": 35}})[0]
    assert held.generated_token_count >= 35
    assert generate(server, {"stopping": {"maxNewTokens": 3}})[0].generated_token_count == 3


def test_stop_sequences_with_and_without_the_sequence(server: RunningServer) -> None:
    text = generate(server, {"stopping": {"maxNewTokens": 30}})[0].text
    word = text.split()[2]
    params = {"stopping": {"maxNewTokens": 30, "stopSequences": [word]}}
    included = generate(server, params)[0]
    assert included.stop_reason == pb.STOP_SEQUENCE and included.stop_sequence == word
    assert included.text.endswith(word) and text.startswith(included.text)
    excluded = generate(server, {"stopping": {**params["stopping"], "includeStopSequence": False}})[0]
    assert excluded.text == included.text[:-len(word)]
    streamed = call(server, "generate_stream", PROMPT, {"stopping": {**params["stopping"],
                                                                     "includeStopSequence": False}})
    assert "".join(m.text for m in streamed) == excluded.text


def test_token_details_and_input_echo(server: RunningServer) -> None:
    params = {"stopping": {"maxNewTokens": 4}, "response": {
        "inputText": True, "generatedTokens": True, "inputTokens": True, "tokenLogprobs": True,
        "tokenRanks": True, "topNTokens": 3}}
    response = generate(server, params)[0]
    plain = generate(server, {"stopping": {"maxNewTokens": 4}})[0]
    assert response.text == PROMPT + plain.text
    assert len(response.tokens) == 4 and len(response.input_tokens) == response.input_token_count
    assert math.isnan(response.input_tokens[0].logprob)
    assert all(t.logprob < 0 and t.rank >= 1 and len(t.top_tokens) == 3 for t in response.tokens)
    assert response.tokens[0].text.startswith("▁")
    greedy_first = response.tokens[0]
    assert greedy_first.rank == 1 and greedy_first.top_tokens[0].text == greedy_first.text
    no_logprobs = generate(server, {"stopping": {"maxNewTokens": 1}, "response": {"generatedTokens": True}})[0]
    assert no_logprobs.tokens[0].logprob == 0 and no_logprobs.tokens[0].rank == 0


def test_truncate_input_tokens_keeps_the_last_tokens(server: RunningServer) -> None:
    params = {"truncateInputTokens": 5, "response": {"inputTokens": True}, "stopping": {"maxNewTokens": 1}}
    response = generate(server, params)[0]
    assert response.input_token_count == 5
    assert [t.text for t in response.input_tokens] == ["▁village", "▁by", "▁the", "▁sea", ","]
    tokens = call(server, "tokenize", [PROMPT], return_tokens=True).responses[0].tokens
    assert [t.text for t in response.input_tokens] == list(tokens[-5:])


def test_batches_answer_each_prompt_like_single_requests(server: RunningServer) -> None:
    texts = ("first prompt", "second prompt here", PROMPT)
    batch = generate(server, {"stopping": {"maxNewTokens": 5}}, texts=texts)
    singles = [generate(server, {"stopping": {"maxNewTokens": 5}}, texts=(t,))[0] for t in texts]
    assert [r.SerializeToString() for r in batch] == [r.SerializeToString() for r in singles]
    assert generate(server, texts=()) == []


def test_prefix_and_adapter_ids(server: RunningServer) -> None:
    plain = generate(server, {"stopping": {"maxNewTokens": 5}})[0]
    prefixed = generate(server, {"stopping": {"maxNewTokens": 5}}, prefix_id="story")[0]
    assert prefixed.input_token_count == plain.input_token_count and prefixed.text != plain.text
    assert generate(server, {"stopping": {"maxNewTokens": 5}}, adapter_id="story")[0].text == prefixed.text
    code, message = error_of(server, {}, prefix_id="nope")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert message == "can't retrieve prompt prefix with id 'nope': prefix not found"


@pytest.mark.parametrize(("params", "message"), [
    ({"method": "SAMPLE", "sampling": {"temperature": 0.01}}, "temperature must be >= 0.05"),
    ({"method": "SAMPLE", "sampling": {"top_p": 1.5}}, "top_p must be > 0.0 and <= 1.0"),
    ({"method": "SAMPLE", "sampling": {"typical_p": 1.2}}, "typical_p must be <= 1.0"),
    ({"stopping": {"maxNewTokens": 41}}, "max_new_tokens must be <= 40"),
    ({"stopping": {"maxNewTokens": 5, "minNewTokens": 6}}, "min_new_tokens must be <= max_new_tokens"),
    ({"decoding": {"repetition_penalty": -1}}, "repetition_penalty must be > 0.0"),
    ({"decoding": {"length_penalty": {"start_index": 2, "decay_factor": 0.5}}},
     "length_penalty must be >= 1.0 and <= 10.0"),
    ({"stopping": {"stopSequences": ["a"] * 7}},
     "can specify at most 6 non-empty stop sequences, each not more than 240 UTF8 bytes"),
    ({"stopping": {"stopSequences": [""]}},
     "can specify at most 6 non-empty stop sequences, each not more than 240 UTF8 bytes"),
    ({"stopping": {"stopSequences": ["é" * 121]}},
     "can specify at most 6 non-empty stop sequences, each not more than 240 UTF8 bytes"),
    ({"response": {"generatedTokens": True, "topNTokens": 11}}, "top_n_tokens (11) must be <= 10"),
    ({"response": {"tokenLogprobs": True}}, "must request input and/or generated tokens to request extra token detail"),
])
def test_invalid_requests_get_tgis_errors(server: RunningServer, params: dict[str, Any], message: str) -> None:
    assert error_of(server, params) == (grpc.StatusCode.INVALID_ARGUMENT, message)
    assert error_of(server, params, "generate_stream") == (grpc.StatusCode.INVALID_ARGUMENT, message)


def test_greedy_ignores_sampling_parameters(server: RunningServer) -> None:
    assert generate(server, {"sampling": {"top_p": 5.0, "temperature": 0.01}})[0].text == generate(server)[0].text


def test_input_too_long_and_token_limit(server: RunningServer) -> None:
    long_text = " ".join(["word"] * 64)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        call(server, "generate", [long_text])
    assert raised.value.details() == "input tokens (64) plus prefix length (0) must be < 64"
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        call(server, "generate", [" ".join(["word"] * 30)], {"stopping": {"minNewTokens": 40, "maxNewTokens": 40}},
             prefix_id="story")
    assert raised.value.details() == "input tokens (30) plus prefix length (5) plus min_new_tokens (40) must be <= 64"
    near = generate(server, {"stopping": {"maxNewTokens": 40, "minNewTokens": 5}}, texts=(" ".join(["w"] * 55),))[0]
    assert (near.stop_reason, near.generated_token_count) == (pb.TOKEN_LIMIT, 9)


def test_stream_follows_the_tgis_rules(server: RunningServer) -> None:
    params = {"method": "SAMPLE", "sampling": {"seed": 9}, "stopping": {"maxNewTokens": 6},
              "response": {"inputText": True, "inputTokens": True, "generatedTokens": True, "tokenLogprobs": True}}
    messages = call(server, "generate_stream", PROMPT, params)
    unary = generate(server, params)[0]
    first, second, last = messages[0], messages[1], messages[-1]
    assert first.input_token_count == unary.input_token_count and first.generated_token_count == 0
    assert first.stop_reason == pb.NOT_FINISHED and first.text == PROMPT
    assert second.input_tokens == unary.input_tokens and not second.text and second.generated_token_count == 0
    assert last.stop_reason == unary.stop_reason and last.generated_token_count == unary.generated_token_count
    assert last.seed == 9
    counts = [m.generated_token_count for m in messages]
    assert counts == sorted(counts)
    assert "".join(m.text for m in messages) == unary.text
    assert [t for m in messages for t in m.tokens] == list(unary.tokens)


def test_penalties_change_the_text(server: RunningServer) -> None:
    base = generate(server, {"stopping": {"maxNewTokens": 30}})[0]
    repeated = generate(server, {"stopping": {"maxNewTokens": 30}, "decoding": {"repetition_penalty": 2.0}})[0]
    assert repeated.text != base.text
    short = generate(server, {"stopping": {"maxNewTokens": 40},
                              "decoding": {"length_penalty": {"start_index": 1, "decay_factor": 3.0}}})[0]
    assert short.stop_reason == pb.EOS_TOKEN and short.generated_token_count < base.generated_token_count


def test_tokenize_and_model_info(server: RunningServer) -> None:
    tokenized = call(server, "tokenize", ["Hello world!", PROMPT], return_tokens=True, return_offsets=True)
    hello = tokenized.responses[0]
    assert hello.token_count == 3 and list(hello.tokens) == ["▁Hello", "▁world", "!"]
    assert [(o.start, o.end) for o in hello.offsets] == [(0, 5), (6, 11), (11, 12)]
    assert tokenized.responses[1].token_count == 13
    truncated = call(server, "tokenize", [PROMPT], truncate_input_tokens=4).responses[0]
    assert truncated.token_count == 4 and not truncated.tokens
    info = call(server, "model_info")
    assert (info.model_kind, info.max_sequence_length, info.max_new_tokens) == (pb.ModelInfoResponse.DECODER_ONLY,
                                                                                 64, 40)


def test_health_and_reflection(server: RunningServer) -> None:
    async def run() -> tuple[int, list[str]]:
        async with grpc.aio.insecure_channel(server.address) as channel:
            health = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="fmaas.GenerationService"), timeout=10)
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            names: list[str] = []
            async for answer in stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
                    list_services="")]), timeout=10):
                names = [s.name for s in answer.list_services_response.service]
            return health.status, names

    status, names = asyncio.run(run())
    assert status == health_pb2.HealthCheckResponse.SERVING
    assert "fmaas.GenerationService" in names and "grpc.health.v1.Health" in names


def test_diverge_switch_changes_the_text_and_config_only_the_logprobs() -> None:
    params = {"stopping": {"maxNewTokens": 8}, "response": {"generatedTokens": True, "tokenLogprobs": True}}
    results = {}
    bf16_sharded = ModelConfig.model_validate({"dtype_str": "bfloat16", "num_shard": 2, "resources": {"gpu": 2}})
    for key, config, diverge in (("f16", ModelConfig(), False),
                                 ("bf16", bf16_sharded, False),
                                 ("diverged", ModelConfig(), True)):
        with ServerThread(ServerSettings(MODEL, config, zero_latency=True, diverge=diverge)) as running:
            results[key] = generate(running, params)[0]
    f16, bf16 = results["f16"], results["bf16"]
    assert bf16.text == f16.text and [t.text for t in bf16.tokens] == [t.text for t in f16.tokens]
    pairs = list(zip((t.logprob for t in f16.tokens), (t.logprob for t in bf16.tokens), strict=True))
    assert any(a != b for a, b in pairs)
    assert all(math.isclose(a, b, rel_tol=5e-4) for a, b in pairs)
    assert results["diverged"].text != f16.text


def test_overload_and_latency_model() -> None:
    config = ModelConfig(max_concurrent_requests=2, max_batch_size=1)
    with ServerThread(ServerSettings("meta-llama/Llama-2-7b-hf", config, gpu_profile="t4")) as running:
        async def run() -> tuple[list[Any], float]:
            async with TgisClient(running.address, timeout=30) as client:
                loop = asyncio.get_running_loop()
                start = loop.time()
                outcomes = await asyncio.gather(
                    *(client.generate(["hi there"], {"stopping": {"maxNewTokens": 3}}) for _ in range(3)),
                    return_exceptions=True)
                return outcomes, loop.time() - start

        outcomes, elapsed = asyncio.run(run())
        latency = running.backend.latency
    errors = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
    assert len(errors) == 1 and errors[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert errors[0].details() == "Model is overloaded"
    one_request = latency.prefill_seconds(2) + 2 * latency.inter_token_seconds(1)
    assert elapsed >= 2 * one_request * 0.95  # batch size 1: the second request waited for the first


def test_time_limit_stops_generation() -> None:
    config = ModelConfig(max_new_tokens=200, max_sequence_length=512)
    with ServerThread(ServerSettings("meta-llama/Llama-2-7b-hf", config, gpu_profile="t4")) as running:
        itl = running.backend.latency.inter_token_seconds(1)
        limit_ms = int(itl * 1000 * 5)
        response = generate(running, {"stopping": {"maxNewTokens": 200, "minNewTokens": 200,
                                                   "timeLimitMillis": limit_ms}}, texts=("hi",))[0]
    assert response.stop_reason == pb.TIME_LIMIT and 1 <= response.generated_token_count < 10


def test_time_scale_compresses_serving_and_the_client_adds_it_back() -> None:
    """On a serving time scale, a call takes that fraction of its modelled time; the server tells the client the rest
    in its trailing metadata, so wall time + time_compressed_s is the latency in simulated time (unary and streamed;
    what a queued request adds: the virtual-time test below)."""
    config = ModelConfig(max_batch_size=1)
    params = {"stopping": {"maxNewTokens": 6, "minNewTokens": 6}}
    with ServerThread(ServerSettings("meta-llama/Llama-2-7b-hf", config, gpu_profile="t4", time_scale=0.1)) as running:
        latency = running.backend.latency
        one_request = latency.prefill_seconds(1) + 5 * latency.inter_token_seconds(1)

        async def scenario() -> tuple[float, float]:
            async with TgisClient(running.address, timeout=30) as client:
                await client.generate(["hi"], params)
                unary = client.time_compressed_s
                async for _message in client.generate_stream("hi", params):
                    pass
                return unary, client.time_compressed_s - unary

        unary, streamed = asyncio.run(scenario())
    assert unary == pytest.approx(one_request * 0.9, rel=1e-3)
    assert streamed == pytest.approx(one_request * 0.9, rel=1e-3)


def test_a_queued_requests_wait_counts_in_simulated_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch size 1 at time scale 0.1, on a virtual clock (the loop's time jumps to the next timer, and the server's
    queue clock reads it): the second request waits the first's 0.1 x one request of wall time for the slot, which
    counts 9 times over once scaled back, besides the 0.9 x one request each took off its own decoding. Exact at any
    machine load: the wall-clock version of this bound was re-tuned three times (load series D and H)."""
    server = ModelServer("meta-llama/Llama-2-7b-hf", ModelConfig(max_batch_size=1), gpu_profile="t4", time_scale=0.1)
    one_request = server.latency.prefill_seconds(1) + 5 * server.latency.inter_token_seconds(1)
    settings = DecodingSettings(min_new_tokens=6, max_new_tokens=6)
    first, second = ServedTime(), ServedTime()

    async def two_requests() -> float:
        loop = asyncio.get_running_loop()
        monkeypatch.setattr(serving, "time", SimpleNamespace(monotonic=loop.time))
        await asyncio.gather(server.complete(server.prepare("hi", 0, []), settings, 0, first),
                             server.complete(server.prepare("hi", 0, []), settings, 0, second))
        return loop.time()

    wall = run(two_requests, virtual_time=True)
    assert wall == pytest.approx(2 * one_request * 0.1, rel=1e-9)  # one after the other, each at the scaled pace
    assert first.compressed_s == pytest.approx(one_request * 0.9, rel=1e-9)
    assert second.compressed_s == pytest.approx(one_request * 0.9 + one_request * 0.1 * 9, rel=1e-9)


def test_a_free_batch_slot_is_no_queue_however_late_the_process_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queue time is scaled back (x 9 at time scale 0.1) only when the request waited for a batch slot: the clock
    moving between the readings around a free slot (the process descheduled on a loaded machine: +3.2 ms of
    simulated time seen in a stream at load 10) is no queue."""
    server = ModelServer("meta-llama/Llama-2-7b-hf", ModelConfig(max_batch_size=1), gpu_profile="t4", time_scale=0.1)
    ticks = itertools.count()
    monkeypatch.setattr(serving, "time", SimpleNamespace(monotonic=lambda: next(ticks) * 0.001))  # 1 ms a reading
    prepared = server.prepare("hi", 0, [])
    served = ServedTime()
    asyncio.run(server.complete(prepared, DecodingSettings(min_new_tokens=6, max_new_tokens=6), 0, served))
    one_request = server.latency.prefill_seconds(1) + 5 * server.latency.inter_token_seconds(1)
    assert served.compressed_s == pytest.approx(one_request * 0.9, rel=1e-9)


def test_a_stall_of_the_serving_process_is_not_added_to_the_later_tokens() -> None:
    """Tokens keep the model's schedule: the server's process blocked for 5 inter-token times mid-request (the
    simulator's other work, a GC pause) delays the tokens then due, which go out at once after it, and the request
    still ends when the model says; before, every later token came a stall late (+5 ITL on e2e). On a virtual clock
    (the stall moves it), so exact at any machine load."""
    server = ModelServer("meta-llama/Llama-2-13b-hf", ModelConfig(max_batch_size=1), gpu_profile="a100")
    itl, tokens = server.latency.inter_token_seconds(1), 10
    modelled = server.latency.prefill_seconds(1) + (tokens - 1) * itl

    async def one_request() -> list[float]:
        loop = asyncio.get_running_loop()
        began, arrivals = loop.time(), []
        settings = DecodingSettings(min_new_tokens=tokens, max_new_tokens=tokens)
        async with contextlib.aclosing(server.generate(server.prepare("hi", 0, []), settings)) as steps:
            async for _generation, _step in steps:
                arrivals.append(loop.time() - began)
                if len(arrivals) == 5:
                    loop.advance(5 * itl)  # the process stalls: no timer fires meanwhile
        return arrivals

    arrivals = run(one_request, virtual_time=True)
    assert len(arrivals) == tokens
    assert arrivals[5] - arrivals[4] == pytest.approx(5 * itl)  # the stall is seen by the token then due ...
    assert arrivals[6] - arrivals[5] == 0  # ... and by the one due meanwhile, which goes out at once
    assert arrivals[-1] == pytest.approx(modelled), (arrivals, modelled, itl)  # the old pacing: modelled + 5 ITL


def test_real_time_server_sends_no_compressed_time(server: RunningServer) -> None:
    async def scenario() -> float:
        async with TgisClient(server.address, timeout=20) as client:
            await client.generate(["hi"], {"stopping": {"maxNewTokens": 2}})
            return client.time_compressed_s

    assert asyncio.run(scenario()) == 0.0


def test_cancelled_stream_frees_its_batch_slot() -> None:
    config = ModelConfig(max_batch_size=1)
    with ServerThread(ServerSettings("meta-llama/Llama-2-7b-hf", config, gpu_profile="t4")) as running:
        async def scenario() -> float:
            async with TgisClient(running.address, timeout=30) as client:
                stream = client.generate_stream("hi", {"stopping": {"maxNewTokens": 1000, "minNewTokens": 1000}})
                async with contextlib.aclosing(stream):
                    async for message in stream:
                        if message.generated_token_count >= 2:
                            break
                loop = asyncio.get_running_loop()
                began = loop.time()
                await client.generate(["hi"], {"stopping": {"maxNewTokens": 2}})
                return loop.time() - began

        elapsed = asyncio.run(scenario())
        assert running.backend.running == 0 and running.backend.in_server == 0
    assert elapsed < 20  # the 1000-token stream (~ 40 s on this profile) no longer holds the only slot (quiet: < 1 s)


def test_command_line_rejects_a_bad_config() -> None:
    result = subprocess.run([sys.executable, "-m", "pytest_topsail.tgis.server", "--model", MODEL, "--config-json",
                             '{"pt2_compile": true}'], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert ("--config-json: invalid TGIS model config: model config tgis_native|f16|pt2c: pt2_compile requires "
            "deployment_framework hf_transformers") in result.stderr
    assert "Traceback" not in result.stderr


def test_environment_switches() -> None:
    from pytest_topsail.tgis.server import environment_settings

    assert environment_settings({}) == {}
    assert environment_settings({"TOPSAIL_TGIS_DIVERGE": "0"}) == {}
    assert environment_settings({"TOPSAIL_TGIS_DIVERGE": "1", "TOPSAIL_TGIS_PREFIXES": '{"p": "Answer:"}'}) == {
        "diverge": True, "prefixes": {"p": "Answer:"}}
    with pytest.raises(ValueError, match="TOPSAIL_TGIS_PREFIXES must be a JSON object of id -> prefix text"):
        environment_settings({"TOPSAIL_TGIS_PREFIXES": '["p"]'})
    env = {**os.environ, "TOPSAIL_TGIS_PREFIXES": "{oops"}
    result = subprocess.run([sys.executable, "-m", "pytest_topsail.tgis.server", "--model", MODEL],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 2 and "TOPSAIL_TGIS_PREFIXES is not JSON" in result.stderr


def test_tls_server_reached_with_a_ca_file(tmp_path) -> None:
    from pytest_topsail.sim.run.tls import make_certificates

    certificates = make_certificates()
    (tmp_path / "tls.crt").write_bytes(certificates.cert_pem)
    (tmp_path / "tls.key").write_bytes(certificates.key_pem)
    (tmp_path / "ca.crt").write_bytes(certificates.ca_pem)
    command = [sys.executable, "-m", "pytest_topsail.tgis.server", "--model", MODEL, "--port", "0", "--zero-latency",
               "--tls-cert-path", str(tmp_path / "tls.crt"), "--tls-key-path", str(tmp_path / "tls.key")]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline() if child.stdout else ""
        port = line.rsplit(":", 1)[-1].strip()

        async def over_tls() -> pb.ModelInfoResponse:
            async with TgisClient(f"localhost:{port}", ca_file=tmp_path / "ca.crt", timeout=20) as client:
                return await client.model_info()

        assert asyncio.run(over_tls()).max_new_tokens == 1024
    finally:
        child.terminate()
        assert child.wait(timeout=20) == 0
    missing = subprocess.run([*command[:-2], "--tls-key-path", str(tmp_path / "nope.key")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and f"cannot read {tmp_path / 'nope.key'}" in missing.stderr
