"""Benchmark of the reference server's OpenAI-compatible front as the simulated vLLM (not part of the test run).

    python benchmarks/vllm_serving.py [--concurrency 64] [--tokens 64] [--duration 4] [--rounds 3] [--output FILE]

The server (python -m pytest_topsail.tgis.server --zero-latency --http-port 0: no modelled prefill or decode delay,
so what is measured is the server's own cost) runs in its own process; this process streams ``/v1/completions``
with ``--concurrency`` users back to back for ``--duration`` s, each answer ``--tokens`` tokens (ignore_eos).
Figures (medians over rounds): streamed tokens per wall second, and per CPU second of the server process (from
/proc: steadier than the wall rate on a shared machine). Goal (issue 43): >= 2,000 streamed tokens/s per CPU core at
concurrency 64. ``--config-json`` passes server settings (e.g. '{"enable_prefix_caching": true}').
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).parent))
from tgis_server import cpu_seconds, start  # noqa: E402 (the sibling benchmark's helpers)

MODEL = "bigscience/bloom-560m"
PROMPT = "Benchmark prompt: how fast does the simulated vLLM stream its tokens to many users at once?"


async def stream_tokens(url: str, concurrency: int, tokens: int, duration: float) -> int:
    """Tokens streamed by ``concurrency`` users sending back to back for ``duration`` seconds."""
    body = json.dumps({"model": MODEL, "prompt": PROMPT, "max_tokens": tokens, "ignore_eos": True,
                       "stream": True}).encode()
    received = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        end = time.monotonic() + duration

        async def user() -> None:
            nonlocal received
            while time.monotonic() < end:
                async with session.post(f"{url}/v1/completions", data=body,
                                        headers={"Content-Type": "application/json"}) as response:
                    async for line in response.content:
                        if line.startswith(b"data: {"):
                            received += 1

        await asyncio.gather(*(user() for _ in range(concurrency)))
    return received


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--config-json", default="{}")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    # the server prints its HTTP address first, then its gRPC one
    server, http = start([sys.executable, "-m", "pytest_topsail.tgis.server", "--model", MODEL, "--port", "0",
                          "--http-port", "0", "--zero-latency", "--config-json", args.config_json])
    try:
        assert server.stdout is not None
        server.stdout.readline()
        url = f"http://{http}"
        wall: list[float] = []
        per_cpu: list[float] = []
        for _ in range(args.rounds):
            cpu_before, began = cpu_seconds(server.pid), time.perf_counter()
            received = asyncio.run(stream_tokens(url, args.concurrency, args.tokens, args.duration))
            wall.append(received / (time.perf_counter() - began))
            per_cpu.append(received / max(cpu_seconds(server.pid) - cpu_before, 1e-3))
    finally:
        server.terminate()
        server.wait(10)
    result: dict[str, Any] = {
        "streamed_tokens_per_s": round(statistics.median(wall)),
        "streamed_tokens_per_server_cpu_s": round(statistics.median(per_cpu)), "goal": ">= 2000 per CPU second",
        "rounds": {"wall": [round(r) for r in wall], "per_cpu": [round(r) for r in per_cpu]},
        "settings": {"concurrency": args.concurrency, "tokens": args.tokens, "duration": args.duration,
                     "config": json.loads(args.config_json)},
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")
    return 0 if result["streamed_tokens_per_server_cpu_s"] >= 2000 else 1


if __name__ == "__main__":
    sys.exit(main())
