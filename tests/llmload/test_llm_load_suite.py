"""The llm_load suite run as a user runs it (`pytest -m llm_load --preset ...` in a subprocess, on the simulator):
artifacts, KPIs and labels, sweep figures, replot, and regression verdicts across runs in one history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.xdist_group("llm_load_suite")  # -n N: the module-scoped smoke run once

REPO = Path(__file__).resolve().parents[2]
SMOKE_ITEMS = 6  # cases/llm_load/smoke.yaml: openai x (completions, chat) x 2 points, tgis x 2 points


def run_pytest(tmp: Path, artifacts: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--artifacts", str(tmp / artifacts),
               "--topsail-history", str(tmp / "history.sqlite"), *args]
    env = {**os.environ}
    env.pop("ARTIFACT_DIR", None)
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def item_dirs(artifacts: Path) -> list[Path]:
    return sorted(p for p in (artifacts / "llm_load").iterdir() if p.is_dir() and "__" in p.name)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("smoke")
    return run_pytest(tmp, "artifacts", "-m", "llm_load", "--preset", "smoke", "-q"), tmp / "artifacts"


def test_smoke_covers_both_backends_with_kpis_labels_and_sweep_figures(smoke_run) -> None:
    result, artifacts = smoke_run
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert f"{SMOKE_ITEMS} passed" in result.stdout
    dirs = item_dirs(artifacts)
    assert [d.name.split("__", 1)[1] for d in dirs][-2:] == [
        "test_llm_load_tgis-concurrency=1", "test_llm_load_tgis-concurrency=8"]
    for directory in dirs:
        summary = json.loads((directory / "load" / "summary.json").read_text())[0]
        assert summary["succeeded"] > 0 and summary["failures"] == {}
        kpis = {k["name"]: k for k in json.loads((directory / "kpis.json").read_text())}
        assert kpis["throughput"]["value"] > 0 and kpis["ttft_p99_ms"]["value"] > 0
        assert kpis["itl_median_ms"]["ignored_for_regression"] is False
        assert kpis["itl_p90_ms"]["ignored_for_regression"] is True
        labels = kpis["throughput"]["labels"]
        assert labels["virtual_users"] == summary["concurrency"] and labels["deployment_mode"] == "RawDeployment"
        assert labels["accelerator"].startswith("NVIDIA-A100") and labels["streaming"] is True
    figures = sorted(p.name for p in (artifacts / "llm_load" / "figures").iterdir()  # the suite figures
                     if "_metrics_" not in p.name)  # GPU metrics over time: docs/metrics.md
    for sweep in ("openai_api_completions", "openai_api_chat", "tgis"):
        assert [name for name in figures if name[3:].startswith(sweep + "_")] != [], (sweep, figures)
    assert len(figures) == 3 * 5
    throughput = next(name for name in figures if name.endswith("tgis_throughput.json"))
    drawn = json.loads((artifacts / "llm_load" / "figures" / throughput).read_text())
    assert drawn["data"][0]["x"] == [1, 8]  # the sweep in the order of its concurrency


def test_replot_recomputes_the_kpis_from_the_records(smoke_run, tmp_path: Path) -> None:
    result, artifacts = smoke_run
    assert result.returncode == 0
    first = item_dirs(artifacts)[0]
    saved = {k["name"]: k["value"] for k in json.loads((first / "kpis.json").read_text())}
    (first / "load" / "summary.json").unlink()
    replot = run_pytest(tmp_path, "unused", f"--topsail-replot={artifacts}")
    assert replot.returncode == 0, replot.stdout[-3000:] + replot.stderr[-2000:]
    assert json.loads((first / "load" / "summary.json").read_text())[0]["succeeded"] > 0
    drawn = [p for p in (artifacts / "llm_load" / "figures").iterdir() if "_metrics_" not in p.name]
    assert len(drawn) == 3 * 5  # the sweep figures drawn again
    again = {k["name"]: k["value"] for k in json.loads((first / "kpis.json").read_text())}
    assert again["ttft_median_ms"] == pytest.approx(saved["ttft_median_ms"])
    assert again["throughput"] == pytest.approx(saved["throughput"])


SLOWER_DECODE = 4.0  # the injected change: the server's inter-token latency x4 (tests.llm_load.itl_factor)


def test_slower_decode_regresses_itl_and_tpot_not_ttft(tmp_path: Path) -> None:
    """Five normal runs, then one with the server's inter-token latency x4, in one history.
    The server runs in-process here to keep the six runs short (the InferenceService path is the smoke test's).

    Detectable under load by construction: every prompt asks for 12 tokens, so each request of a run has the same
    TPOT (the median is not a mix of short and long answers) and the 11 gaps of a request dilute one stalled
    wake-up; the change (+3 x the ~25 ms ITL of a 3B model on an A100 profile: ~97 ms) is 13 to 70 times the
    run-to-run stddev of the TPOT medians (1-5 ms at a load average of 12-13 on 2 cores, 3 tests: p <= 0.0002),
    where the t-test of one run against 5 (p < 0.001) needs ~10 times; the slow-itl preset's x2 on mixed answer
    lengths was at that edge and missed TPOT 2 runs in 3 (load 10-14).

    Not TTFT, by construction too: the prompts are 1,000 tokens, a modelled prefill of ~170 ms. The slower run's
    users are idle most of the time (a request every 1.3 s instead of every 0.45 s), and each hop of an idle
    process's request (the client's send, the server's read, its prefill timer, the client's read) waits for a CPU
    on a busy machine: with 40-token prompts (a prefill of 38 ms) its TTFT median came out +35% and more at load 14
    (6 xdist workers beside 8 busy processes), and 13-24% above on an idle machine."""
    dataset = tmp_path / "twelve_tokens.jsonl"
    words = " ".join(f"w{index % 50}" for index in range(1000))  # a 1,000-token prompt: a prefill of ~170 ms
    dataset.write_text("".join(json.dumps({"prompt": f"prompt {n}: {words}", "input_tokens": 1000,
                                           "output_tokens": 12}) + "\n" for n in range(8)))
    case_file = tmp_path / "regress.yaml"
    case_file.write_text(yaml.safe_dump([{
        "name": "regress", "model": "ibm-granite/granite-3b-code-base", "backend": "tgis", "streaming": True,
        "concurrency": 4, "duration_s": 2, "warmup_s": 0.3, "dataset": str(dataset),
        "server": {"max_batch_size": 8}}]))
    options = ["suites/llm_load", "-q", "--var", f"cases=[{case_file}]", "--var", "tests.llm_load.serving=in-process",
               "--var", "metrics.enabled=false",  # the load's own KPIs are judged (no ~6 s wait for the first scrapes)
               # the idle process's wake-ups (the docstring) shift TTFT by a few ms to 15 ms: judged with a floor of
               # 35% of the ~170 ms prefill; ITL and TPOT change by +300%
               "--var", "regression.kpis={\"tt_ack_*_ms\": {min_change: 5}, ttft_median_ms: {min_magnitude: 0.35}}"]
    untrusted = set()  # the validity audit's reasons: a point the product itself says not to judge
    for run in range(6):
        slow = ["--var", f"tests.llm_load.itl_factor={SLOWER_DECODE}"] if run == 5 else []
        result = run_pytest(tmp_path, f"run{run}", *options, *slow)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        verdicts = json.loads((tmp_path / f"run{run}" / "verdicts.json").read_text())
        regressions = sorted(v["kpi"] for v in verdicts if v["status"] == "regression")
        untrusted |= {f"run {run}: {v['explanation']}" for v in verdicts
                      if v["kpi"] == "tpot_median_ms" and str(v.get("explanation") or "").startswith("not judged")}
        if run < 5:
            judged = [v["kpi"] for v in verdicts if v["status"] in ("regression", "improvement")]
            assert judged == [], f"run {run}: {judged}"
    decode = {v["kpi"]: f"{v['status']}: {v.get('explanation')}" for v in verdicts
              if v["kpi"] in ("itl_median_ms", "tpot_median_ms", "ttft_median_ms")}
    if untrusted and not {"itl_median_ms", "tpot_median_ms"} <= set(regressions):
        # on a machine loaded enough that the audit kept runs out of the judgement (client saturated, no steady
        # state), there is nothing to judge against: the product says so, rightly
        pytest.skip(f"the validity audit kept points out of the judgement: {'; '.join(sorted(untrusted))}")
    assert {"itl_median_ms", "tpot_median_ms"} <= set(regressions), decode
    ttft = [name for name in regressions if name.startswith("ttft_")]
    saturated = [point["client"]["warning"] for summary in (tmp_path / "run5").rglob("load/summary.json")
                 for point in json.loads(summary.read_text()) if (point.get("client") or {}).get("warning")]
    if ttft and saturated:
        # the product said the client, not the server, made these figures (its event loop stalled: 162 ms p99 and
        # request acks of 180-400 ms seen at load 14), so the TTFT side cannot be judged on this machine now
        pytest.skip(f"TTFT of the slower run not judged: {'; '.join(saturated)}")
    assert not ttft, (regressions, decode)
