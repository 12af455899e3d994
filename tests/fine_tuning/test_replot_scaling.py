"""--topsail-replot recomputes the fine-tuning scaling efficiency (issue 41): from the saved points' logs, against the
group's point at the smallest GPU count among the saved ones, with the run-scoped labels of the live run."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.fine_tuning.test_fine_tuning_suite import FAST, REPO, item_dirs, kpis_of, output, run_pytest


def test_a_replot_recomputes_the_scaling_efficiency_from_the_saved_logs(tmp_path):
    cases = [{"name": "scaling", "model": "bigscience/bloom-560m", "method": "full", "gpus_per_pod": [1, 2],
              "per_device_batch_size": 8, "max_seq_length": 512}]
    result, artifacts = run_pytest(tmp_path, "--preset", "dgx", *FAST, cases=cases)
    assert result.returncode == 0, output(result)
    dirs = {kpis_of(d)["train_tokens_per_second"]["labels"]["accelerator_count"]: d
            for d in item_dirs(artifacts).values()}
    live = kpis_of(dirs[2])["scaling_efficiency"]
    assert "scaling_efficiency" not in kpis_of(dirs[1])
    # the baseline's log now says it ran twice as fast: the 2-GPU point's efficiency halves in the replot
    log = (dirs[1] / "pod.log").read_text()
    summary = re.findall(r"\{'train_runtime'[^{}]*\}", log)[-1]
    rate = float(re.search(r"'train_tokens_per_second': ([0-9.e+-]+)", summary).group(1))
    (dirs[1] / "pod.log").write_text(log.replace(summary, summary.replace(
        f"'train_tokens_per_second': {rate}", f"'train_tokens_per_second': {rate * 2}")))
    replot = subprocess.run([sys.executable, "-m", "pytest", f"--topsail-replot={artifacts}", "suites/fine_tuning",
                             "-p", "no:cacheprovider", "--topsail-history", str(tmp_path / "replot.sqlite")],
                            cwd=REPO, capture_output=True, text=True, timeout=180)
    assert "parse failed" not in replot.stdout + replot.stderr, output(replot)
    replotted = [v for v in json.loads((artifacts / "verdicts.json").read_text()) if v["kpi"] == "scaling_efficiency"]
    assert len(replotted) == 1, replotted
    assert replotted[0]["value"] == pytest.approx(live["value"] / 2, rel=1e-3)
    again = kpis_of(dirs[2])["scaling_efficiency"]
    assert again["scope"] == "run" and again["labels"] == live["labels"]
    assert again["labels"]["baseline_accelerator_count"] == 1 and again["labels"]["accelerator_count"] == 2
