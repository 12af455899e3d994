"""Submit N jobs through the official client: connection reuse, client-go-like QPS/burst pacing or Run:ai-like waves.

Each job is a short list of objects (e.g. a PVC then a Job) created in order. Submit times are wall-clock epoch
milliseconds taken just before the first request of the job is sent (``submit_ms``) and when its last response
arrived (``response_ms``). Progress is reported at a fixed interval; the result carries offered vs achieved rates.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.client import Kube, KubeError


@dataclass(frozen=True)
class Pacing:
    """How fast to submit.

    ``mode="qps"``: a token bucket like client-go's (``qps`` requests per second, ``burst`` tokens at start, one token
    per API request), ``parallelism`` requests in flight at most; ``qps <= 0`` means unlimited.
    ``mode="waves"``: like the Run:ai tool, ``wave_size`` jobs at once (``parallelism`` in flight), then ``delay_s``.
    """

    mode: str = "qps"
    qps: float = 0.0
    burst: int = 1
    parallelism: int = 8
    wave_size: int = 10
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in ("qps", "waves"):
            raise TopsailError(f"pacing mode {self.mode!r} is unknown: expected 'qps' or 'waves'")
        if self.parallelism < 1 or self.burst < 1 or self.wave_size < 1 or self.delay_s < 0:
            raise TopsailError(f"invalid pacing {self}: parallelism, burst, wave_size >= 1 and delay_s >= 0 required")

    def offered_jobs_per_s(self, requests_per_job: int) -> float | None:
        """The rate the pacing allows (None: unlimited, bounded only by the client and the server)."""
        if self.mode == "qps":
            return self.qps / max(requests_per_job, 1) if self.qps > 0 else None
        return self.wave_size / self.delay_s if self.delay_s > 0 else None


class TokenBucket:
    """client-go's flowcontrol token bucket: starts full with ``burst`` tokens, refills at ``qps`` per second."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps = qps
        self.burst = burst
        self.tokens = float(burst)
        self.clock = clock
        self.sleep = sleep
        self.last = clock()
        self.lock = threading.Lock()

    def reserve(self) -> float:
        """Take a token (possibly in advance); return how long the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        with self.lock:
            now = self.clock()
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
            self.last = now
            self.tokens -= 1.0
            return 0.0 if self.tokens >= 0 else -self.tokens / self.qps

    def wait(self) -> float:
        delay = self.reserve()
        if delay > 0:
            self.sleep(delay)
        return delay


@dataclass
class JobToSubmit:
    index: int
    name: str
    namespace: str
    objects: list[dict[str, Any]]
    expected_pods: int = 1
    completes: bool = False


@dataclass
class SubmitRecord:
    index: int
    jobName: str  # noqa: N815 - Run:ai's submitted.json field names
    jobNamespace: str  # noqa: N815
    kind: str
    submitTimestamp: str  # noqa: N815 - ISO 8601 UTC with milliseconds
    submit_ms: float  # epoch ms, before the first request of the job
    response_ms: float  # epoch ms, after the last response
    expected_pods: int
    completes: bool
    attempts: int
    error: str | None = None


@dataclass
class SubmitResult:
    records: list[SubmitRecord]
    pacing: Pacing
    started_ms: float
    finished_ms: float
    requests: int
    offered_jobs_per_s: float | None
    achieved_jobs_per_s: float
    failed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pacing": asdict(self.pacing),
            "started_ms": self.started_ms,
            "finished_ms": self.finished_ms,
            "duration_s": round((self.finished_ms - self.started_ms) / 1000.0, 3),
            "requests": self.requests,
            "offered_jobs_per_s": self.offered_jobs_per_s,
            "achieved_jobs_per_s": self.achieved_jobs_per_s,
            "failed": self.failed,
            **self.extra,
            "jobs": [asdict(r) for r in self.records],
        }

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=1))


def iso_ms(epoch_ms: float) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000.0, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class SubmitProgress:
    """Counts submitted jobs; writes ``submitted i/N`` lines to the progress stream at most every ``interval_s``
    seconds (and once at the end)."""

    def __init__(self, total: int, label: str, stream: TextIO | None, interval_s: float = 1.0) -> None:
        self.total = total
        self.label = label
        self.stream = stream
        self.interval_s = interval_s
        self.done = 0
        self.failed = 0
        self.start = time.monotonic()
        self.last_print = self.start
        self.lock = threading.Lock()

    def job_done(self, ok: bool) -> None:
        with self.lock:
            self.done += 1
            self.failed += 0 if ok else 1
            now = time.monotonic()
            if now - self.last_print >= self.interval_s:
                self.last_print = now
                self.print_line(now)

    def finish(self) -> None:
        self.print_line(time.monotonic())

    def print_line(self, now: float) -> None:
        if self.stream is None:
            return
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        self.stream.write(
            f"[{self.label}] submitted {self.done}/{self.total} jobs, {self.failed} failed, "
            f"{rate:.1f} jobs/s, {elapsed:.1f}s\n"
        )
        self.stream.flush()


class Submitter:
    """Creates jobs through one ``Kube`` connection from ``pacing.parallelism`` threads (pool sized for them)."""

    def __init__(
        self,
        api: Kube,
        pacing: Pacing,
        progress_stream: TextIO | None = sys.stderr,
        progress_interval_s: float = 1.0,
        label: str = "scale",
    ) -> None:
        self.api = api
        self.pacing = pacing
        self.progress_stream = progress_stream
        self.progress_interval_s = progress_interval_s
        self.label = label
        self.bucket = TokenBucket(pacing.qps, pacing.burst) if pacing.mode == "qps" else None
        self.requests = 0
        self.requests_lock = threading.Lock()

    def submit(self, jobs: Sequence[JobToSubmit]) -> SubmitResult:
        progress = SubmitProgress(len(jobs), self.label, self.progress_stream, self.progress_interval_s)
        started_ms = time.time() * 1000.0
        with ThreadPoolExecutor(max_workers=self.pacing.parallelism, thread_name_prefix="submit") as pool:
            if self.pacing.mode == "qps":
                records = list(pool.map(lambda job: self.submit_one(job, progress), jobs))
            else:
                records = []
                for start in range(0, len(jobs), self.pacing.wave_size):
                    if start and self.pacing.delay_s:
                        time.sleep(self.pacing.delay_s)
                    wave = jobs[start : start + self.pacing.wave_size]
                    records.extend(pool.map(lambda job: self.submit_one(job, progress), wave))
        finished_ms = time.time() * 1000.0
        progress.finish()
        ok = [r for r in records if r.error is None]
        span_ms = (max(r.response_ms for r in ok) - min(r.submit_ms for r in ok)) if ok else 0.0
        requests_per_job = max((len(j.objects) for j in jobs), default=1)
        return SubmitResult(
            records=records,
            pacing=self.pacing,
            started_ms=round(started_ms, 3),
            finished_ms=round(finished_ms, 3),
            requests=self.requests,
            offered_jobs_per_s=self.pacing.offered_jobs_per_s(requests_per_job),
            achieved_jobs_per_s=round(len(ok) / (span_ms / 1000.0), 3) if span_ms > 0 else 0.0,
            failed=len(records) - len(ok),
        )

    def submit_one(self, job: JobToSubmit, progress: SubmitProgress) -> SubmitRecord:
        submit_ms: float | None = None
        attempts = 0
        error: str | None = None
        for obj in job.objects:
            if self.bucket is not None:
                self.bucket.wait()
            if submit_ms is None:
                submit_ms = time.time() * 1000.0
            tries, error = self.create(obj, job.namespace)
            attempts += tries
            if error:
                break
        response_ms = time.time() * 1000.0
        submit_ms = submit_ms if submit_ms is not None else response_ms
        progress.job_done(error is None)
        return SubmitRecord(
            index=job.index,
            jobName=job.name,
            jobNamespace=job.namespace,
            kind=job.objects[-1]["kind"] if job.objects else "",
            submitTimestamp=iso_ms(submit_ms),
            submit_ms=round(submit_ms, 3),
            response_ms=round(response_ms, 3),
            expected_pods=job.expected_pods,
            completes=job.completes,
            attempts=attempts,
            error=error,
        )

    def create(self, obj: dict[str, Any], namespace: str) -> tuple[int, str | None]:
        """Create one object. The Kubernetes layer retries throttling and server errors (kube/retry.py; a 409 after
        a lost answer counts as created: the job names are the run's own). Returns (attempts, error or None)."""
        error = None
        try:
            self.api.create(obj, namespace, lost_answer_ok=True)
        except KubeError as exc:
            error = f"{obj['kind']} {obj['metadata']['name']}: {exc}"
        attempts = max(self.api.last_attempts, 1)
        with self.requests_lock:
            self.requests += attempts
        return attempts, error
