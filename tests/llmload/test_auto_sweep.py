"""The automatic sweep as a case setting (``mode: sweep``), run as a user runs it: the suite in a subprocess on the
simulator, the model served by the reference server through an InferenceService. The sweep finds the server's
knee (its max-throughput point within 10% of the capacity the server is configured for) and reports goodput
against the suite's SLOs; its figures and summary come from the one item's records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_topsail.tgis.latency import LatencyModel
from pytest_topsail.tgis.model_config import load_model_config
from pytest_topsail.tgis.sizing import active_params_billions
from pytest_topsail.tgis.tokenizer import tokenize

REPO = Path(__file__).resolve().parents[2]
MODEL = "ibm-granite/granite-3b-code-instruct"
BATCH = 8  # the server decodes at most this many requests at once
ITL_FACTOR = 4.0  # tokens 4x slower than the model's: the server's own timer overhead (~2 ms a token when this
# machine is loaded) stays a small part of each token
OUTPUT_TOKENS = (6, 7, 8, 9, 10)  # round robin: requests of different lengths do not end in lockstep bursts
PROMPT = " ".join(["serve"] * 24)


def capacity(input_tokens: int) -> float:
    """Requests/s of the reference server when its batch is always full: each slot serves a request in its prefill
    plus (output tokens - 1) inter-token latencies of a full batch (pytest_topsail/tgis/latency.py)."""
    model = LatencyModel.for_config(load_model_config({"max_batch_size": BATCH}, "test"), "a100",
                                    active_params_billions(MODEL))
    mean_tokens = sum(OUTPUT_TOKENS) / len(OUTPUT_TOKENS)
    itl = model.inter_token_seconds(BATCH) * ITL_FACTOR
    return BATCH / (model.prefill_seconds(input_tokens) + (mean_tokens - 1) * itl)


def run_suite(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "suites/llm_load",
               "-q", "--artifacts", str(tmp / "artifacts"), "--topsail-history", str(tmp / "history.sqlite"),
               "--var", "metrics.enabled=false", *args]  # the load's KPIs only (no wait for Prometheus' first scrapes)
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("ARTIFACT_DIR", None)
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def case_file(tmp: Path, **settings: object) -> Path:
    dataset = tmp / "fixed.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": PROMPT, "input_tokens": 24, "output_tokens": tokens}) + "\n"
                               for tokens in OUTPUT_TOKENS))
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump([{
        "name": "knee", "model": MODEL, "backend": "tgis", "streaming": True, "mode": "sweep", "sweep_rates": 2,
        "max_concurrency": 16, "duration_s": 5, "warmup_s": 0.5, "dataset": str(dataset),
        "server": {"max_batch_size": BATCH, "max_concurrent_requests": 64}, **settings}]))
    return path


def test_auto_sweep_finds_the_knee_and_reports_goodput(tmp_path: Path) -> None:
    result = run_suite(tmp_path, "--var", f"cases=[{case_file(tmp_path)}]",
                       "--var", "tests.llm_load.slo.ttft_ms=300",
                       "--var", f"tests.llm_load.itl_factor={ITL_FACTOR}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    [item] = [p for p in (tmp_path / "artifacts" / "llm_load").iterdir() if "__test_llm_load" in p.name]
    summaries = json.loads((item / "load" / "summary.json").read_text())
    assert [s["label"] for s in summaries[:2]] == ["concurrency=1", "concurrency=16"]
    assert [s["mode"] for s in summaries[2:]] == ["constant", "constant"]
    sync, peak = summaries[0]["requests_per_s"], summaries[1]["requests_per_s"]
    expected = capacity(len(tokenize(PROMPT)))
    assert peak == pytest.approx(expected, rel=0.10), (peak, expected)
    assert sync < summaries[2]["offered_rate"] < summaries[3]["offered_rate"] < peak
    # goodput against the SLO (TTFT <= 300 ms): one user meets it; of 16 users, 8 wait for a slot of the batch
    assert summaries[0]["slo"]["attainment"] > 0.9 and summaries[1]["slo"]["attainment"] < 0.5
    kpis = {k["name"]: k["value"] for k in json.loads((item / "kpis.json").read_text())}
    assert kpis["requests_per_s"] == pytest.approx(peak)  # the item's KPIs: its max-throughput point
    assert kpis["goodput"] == max(s["slo"]["goodput"] for s in summaries) > 0
    assert "good/s" in (item / "load" / "summary.txt").read_text()
    figures = tmp_path / "artifacts" / "llm_load" / "figures"
    [throughput] = [p for p in figures.iterdir() if p.name.endswith("knee_throughput.json")]
    drawn = json.loads(throughput.read_text())["data"]
    assert drawn[0]["x"] == sorted(drawn[0]["x"]) and len(drawn[0]["x"]) == 4  # every point, by completed rate
    assert drawn[2]["name"].startswith("goodput")
    assert "knee: concurrency=16:" in result.stdout + result.stderr  # each point of the sweep, in the terminal
    (item / "load" / "summary.json").unlink()
    replot = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                             f"--topsail-replot={tmp_path / 'artifacts'}", "--artifacts", str(tmp_path / "unused"),
                             "--topsail-history", str(tmp_path / "replot.sqlite")],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert replot.returncode == 0, replot.stdout[-3000:] + replot.stderr[-2000:]
    again = {k["name"]: k["value"] for k in json.loads((item / "kpis.json").read_text())}
    assert again["goodput"] == pytest.approx(kpis["goodput"]) and again["requests_per_s"] == pytest.approx(peak)


@pytest.mark.parametrize(("extra", "message"), [
    ({"concurrency": 4}, "mode sweep chooses its concurrency and rates itself"),
    ({"sweep_rates": -1}, "sweep_rates"),
])
def test_bad_sweep_settings_are_named_at_start_up(tmp_path: Path, extra: dict[str, object], message: str) -> None:
    result = run_suite(tmp_path, "--var", f"cases=[{case_file(tmp_path, **extra)}]", "--collect-only")
    assert result.returncode != 0
    assert message in result.stdout + result.stderr and "Traceback" not in result.stdout + result.stderr
