"""``--topsail-baseline`` on the scale suite: a run whose simulated pods take 1.5 s longer to turn Ready
(``cluster.sim.stages.ready.delay_ms``, the slow-ready preset's delay) is judged against one without it, and only
the Ready KPIs are flagged.

The case (20 one-GPU training jobs of 3 s) keeps Ready measured: a job shorter than the Ready delay (the smoke
preset's 0.2 s training jobs under the slow-ready preset) completes before its pod is ever Ready, and records no
Ready KPI at all. The job_* KPIs are machine_bound (timed on this machine's clock): judged only between runs at
similar contention, and moved on every step by a loaded machine (FLOORS). So the two runs run side by side, and the
slower one is then judged with ``--topsail-replot <slow> --topsail-baseline <base>`` (the judgement made at the end
of its own session)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from pytest_topsail.regression import BUSIER

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.xdist_group("baseline_scale")  # -n N: the module-scoped runs once
CASE = """\
- name: ready
  workload: training
  jobs: 20
  gpus: 1
  duration_s: 3
  pacing: qps
  qps: 200
  burst: 20
"""
READY_DELAY_MS = 1500  # the slow-ready preset's delay
# the suite's floors, job_* raised from 100 to 500 ms: two runs side by side on a loaded 2-core machine move every
# step by 100-300 ms now and then (which of them gets the CPUs first), and the test is about the Ready stage
FLOORS = '{"pod_*_object_p99_ms": {"min_change": 1000}, "job_*_ms": {"min_change": 500}}'
ATTEMPTS = 3


def pytest_command(history: Path, *options: str) -> list[str]:
    """Each run its own history: the noise between runs of a history holding the slower run would be its delay."""
    return [sys.executable, "-m", "pytest", "suites/scale", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            f"--topsail-history={history}", *options]


def run_side_by_side(root: Path, environment: dict[str, str]) -> tuple[float, float]:
    """The base and slow-ready runs at the same time: the machine loads (runnable tasks per CPU) their items were
    measured at."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "ready.yaml").write_text(CASE)
    case = ["--preset", "smoke", "--var", f"cases=[{root / 'ready.yaml'}]", "--var", f"regression.kpis={FLOORS}"]
    slower = ["--var", f"cluster.sim.stages.ready.delay_ms={READY_DELAY_MS}"]
    runs = {name: subprocess.Popen(pytest_command(root / f"{name}.sqlite", *case, f"--artifacts={root / name}",
                                                  *(slower if name == "slow" else [])),
                                   cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env=environment)
            for name in ("base", "slow")}
    for name, process in runs.items():
        output, _ = process.communicate(timeout=240)
        assert process.returncode == 0, f"{name}: {output[-3000:]}"
    loads = [json.loads(next((root / name).glob("scale/*/item.json")).read_text())["machine_load"]
             for name in ("base", "slow")]
    return float(loads[0]), float(loads[1])


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The runs side by side (again, up to ATTEMPTS times, until the base and slow items ran at contentions their
    machine_bound KPIs are judged at: runnable-task samples of two items at the same time can differ by more than
    ``regression.BUSIER``), then the slow one replotted against the base: its artifacts, the replot's terminal
    output and junit file."""
    root = tmp_path_factory.mktemp("baseline_scale") / "runs"
    environment = {key: value for key, value in os.environ.items() if key != "ARTIFACT_DIR"}
    for _ in range(ATTEMPTS):
        loads = run_side_by_side(root, environment)
        if max(loads) <= max(1.0, BUSIER * min(loads)):
            break
    else:
        pytest.skip(f"the base and slow items ran at {loads[0]:.2f} and {loads[1]:.2f} runnable tasks per CPU "
                    f"{ATTEMPTS} times: their machine_bound KPIs are not judged at such different contentions")
    judge = [f"--topsail-replot={root / 'slow'}", f"--topsail-baseline={root / 'base'}",
             f"--junitxml={root / 'judged.xml'}"]
    replot = subprocess.run(pytest_command(root / "judged.sqlite", *judge),
                            cwd=REPO, capture_output=True, text=True, timeout=240, env=environment)
    assert replot.returncode == 0, replot.stdout[-3000:] + replot.stderr[-3000:]
    (root / "judged.out").write_text(replot.stdout)
    return {"slow": root / "slow", "out": root / "judged.out", "junit": root / "judged.xml"}


def baseline_properties(junit: Path) -> dict[str, str]:
    """KPI -> ``<verdict> <change>`` from the testsuite properties ``<nodeid>::baseline.<kpi>`` (a replot has no
    testcases)."""
    found = {}
    for node in ElementTree.parse(junit).getroot().iter("property"):
        name = node.get("name", "")
        if "::baseline." in name:
            found[name.split("::baseline.")[1]] = node.get("value", "")
    return found


def test_a_slower_ready_stage_flags_the_ready_kpis_only(judged: dict[str, Path]) -> None:
    found = baseline_properties(judged["junit"])
    assert {"job_ready_p50_ms", "job_ready_avg_ms", "job_started_p50_ms", "job_completed_p50_ms"} <= set(found)
    flagged = {kpi for kpi, value in found.items() if value.startswith(("worse", "better"))}
    assert flagged == {"job_ready_p50_ms", "job_ready_avg_ms"}, found
    assert all(found[kpi].startswith("worse +") for kpi in flagged), found
    for kpi in ("job_created_p50_ms", "job_scheduled_p50_ms", "job_started_p50_ms", "job_completed_p50_ms"):
        assert found[kpi].startswith("no significant difference"), (kpi, found[kpi])


def test_the_terminal_and_report_name_the_baseline_and_the_ready_kpis(judged: dict[str, Path]) -> None:
    output = judged["out"].read_text()
    section = output[output.index("topsail: against the baseline base"):]
    rows = [line.split() for line in section.splitlines() if line.startswith("scale test_scale[ready]")]
    assert sorted(row[2] for row in rows) == ["job_ready_avg_ms", "job_ready_p50_ms"]
    assert "topsail baseline compare: 2 worse, 0 better" in section
    report = (judged["slow"] / "report.html").read_text(encoding="latin-1")  # cp1252 with plotly.js as raw bytes
    assert '<section id="baseline">' in report and "Against the baseline base<" in report
