"""Benchmark of the LLM load generator's client against an llm-load-test-style client (not part of the test run).

    python benchmarks/llm_load.py [--concurrency 16] [--duration 4] [--output-tokens 8] [--rounds 3]
                                  [--high-concurrency 256] [--output FILE]

One reference server (python -m pytest_topsail.tgis.server --zero-latency: no prefill or decode delay) in its own
process serves every measurement, over gRPC (GenerateStream, streaming) and, for TTFT, over OpenAI HTTP as well.
1. Client CPU cost, side by side, rounds alternating: ``--concurrency`` users for ``--duration`` s each way.
   - ours: pytest_topsail.llmload (closed loop, one asyncio loop, one gRPC channel multiplexing every stream);
   - llm-load-test's way: one process per user, each request on a new gRPC channel (sync grpc), as its TGIS plugin.
   Figure: completed requests per CPU-second of the client (this process for ours; the sum over the user processes
   for theirs: the server's CPU is not counted), and the ratio ours / theirs. Goal: >= 5x.
2. TTFT at concurrency 1 (sequential streamed requests): ours over gRPC against the bare generated stub on one
   channel (the difference is our client's own overhead; goal p50 <= 1 ms), and ours over HTTP.
3. ``--high-concurrency`` users for ``--duration`` s through our client: failures by status (none may mention
   "Too many open files"), the most file descriptors this process held, and its limit.
Medians over ``--rounds``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import logging.handlers
import multiprocessing
import os
import queue
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from pytest_topsail.llmload.backends.openai_http import OpenAIBackend
from pytest_topsail.llmload.backends.tgis_grpc import TgisBackend
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.run import run_load_test
from pytest_topsail.tgis import generation_pb2 as pb
from pytest_topsail.tgis import generation_pb2_grpc as pb_grpc

MODEL = "bigscience/bloom-560m"
SERVER_CONFIG = {"max_batch_size": 1024, "max_concurrent_requests": 4096}
PROMPT_TEXT = "Benchmark prompt: how much does the client cost per request?"
START_TIMEOUT_S = 60.0


def start_server() -> tuple[subprocess.Popen[str], str, str]:
    """The zero-latency reference server in a child process; returns it, its gRPC target and its HTTP URL."""
    command = [sys.executable, "-m", "pytest_topsail.tgis.server", "--model", MODEL, "--port", "0", "--http-port",
               "0", "--zero-latency", "--config-json", json.dumps(SERVER_CONFIG)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout.readline() for _ in range(2))
                              if process.stdout else None, daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    if len(lines) < 2 or "listening on" not in lines[1]:
        process.kill()
        raise SystemExit(f"the reference server did not start within {START_TIMEOUT_S:.0f} s: {lines}")
    return process, lines[1].split()[-1], "http://" + lines[0].split()[-1]


def request_for(output_tokens: int) -> pb.SingleGenerationRequest:
    stopping = pb.StoppingCriteria(max_new_tokens=output_tokens, min_new_tokens=output_tokens)
    return pb.SingleGenerationRequest(model_id=MODEL, request=pb.GenerationRequest(text=PROMPT_TEXT),
                                      params=pb.Parameters(stopping=stopping))


# -- ours ---------------------------------------------------------------------------------------------------------
def ours(backend: Any, concurrency: int, duration: float, output_tokens: int, directory: Path) -> dict[str, Any]:
    prompts = [Prompt(PROMPT_TEXT, 10, output_tokens)]
    cpu_before = time.process_time()
    summary = run_load_test(backend, prompts, [LoadPoint(concurrency=concurrency, duration_s=duration,
                                                         timeout_s=60)], directory)[0]
    cpu = time.process_time() - cpu_before
    return {"requests": summary["succeeded"], "failures": summary["failures"], "cpu_s": cpu,
            "requests_per_cpu_s": summary["succeeded"] / cpu, "summary": summary}


# -- llm-load-test's way --------------------------------------------------------------------------------------------
def one_request_their_way(target: str, request: pb.SingleGenerationRequest, stream: bool) -> dict[str, Any]:
    """One request as llm-load-test's TGIS plugin makes it: a new channel (dropped when the function returns);
    streamed: wall-clock times of the acknowledgement and first token, every token's text kept and joined."""
    channel = grpc.insecure_channel(target)
    stub = pb_grpc.GenerationServiceStub(channel)
    result: dict[str, Any] = {"start_time": time.time(), "ack_time": None, "first_token_time": None}
    if not stream:
        answer = stub.Generate(pb.BatchedGenerationRequest(model_id=request.model_id, requests=[request.request],
                                                           params=request.params), timeout=60).responses[0]
        result.update(end_time=time.time(), output_text=answer.text, output_tokens=answer.generated_token_count)
        return result
    texts = []
    for message in stub.GenerateStream(request, timeout=60):
        if result["ack_time"] is None and not message.tokens:
            result["ack_time"] = time.time()
        if message.tokens:
            if result["first_token_time"] is None and message.tokens[0].text:
                result["first_token_time"] = time.time()
            texts.append(message.text)
        if message.stop_reason:
            result["output_tokens"] = message.generated_token_count
    result["end_time"] = time.time()
    result["output_text"] = "".join(texts)
    return result


