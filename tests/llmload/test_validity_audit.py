"""The validity audit of a load point (pytest_topsail/llmload/audit.py): a point that says it cannot be trusted has
its client-measured KPIs ``ignored`` with the reason, never judged, and kept out of later baselines; the others are
judged. The end-to-end test starves one point's client for real: a CPU hog thread beside it (cpu_hog_plugin.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

from pytest_topsail.llmload import audit_point
from pytest_topsail.regression import RegressionSettings, judge
from pytest_topsail.verdict_states import State

REPO = Path(__file__).resolve().parents[2]
LATENCIES = ("ttft_median_ms", "tpot_median_ms", "itl_median_ms", "e2e_median_ms")


def summary(**fields: Any) -> dict[str, Any]:
    return {"client": {"warning": None}, "concurrency": 4, "stats": {"ttft_ms": {"mean": 50.0}},
            "window_halves": [100, 100], **fields}


def test_a_sound_point_passes_the_audit() -> None:
    assert audit_point(summary(), {"ttft_mean_ms": 47.0}) == []
    assert audit_point(summary(window_halves=[12, 30])) == []  # 42 requests: chance explains 12 vs 30
    assert audit_point(summary(window_halves=[3, 9])) == []  # too few requests to speak of a trend


def test_each_reason_is_named() -> None:
    saturated = audit_point(summary(client={"warning": "load client saturated: its CPU was 99% of a core"}))
    assert saturated == ["load client saturated: its CPU was 99% of a core"]
    [ramp] = audit_point(summary(window_halves=[100, 300]))
    assert ramp.startswith("not at steady state: 100 requests ended in the first half")
    [errors] = audit_point(summary(failure_rate=0.1))
    assert errors.startswith("10% of the measured requests failed (> 5%)")
    assert audit_point(summary(failure_rate=0.05)) == []
    [ttft] = audit_point(summary(), {"ttft_mean_ms": 20.0})
    assert ttft.startswith("server and client disagree on TTFT: mean 20.0 ms on the server") and "50.0 ms" in ttft
    assert audit_point(summary(stats={"ttft_ms": {"mean": 4.0}}), {"ttft_mean_ms": 1.0}) == []  # within 10 ms


def kpi_record(value: float, timestamp: float, **fields: Any) -> dict[str, Any]:
    return {"name": "ttft_median_ms", "value": value, "unit": "ms", "higher_better": False, "timestamp": timestamp,
            "test_uuid": f"run-{timestamp}", "suite": "llm_load", "nodeid": "t", **fields}


def test_an_untrusted_value_is_ignored_and_left_out_of_later_baselines() -> None:
    settings = RegressionSettings(min_history=2)
    history = [kpi_record(10.0, 1.0), kpi_record(10.2, 2.0), kpi_record(400.0, 3.0, untrusted="load client saturated")]
    untrusted = judge(kpi_record(500.0, 4.0, untrusted="load client saturated: x"), history, settings)
    assert (untrusted.status, untrusted.explanation) == (State.IGNORED, "not judged: load client saturated: x")
    judged = judge(kpi_record(10.1, 4.0), history, settings)
    assert judged.status == State.ACCEPTED and judged.history_size == 2 and judged.excluded == 1


def run_suite(tmp_path: Path, cases: Path, run: int) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "cpu_hog_plugin",
               "suites/llm_load", "-q", "--artifacts", str(tmp_path / f"run{run}"),
               "--topsail-history", str(tmp_path / "h.sqlite"), "--junitxml", str(tmp_path / f"run{run}.xml"),
               "--var", f"cases=[{cases}]", "--var", "tests.llm_load.serving=in-process",
               "--var", "metrics.enabled=false", "--var", "regression.min_history=1"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    env.pop("ARTIFACT_DIR", None)
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def test_a_starved_point_has_its_latency_verdicts_ignored_and_an_unstarved_one_is_judged(tmp_path: Path) -> None:
    point = {"model": "bigscience/bloom-560m", "backend": "openai", "concurrency": 2, "duration_s": 0.5,
             "max_output_tokens": 16, "server": {"max_batch_size": 8}}
    cases = tmp_path / "cases.yaml"
    # the two cases differ by more than their names, or each would be the other's history; the calm one's loop-lag
    # limit is raised so that a loaded machine (its server shares its process) does not starve it too
    calm = {"name": "calm", **point, "concurrency": 3, "client_max_loop_lag_ms": 500}
    cases.write_text(yaml.safe_dump([{"name": "starved", **point}, calm]))
    for run in (1, 2):  # the first run is the second's history (regression.min_history=1)
        result = run_suite(tmp_path, cases, run)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]  # a warning, not a failure
    verdicts = json.loads((tmp_path / "run2" / "verdicts.json").read_text(encoding="utf-8"))
    by_case = {(v["nodeid"].rsplit("[", 1)[-1].rstrip("]"), v["kpi"]): v for v in verdicts}
    for kpi in LATENCIES:
        starved, calm = by_case["starved", kpi], by_case["calm", kpi]
        assert starved["status"] == State.IGNORED, starved
        assert starved["explanation"].startswith("not judged: load client saturated: its "), starved
        assert starved["history_size"] == 0 and starved["excluded"] == 1  # run 1's starved value is no baseline
        assert State(calm["status"]).judged and calm["history_size"] == 1, calm
    assert by_case["starved", "failures"]["status"] != State.IGNORED  # the server's answers count however measured
    properties = {p.get("name"): p.get("value") for p in ET.parse(tmp_path / "run2.xml").iter("property")}
    assert properties["suites/llm_load/test_llm_load.py::test_llm_load[starved]::verdict.ttft_median_ms"] == "ignored"
    assert State(properties["suites/llm_load/test_llm_load.py::test_llm_load[calm]::verdict.ttft_median_ms"]).judged
    report = (tmp_path / "run2" / "report.html").read_text(encoding="utf-8", errors="replace")
    assert "not judged: load client saturated" in report
