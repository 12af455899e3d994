"""Pacing (token bucket, waves), retries and records of the submitter, through the real Kubernetes layer (its retry
rules, kube/retry.py) over an in-memory transport."""

from __future__ import annotations

import io
import json
import threading
import time
from types import SimpleNamespace

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.client import Kube, ResourceInfo
from pytest_topsail.kube.retry import RetryPolicy
from pytest_topsail.scale.submitter import JobToSubmit, Pacing, Submitter, TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Answer:
    """An HTTP answer as the Kubernetes client hands it over."""

    def __init__(self, status: int, body: dict) -> None:
        self.status, self.data = status, json.dumps(body).encode()

    def read(self) -> bytes:
        return self.data

    def getheader(self, name: str) -> str | None:
        return "0.001" if name == "Retry-After" and self.status in (429, 503) else None


class MemoryApi:
    """The transport under a real ``Kube``: records the Jobs created; POSTs of a name answer its scripted statuses
    first (an error Status, Retry-After 1 ms on 429/503); GETs answer what was created."""

    def __init__(self, failures: dict[str, list[int]] | None = None) -> None:
        self.failures = failures or {}
        self.created: list[tuple[float, str]] = []
        self.calls = 0
        self.lock = threading.Lock()
        self.configuration = SimpleNamespace(host="https://memory")

    def param_serialize(self, method, path, query_params=None, header_params=None, body=None, auth_settings=None):
        return method, path, body

    def call_api(self, method, path, body, _request_timeout=None) -> Answer:
        name = body["metadata"]["name"] if body else path.rsplit("/", 1)[-1]
        with self.lock:
            self.calls += 1
            if method == "GET":
                found = name in {created for _, created in self.created}
                return Answer(200, {"metadata": {"name": name}}) if found else Answer(404, {"reason": "NotFound"})
            script = self.failures.get(name)
            if script:
                status = script.pop(0)
                return Answer(status, {"kind": "Status", "code": status, "message": f"scripted (HTTP {status})"})
            self.created.append((time.monotonic(), name))
        return Answer(201, body)


def kube_over(api: MemoryApi, max_attempts: int = 4) -> Kube:
    kube = Kube(api, description="memory", retry=RetryPolicy(max_attempts=max_attempts, first_delay_s=0.001))
    kube._discovery["batch/v1"] = {"Job": ResourceInfo("batch/v1", "Job", "jobs", namespaced=True)}
    return kube


def jobs(n: int, count: int = 1) -> list[JobToSubmit]:
    return [
        JobToSubmit(i, f"j-{i}", "ns", [{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"j-{i}-{k}"}}
                                        for k in range(count)])
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
    result = Submitter(kube_over(api), Pacing(qps=100, burst=1, parallelism=4), progress_stream=None).submit(jobs(21))
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
        kube_over(api), Pacing(mode="waves", wave_size=5, delay_s=0.1, parallelism=5), progress_stream=None
    ).submit(jobs(15))
    assert time.monotonic() - started >= 0.2  # two pauses between three waves
    submit_times = sorted(r.submit_ms for r in result.records)
    assert submit_times[5] - submit_times[4] >= 95 and submit_times[10] - submit_times[9] >= 95


def test_retries_throttling_and_server_errors_then_records_failures():
    api = MemoryApi(failures={"j-1-0": [429, 503], "j-2-0": [500, 500, 500, 500], "j-3-0": [422]})
    result = Submitter(kube_over(api), Pacing(parallelism=2), progress_stream=None).submit(jobs(4))
    by_name = {r.jobName: r for r in result.records}
    assert by_name["j-1"].error is None and by_name["j-1"].attempts == 3
    assert "500" in by_name["j-2"].error and by_name["j-2"].attempts == 4
    assert "422" in by_name["j-3"].error and by_name["j-3"].attempts == 1  # not retryable
    assert result.failed == 2 and result.requests == 1 + 3 + 4 + 1


def test_conflict_after_a_lost_answer_counts_as_created():
    api = MemoryApi(failures={"j-0-0": [503, 409]})
    (record,) = Submitter(kube_over(api), Pacing(), progress_stream=None).submit(jobs(1)).records
    assert record.error is None and record.attempts == 2


def test_a_create_is_sent_at_most_as_often_as_the_layer_allows():
    """One retry loop (the Kubernetes layer's): a create answered 500 every time is sent max_attempts times, not
    max_attempts x (the submitter's own retries + 1) as when the submitter retried on top of the layer."""
    api = MemoryApi(failures={"j-0-0": [500] * 50})
    (record,) = Submitter(kube_over(api, max_attempts=5), Pacing(), progress_stream=None).submit(jobs(1)).records
    assert "500" in record.error and record.attempts == 5 and api.calls == 5


def test_a_job_stops_at_its_first_failed_object():
    api = MemoryApi(failures={"j-0-0": [403]})
    (record,) = Submitter(kube_over(api), Pacing(), progress_stream=None).submit(jobs(1, count=2)).records
    assert record.error and api.calls == 1


def test_submit_times_have_millisecond_precision_and_iso_timestamps():
    result = Submitter(kube_over(MemoryApi()), Pacing(), progress_stream=None).submit(jobs(3))
    for record in result.records:
        assert record.submit_ms <= record.response_ms
        assert record.submitTimestamp.endswith("Z") and len(record.submitTimestamp.split(".")[1]) == 4
    document = result.to_dict()
    assert document["jobs"][0]["jobName"] == "j-0" and document["pacing"]["mode"] == "qps"


def test_progress_lines_are_printed():
    stream = io.StringIO()
    Submitter(kube_over(MemoryApi()), Pacing(), progress_stream=stream, progress_interval_s=0.0).submit(jobs(3))
    lines = stream.getvalue().splitlines()
    assert lines[-1].startswith("[scale] submitted 3/3 jobs, 0 failed")


@pytest.mark.parametrize("kwargs", [{"mode": "burst"}, {"parallelism": 0}, {"delay_s": -1}])
def test_bad_pacing_is_a_clear_error(kwargs):
    with pytest.raises(TopsailError, match="pacing"):
        Pacing(**kwargs)