def user_process(target: str, stream: bool, dataset: Any, stop: Any, logs: Any, results: Any, ready: Any,
                 go: Any) -> None:
    """One user of llm-load-test's way: its next query from the shared dataset queue, an INFO log record per
    request through a queue to the main process, until the stop queue says stop; results sent at the end."""
    logger = logging.getLogger("user")
    logger.handlers[:] = [logging.handlers.QueueHandler(logs)]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    records, failed = [], 0
    ready.put(os.getpid())
    go.wait(120)
    cpu_before = time.process_time()
    while stop.empty():
        try:
            query = dataset.get(timeout=2)
        except queue.Empty:
            continue
        logger.info("User %s making request", os.getpid())
        try:
            records.append(one_request_their_way(target, query, stream))
        except grpc.RpcError:
            failed += 1
    results.put((len(records), failed, time.process_time() - cpu_before))


def theirs(target: str, concurrency: int, duration: float, output_tokens: int, stream: bool) -> dict[str, Any]:
    """The users in their processes; this process feeds the dataset queue and handles their log records, as
    llm-load-test's main process does (its CPU counts too)."""
    context = multiprocessing.get_context("spawn")
    dataset, stop, logs, results, ready = (context.Queue() for _ in range(5))
    go = context.Event()
    request = request_for(output_tokens)
    request.params.response.generated_tokens = True  # as its plugin asks, for the per-token texts
    sink = logging.Logger("llm-load-test-main")
    sink.addHandler(logging.StreamHandler(io.StringIO()))
    listener = logging.handlers.QueueListener(logs, *sink.handlers)
    users = [context.Process(target=user_process, args=(target, stream, dataset, stop, logs, results, ready, go))
             for _ in range(concurrency)]
    for user in users:
        user.start()
    for _ in users:  # process start-up is not measured (llm-load-test starts its users before the test too)
        ready.get(timeout=120)
    listener.start()
    go.set()
    cpu_before = time.process_time()
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        while dataset.qsize() < concurrency * 2:
            dataset.put(request)
        time.sleep(0.001)
    stop.put("stop")
    answers = [results.get(timeout=120) for _ in users]
    main_cpu = time.process_time() - cpu_before
    listener.stop()
    for user in users:
        user.join(timeout=30)
    done = sum(a[0] for a in answers)
    cpu = sum(a[2] for a in answers) + main_cpu
    return {"requests": done, "failures": sum(a[1] for a in answers), "cpu_s": cpu, "main_cpu_s": main_cpu,
            "requests_per_cpu_s": done / cpu if cpu else 0.0}


# -- TTFT at concurrency 1 ----------------------------------------------------------------------------------------
async def bare_ttfts(target: str, requests: int) -> list[float]:
    """First-message latency of GenerateStream through the bare generated stub on one channel (the floor)."""
    request = request_for(4)
    values = []
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pb_grpc.GenerationServiceStub(channel)
        for _ in range(requests):
            start = time.perf_counter()
            first = None
            async for message in stub.GenerateStream(request):
                if first is None and message.generated_token_count:
                    first = time.perf_counter()
            values.append((first or time.perf_counter()) - start)
    return values


