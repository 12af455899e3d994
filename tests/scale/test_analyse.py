"""Analysis of a saved run: artifacts, figures, re-run from disk, case validation."""

from __future__ import annotations

import json

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.scale.latency import Threshold
from pytest_topsail.scale.plots import detailed_figure, general_figure
from pytest_topsail.scale.run import ScaleCase, analyse, analyse_directory
from pytest_topsail.scale.sampler import write_sampled
from pytest_topsail.scale.timelines import job_timelines


def test_analyse_writes_every_artifact(make_run, tmp_path):
    submitted, sampled = make_run(jobs=20, completes=True)
    result = analyse(submitted, sampled, tmp_path, [Threshold("Ready", "P99", 10)])
    for name in ("times.csv", "latency.txt", "latency.json", "summary.json", "general.html", "detailed.html"):
        assert (tmp_path / name).stat().st_size > 0, name
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["target"] == "Completed" and summary["failed_jobs"]["total"] == 0
    assert summary["scheduling_pods_per_s"] > 0
    assert result.violations == ["job step Ready (watch) P99 = 51.0 ms exceeds threshold 10 ms"]
    assert set(result.figures) == {"general", "detailed"}


def test_analysis_reruns_on_saved_documents(make_run, tmp_path):
    submitted, sampled = make_run(jobs=8)
    (tmp_path / "submitted.json").write_text(json.dumps(submitted))
    write_sampled(sampled, tmp_path / "sampled.json")
    first = analyse(submitted, sampled, tmp_path, plots=False)
    again = analyse_directory(tmp_path, plots=False)
    assert [s.to_dict() for s in again.stats] == [s.to_dict() for s in first.stats]


def test_rerun_on_a_directory_without_the_documents_is_a_clear_error(tmp_path):
    with pytest.raises(TopsailError, match="cannot re-read the scale run"):
        analyse_directory(tmp_path)


def test_figures_have_one_row_per_step_and_a_histogram(make_run):
    submitted, sampled = make_run(jobs=5, completes=True)
    timelines = job_timelines(submitted, sampled)
    detailed = detailed_figure(timelines)
    assert [t.type for t in detailed.data].count("histogram") == 7
    general = general_figure(timelines)
    assert [len(t.x) for t in general.data] == [5, 5]


def test_case_settings_are_validated_with_the_key_named():
    case = ScaleCase.from_settings({"name": "smoke", "workload": "distributed", "jobs": 5, "workers": 2}, "c.yaml")
    assert case.workload_spec().pods_per_job == 3 and case.target() == "ready"
    assert ScaleCase.from_settings({"duration_s": 1}, "c.yaml").target() == "completed"
    with pytest.raises(TopsailError, match=r"cases/scale/x.yaml: invalid scale case settings: key jobz: unknown key"):
        ScaleCase.from_settings({"jobz": 5}, "cases/scale/x.yaml")
    with pytest.raises(TopsailError, match="jobs: Input should be greater than or equal to 1"):
        ScaleCase.from_settings({"jobs": 0}, "c.yaml")
