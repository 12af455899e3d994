"""Timelines from submitted/sampled documents; times.csv."""

from __future__ import annotations

import pandas as pd

from pytest_topsail.scale.timelines import failed_jobs, job_timelines, pod_timelines, write_times_csv


def test_watch_deltas_are_from_submission_and_object_deltas_from_creation(make_run):
    submitted, sampled = make_run(jobs=3)
    (first, *_) = job_timelines(submitted, sampled)
    assert first.delta("watch", "Created") == 6.0
    assert first.delta("watch", "Scheduled") == 21.0
    assert first.delta("watch", "Ready") == 51.0
    # object source: from the Job's creationTimestamp; Scheduled from the Scheduled event's eventTime (us precision)
    assert first.delta("object", "Scheduled") == 14.0
    assert first.delta("object", "Ready") == 45.0


def test_a_job_reaches_a_step_when_its_last_pod_does(make_run):
    submitted, sampled = make_run(jobs=1)
    submitted["jobs"][0]["expected_pods"] = 2
    second = {
        "object": {"metadata": {"name": "j-00000-worker", "namespace": "ns", "labels": sampled["pods"][0]["object"]
                                ["metadata"]["labels"]}},
        "steps": {k: {"watch": v["watch"] + 100, "object": v["object"] + 100} for k, v in sampled["pods"][0]
                  ["steps"].items()},
    }
    (only_one,) = job_timelines(submitted, sampled)
    assert only_one.delta("watch", "Ready") is None  # one of two pods seen: the job is not ready
    sampled["pods"].append(second)
    (both,) = job_timelines(submitted, sampled)
    assert both.delta("watch", "Ready") == 151.0 and both.pods == 2


def test_pod_timelines_measure_from_pod_creation(make_run):
    submitted, sampled = make_run(jobs=2)
    pod = pod_timelines(sampled)[0]
    assert pod.delta("watch", "Scheduled") == 10.0 and pod.delta("watch", "Ready") == 40.0
    assert pod.delta("object", "Scheduled") == 9.0  # from the Scheduled event


def test_whole_second_object_timestamps_do_not_break_the_watch_source(make_run):
    submitted, sampled = make_run(jobs=50, whole_seconds=True)
    timelines = job_timelines(submitted, sampled)
    assert all(t.delta("watch", "Ready") == 51.0 for t in timelines)
    assert {t.times["object"]["Ready"] % 1000 for t in timelines} == {0.0}


def test_failed_jobs_are_counted_by_cause(make_run):
    submitted, sampled = make_run(jobs=6, missing_ready=1)
    submitted["jobs"][5]["error"] = "Job j-00005: 500 Internal Server Error"
    sampled["pods"][4]["steps"]["failed"] = {"watch": 1.0, "object": 1.0}
    counts = failed_jobs(job_timelines(submitted, sampled), "Ready")
    assert counts == {"submit": 1, "runtime": 1, "unfinished": 1, "total": 3}


def test_times_csv_has_one_header_aligned_columns_and_ms_values(make_run, tmp_path):
    submitted, sampled = make_run(jobs=12, missing_ready=1)
    write_times_csv(job_timelines(submitted, sampled), tmp_path / "times.csv")
    lines = (tmp_path / "times.csv").read_text().splitlines()
    assert len(lines) == 13 and lines[0].lstrip().startswith("index,")
    assert len({len(line) for line in lines}) == 1
    comma_positions = {tuple(i for i, c in enumerate(line) if c == ",") for line in lines}
    assert len(comma_positions) == 1, "columns start at the same offsets on every line"
    frame = pd.read_csv(tmp_path / "times.csv", skipinitialspace=True)
    assert frame["Ready_watch_ms"].iloc[1] == 51.0 and pd.isna(frame["Ready_watch_ms"].iloc[0])
    assert frame["submit_offset_ms"].iloc[3] == 30.0
    assert "Completed_watch_ms" in frame.columns and frame["Completed_watch_ms"].isna().all()


def test_scheduled_event_time_is_floored_to_whole_seconds_when_creation_is(make_run):
    submitted, sampled = make_run(jobs=3, whole_seconds=True)
    for pod in sampled["pods"]:
        pod["steps"]["created"]["object"] = float(int(pod["steps"]["created"]["object"] // 1000) * 1000)
    for timeline in pod_timelines(sampled):
        delta = timeline.delta("object", "Scheduled")
        assert delta is not None and delta >= 0 and delta % 1000 == 0
