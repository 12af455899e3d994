"""The verdict rules on the real scale suite, as a user runs it (subprocesses, the simulator, seed fixed):

identical runs give no regression; a slowed Ready stage (a simulator profile change) is a regression of the Ready
KPIs only, still one on the next two re-runs (the regressed values never become the baseline), until acknowledged
with ``python -m pytest_topsail.history ack``: then the new level is accepted. Every HTML file of the artifacts
works offline in headless Chromium: no request leaves the artifacts directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.report.chromium import CHROMIUM, visit_page

pytestmark = pytest.mark.xdist_group("scale_verdicts")  # -n N: the module-scoped series of runs once

REPO = Path(__file__).resolve().parents[2]
ITEMS = "distributed or interactive"  # two smoke items of 5 jobs each: seconds per run
# The injected change: +3 s on the Ready stage. The t-test of one run against 5 needs ~10 baseline stddevs, and the
# 'interactive' item's Ready P50 (~1 s) spread by 260 ms across runs at a load average of 12-32 on 2 cores: +1.5 s
# missed there, +3 s is 11 stddevs at that load and far more at a usual one.
SLOW = ["--var", "cluster.sim.stages.ready.delay_ms=3000"]
IDENTICAL_RUNS = 6  # 5 to build the history, the 6th judged against those 5


@dataclass
class Series:
    tmp: Path
    runs: list[subprocess.CompletedProcess[str]] = field(default_factory=list)

    @property
    def history(self) -> Path:
        return self.tmp / "history.sqlite"

    def artifacts(self, number: int) -> Path:
        return self.tmp / f"run{number}"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        number = len(self.runs) + 1
        command = [sys.executable, "-m", "pytest", "suites/scale", "--preset", "smoke", "-k", ITEMS, "-q",
                   "-p", "no:cacheprovider", "-p", "no:randomly", "--artifacts", str(self.artifacts(number)),
                   "--topsail-history", str(self.history), *args]
        env = {**os.environ, "COLUMNS": "160"}
        env.pop("ARTIFACT_DIR", None)
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180, env=env)
        assert result.returncode == 0, f"run {number}:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}"
        self.runs.append(result)
        return result

    def verdicts(self, number: int) -> list[dict]:
        return json.loads((self.artifacts(number) / "verdicts.json").read_text())

    def statuses(self, number: int, *wanted: str) -> set[tuple[str, str]]:
        return {(v["nodeid"].split("[")[-1].rstrip("]"), v["kpi"]) for v in self.verdicts(number)
                if v["status"] in wanted}

    def skip_if_contention_differed(self, *numbers: int) -> None:
        """job_ready_p50_ms is machine_bound: its change is not judged when the test ran at 1.25x the contention of
        every reference run (docs/kpis-and-regressions.md, machine contention), and such a not-judged value joins
        the baseline of the next runs. When another worker's load (or another job's) made the slowed runs that much
        busier than the identical ones, the product said so and the scenario cannot be judged on this machine now:
        skipped with its words, rather than failed; any other outcome is asserted."""
        excused = [f"run {number} [{v['nodeid'].split('[')[-1]}: {v['explanation']}" for number in numbers
                   for v in self.verdicts(number) if v["kpi"] == "job_ready_p50_ms" and v["status"] == "ignored"
                   and v["method"] == "machine contention unlike its baseline's"]
        if excused:
            pytest.skip("; ".join(excused))


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> Series:
    runs = Series(tmp_path_factory.mktemp("scale-verdicts"))
    for _ in range(IDENTICAL_RUNS):
        runs.run()
    for _ in range(3):  # slowed, then two re-runs
        runs.run(*SLOW)
    ack = subprocess.run([sys.executable, "-m", "pytest_topsail.history", "ack", "--history", str(runs.history),
                          "--suite", "scale", "--kpi", "*ready*", "--reason", "readiness probe slowed on purpose"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ack.returncode == 0, ack.stderr
    runs.run(*SLOW)
    return runs


def test_identical_runs_give_no_regression_and_no_improvement(series: Series) -> None:
    for number in range(1, IDENTICAL_RUNS + 1):
        assert series.statuses(number, "regression", "improvement") == set(), f"run {number}"
    judged = [v for v in series.verdicts(IDENTICAL_RUNS) if v["status"] == "accepted"]
    assert judged and all(v["history_size"] == 5 for v in judged), "the 6th run is judged against 5 runs"
    if Path("/proc/loadavg").is_file():  # each test's CPU contention, for its machine_bound KPIs (job_* steps)
        assert all(v["machine_load"] is not None and v["machine_load"] >= 0 for v in judged)
        assert {v["kpi"] for v in judged if v["machine_bound"]} >= {"job_created_p50_ms", "job_ready_p50_ms"}
    assert "topsail: no regression" in series.runs[IDENTICAL_RUNS - 1].stdout


def test_a_slowed_stage_is_a_regression_of_that_stages_kpis_only(series: Series) -> None:
    slowed = IDENTICAL_RUNS + 1
    series.skip_if_contention_differed(slowed)
    regressions = series.statuses(slowed, "regression")
    assert {("distributed", "job_ready_p50_ms"), ("interactive", "job_ready_p50_ms")} <= regressions, \
        series.verdicts(slowed)
    assert all("ready" in kpi for _, kpi in regressions), regressions
    assert series.statuses(slowed, "improvement") == set()
    assert "KPI regressed" in series.runs[slowed - 1].stdout


def test_the_regression_stays_on_re_runs_until_acknowledged_then_is_the_new_level(series: Series) -> None:
    slowed = IDENTICAL_RUNS + 1
    series.skip_if_contention_differed(slowed, slowed + 1, slowed + 2)
    for number in (slowed + 1, slowed + 2):
        regressions = series.statuses(number, "regression")
        assert {("distributed", "job_ready_p50_ms"), ("interactive", "job_ready_p50_ms")} <= regressions, \
            series.verdicts(number)
        ready = next(v for v in series.verdicts(number) if v["kpi"] == "job_ready_p50_ms")
        assert ready["history_size"] == IDENTICAL_RUNS and ready["excluded"] == number - slowed
    after_ack = slowed + 3
    # the acknowledged KPIs: no regression once the slower level is accepted. (The other KPIs of this run are the
    # identical-runs property, which test_identical_runs_... asserts on quieter history; this 10th run meets another
    # xdist worker's load against a history of 9, and its creation latencies in tens of ms can move with it.)
    assert {kpi for _, kpi in series.statuses(after_ack, "regression") if "ready" in kpi} == set(), \
        series.verdicts(after_ack)
    ready = next(v for v in series.verdicts(after_ack) if v["kpi"] == "job_ready_p50_ms")
    assert ready["status"] == "accepted" and ready["history_size"] == IDENTICAL_RUNS + 3
    assert ready["reference"] > 1000, "the acknowledged slower level is the reference now"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_every_html_file_of_the_artifacts_works_offline(series: Series) -> None:
    root = series.artifacts(len(series.runs)).resolve()
    pages = sorted(root.rglob("*.html"))
    names = {page.name for page in pages}
    assert {"report.html", "general.html", "detailed.html"} <= names
    assert len(list(root.rglob("plotly.min.js"))) == 1, "one plotly.js for the whole run"
    for page in pages:
        visit = visit_page(page, "document.readyState === 'complete' && (document.body.dataset.status || 'done')"
                                 " === 'done'",
                           "({drawn: document.querySelectorAll('svg.main-svg').length,"
                           " errors: JSON.parse(document.body.dataset.errors || '[]')})")
        outside = [url for url in visit.requests
                   if urlsplit(url).scheme != "file" or not Path(unquote(urlsplit(url).path)).is_relative_to(root)]
        assert outside == [], f"{page}: requests leaving the artifacts: {outside}"
        assert visit.exceptions == [] and visit.result["errors"] == [], page
        assert visit.result["drawn"] > 0, f"{page}: no figure drawn"
