"""The reports of the README's quick start (``pytest suites --preset smoke``) and of ``pytest -m fine_tuning
--preset dgx`` as a reader sees them in headless Chromium at 1400 px: no horizontal scroll, the verdict and the
failures/changes on the first screens, each suite's first figure within the first two screens of its section, no
tick label or title clipped or covered, and the dgx report at most 2 MB. (How fast the first figure is drawn is
measured side by side by benchmarks/report_first_figure.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.report.chromium import CHROMIUM, LAYOUT, READY, visit_page

ROOT = Path(__file__).resolve().parents[2]
MAX_DGX_BYTES = 2_000_000

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


def run_suites(tmp_path: Path, *args: str) -> Path:
    artifacts = tmp_path / "artifacts"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ARTIFACT_DIR", None)
    done = subprocess.run([sys.executable, "-m", "pytest", *args, "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           f"--artifacts={artifacts}", f"--topsail-history={tmp_path / 'h.sqlite'}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return artifacts / "report.html"


def check_layout(report: Path) -> dict:
    visit = visit_page(report, READY, LAYOUT, timeout=120, width=1400, height=900)
    page = visit.result
    requests = [url for url in visit.requests if not url.startswith("data:")]  # plotly's inline patterns
    assert requests == [report.resolve().as_uri()] and visit.exceptions == [] and visit.console_errors == []
    assert page["errors"] == [] and page["violations"] == []
    assert page["width"] <= page["viewport"] == 1400, "no horizontal scroll"
    screen = page["screen"]
    assert page["verdictTop"] < screen
    assert page["attentionTop"] is None or page["attentionTop"] < 2 * screen
    for suite in page["suites"]:
        assert suite["figure"] is not None and suite["figure"] < 2 * screen, suite
    assert page["drawn"] == page["holders"] > 0
    assert page["clipped"] == []
    return page


def test_quick_start_report_reads_at_a_glance(tmp_path: Path) -> None:
    page = check_layout(run_suites(tmp_path, "suites", "--preset", "smoke"))
    assert [suite["id"] for suite in page["suites"]] == ["suite-fine_tuning", "suite-llm_load", "suite-scale",
                                                         "suite-tgis"]


def test_dgx_report_is_small_and_reads_at_a_glance(tmp_path: Path) -> None:
    report = run_suites(tmp_path, "suites", "-m", "fine_tuning", "--preset", "dgx")
    assert report.stat().st_size <= MAX_DGX_BYTES
    page = check_layout(report)
    assert page["suites"][0]["matrix"] < 3 * page["screen"], "the matrix follows the suite's figures"
