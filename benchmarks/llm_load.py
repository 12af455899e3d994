"""Benchmark of the LLM load generator's client cost against llm-load-test-style and guidellm-style clients (not part
of the test run).

    python benchmarks/llm_load.py [--backends grpc http] [--shapes unary 1 8] [--concurrency 16] [--duration 3]
                                  [--rounds 3] [--high-concurrency 256] [--output FILE]

One reference server (python -m pytest_topsail.tgis.server --zero-latency: no prefill or decode delay) in its own
process serves every measurement, over TGIS gRPC and over OpenAI HTTP.
1. Client CPU cost, side by side, clients alternating within each round: ``--concurrency`` users for ``--duration`` s
   each, for every backend (``grpc``: Generate/GenerateStream; ``http``: /v1/completions, SSE when streamed) and
   every shape (``unary``: 8 output tokens in one answer; ``1``/``8``: streams of 1 or 8 tokens):
   - ours: pytest_topsail.llmload (closed loop, one process, one connection pool or gRPC channel for everything);
   - llm-load-test's way (our re-implementation of its style): one process per user; each request on a new gRPC
     channel (sync grpc) or a new HTTP connection (``requests.post``, ``iter_lines``, every line decoded), wall-clock
     times and every token's text kept; dataset and log queues through a main process;
   - guidellm's way (our re-implementation of its style, HTTP only: guidellm has no gRPC backend): a main process
     scheduling each request through a multiprocessing queue to worker processes running asyncio (one aiohttp
     session each, lighter than guidellm's httpx), every SSE line decoded and parsed, timings and results kept as
     pydantic models and sent back through a queue.
   Figure: completed requests per CPU-second of the client (the sum over its processes; the server's CPU is not
   counted), and the ratios ours / theirs. Goal (issue 28): >= 5x the llm-load-test way, unary and 8-token streams.
2. TTFT at concurrency 1 (sequential streamed requests): ours over gRPC against the bare generated stub on one
   channel (the difference is our client's own overhead; goal p50 <= 1 ms), and ours over HTTP.
3. ``--high-concurrency`` users for ``--duration`` s through our client: failures by status (none may mention
   "Too many open files"), the most file descriptors this process held, and its limit.
Medians over ``--rounds``; the load average is printed with each round (the machine is shared).
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
from concurrent.futures import ThreadPoolExecutor
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
UNARY_TOKENS = 8
GOAL = 5.0


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


def http_body(output_tokens: int, stream: bool) -> dict[str, Any]:
    """The completions request the peers send (their usage options; min_tokens/ignore_eos pin the length)."""
    body: dict[str, Any] = {"model": MODEL, "prompt": PROMPT_TEXT, "max_tokens": output_tokens,
                            "min_tokens": output_tokens, "ignore_eos": True, "temperature": 0.0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    return body


def shape_of(shape: str) -> tuple[bool, int]:
    """A shape's (streamed, output tokens): ``unary`` or a stream's token count."""
    return (False, UNARY_TOKENS) if shape == "unary" else (True, int(shape))


# -- ours ---------------------------------------------------------------------------------------------------------
def our_backend(kind: str, where: str, stream: bool) -> Any:
    return TgisBackend(where, model=MODEL, stream=stream) if kind == "grpc" else OpenAIBackend(where, MODEL,
                                                                                               stream=stream)


def ours(backend: Any, concurrency: int, duration: float, output_tokens: int, directory: Path) -> dict[str, Any]:
    prompts = [Prompt(PROMPT_TEXT, 10, output_tokens)]
    cpu_before = time.process_time()
    summary = run_load_test(backend, prompts, [LoadPoint(concurrency=concurrency, duration_s=duration,
                                                         timeout_s=60)], directory)[0]
    cpu = time.process_time() - cpu_before
    return {"requests": summary["succeeded"], "failures": summary["failures"], "cpu_s": cpu,
            "requests_per_cpu_s": summary["succeeded"] / cpu, "summary": summary}


# -- llm-load-test's way --------------------------------------------------------------------------------------------
def one_grpc_request_their_way(target: str, request: pb.SingleGenerationRequest, stream: bool) -> dict[str, Any]:
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


def one_http_request_their_way(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """One request as llm-load-test's OpenAI plugin makes it: ``requests.post`` (a new connection), streamed lines
    read one by one, each decoded and parsed, wall-clock times of the first token and the end, texts joined."""
    import requests

    result: dict[str, Any] = {"start_time": time.time(), "first_token_time": None, "output_tokens": None}
    response = requests.post(url + "/v1/completions", json=body, stream=body["stream"], timeout=60)
    response.raise_for_status()
    if not body["stream"]:
        answer = response.json()
        result.update(end_time=time.time(), output_text=answer["choices"][0]["text"],
                      output_tokens=answer["usage"]["completion_tokens"])
        return result
    texts = []
    for line in response.iter_lines():
        text = line.decode("utf-8").strip()
        if not text.startswith("data:"):
            continue
        payload = text[len("data:"):].strip()
        if payload == "[DONE]":
            break
        message = json.loads(payload)
        if message.get("choices") and message["choices"][0].get("text"):
            if result["first_token_time"] is None:
                result["first_token_time"] = time.time()
            texts.append(message["choices"][0]["text"])
        if message.get("usage"):
            result["output_tokens"] = message["usage"]["completion_tokens"]
    result["end_time"] = time.time()
    result["output_text"] = "".join(texts)
    return result


def user_process(kind: str, where: str, stream: bool, dataset: Any, stop: Any, logs: Any, results: Any,
                 ready: Any, go: Any) -> None:
    """One user of llm-load-test's way: its next query from the shared dataset queue, an INFO log record per
    request through a queue to the main process, until the stop queue says stop; results sent at the end."""
    if kind == "http":
        import requests  # noqa: F401  (imported before the clock starts, as its plugin does)
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
            if kind == "grpc":
                records.append(one_grpc_request_their_way(where, query, stream))
            else:
                records.append(one_http_request_their_way(where, query))
        except Exception:  # noqa: BLE001 (a failed request is counted, as its users do)
            failed += 1
    results.put((len(records), failed, time.process_time() - cpu_before))


def spawn(target: Any, args: tuple[Any, ...], count: int, ready: Any) -> list[Any]:
    """``count`` processes started and ready (process start-up is not measured: the peers start theirs before
    the test too)."""
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=args) for _ in range(count)]
    for process in processes:
        process.start()
    for _ in processes:
        ready.get(timeout=120)
    return processes


def llm_load_test_way(kind: str, where: str, concurrency: int, duration: float, output_tokens: int,
                      stream: bool) -> dict[str, Any]:
    """The users in their processes; this process feeds the dataset queue and handles their log records, as
    llm-load-test's main process does (its CPU counts too)."""
    context = multiprocessing.get_context("spawn")
    dataset, stop, logs, results, ready = (context.Queue() for _ in range(5))
    go = context.Event()
    query: Any
    if kind == "grpc":
        query = request_for(output_tokens)
        query.params.response.generated_tokens = True  # as its plugin asks, for the per-token texts
    else:
        query = http_body(output_tokens, stream)
    sink = logging.Logger("llm-load-test-main")
    sink.addHandler(logging.StreamHandler(io.StringIO()))
    listener = logging.handlers.QueueListener(logs, *sink.handlers)
    users = spawn(user_process, (kind, where, stream, dataset, stop, logs, results, ready, go), concurrency, ready)
    listener.start()
    go.set()
    cpu_before = time.process_time()
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        while dataset.qsize() < concurrency * 2:
            dataset.put(query)
        time.sleep(0.001)
    stop.put("stop")
    answers = [results.get(timeout=120) for _ in users]
    main_cpu = time.process_time() - cpu_before
    listener.stop()
    for user in users:
        user.join(timeout=30)
    return tally(answers, main_cpu)


