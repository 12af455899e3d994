"""Pacing (token bucket, waves), retries and records of the submitter, against an in-memory API."""

from __future__ import annotations

import io
import threading
import time

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.client import KubeError
from pytest_topsail.scale.submitter import JobToSubmit, Pacing, Submitter, TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class MemoryApi:
    """Records creates; answers with scripted errors per object name."""

    def __init__(self, failures: dict[str, list[int]] | None = None) -> None:
        self.failures = failures or {}
        self.created: list[tuple[float, str]] = []
        self.calls = 0
        self.lock = threading.Lock()

    def create(self, obj, namespace=None):
        name = obj["metadata"]["name"]
        with self.lock:
            self.calls += 1
            script = self.failures.get(name)
            if script:
                status = script.pop(0)
                raise KubeError(f"create {name}: scripted (HTTP {status})", status, retry_after=0.001)
            self.created.append((time.monotonic(), name))
        return obj


def jobs(n: int, count: int = 1) -> list[JobToSubmit]:
    return [
        JobToSubmit(i, f"j-{i}", "ns", [{"kind": "Job", "metadata": {"name": f"j-{i}-{k}"}} for k in range(count)])
        for i in range(n)
    ]


def test_token_bucket_allows_a_burst_then_paces_at_qps():
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=5, clock=clock, sleep=clock.sleep)
    waits = [bucket.wait() for _ in range(8)]
    assert waits[:5] == [0.0] * 5
    assert waits[5:] == pytest.approx([0.1, 0.1, 0.1])
    assert clock.now == pytest.approx(0.3)


def test_token_bucket_refills_up_to_burst_only():
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=2, clock=clock, sleep=clock.sleep)
    clock.now = 100.0  # a long pause refills the bucket, but not beyond its burst
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0.0, 0.0, 0.1])


def test_unlimited_bucket_never_waits():
    assert TokenBucket(qps=0, burst=1).reserve() == 0.0


def test_qps_pacing_bounds_the_achieved_rate():
    api = MemoryApi()
    result = Submitter(api, Pacing(qps=100, burst=1, parallelism=4), progress_stream=None).submit(jobs(21))
    span = api.created[-1][0] - api.created[0][0]
    assert span >= 0.19  # 20 intervals of 10 ms after the first token
    assert result.offered_jobs_per_s == 100
    assert result.achieved_jobs_per_s <= 110
    assert [r.index for r in result.records] == list(range(21))


def test_offered_rate_counts_every_request_of_a_job():
    assert Pacing(qps=100).offered_jobs_per_s(requests_per_job=2) == 50
    assert Pacing(qps=0).offered_jobs_per_s(1) is None
    assert Pacing(mode="waves", wave_size=10, delay_s=2).offered_jobs_per_s(1) == 5


def test_waves_wait_between_waves():
    api = MemoryApi()
    started = time.monotonic()
    result = Submitter(
        api, Pacing(mode="waves", wave_size=5, delay_s=0.1, parallelism=5), progress_stream=None
    ).submit(jobs(15))
    assert time.monotonic() - started >= 0.2  # two pauses between three waves
    submit_times = sorted(r.submit_ms for r in result.records)
    assert submit_times[5] - submit_times[4] >= 95 and submit_times[10] - submit_times[9] >= 95


def test_retries_throttling_and_server_errors_then_records_failures():
    api = MemoryApi(failures={"j-1-0": [429, 503], "j-2-0": [500, 500, 500, 500], "j-3-0": [422]})
    result = Submitter(api, Pacing(parallelism=2), retries=3, progress_stream=None).submit(jobs(4))
    by_name = {r.jobName: r for r in result.records}
    assert by_name["j-1"].error is None and by_name["j-1"].attempts == 3
    assert "500" in by_name["j-2"].error and by_name["j-2"].attempts == 4
    assert "422" in by_name["j-3"].error and by_name["j-3"].attempts == 1  # not retryable
    assert result.failed == 2 and result.requests == 1 + 3 + 4 + 1


def test_conflict_after_a_lost_answer_counts_as_created():
    api = MemoryApi(failures={"j-0-0": [503, 409]})
    (record,) = Submitter(api, Pacing(), progress_stream=None).submit(jobs(1)).records
    assert record.error is None and record.attempts == 2


def test_a_job_stops_at_its_first_failed_object():
    api = MemoryApi(failures={"j-0-0": [403]})
    (record,) = Submitter(api, Pacing(), progress_stream=None).submit(jobs(1, count=2)).records
    assert record.error and api.calls == 1


def test_submit_times_have_millisecond_precision_and_iso_timestamps():
    result = Submitter(MemoryApi(), Pacing(), progress_stream=None).submit(jobs(3))
    for record in result.records:
        assert record.submit_ms <= record.response_ms
        assert record.submitTimestamp.endswith("Z") and len(record.submitTimestamp.split(".")[1]) == 4
    document = result.to_dict()
    assert document["jobs"][0]["jobName"] == "j-0" and document["pacing"]["mode"] == "qps"


def test_progress_lines_are_printed():
    stream = io.StringIO()
    Submitter(MemoryApi(), Pacing(), progress_stream=stream, progress_interval_s=0.0).submit(jobs(3))
    lines = stream.getvalue().splitlines()
    assert lines[-1].startswith("[scale] submitted 3/3 jobs, 0 failed")


@pytest.mark.parametrize("kwargs", [{"mode": "burst"}, {"parallelism": 0}, {"delay_s": -1}])
def test_bad_pacing_is_a_clear_error(kwargs):
    with pytest.raises(TopsailError, match="pacing"):
        Pacing(**kwargs)
