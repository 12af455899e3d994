"""LLM serving load generator: closed loop at constant concurrency, open loop at a constant or Poisson rate, sweeps.

- dataset.py: prompts with input/output token lengths (JSON lines; llm-load-test's format accepted)
- records.py: one record per request, saved as JSON lines (the raw data every metric is computed from)
- generator.py: the asyncio load loops and sweeps
- backends/: the Backend protocol, OpenAI-compatible HTTP (aiohttp) and TGIS gRPC (grpc.aio)
- metrics.py: TTFT, ITL, TPOT, latency, throughput, offered vs achieved rate, failures (docs/llm-load.md)
- plots.py: the figures of a sweep
"""