def tally(answers: list[tuple[int, int, float]], main_cpu: float) -> dict[str, Any]:
    done = sum(a[0] for a in answers)
    cpu = sum(a[2] for a in answers) + main_cpu
    return {"requests": done, "failures": sum(a[1] for a in answers), "cpu_s": cpu, "main_cpu_s": main_cpu,
            "requests_per_cpu_s": done / cpu if cpu else 0.0}


# -- guidellm's way (HTTP only) ---------------------------------------------------------------------------------------
def guidellm_worker(url: str, tasks: int, requests: Any, results: Any, ready: Any, go: Any) -> None:
    """A worker process: ``tasks`` asyncio tasks, each taking its next scheduled request from the queue, sending it
    on the worker's session, timing every SSE line, and sending its stats (a pydantic model) back."""
    import aiohttp
    import pydantic

    class Timings(pydantic.BaseModel):
        request_id: int
        scheduled_at: float
        dequeued_at: float
        request_start: float
        first_iteration: float | None = None
        last_iteration: float | None = None
        request_end: float = 0.0
        iterations: int = 0
        prompt_tokens: int | None = None
        output_tokens: int | None = None
        output: str = ""
        error: str | None = None

    async def read_events(response: aiohttp.ClientResponse, stats: Timings, texts: list[str]) -> None:
        async for raw in response.content:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            payload = line[len("data:"):].strip()
            if payload == "[DONE]":
                break
            now = time.time()
            message = json.loads(payload)
            if stats.first_iteration is None:
                stats.first_iteration = now
            stats.last_iteration = now
            stats.iterations += 1
            if message.get("choices"):
                texts.append(message["choices"][0].get("text") or "")
            if message.get("usage"):
                stats.prompt_tokens = message["usage"]["prompt_tokens"]
                stats.output_tokens = message["usage"]["completion_tokens"]

    ready.put(os.getpid())
    go.wait(120)
    cpu_before = time.process_time()

    async def task(session: aiohttp.ClientSession, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            item = await loop.run_in_executor(None, requests.get)
            if item is None:
                return
            stats = Timings(request_id=item["id"], scheduled_at=item["at"], dequeued_at=time.time(),
                            request_start=time.time())
            texts: list[str] = []
            try:
                async with session.post(url + "/v1/completions", json=item["body"]) as response:
                    response.raise_for_status()
                    if item["body"]["stream"]:
                        await read_events(response, stats, texts)
                    else:
                        answer = await response.json()
                        texts.append(answer["choices"][0]["text"])
                        stats.output_tokens = answer["usage"]["completion_tokens"]
            except Exception as error:  # noqa: BLE001
                stats.error = str(error)
            stats.request_end = time.time()
            stats.output = "".join(texts)
            results.put(("result", stats.model_dump()))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(tasks))  # one blocking queue read per task
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            await asyncio.gather(*(task(session, loop) for _ in range(tasks)))

    asyncio.run(main())
    results.put(("cpu", time.process_time() - cpu_before))


