"""Benchmark of the reference TGIS server and client (not part of the test run).

    python benchmarks/tgis_server.py [--requests 2000] [--concurrency 16] [--rounds 3] [--output FILE]

Side by side in one run, rounds that measure the compared servers back to back (figures: medians over rounds; the
ratio: median of the rounds' ratios), each server in its own process (the load generator in this one):
1. requests/s: Generate of one prompt, max_new_tokens 1, zero latency, `--concurrency` calls in flight over one
   TgisClient channel, against the reference server and against a trivial grpc.aio GenerationService that answers a
   fixed response. Goal: reference >= 0.5x of the echo.
   Also requests per CPU second of each server process (from /proc): on a loaded machine the wall rates swing with
   the scheduler, the CPU cost per request does not.
2. client per-call overhead: p50 of sequential Generate calls through TgisClient minus p50 of the same calls through
   the bare generated stub, against the echo server (what our client adds: metadata, deadline, retry wrapper).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc

from pytest_topsail.tgis import generation_pb2 as pb
from pytest_topsail.tgis import generation_pb2_grpc as pb_grpc
from pytest_topsail.tgis.client import TgisClient

PROMPT = "Benchmark prompt: how fast is the reference server?"
PARAMS = pb.Parameters(stopping=pb.StoppingCriteria(max_new_tokens=1))
START_TIMEOUT = 60.0


class EchoServicer(pb_grpc.GenerationServiceServicer):
    """The trivial baseline: a fixed one-token answer, no validation, no model."""

    async def Generate(self, request, context):  # noqa: N802 (gRPC method name)
        return pb.BatchedGenerationResponse(responses=[
            pb.GenerationResponse(input_token_count=9, generated_token_count=1, text=" the", stop_reason=pb.MAX_TOKENS)
            for _ in request.requests])


async def serve_echo() -> None:
    server = grpc.aio.server()
    pb_grpc.add_GenerationServiceServicer_to_server(EchoServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"echo server listening on 127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()


def start(command: list[str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + START_TIMEOUT
    line = process.stdout.readline() if process.stdout else ""
    if "listening on" not in line or time.monotonic() > deadline:
        process.kill()
        raise SystemExit(f"server did not start: {command} printed {line!r}")
    return process, line.rsplit(" ", 1)[-1].strip()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(address: str, pid: int, requests: int, concurrency: int) -> tuple[float, float]:
    """(requests per wall second, requests per CPU second of the server)."""
    cpu_before = cpu_seconds(pid)
    rate = asyncio.run(requests_per_second(address, requests, concurrency))
    return rate, (requests + 1) / max(cpu_seconds(pid) - cpu_before, 1e-3)


async def requests_per_second(address: str, requests: int, concurrency: int) -> float:
    async with TgisClient(address, timeout=30, retries=0) as client:
        await client.generate([PROMPT], PARAMS)  # connect first
        remaining = requests

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await client.generate([PROMPT], PARAMS)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return requests / (time.perf_counter() - began)


async def call_p50s(address: str, calls: int) -> tuple[float, float]:
    """p50 seconds of sequential Generate calls through TgisClient and through the bare stub (same channel kind)."""
    request = pb.BatchedGenerationRequest(requests=[pb.GenerationRequest(text=PROMPT)], params=PARAMS)
    async with TgisClient(address, timeout=30, retries=0) as client, grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.GenerationServiceStub(channel)
        await client.generate([PROMPT], PARAMS)
        await stub.Generate(request, timeout=30)
        client_times, stub_times = [], []
        for _ in range(calls):
            began = time.perf_counter()
            await client.generate([PROMPT], PARAMS)
            client_times.append(time.perf_counter() - began)
            began = time.perf_counter()
            await stub.Generate(request, timeout=30)
            stub_times.append(time.perf_counter() - began)
    return statistics.median(client_times), statistics.median(stub_times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_echo:
        asyncio.run(serve_echo())
        return 0

    reference, reference_address = start([sys.executable, "-m", "pytest_topsail.tgis.server", "--model",
                                          "bigscience/bloom-560m", "--port", "0", "--zero-latency"])
    echo, echo_address = start([sys.executable, __file__, "--serve-echo"])
    try:
        rates: dict[str, list[float]] = {"reference": [], "echo": []}
        per_cpu: dict[str, list[float]] = {"reference": [], "echo": []}
        for _ in range(args.rounds):
            for name, address, pid in (("reference", reference_address, reference.pid),
                                       ("echo", echo_address, echo.pid)):
                rate, cpu_rate = measure(address, pid, args.requests, args.concurrency)
                rates[name].append(rate)
                per_cpu[name].append(cpu_rate)
        p50s = [asyncio.run(call_p50s(echo_address, args.requests // 4)) for _ in range(args.rounds)]
    finally:
        for process in (reference, echo):
            process.terminate()
            process.wait(10)

    reference_rate, echo_rate = statistics.median(rates["reference"]), statistics.median(rates["echo"])
    # each round measures both servers back to back: the median of the rounds' ratios resists load swings
    ratio = statistics.median(r / e for r, e in zip(rates["reference"], rates["echo"], strict=True))
    cpu_ratio = statistics.median(per_cpu["reference"]) / statistics.median(per_cpu["echo"])
    client_p50 = statistics.median(p[0] for p in p50s)
    stub_p50 = statistics.median(p[1] for p in p50s)
    result: dict[str, Any] = {
        "generate_requests_per_s": {"reference": round(reference_rate), "echo": round(echo_rate),
                                    "ratio": round(ratio, 3), "goal": ">= 0.5",
                                    "rounds": {name: [round(r) for r in values] for name, values in rates.items()}},
        "generate_requests_per_server_cpu_s": {
            "reference": round(statistics.median(per_cpu["reference"])),
            "echo": round(statistics.median(per_cpu["echo"])), "ratio": round(cpu_ratio, 3)},
        "client_call_p50_us": {"tgis_client": round(client_p50 * 1e6, 1), "bare_stub": round(stub_p50 * 1e6, 1),
                               "overhead": round((client_p50 - stub_p50) * 1e6, 1)},
        "settings": {"requests": args.requests, "concurrency": args.concurrency, "rounds": args.rounds},
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")
    return 0 if ratio >= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
