"""The real guidellm against the simulated vLLM, beside our llm_load client and the server's own /metrics (issue 43,
"real counterparts"; not part of the test run).

    python benchmarks/guidellm_vllm.py [--venv /tmp/guidellm-venv] [--concurrency 4] [--requests 200]
        [--prompt-tokens 512] [--output-tokens 64] [--prefix-tokens 448] [--tolerance 0.10] [--output FILE]

What it does, as a developer would by hand:
1. guidellm (``--guidellm``, 0.8.1) in its own venv (``--venv``; created when it has no guidellm, torch installed
   first as ``--torch``, the CPU build, so that guidellm does not pull a CUDA one), never in this interpreter.
2. A local tokenizer for guidellm's synthetic data (it needs one and cannot download one): a Hugging Face
   ``tokenizers`` WordLevel file whose pieces are our toy tokenizer's (tgis/tokenizer.py) over faker's words, so a
   prompt of N guidellm tokens is N tokens for the server too.
3. Two datasets, each on a fresh server (``python -m pytest_topsail.tgis.server --http-port``, prefix caching on,
   ``--model``), guidellm unchanged (``guidellm run``, its OpenAI HTTP backend, chat completions, streamed,
   ``concurrent`` profile at ``--concurrency`` for ``--requests`` requests): ``synthetic`` (``synthetic_text``
   prompt_tokens / output_tokens) and ``prefix`` (the same with ``prefix_tokens`` of one shared prefix, which
   guidellm sends as the system message, and a ``prompt_tokens - prefix_tokens`` suffix). The server's /metrics are
   scraped before and after.
4. The same load through our llm_load client (run_load_test, OpenAI chat backend, closed loop, the same request
   budget) replaying the very prompts guidellm sent (its JSON output keeps each request's body), on another fresh
   server.
5. A table: TTFT, inter-token latency, output tokens/s and prompt/output token counts from guidellm, llm_load and
   the server (vLLM's histograms: means from _sum/_count, medians from the buckets as histogram_quantile does), and
   for the prefix dataset the server's prefix-cache hit rate (hits / queries) beside the share of prompt tokens the
   shared prefix makes and guidellm's own cached_tokens share (from the usage the server reports). Exit 1 when
   guidellm fails, or a figure is off beyond ``--tolerance`` (TTFT, ITL, throughput: guidellm vs llm_load; each
   client's mean TTFT and ITL vs the server's; on TTFT ``--client-overhead-ms`` more, for a client's own HTTP,
   parsing and scheduling time, which the server's clock does not see; token counts equal), or the hit rate is more
   than 5 points from the shared share (or from a client's cached_tokens share).
6. guidellm's time limit (``--constraint kind=max_duration``, ``--abort-after-s``) on answers that outlast it: the
   requests it cancels must be the server's aborted ones (``finished_reason="abort"``), the others its finished
   ones, with no traceback in the server's log.
What guidellm needed from the server (tgis/openai_http.py, tests/llmload/test_guidellm_requests.py): chat message
content as a list of text parts (every request was refused with 400 before) and ``max_completion_tokens``.

Names: guidellm's "ITL" is our TPOT (per request: (e2e - TTFT) / (output tokens - 1)), its "TTFT" ours; the
server's ITL is vLLM's inter_token_latency_seconds (every token gap).

Measured 2026-11-29 with the defaults (2 shared cores, load average ~2; bloom-560m, A100 latency profile,
max_batch_size 8, prefix caching on; guidellm 0.8.1 concurrent@4, 200 requests of 512 prompt tokens (518 as the
server counts the chat layout) and 64 output tokens; prefix: 448 of them one shared prefix; ~110 s in all), two runs
(a / b). ms; "server" = the server of that client's run, means from the histograms' sums (bucket medians too coarse):
    synthetic  TTFT median  guidellm 27.14 / 26.54, llm_load 25.99 / 25.99 (+4.4% / +2.1%)
               TTFT mean    guidellm 28.28 / 27.75, llm_load 26.80 / 27.36; server 24.84 / 24.70 and 24.86 / 25.34
               ITL          medians 6.16 both clients; means 6.16-6.17, server 6.15-6.16
               tokens/s     guidellm 607.7 / 608.5, llm_load 616.8 / 616.6 (-1.5% / -1.3%)
    prefix     TTFT median  guidellm 13.25 / 12.11, llm_load 12.03 / 12.00 (+10.2% / +1.0%)
               TTFT mean    guidellm 14.51 / 12.89, llm_load 12.86 / 12.82; server 11.07 / 10.96 and 11.10 / 11.21
               ITL          medians 6.15-6.17; means 6.15-6.16, server 6.15-6.16
               tokens/s     guidellm 628.9 / 632.9, llm_load 638.2 / 638.3 (-1.4% / -0.9%)
               prefix-cache hit rate 84.3% (all four runs) vs shared share 86.4% (-2.1 pt: whole 16-token blocks
               only, and the 4 first requests compute the prefix together); guidellm's and llm_load's cached_tokens
               share 84.3% (= the server's)
    both       token counts (103,600 / 104,200 prompt, 12,800 output, 200 requests) equal the server's counters
    abort      (b) guidellm's 3 s limit cancelled 4 requests; the server: 4 aborted, 0 finished, no traceback
A client's mean TTFT exceeds the server's by 1.8-3.4 ms (guidellm's the most; its own warning says its data
generation delayed requests by 2-6% of TTFT), hence ``--client-overhead-ms`` (3) beside the 10%. At concurrency 8
(160 requests, load average ~3.7) the script exits 1: guidellm's mean TTFT is 6.1 ms (synthetic: 31.5 vs 25.4) and
10.0 ms (prefix: 21.9 vs 11.9, its median 15.8) over the server's, llm_load's 2.9 and 2.6 ms; its TTFT median 12-29%
over llm_load's, while ITL (7.64 vs 7.68), tokens/s (-1.7%, -3.2%), token counts and hit rates (82.2% / 81.7%)
still agree: guidellm's own client time grows with its concurrency on 2 shared cores, the server's does not. Part of
it may be a TCP connection per request (not measured apart): guidellm stops reading a stream at ``[DONE]``, before
the chunked body's end, so httpx closes the connection (80 requests: 76 closed by guidellm; llm_load: 8
connections), and each new one is accepted by the server's busy event loop before the server's TTFT clock starts.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from pytest_topsail.llmload.backends.openai_http import OpenAIBackend
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.run import load_directory, run_load_test
from pytest_topsail.llmload.server_metrics import Snapshot, buckets_delta, delta, histogram_quantile, scrape
from pytest_topsail.tgis.tokenizer import tokenize
from pytest_topsail.waiting import poll

INSTALL_TIMEOUT_S = 1800
SERVER_START_TIMEOUT_S = 60
BLOCK_SIZE = 16

# Run in the guidellm venv (faker and tokenizers are guidellm's dependencies): writes tokenizer.json and
# tokenizer_config.json into argv[1]. Pieces as tgis/tokenizer.py cuts them: a space joins the next word or
# punctuation mark as "▁", a newline is a piece, words longer than 7 characters are cut into pieces of 5.
TOKENIZER_BUILDER = r'''
import json, string, sys
from pathlib import Path
from faker.providers.lorem.en_US import Provider
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

MARK = "\u2581"
vocab = {"[UNK]": 0}
def add(piece):
    vocab.setdefault(piece, len(vocab))
for word in Provider.word_list:
    for form in {word, word.capitalize(), word.upper()}:
        pieces = [form] if len(form) <= 7 else [form[i:i + 5] for i in range(0, len(form), 5)]
        add(MARK + pieces[0]); add(pieces[0])
        for piece in pieces[1:]:
            add(piece)
for mark in string.punctuation:
    add(mark); add(MARK + mark)
for number in range(200000):  # guidellm starts each prompt with "<iteration> <sample> m<turn> "
    add(MARK + str(number))
for turn in range(10):
    add(MARK + f"m{turn}")
add(MARK); add("\n")
tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Metaspace(replacement=MARK, prepend_scheme="always", split=False),
    pre_tokenizers.Split(Regex(MARK + r"?(?:\b\w{1,7}\b|\w{1,5}|[^\w\s" + MARK + r"])|" + MARK + r"|\s"),
                         behavior="isolated")])
tokenizer.decoder = decoders.Metaspace(replacement=MARK, prepend_scheme="always", split=False)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
tokenizer.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps(
    {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1000000}))
'''


def run(command: list[str], timeout: float, what: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(command, text=True, capture_output=True, timeout=timeout, check=False, **kwargs)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{what}: no result after {timeout:.0f} s: {' '.join(command)}") from None
    if done.returncode != 0:
        raise SystemExit(f"{what} failed (exit {done.returncode}): {' '.join(command)}\n"
                         f"{(done.stdout + done.stderr)[-3000:]}")
    return done


def ensure_guidellm(venv: Path, version: str, torch: str) -> Path:
    """The venv's guidellm executable, installing it (torch first) when missing."""
    guidellm = venv / "bin" / "guidellm"
    if guidellm.exists():
        return guidellm
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    if not (venv / "bin" / "python").exists():
        run([sys.executable, "-m", "venv", str(venv)], 300, "creating the guidellm venv")
    if torch:
        run([*pip, torch], INSTALL_TIMEOUT_S, f"installing {torch} into {venv}")
    run([*pip, f"guidellm=={version}"], INSTALL_TIMEOUT_S, f"installing guidellm {version} into {venv}")
    return guidellm


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def server(model: str, config: dict[str, Any], log: Path) -> Iterator[str]:
    """A fresh simulated vLLM (its own process); yields its HTTP base URL."""
    port = free_port()
    with log.open("w") as output:
        process = subprocess.Popen([sys.executable, "-m", "pytest_topsail.tgis.server", "--model", model,
                                    "--port", "0", "--http-port", str(port), "--config-json", json.dumps(config)],
                                   stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        poll(lambda: process.poll() is None and healthy(url), lambda up: up or process.poll() is not None,
             what=f"the simulated vLLM on {url}", timeout=SERVER_START_TIMEOUT_S)
        if process.poll() is not None:
            raise SystemExit(f"the server exited {process.returncode}: {log.read_text()[-2000:]}")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def healthy(url: str) -> bool:
    try:
        scrape(url, timeout_s=2)
        return True
    except Exception:  # noqa: BLE001 (not up yet)
        return False


def server_figures(first: Snapshot, last: Snapshot) -> dict[str, Any]:
    def mean_ms(histogram: str) -> float | None:
        count = delta(first, last, f"vllm:{histogram}_count")
        return delta(first, last, f"vllm:{histogram}_sum") / count * 1000 if count else None

    def median_ms(histogram: str) -> float | None:
        value = histogram_quantile(0.5, buckets_delta(first, last, f"vllm:{histogram}_bucket"))
        return None if value is None else value * 1000

    queries = delta(first, last, "vllm:prefix_cache_queries_total")
    return {"ttft_mean": mean_ms("time_to_first_token_seconds"),
            "ttft_median": median_ms("time_to_first_token_seconds"),
            "itl_mean": mean_ms("inter_token_latency_seconds"),
            "itl_median": median_ms("inter_token_latency_seconds"),
            "requests": delta(first, last, "vllm:e2e_request_latency_seconds_count"),
            "prompt_tokens": delta(first, last, "vllm:prompt_tokens_total"),
            "output_tokens": delta(first, last, "vllm:generation_tokens_total"),
            "hit_rate": delta(first, last, "vllm:prefix_cache_hits_total") / queries if queries else None}


def run_guidellm(guidellm: Path, url: str, model: str, tokenizer: Path, data: str, args: argparse.Namespace,
                 out: Path, constraint: str | None = None) -> dict[str, Any]:
    """guidellm's benchmark of ``data``; by default ``--requests`` requests, all of which must succeed; with another
    ``constraint`` (a time limit) the requests it cancels are its ``incomplete`` ones."""
    command = [str(guidellm), "run", "--backend", f"kind=openai_http,target={url},model={model}",
               "--profile", f"kind=concurrent,streams={args.concurrency}",
               "--constraint", constraint or f"kind=max_requests,count={args.requests}",
               "--tokenizer", f"kind=hf_auto,model={tokenizer}", "--data", data,
               "--output", f"kind=json,path={out}", "--disable-progress"]
    done = run(command, args.timeout, "guidellm")
    (out.parent / f"{out.stem}.log").write_text(done.stdout + done.stderr)
    report = json.loads(out.read_text())
    benchmark = report["benchmarks"][0]
    requests = benchmark["requests"]
    if requests["errored"] or (requests["incomplete"] and constraint is None):
        first = (requests["errored"] or requests["incomplete"])[0]["info"].get("error")
        raise SystemExit(f"guidellm: {len(requests['errored'])} errored, {len(requests['incomplete'])} incomplete "
                         f"requests (first: {first})")
    return benchmark


def guidellm_figures(benchmark: dict[str, Any]) -> dict[str, Any]:
    metrics, done = benchmark["metrics"], benchmark["requests"]["successful"]

    def stat(name: str, which: str) -> float:
        return float(metrics[name]["successful"][which])

    prompt = sum(r["prompt_tokens"] for r in done)
    return {"ttft_mean": stat("time_to_first_token_ms", "mean"),
            "ttft_median": stat("time_to_first_token_ms", "median"),
            "itl_mean": stat("inter_token_latency_ms", "mean"), "itl_median": stat("inter_token_latency_ms", "median"),
            "throughput": stat("output_tokens_per_second", "mean"), "requests": len(done),
            "prompt_tokens": prompt, "output_tokens": sum(r["output_tokens"] for r in done),
            "cached_share": sum(r.get("cached_tokens") or 0 for r in done) / prompt}


def sent_prompts(benchmark: dict[str, Any]) -> list[Prompt]:
    """The prompts guidellm sent, in the order it sent them (its chat bodies: a system prefix, a user text part)."""
    prompts = []
    for request in sorted(benchmark["requests"]["successful"], key=lambda r: r["request_start_time"]):
        body = json.loads(request["request_args"])["body"]
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        text = "\n".join(part["text"] for part in user) if isinstance(user, list) else user
        prompts.append(Prompt(text=text, system_prompt=system, input_tokens=request["prompt_tokens"],
                              output_tokens=body["max_completion_tokens"]))
    return prompts


def run_llm_load(url: str, model: str, prompts: list[Prompt], args: argparse.Namespace,
                 directory: Path) -> dict[str, Any]:
    backend = OpenAIBackend(url=url, model=model, api="chat", stream=True)
    point = LoadPoint(concurrency=args.concurrency, requests=len(prompts), timeout_s=args.timeout)
    summary = run_load_test(backend, prompts, [point], directory)[0]
    stats = summary["stats"]
    _points, by_point = load_directory(directory)
    done = [r for r in by_point[0] if r["status"] == "ok"]
    return {"ttft_mean": stats["ttft_ms"]["mean"], "ttft_median": stats["ttft_ms"]["median"],
            "itl_mean": stats["tpot_ms"]["mean"], "itl_median": stats["tpot_ms"]["median"],
            "throughput": summary["output_tokens_per_s"], "requests": len(done),
            "prompt_tokens": sum(r["input_tokens"] for r in done),
            "output_tokens": sum(r["output_tokens"] for r in done),
            "cached_share": sum(r.get("cached_tokens") or 0 for r in done) / sum(r["input_tokens"] for r in done)}


def check_aborts(guidellm: Path, tokenizer: Path, config: dict[str, Any], args: argparse.Namespace, work: Path,
                 verdicts: Verdicts) -> dict[str, Any]:
    """guidellm's time limit cancels the requests in flight: the server counts each as an aborted request
    (finished_reason="abort", as vLLM does), its log without a traceback, and nothing is left running."""
    log = work / "abort-server.log"
    with server(args.model, config, log) as url:
        data = f"kind=synthetic_text,prompt_tokens=128,output_tokens={args.abort_output_tokens}"
        benchmark = run_guidellm(guidellm, url, args.model, tokenizer, data, args, work / "abort.json",
                                 constraint=f"kind=max_duration,seconds={args.abort_after_s}")
        poll(lambda: scrape(url), lambda snapshot: snapshot.get("vllm:num_requests_running") == 0,
             what="the server's running requests to end after guidellm's time limit", timeout=30)
        ended = finished_reasons(url)
    figures = {"guidellm_cancelled": len(benchmark["requests"]["incomplete"]),
               "guidellm_completed": len(benchmark["requests"]["successful"]),
               "server_aborted": ended.get("abort", 0.0), "server_length": ended.get("length", 0.0),
               "tracebacks": log.read_text().count("Traceback")}
    verdicts.equal("abort: guidellm's cancelled vs the server's aborted", figures["guidellm_cancelled"],
                   figures["server_aborted"])
    verdicts.equal("abort: guidellm's completed vs the server's finished", figures["guidellm_completed"],
                   figures["server_length"])
    verdicts.equal("abort: tracebacks in the server's log vs none", figures["tracebacks"], 0)
    if not figures["guidellm_cancelled"]:
        verdicts.rows.append(("abort: guidellm cancelled requests at its time limit", "0", "", False))
    return figures


def finished_reasons(url: str) -> dict[str, float]:
    """vllm:request_success_total per finished_reason (a fresh server: the counts since it started)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {sample.labels["finished_reason"]: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "vllm:request_success_total"}


def shared_share(prompts: list[Prompt]) -> float:
    """The share of the prompt tokens (as the server counts them) that the shared system prefix makes, in the
    server's chat layout ("system: <prefix>" first)."""
    shared = sum(len(tokenize(f"system: {p.system_prompt}")) for p in prompts if p.system_prompt)
    return shared / sum(p.input_tokens for p in prompts)


class Verdicts:
    """Each comparison's row of the table, and whether it is within its tolerance."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, bool]] = []

    def close(self, what: str, ours: float, other: float, tolerance: float, slack: float = 0.0) -> None:
        ok = abs(ours - other) <= tolerance * abs(other) + slack
        self.rows.append((what, f"{ours:.2f} vs {other:.2f}", f"{(ours - other) / other:+.1%}" if other else "-", ok))

    def points(self, what: str, share: float, other: float, points: float = 0.05) -> None:
        self.rows.append((what, f"{share:.1%} vs {other:.1%}", f"{(share - other) * 100:+.1f} pt",
                          abs(share - other) <= points))

    def equal(self, what: str, ours: float, other: float) -> None:
        self.rows.append((what, f"{ours:.0f} vs {other:.0f}", "", ours == other))

    def print(self) -> bool:
        width = max(len(row[0]) for row in self.rows)
        for what, values, diff, ok in self.rows:
            print(f"  {what:<{width}}  {values:>22}  {diff:>8}  {'ok' if ok else 'MISMATCH'}")
        return all(row[3] for row in self.rows)


def compare(name: str, guide: dict[str, Any], ours: dict[str, Any], servers: dict[str, dict[str, Any]],
            args: argparse.Namespace, verdicts: Verdicts) -> None:
    tol, slack = args.tolerance, args.client_overhead_ms
    for key, label, allowance in (("ttft_median", "TTFT median ms", slack), ("itl_median", "ITL median ms", 0.0),
                                  ("throughput", "output tokens/s", 0.0)):
        verdicts.close(f"{name}: {label}, guidellm vs llm_load", guide[key], ours[key], tol, allowance)
    for client, figures in (("guidellm", guide), ("llm_load", ours)):
        server = servers[client]
        verdicts.close(f"{name}: TTFT mean ms, {client} vs its server", figures["ttft_mean"], server["ttft_mean"],
                       tol, slack)
        verdicts.close(f"{name}: ITL mean ms, {client} vs its server", figures["itl_mean"], server["itl_mean"], tol)
        for key in ("requests", "prompt_tokens", "output_tokens"):
            verdicts.equal(f"{name}: {key}, {client} vs its server", figures[key], server[key])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/guidellm-venv"))
    parser.add_argument("--guidellm", default="0.8.1", help="the guidellm release to install")
    parser.add_argument("--torch", default="torch==2.13.0", help="installed first ('' for none)")
    parser.add_argument("--model", default="bigscience/bloom-560m")
    parser.add_argument("--max-batch-size", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--prefix-tokens", type=int, default=448, help="of --prompt-tokens, shared (prefix dataset)")
    parser.add_argument("--tolerance", type=float, default=0.10)
    parser.add_argument("--client-overhead-ms", type=float, default=3.0,
                        help="allowed beside --tolerance on TTFT between the clients and against the server's: "
                             "a client's own HTTP, parsing and scheduling time")
    parser.add_argument("--abort-after-s", type=float, default=3.0, help="guidellm's time limit (abort check)")
    parser.add_argument("--abort-output-tokens", type=int, default=1500, help="answers outlasting that limit")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for each guidellm run and load point")
    parser.add_argument("--work", type=Path, help="keep guidellm's and llm_load's outputs here (else a temp dir)")
    parser.add_argument("--output", type=Path, help="write the figures as JSON")
    args = parser.parse_args()
    if not 0 < args.prefix_tokens < args.prompt_tokens:
        parser.error("--prefix-tokens must be between 0 and --prompt-tokens")
    guidellm = ensure_guidellm(args.venv, args.guidellm, args.torch)
    work = args.work or Path(tempfile.mkdtemp(prefix="guidellm-vllm-"))
    work.mkdir(parents=True, exist_ok=True)
    tokenizer = work / "tokenizer"
    run([str(args.venv / "bin" / "python"), "-c", TOKENIZER_BUILDER, str(tokenizer)], 300, "building the tokenizer")
    config = {"enable_prefix_caching": True, "max_batch_size": args.max_batch_size}
    suffix = args.prompt_tokens - args.prefix_tokens
    datasets = {
        "synthetic": f"kind=synthetic_text,prompt_tokens={args.prompt_tokens},output_tokens={args.output_tokens}",
        "prefix": f"kind=synthetic_text,prompt_tokens={suffix},output_tokens={args.output_tokens},"
                  f"prefix_tokens={args.prefix_tokens},prefix_count=1",
    }
    verdicts, figures = Verdicts(), {}
    for name, data in datasets.items():
        servers = {}
        with server(args.model, config, work / f"{name}-guidellm-server.log") as url:
            first = scrape(url)
            benchmark = run_guidellm(guidellm, url, args.model, tokenizer, data, args, work / f"{name}.json")
            servers["guidellm"] = server_figures(first, scrape(url))
        guide, prompts = guidellm_figures(benchmark), sent_prompts(benchmark)
        with server(args.model, config, work / f"{name}-llm_load-server.log") as url:
            first = scrape(url)
            ours = run_llm_load(url, args.model, prompts, args, work / f"{name}-llm_load")
            servers["llm_load"] = server_figures(first, scrape(url))
        compare(name, guide, ours, servers, args, verdicts)
        if name == "prefix":
            share = shared_share(prompts)
            for client, client_figures in (("guidellm", guide), ("llm_load", ours)):
                verdicts.points(f"prefix: server hit rate ({client}) vs shared share", servers[client]["hit_rate"],
                                share)
                verdicts.points(f"prefix: {client}'s cached share vs server hit rate", client_figures["cached_share"],
                                servers[client]["hit_rate"])
        figures[name] = {"guidellm": guide, "llm_load": ours, "server": servers,
                         **({"shared_share": shared_share(prompts)} if name == "prefix" else {})}
    figures["abort"] = check_aborts(guidellm, tokenizer, config, args, work, verdicts)
    print_figures(figures)
    print("comparisons (first vs second):")
    ok = verdicts.print()
    result = {"date": time.strftime("%Y-%m-%d"), "settings": {k: str(v) for k, v in vars(args).items()},
              "figures": figures, "ok": ok}
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(f"outputs in {work}; {'all within tolerance' if ok else 'MISMATCH beyond tolerance'}")
    return 0 if ok else 1


def print_figures(figures: dict[str, Any]) -> None:
    keys = ("ttft_median", "ttft_mean", "itl_median", "itl_mean", "throughput", "requests", "prompt_tokens",
            "output_tokens", "hit_rate")
    print(f"{'dataset / figure':<24} {'guidellm':>10} {'llm_load':>10} {'server(g)':>10} {'server(l)':>10}")
    for name, each in figures.items():
        if name == "abort":
            print("abort " + ", ".join(f"{key} {value:g}" for key, value in each.items()))
            continue
        for key in keys:
            cells = [each["guidellm"].get(key), each["llm_load"].get(key), each["server"]["guidellm"].get(key),
                     each["server"]["llm_load"].get(key)]
            if key == "hit_rate" and name != "prefix":
                continue
            print(f"{name + ' ' + key:<24} " + " ".join(f"{c:>10.2f}" if c is not None else f"{'-':>10}"
                                                          for c in cells))
        if "shared_share" in each:
            print(f"{'prefix shared share':<24} {each['shared_share']:>10.3f}")


if __name__ == "__main__":
    sys.exit(main())