def guidellm_way(url: str, concurrency: int, duration: float, output_tokens: int, stream: bool) -> dict[str, Any]:
    """The scheduler in this process keeps ``concurrency`` requests queued or in flight, receives every result and
    validates it into its report model (its CPU counts too); workers: one per core, at most ``concurrency``."""
    import pydantic

    class Result(pydantic.BaseModel):
        request_id: int
        scheduled_at: float
        request_start: float
        first_iteration: float | None
        request_end: float
        output_tokens: int | None
        error: str | None

    context = multiprocessing.get_context("spawn")
    requests, results, ready = (context.Queue() for _ in range(3))
    go = context.Event()
    workers_count = max(1, min(os.cpu_count() or 1, concurrency))
    per_worker = [concurrency // workers_count + (n < concurrency % workers_count) for n in range(workers_count)]
    workers = [context.Process(target=guidellm_worker, args=(url, tasks, requests, results, ready, go))
               for tasks in per_worker]
    for worker in workers:
        worker.start()
    for _ in workers:
        ready.get(timeout=120)
    body = http_body(output_tokens, stream)
    go.set()
    cpu_before = time.process_time()
    deadline = time.monotonic() + duration
    issued, failed = 0, 0
    done: list[Any] = []
    while time.monotonic() < deadline:
        while issued - len(done) - failed < concurrency:
            requests.put({"id": issued, "at": time.time(), "body": body})
            issued += 1
        try:
            kind, value = results.get(timeout=0.05)
        except queue.Empty:
            continue
        result = Result.model_validate(value)
        if result.error is None:
            done.append(result)
        else:
            failed += 1
    for _ in range(sum(per_worker)):
        requests.put(None)
    worker_cpu: list[float] = []
    while len(worker_cpu) < len(workers):
        kind, value = results.get(timeout=120)
        if kind == "cpu":
            worker_cpu.append(value)
        elif Result.model_validate(value).error is None:
            done.append(Result.model_validate(value))
        else:
            failed += 1
    main_cpu = time.process_time() - cpu_before
    for worker in workers:
        worker.join(timeout=30)
    return tally([(len(done), failed, sum(worker_cpu))], main_cpu)


# -- one round of the client-cost comparison -----------------------------------------------------------------------
def cost_round(args: argparse.Namespace, target: str, url: str, work: Path, number: int) -> dict[str, Any]:
    """Every (backend, shape) once, the clients side by side; returns {"grpc unary": {client: figures}, ...}."""
    figures: dict[str, Any] = {}
    for kind in args.backends:
        where = target if kind == "grpc" else url
        for shape in args.shapes:
            stream, tokens = shape_of(shape)
            case = figures[f"{kind} {shape}"] = {"load_average": os.getloadavg()[0]}
            mine = ours(our_backend(kind, where, stream), args.concurrency, args.duration, tokens,
                        work / f"ours-{kind}-{shape}-{number}")
            mine.pop("summary")
            case["ours"] = mine
            case["llm_load_test_way"] = llm_load_test_way(kind, where, args.concurrency, args.duration, tokens,
                                                          stream)
            if kind == "http":
                case["guidellm_way"] = guidellm_way(url, args.concurrency, args.duration, tokens, stream)
            line = f"round {number} {kind} {shape:>5}: ours {mine['requests_per_cpu_s']:5.0f} req/CPU-s"
            for peer in ("llm_load_test_way", "guidellm_way"):
                if peer in case:
                    case[f"ratio_{peer}"] = mine["requests_per_cpu_s"] / max(case[peer]["requests_per_cpu_s"], 1e-9)
                    line += (f", {peer} {case[peer]['requests_per_cpu_s']:5.0f} "
                             f"({case[f'ratio_{peer}']:.1f}x)")
            print(line + f", load {case['load_average']:.1f}", flush=True)
    return figures


def cost_medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    medians: dict[str, Any] = {}
    for case in rounds[0]:
        entries = [r[case] for r in rounds]
        medians[case] = {key: statistics.median(e[key]["requests_per_cpu_s"] if isinstance(e[key], dict)
                                                else e[key] for e in entries)
                         for key in entries[0]}
    return medians


def print_table(medians: dict[str, Any]) -> None:
    print(f"{'case':<12} {'ours':>6} {'llm-load-test':>14} {'ratio':>6} {'guidellm':>9} {'ratio':>6} {'load':>5}")
    for case, m in medians.items():
        guide = (f"{m['guidellm_way']:9.0f} {m['ratio_guidellm_way']:5.1f}x" if "guidellm_way" in m
                 else f"{'-':>9} {'-':>6}")
        goal = "" if m["ratio_llm_load_test_way"] >= GOAL else "  (< 5x goal)"
        print(f"{case:<12} {m['ours']:6.0f} {m['llm_load_test_way']:14.0f} {m['ratio_llm_load_test_way']:5.1f}x "
              f"{guide} {m['load_average']:5.1f}{goal}")


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
    parser.add_argument("--backends", nargs="+", choices=("grpc", "http"), default=["grpc", "http"])
    parser.add_argument("--shapes", nargs="+", default=["unary", "1", "8"],
                        help="unary, or a streamed output length in tokens")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ttft-requests", type=int, default=300, help="0: skip the TTFT measurement")
    parser.add_argument("--high-concurrency", type=int, default=256, help="0: skip the high-concurrency run")
    parser.add_argument("--output", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args()
    for shape in args.shapes:
        if shape != "unary" and not (shape.isdigit() and int(shape) >= 1):
            parser.error(f"--shapes: {shape!r} is neither 'unary' nor a token count >= 1")
    server, target, url = start_server()
    figures: dict[str, Any] = {"args": vars(args) | {"output": str(args.output)}, "cpu_count": os.cpu_count()}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            work = Path(scratch)
            rounds = [cost_round(args, target, url, work, number) for number in range(args.rounds)]
            figures["rounds"] = rounds
            figures["requests_per_cpu_s"] = cost_medians(rounds)
            if args.ttft_requests:
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
            if args.high_concurrency:
                figures["high_concurrency"] = high_concurrency(target, args.high_concurrency, args.duration,
                                                               UNARY_TOKENS, work / "high")
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps({key: value for key, value in figures.items() if key not in ("rounds", "requests_per_cpu_s")},
                     indent=1))
    print_table(figures["requests_per_cpu_s"])
    if args.output:
        args.output.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