def ttft_p50_ms(backend: Any, requests: int, directory: Path) -> float:
    summary = run_load_test(backend, [Prompt(PROMPT_TEXT, 10, 4)], [LoadPoint(concurrency=1, requests=requests)],
                            directory)[0]
    return summary["stats"]["ttft_ms"]["median"]


# -- high concurrency -----------------------------------------------------------------------------------------------
def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def high_concurrency(target: str, concurrency: int, duration: float, output_tokens: int,
                     directory: Path) -> dict[str, Any]:
    most = [open_fds()]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            most.append(open_fds())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = ours(TgisBackend(target, model=MODEL), concurrency, duration, output_tokens, directory)
    finally:
        stop.set()
        sampler.join(5)
    errors = [json.loads(line).get("error") or "" for line in (directory / "records.jsonl").read_text().splitlines()]
    return {"concurrency": concurrency, "requests": result["requests"], "failures": result["failures"],
            "too_many_open_files": sum("Too many open files" in e for e in errors), "max_open_fds": max(most),
            "fd_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--output-tokens", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--unary", action="store_true", help="Generate instead of GenerateStream, both ways")
    parser.add_argument("--ttft-requests", type=int, default=300)
    parser.add_argument("--high-concurrency", type=int, default=256)
    parser.add_argument("--output", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args()
    server, target, url = start_server()
    figures: dict[str, Any] = {"args": vars(args) | {"output": str(args.output)}, "cpu_count": os.cpu_count()}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            work = Path(scratch)
            rounds: list[dict[str, Any]] = []
            for number in range(args.rounds):
                backend = TgisBackend(target, model=MODEL, stream=not args.unary)
                mine = ours(backend, args.concurrency, args.duration, args.output_tokens, work / f"ours{number}")
                mine.pop("summary")
                other = theirs(target, args.concurrency, args.duration, args.output_tokens, not args.unary)
                rounds.append({"ours": mine, "llm_load_test_way": other,
                               "ratio": mine["requests_per_cpu_s"] / max(other["requests_per_cpu_s"], 1e-9)})
                print(f"round {number}: ours {mine['requests_per_cpu_s']:.0f} req/CPU-s ({mine['requests']} req), "
                      f"llm-load-test way {other['requests_per_cpu_s']:.0f} req/CPU-s ({other['requests']} req), "
                      f"ratio {rounds[-1]['ratio']:.1f}x", flush=True)
            figures["rounds"] = rounds
            figures["requests_per_cpu_s"] = {
                "ours": statistics.median(r["ours"]["requests_per_cpu_s"] for r in rounds),
                "llm_load_test_way": statistics.median(r["llm_load_test_way"]["requests_per_cpu_s"] for r in rounds),
                "ratio": statistics.median(r["ratio"] for r in rounds)}
            ttft: dict[str, list[float]] = {"ours_grpc": [], "bare_stub": [], "ours_http": []}
            for number in range(args.rounds):
                ttft["bare_stub"].append(statistics.median(asyncio.run(bare_ttfts(target, args.ttft_requests)))
                                         * 1000)
                ttft["ours_grpc"].append(ttft_p50_ms(TgisBackend(target, model=MODEL), args.ttft_requests,
                                                     work / f"ttft{number}"))
                ttft["ours_http"].append(ttft_p50_ms(OpenAIBackend(url, MODEL), args.ttft_requests,
                                                     work / f"ttft-http{number}"))
            figures["ttft_p50_ms"] = {name: statistics.median(values) for name, values in ttft.items()}
            figures["ttft_p50_ms"]["ours_overhead_grpc"] = (figures["ttft_p50_ms"]["ours_grpc"]
                                                            - figures["ttft_p50_ms"]["bare_stub"])
            figures["high_concurrency"] = high_concurrency(target, args.high_concurrency, args.duration,
                                                           args.output_tokens, work / "high")
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps({key: value for key, value in figures.items() if key != "rounds"}, indent=1))
    if args.output:
        args.output.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
